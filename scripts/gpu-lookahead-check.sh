#!/usr/bin/env bash
# Runs issue 11's GPU acceptance line (agent.BenchmarkLookaheadGPU) with Debian's llama-server on a real NVIDIA
# GPU through Vulkan (engine-notes §7): the full-size Qwen3.6-35B-A3B stand-in with MTP on the GPU and its
# projector on the CPU, a ~1,000-token screenshot attached 15 s ahead against the same turn without lookahead.
# Builds nothing on the GPU machine: it installs the carried .deb files with install-engine.sh, runs llama-server
# through sid's own loader, and runs the agent package's test binary (built beforehand), which writes the
# stand-in (sparse, seconds) and starts the server itself.
#
# Prepare (on a machine with network and Go):
#   mkdir -p .cache/gpu-debs && cp ENGINE_DIR/debs/*.deb .cache/gpu-debs/   # the 10 packages of install-engine.sh
#   (cd .cache/gpu-debs && apt-get … download libggml0-backend-vulkan libvulkan1 libegl1 libglvnd0)
#   CGO_ENABLED=1 go test -c -ldflags='-s -w' -o .cache/agent.test ./agent
# Run (on the GPU machine, from the repository root): scripts/gpu-lookahead-check.sh
# (VISOR_LOOKAHEAD_GPU_ROUNDS=3 repeats the with/without pairs inside the one benchmark run)
# Results on stdout and in $OUT (the server log). Skips (exit 0) without a GPU, and in CI.
set -euo pipefail

if [ -n "${CI:-}" ]; then echo "gpu-lookahead-check: skipped in CI (needs an NVIDIA GPU)"; exit 0; fi
debs=${VISOR_GPU_DEBS:-.cache/gpu-debs}
bin=${VISOR_AGENT_TEST:-.cache/agent.test}
work=${VISOR_GPU_WORK:-${TMPDIR:-/tmp}/visor-gpu-lookahead}
out=${OUT:-$work/out}
nvlib=${VISOR_NVIDIA_LIB:-/usr/local/nvidia/lib64}
fail() { echo "gpu-lookahead-check: $*" >&2; exit 1; }

command -v nvidia-smi >/dev/null || [ -e "$nvlib/libnvidia-ml.so.1" ] || { echo "gpu-lookahead-check: no NVIDIA driver: skipped"; exit 0; }
ls "$debs"/*.deb >/dev/null 2>&1 || fail "no .deb files in $debs (see the header of this script)"
[ -x "$bin" ] || fail "$bin missing: CGO_ENABLED=1 go test -c -o $bin ./agent"

mkdir -p "$out" "$work/models"
. "$(dirname "$0")/gpu-engine.sh"
gpu_engine "$work/engine" "$debs" || fail "installing the engine from $debs failed"
"$server" --version 2>&1 | tail -2
"$server" --list-devices 2>&1 | grep -q "Vulkan0" || fail "llama-server sees no Vulkan device: it would silently run on the CPU"
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv 2>/dev/null || true
VISOR_LOOKAHEAD_GPU_SERVER=$server VISOR_LOOKAHEAD_GPU_DIR=$work/models \
  "$loader" --library-path "$lib" "$bin" -test.run '^$' -test.bench 'LookaheadGPU' -test.benchtime 1x -test.v \
  -test.timeout 7m 2>&1 | tee "$out/bench.txt"
cp "$work/models/llama-server.log" "$out/" 2>/dev/null || true
