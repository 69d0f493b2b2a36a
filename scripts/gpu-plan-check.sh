#!/usr/bin/env bash
# Compares the VRAM planner with Debian's llama-server on a real NVIDIA GPU through Vulkan (docs/engine-notes.md §7).
# Builds nothing on the GPU machine: it installs the carried .deb files with install-engine.sh, runs llama-server
# through sid's own loader, and runs visor's own vramcheck binary (built beforehand), which generates the test
# models, plans each case, starts the server with the plan's arguments and reads NVML.
#
# Prepare (on a machine with network and Go):
#   mkdir -p .cache/gpu-debs && cp ENGINE_DIR/debs/*.deb .cache/gpu-debs/   # the 10 packages of install-engine.sh
#   (cd .cache/gpu-debs && apt-get … download libggml0-backend-vulkan libvulkan1 libegl1 libglvnd0)
#   CGO_ENABLED=1 go build -o .cache/vramcheck ./internal/gpucheck/cmd/vramcheck
# Run (on the GPU machine, from the repository root): scripts/gpu-plan-check.sh [CASES]
# Results: $OUT/results.json, one server log per case, and a table on stdout. Skips (exit 0) without a GPU, and
# in CI.
set -euo pipefail

if [ -n "${CI:-}" ]; then echo "gpu-plan-check: skipped in CI (needs an NVIDIA GPU)"; exit 0; fi
debs=${VISOR_GPU_DEBS:-.cache/gpu-debs}
check=${VISOR_VRAMCHECK:-.cache/vramcheck}
work=${VISOR_GPU_WORK:-${TMPDIR:-/tmp}/visor-gpu-check}
out=${OUT:-$work/out}
nvlib=${VISOR_NVIDIA_LIB:-/usr/local/nvidia/lib64}
fail() { echo "gpu-plan-check: $*" >&2; exit 1; }

command -v nvidia-smi >/dev/null || [ -e "$nvlib/libnvidia-ml.so.1" ] || { echo "gpu-plan-check: no NVIDIA driver: skipped"; exit 0; }
ls "$debs"/*.deb >/dev/null 2>&1 || fail "no .deb files in $debs (see the header of this script)"
[ -x "$check" ] || fail "$check missing: CGO_ENABLED=1 go build -o $check ./internal/gpucheck/cmd/vramcheck"

mkdir -p "$out" "$work/models"
. "$(dirname "$0")/gpu-engine.sh"
gpu_engine "$work/engine" "$debs" || fail "installing the engine from $debs failed"
"$server" --version 2>&1 | tail -2
devs=$("$server" --list-devices 2>&1 || true)
echo "$devs" | grep -E "Vulkan|CUDA|available" || true
echo "$devs" | grep -q "Vulkan0" || fail "llama-server sees no Vulkan device (missing libEGL/glvnd or ICD?): it would silently run on the CPU"

nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv 2>/dev/null || true
# Through sid's loader too, so the device's own glibc version does not matter; NVML is dlopened from $nvlib.
"$loader" --library-path "$lib:$nvlib" "$check" -server "$server" -dir "$work/models" -out "$out" ${1:+-cases "$1"}
