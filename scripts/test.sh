#!/usr/bin/env bash
# The test command: installs what the tests need (Debian's llama-server into visor's engine folder) and runs every
# test, the real-engine ones included. Extra arguments go to `go test` (e.g. -run, -v).
set -euo pipefail
cd "$(dirname "$0")/.."
# go-nvml's header marks dozens of NVML calls deprecated; gcc's warnings about them bury the real output.
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations"

engine_dir=${VISOR_ENGINE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/visor/engine}
scripts/install-engine.sh "$engine_dir"
export VISOR_ENGINE_DIR="$engine_dir"
export VISOR_LLAMA_SERVER=${VISOR_LLAMA_SERVER:-$engine_dir/bin/llama-server}
if [ -z "${VISOR_SHARED:-}" ] && [ -d ../shared/models ]; then
  VISOR_SHARED=$(cd ../shared && pwd)
  export VISOR_SHARED
fi

start=$(date +%s)
go test -tags sqlite_fts5 -count=1 -timeout 20m "$@" ./...
echo "tests finished in $(( $(date +%s) - start )) s"
