#!/usr/bin/env bash
# The test command: installs what the tests need (Debian's llama-server into visor's engine folder, and the MCP
# Inspector CLI from npm when npm is there; CI requires it) and runs every test, the real-engine ones included.
# Extra arguments go to `go test` (e.g. -run, -v).
set -euo pipefail
cd "$(dirname "$0")/.."
# go-nvml's header marks dozens of NVML calls deprecated; gcc's warnings about them bury the real output.
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations"

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
if [ -z "${VISOR_SHARED:-}" ] && [ -d ../shared/models ]; then
  VISOR_SHARED=$(cd ../shared && pwd)
  export VISOR_SHARED
fi

start=$(date +%s)
go test -tags sqlite_fts5 -count=1 -timeout 20m "$@" ./...
echo "tests finished in $(( $(date +%s) - start )) s"
