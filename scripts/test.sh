#!/usr/bin/env bash
# The test command: installs what the tests need (Debian's llama-server into visor's engine folder; Debian's
# chromium and tmux for the browser and terminal tests; the MCP Inspector CLI from npm when npm is there, which CI
# requires) and runs every test, the real-engine ones included.
# Extra arguments go to `go test` (e.g. -run, -v).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/cgo-flags.sh
. scripts/progress.sh

# need CMD PACKAGE installs Debian's PACKAGE when CMD is missing. Without root (and without sudo) it says what
# to run; the tests that need it then fail in CI and skip, saying so, elsewhere.
need() {
  command -v "$1" >/dev/null && return
  local sudo=
  if [ "$(id -u)" != 0 ]; then
    if ! command -v sudo >/dev/null; then
      echo "test.sh: $1 is missing: install it with: apt-get install $2" >&2
      return
    fi
    sudo=sudo
  fi
  progress "test.sh: installing $2 (apt-get, ~1 min) for the tests that drive it …" $sudo apt-get update -qq >/dev/null
  export DEBIAN_FRONTEND=noninteractive
  progress "  apt-get install $2 …" $sudo apt-get install -y -qq --no-install-recommends "$2" >/dev/null
}
need chromium chromium
need tmux tmux

engine_dir=${VISOR_ENGINE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/visor/engine}
scripts/install-engine.sh "$engine_dir"
export VISOR_ENGINE_DIR="$engine_dir"
export VISOR_LLAMA_SERVER=${VISOR_LLAMA_SERVER:-$engine_dir/bin/llama-server}
# The real-client MCP tests (frontend/mcpserver) need the Inspector CLI: they skip without it, except in CI.
if [ -z "${VISOR_MCP_INSPECTOR:-}" ]; then
  if command -v npm >/dev/null; then
    VISOR_MCP_INSPECTOR=$(scripts/install-mcp-inspector.sh)
    export VISOR_MCP_INSPECTOR
  elif [ -n "${CI:-}" ]; then
    echo "test: npm not found, and CI runs the MCP Inspector tests: apt-get install nodejs npm" >&2
    exit 1
  fi
fi

# The official OpenAI Node SDK, for the gateway's client test, goes into visor's cache folder when node and npm are
# there (npm's own registry settings apply). In CI the test fails rather than skips without it.
if command -v node >/dev/null && command -v npm >/dev/null; then
  npm_dir=${XDG_CACHE_HOME:-$HOME/.cache}/visor/npm
  if [ ! -f "$npm_dir/node_modules/openai/package.json" ]; then
    mkdir -p "$npm_dir"
    progress "test.sh: installing the OpenAI Node SDK into $npm_dir for the gateway's client test (npm, ~30 s) …" \
      npm install --prefix "$npm_dir" --no-audit --no-fund --no-save --loglevel=error openai@5 >/dev/null
  fi
  export VISOR_NODE_MODULES="$npm_dir/node_modules"
fi
# examples/mcp-files.yaml runs the reference MCP filesystem server with npx; fetching it once here keeps npm's
# download out of the test's 30 s wait for the server to answer. The version is the one the example pins.
if command -v npx >/dev/null; then
  fs_pkg=$(grep -o '@modelcontextprotocol/server-filesystem@[0-9.]*' examples/mcp-files.yaml)
  progress "test.sh: fetching $fs_pkg for the MCP example (npm, ~30 s the first time) …" \
    npm exec --yes --package="$fs_pkg" -- true </dev/null
fi

# go test -json through internal/testreport: a line per package, a heartbeat naming what still runs whenever
# nothing was said for 20 s (a cold build of the test binaries takes minutes on two cores), every skip with its
# reason, and a summary line that is printed even when a build fails.
report=$(mktemp -d)/testreport
trap 'rm -rf "$(dirname "$report")"' EXIT
progress "test.sh: building the test reporter …" go build -o "$report" ./internal/testreport
echo "test.sh: building and running every test (cold: ~15 min on two cores; warm: ~5 min) …" >&2
go test -json -count=1 -timeout 20m "$@" ./... | "$report"
