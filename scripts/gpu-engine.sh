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
