# Sourced by the gpu-*-check scripts. gpu_engine DIR DEBS installs the carried .deb files into DIR with
# install-engine.sh (which also wires the NVIDIA container's driver libraries and Vulkan ICD into its wrapper) and
# sets server (that llama-server wrapper) and loader and lib (sid's dynamic loader and library folder, to run the
# Go binaries built elsewhere under the same glibc). VISOR_NVIDIA_LIB, when set, is added to the wrapper's path.
gpu_engine() {
  local here
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  VISOR_ENGINE_GPU=${VISOR_ENGINE_GPU:-auto} VISOR_ENGINE_DEBS="$2" VISOR_ENGINE_FORCE=1 "$here/install-engine.sh" "$1" || return 1
  export VISOR_ENGINE_LIBRARY_PATH=${VISOR_NVIDIA_LIB:-}
  server=$1/bin/llama-server
  loader=$(find "$1/root" -name 'ld-linux-x86-64.so.2' | head -n1)
  [ -n "$loader" ] || return 1
  lib=$(dirname "$loader")
}

# gpu_prepare NAME runs what every gpu-*-check script does first: it skips in CI or without an NVIDIA driver, checks
# the carried files (VISOR_GPU_DEBS, VISOR_BIN, VISOR_SEEDCHECK), installs the engine with gpu_engine and writes
# $work/visor, visor run through sid's loader (so the machine's own glibc does not matter; NVML and libcuda are
# dlopened from the driver's folder). It sets debs, visor, check, work, out, nvlib and fail for the caller.
gpu_prepare() {
  local name=$1
  if [ -n "${CI:-}" ]; then echo "$name: skipped in CI (needs an NVIDIA GPU)"; exit 0; fi
  debs=${VISOR_GPU_DEBS:-.cache/gpu-debs}
  visor=${VISOR_BIN:-.cache/visor}
  check=${VISOR_SEEDCHECK:-.cache/seedcheck}
  work=${VISOR_GPU_WORK:-${TMPDIR:-/tmp}/visor-${name#gpu-}}
  out=${OUT:-$work/out}
  nvlib=${VISOR_NVIDIA_LIB:-/usr/local/nvidia/lib64}
  eval "fail() { echo \"$name: \$*\" >&2; exit 1; }"

  command -v nvidia-smi >/dev/null || [ -e "$nvlib/libnvidia-ml.so.1" ] || { echo "$name: no NVIDIA driver: skipped"; exit 0; }
  ls "$debs"/*.deb >/dev/null 2>&1 || fail "no .deb files in $debs (see the header of this script)"
  [ -x "$visor" ] || fail "$visor missing (see the header of this script)"
  [ -x "$check" ] || fail "$check missing (see the header of this script)"
  mkdir -p "$work" "$out"
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv 2>/dev/null || true

  # The real installer, offline, with its GPU detection: it must pick the Vulkan backend on its own.
  gpu_engine "$work/engine" "$debs" || fail "installing the engine from $debs failed"
  cat > "$work/visor" <<SH
#!/bin/sh
exec "$loader" --library-path "$lib:$nvlib" "$(cd "$(dirname "$visor")" && pwd)/$(basename "$visor")" "\$@"
SH
  chmod +x "$work/visor"
}
