#!/usr/bin/env bash
# Stand-in GPUs on a CPU host, for checking multi-device placement without GPUs (engine/vram/MULTIGPU.md): ggml
# RPC servers over the CPU backend, each a separate llama-server device (RPC0, RPC1, …) with its own model, KV and
# compute buffers, named in the load log like GPUs are. Memory comes from host RAM.
#
# Usage: scripts/rpc-devices.sh start [N] | stop
#   start: installs Debian's llama-server with its RPC backend into $VISOR_RPC_ENGINE_DIR (default
#          /tmp/visor-rpc-engine; install-engine.sh does it, so the usual engine is left alone), builds rpcsrv
#          against that engine's libggml, starts N servers (default 2) on 127.0.0.1:50052 and up, and prints the
#          --rpc flag and the `visor plan` line to use. stop ends the servers it started.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${VISOR_RPC_ENGINE_DIR:-/tmp/visor-rpc-engine}
fail() { echo "rpc-devices: $*" >&2; exit 1; }

case "${1:-}" in
stop)
  for pid in "$dir"/rpcsrv.*.pid; do
    [ -e "$pid" ] || continue
    kill "$(cat "$pid")" 2>/dev/null || true
    rm -f "$pid"
  done
  exit 0;;
start) ;;
*) fail "usage: $0 start [N] | stop";;
esac
n=${2:-2}
[[ "$n" =~ ^[1-9][0-9]?$ ]] || fail "N must be a number of devices from 1 to 99, got $n"
command -v gcc >/dev/null || fail "gcc not found: it builds the small RPC server (scripts/rpc-devices/rpcsrv.c)"

if ! find "$dir/root" -name 'libggml-rpc.so' 2>/dev/null | grep -q .; then
  VISOR_ENGINE_GPU=off VISOR_ENGINE_FORCE=1 VISOR_ENGINE_EXTRA_PKGS=libggml0-backend-rpc "$here/install-engine.sh" "$dir" >/dev/null
fi
lib=$(dirname "$(find "$dir/root" -name 'libggml-rpc.so' -path '*backends*' | head -n1)")
[ -e "$lib/libggml-rpc.so" ] || fail "libggml0-backend-rpc did not install into $dir"
libdir=$(dirname "$(dirname "$lib")")
loader=$(find "$dir/root" -name 'ld-linux-x86-64.so.2' -o -name 'ld-linux-aarch64.so.1' | head -n1)
# sid's libraries need a newer glibc than the host's linker knows: leave their symbols to sid's loader.
gcc -O1 -o "$dir/rpcsrv" "$here/rpc-devices/rpcsrv.c" -L"$libdir" -L"$lib" -l:libggml.so.0 -l:libggml-base.so.0 \
  -l:libggml-rpc.so -Wl,--allow-shlib-undefined

for pid in "$dir"/rpcsrv.*.pid; do
  [ -e "$pid" ] && kill -0 "$(cat "$pid")" 2>/dev/null && fail "RPC servers are already running: $0 stop first"
done
rm -f "$dir"/rpcsrv.*.pid
endpoints=()
for i in $(seq 0 $((n - 1))); do
  ep="127.0.0.1:$((50052 + i))"
  setsid "$loader" --library-path "$libdir:$lib" "$dir/rpcsrv" "$lib" "$ep" 1 >"$dir/rpcsrv.$i.log" 2>&1 &
  echo $! >"$dir/rpcsrv.$i.pid"
  endpoints+=("$ep")
done
list=$(IFS=,; echo "${endpoints[*]}")
for _ in $(seq 1 50); do
  "$dir/bin/llama-server" --rpc "$list" --list-devices 2>/dev/null | grep -q "RPC$((n - 1)):" && break
  sleep 0.2
done
"$dir/bin/llama-server" --rpc "$list" --list-devices 2>/dev/null | grep -q "RPC$((n - 1)):" ||
  fail "the RPC servers did not come up (see $dir/rpcsrv.*.log)"
for i in $(seq 0 $((n - 1))); do
  # A port already taken lists the other server's device: make sure ours are the ones listening.
  kill -0 "$(cat "$dir/rpcsrv.$i.pid")" 2>/dev/null || fail "RPC server $i exited: $(tail -n1 "$dir/rpcsrv.$i.log")"
done
"$dir/bin/llama-server" --rpc "$list" --list-devices
names=$(seq -s, -f 'RPC%g' 0 $((n - 1)))
cat <<MSG
llama-server: $dir/bin/llama-server --rpc $list -lv 4 ARGS
plan:         visor plan --model M.gguf [--mmproj P.gguf] --gpu $(printf '20GiB,%.0s' $(seq 1 "$n") | sed 's/,$//') --devices $names
stop:         $0 stop
MSG
