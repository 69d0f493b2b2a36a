#!/usr/bin/env bash
# The main job: installs the engine and runs a demo agent. With no model of your own (VISOR_MODEL unset), visor
# writes its tiny generated model and the agent lists a folder with a real tool call on a real llama-server.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/cgo-flags.sh
. scripts/progress.sh

engine_dir=${VISOR_ENGINE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/visor/engine}
# The install says what it does (about 20 s the first time); an engine already there is not news. sed -u passes
# each line on as it comes instead of at the end.
scripts/install-engine.sh "$engine_dir" | sed -u '/already installed/d' >&2
export VISOR_ENGINE_DIR="$engine_dir"
mkdir -p bin
progress "building bin/visor (the first build takes 3–8 min on two cores; later ones seconds) …" go build -o bin/visor ./cmd/visor
if [ -n "${VISOR_MODEL:-}" ]; then
  exec bin/visor ask --model "$VISOR_MODEL" --tools list_dir,read_file "${*:-List the files in this folder and tell me what this project is.}"
fi
exec bin/visor demo "$@"
