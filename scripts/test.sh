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

# The agent SDKs the gateway's client tests drive (the OpenAI Node SDK, the Vercel AI SDK with its OpenAI provider,
# LangChain JS) go into visor's cache folder when node and npm are there (npm's own registry settings apply), all in
# one install so npm keeps each of them. In CI the tests fail rather than skip without them.
if command -v node >/dev/null && command -v npm >/dev/null; then
  npm_dir=${XDG_CACHE_HOME:-$HOME/.cache}/visor/npm
  sdks=(openai@5 ai@7 @ai-sdk/openai@4 @langchain/openai@1 @langchain/core@1)
  missing=
  for p in "${sdks[@]}"; do
    [ -f "$npm_dir/node_modules/${p%@*}/package.json" ] || missing=1
  done
  if [ -n "$missing" ]; then
    mkdir -p "$npm_dir"
    progress "test.sh: installing the agent SDKs into $npm_dir for the gateway's client tests (npm, ~40 s) …" \
      npm install --prefix "$npm_dir" --no-audit --no-fund --no-save --loglevel=error "${sdks[@]}" >/dev/null
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
# nothing was said for 15 s (a cold build of the test binaries takes minutes on two cores), every skip with its
# reason, and a summary line that is printed even when a build fails.
report=$(mktemp -d)/testreport
trap 'rm -rf "$(dirname "$report")"' EXIT
progress "test.sh: building the test reporter …" go build -o "$report" ./internal/testreport
echo "test.sh: building and running every test (cold: ~15 min on two cores; warm: ~5 min) …" >&2
go test -json -count=1 -timeout 45m "$@" ./... | "$report"
