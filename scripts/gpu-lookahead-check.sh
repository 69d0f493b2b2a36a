#!/usr/bin/env bash
# Runs issue 11's GPU acceptance line (agent.BenchmarkLookaheadGPU) with Debian's llama-server on a real NVIDIA
# GPU through Vulkan (engine-notes §7): the full-size Qwen3.6-35B-A3B stand-in with MTP on the GPU and its
# projector on the CPU, a ~1,000-token screenshot attached 15 s ahead against the same turn without lookahead.
# Builds nothing on the GPU machine: it unpacks the carried .deb files into a private folder, runs llama-server
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
icd=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
fail() { echo "gpu-lookahead-check: $*" >&2; exit 1; }

command -v nvidia-smi >/dev/null || [ -e "$nvlib/libnvidia-ml.so.1" ] || { echo "gpu-lookahead-check: no NVIDIA driver: skipped"; exit 0; }
ls "$debs"/*.deb >/dev/null 2>&1 || fail "no .deb files in $debs (see the header of this script)"
[ -x "$bin" ] || fail "$bin missing: CGO_ENABLED=1 go test -c -o $bin ./agent"
[ -e "$icd" ] || fail "Vulkan ICD $icd not found: set VK_DRIVER_FILES"

root=$work/root
rm -rf "$root" && mkdir -p "$root" "$out" "$work/models"
for d in "$debs"/*.deb; do
  if command -v dpkg >/dev/null; then dpkg -x "$d" "$root" || fail "unpacking $d failed"; continue; fi
  python3 - "$d" "$root" <<'PY' || fail "unpacking $d failed"
import sys, tarfile, io
data = open(sys.argv[1], 'rb').read(); pos = 8
while pos < len(data):
    name = data[pos:pos+16].decode().strip().rstrip('/'); size = int(data[pos+48:pos+58]); body = data[pos+60:pos+60+size]
    if name.startswith('data.tar'):
        tarfile.open(fileobj=io.BytesIO(body)).extractall(sys.argv[2])
    pos += 60 + size + (size & 1)
PY
done
lib=$root/usr/lib/x86_64-linux-gnu
loader=$(ls "$lib"/ld-linux-x86-64.so.2 2>/dev/null) || fail "sid's loader not found in the unpacked libc6"
for so in "$lib"/ggml/backends*/libggml-*.so; do [ -e "$so" ] && ln -sf "$so" "$lib/$(basename "$so")"; done
server=$work/llama-server
cat > "$server" <<SH
#!/bin/sh
export VK_DRIVER_FILES="$icd"
exec "$loader" --library-path "$lib:$lib/llama:$nvlib" "$root/usr/bin/llama-server" "\$@"
SH
chmod +x "$server"
"$server" --version 2>&1 | tail -2
"$server" --list-devices 2>&1 | grep -q "Vulkan0" || fail "llama-server sees no Vulkan device: it would silently run on the CPU"
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv 2>/dev/null || true
VISOR_LOOKAHEAD_GPU_SERVER=$server VISOR_LOOKAHEAD_GPU_DIR=$work/models \
  "$loader" --library-path "$lib" "$bin" -test.run '^$' -test.bench 'LookaheadGPU' -test.benchtime 1x -test.v \
  -test.timeout 7m 2>&1 | tee "$out/bench.txt"
cp "$work/models/llama-server.log" "$out/" 2>/dev/null || true
