#!/usr/bin/env bash
# Issue 25 on a real NVIDIA GPU: the seed's budget recreated by ballast (seedcheck -free, default 23.4 GB), visor's
# plan (the KV cache type is part of it) and `visor serve` as planned, then a 30-turn screenshot chat through visor's
# session service with lookahead and the image window: each turn's time to first token against the engine's floor
# (a raw request of the same conversation as visor sent it, every image cached), turn 30 against turn 2. Then the
# decode speed of the full-size stand-in with each KV cache type (f16, q8_0, q4_0; MTP with synthetic acceptance
# 2.6, as docs/engine-notes.md §9), which the plan's KV ranking assumes. Nothing is built on the GPU machine.
#
# Prepare (with network and Go), from the repository root, as for scripts/gpu-seed-check.sh:
#   VISOR_ENGINE_GPU=vulkan VISOR_ENGINE_FORCE=1 scripts/install-engine.sh .cache/gpu-engine
#   mkdir -p .cache/gpu-debs && cp .cache/gpu-engine/debs/*.deb .cache/gpu-debs/
#   CGO_ENABLED=1 go build -ldflags=-s -o .cache/visor ./cmd/visor
#   CGO_ENABLED=1 go build -ldflags=-s -o .cache/seedcheck ./internal/gpucheck/cmd/seedcheck
# Run: scripts/gpu-window-check.sh [-chat 30] [-typing 6s] [-free 23.4GB] [-attach-send] [-chat-again N] [-cut 8192,1024]
#   (flags go to seedcheck: -attach-send the same chat without lookahead, -chat-again a second session's first
#   turns, -cut a raw window chat at each --checkpoint-min-step and older images stubbed/downscaled/full)
# Results: $OUT/results.json (the chat), $OUT/kv-speed.txt, PASS/FAIL lines on stdout. Skips without a GPU and in CI.
set -euo pipefail

. "$(dirname "$0")/gpu-engine.sh"
gpu_prepare gpu-window-check
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(-chat 30 -typing 6s)
status=0
"$loader" --library-path "$lib:$nvlib" "$check" -visor "$work/visor" -server "$server" -work "$work" -out "$out" \
  -control=false "${args[@]}" || status=$?

# Decode speed per KV cache type, on the stand-in seedcheck wrote (no ballast: only the speed matters here);
# VISOR_KV_SPEED=0 leaves it out.
[ "${VISOR_KV_SPEED:-1}" != 0 ] || exit $status
model=$work/qwen3.6-35b-a3b.gguf
[ -f "$model" ] || fail "no stand-in model at $model"
: > "$out/kv-speed.txt"
for kv in f16 q8_0 q4_0; do
  port=$((18080 + RANDOM % 1000))
  "$server" -m "$model" -c 65536 -ngl 999 -fa on -ctk $kv -ctv $kv -np 1 --fit off --spec-type draft-mtp \
    --spec-draft-n-max 3 --spec-synth-len 2.6 --host 127.0.0.1 --port $port > "$out/kv-$kv.log" 2>&1 &
  pid=$!
  python3 - "$port" "$kv" >> "$out/kv-speed.txt" <<'PY' || true
import json, sys, time, urllib.request
port, kv = sys.argv[1], sys.argv[2]
base = f"http://127.0.0.1:{port}"
for _ in range(240):
    try:
        if urllib.request.urlopen(base + "/health", timeout=2).status == 200:
            break
    except Exception:
        time.sleep(0.5)
speeds = []
for i in range(5):
    body = json.dumps({"prompt": f"Once upon a time, number {i},", "n_predict": 256, "temperature": 0,
                       "ignore_eos": True, "cache_prompt": False}).encode()
    req = urllib.request.Request(base + "/completion", data=body, headers={"Content-Type": "application/json"})
    t = json.load(urllib.request.urlopen(req, timeout=120))["timings"]
    if i > 0:  # the first pays the kernels' first use
        speeds.append(t["predicted_per_second"])
speeds.sort()
print(f"kv {kv}: predicted tokens/s {speeds}, median {speeds[len(speeds)//2]:.1f}")
PY
  kill $pid 2>/dev/null || true
  wait $pid 2>/dev/null || true
done
cat "$out/kv-speed.txt"
exit $status
