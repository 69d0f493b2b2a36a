#!/usr/bin/env bash
# Runs the seed's 24 GB scenario end to end on a real NVIDIA GPU (issue 12; docs/engine-notes.md §8–§9): ballast down to
# the seed's 23.4 GB free, `visor plan` and `visor serve` (plan auto: visor picks and starts the mode, checks it
# runs on the GPU, warms up), 1080p / 1440p / largest screenshots, NVML's minimum free memory during each turn,
# first-image vs later-image time to first token (with and without warm-up, each on a fresh shader cache), and
# tokens/s through visor's client vs a raw HTTP read of the same server. Nothing is built on the GPU machine.
#
# Prepare (on a machine with network and Go), from the repository root:
#   VISOR_ENGINE_GPU=vulkan VISOR_ENGINE_FORCE=1 scripts/install-engine.sh .cache/gpu-engine
#   mkdir -p .cache/gpu-debs && cp .cache/gpu-engine/debs/*.deb .cache/gpu-debs/
#   CGO_ENABLED=1 go build -ldflags=-s -o .cache/visor ./cmd/visor
#   CGO_ENABLED=1 go build -ldflags=-s -o .cache/seedcheck ./internal/gpucheck/cmd/seedcheck
# Run (on the GPU machine, from the repository root): scripts/gpu-seed-check.sh [seedcheck flags, e.g. -free 23.4GB]
# Only the tokens/s comparison (same ballast, plan and warm-up start; no control run, no screenshots):
#   scripts/gpu-seed-check.sh -tps-only -reps 120 -tps-tokens 128 -tps-budget 400s [-goopenai]
# The server's own rate varies ~7% from one request to the next, so one run's 1% line is a coin toss; pool runs
# (on any machine): seedcheck -pool run1/results.json run2/results.json ...
# Without a GPU, `seedcheck -dry -model M -mmproj P` checks the flow on the CPU with small models (no NVML, no ballast).
# Results: $OUT/results.json, the llama-server logs and PASS/FAIL lines on stdout (the screenshots stay in the work
# folder). Skips (exit 0) without an NVIDIA GPU, and in CI.
set -euo pipefail

. "$(dirname "$0")/gpu-engine.sh"
gpu_prepare gpu-seed-check
VISOR_ENGINE_DIR="$work/state-engine" "$work/visor" engine --server "$server" | tee "$out/visor-engine.txt"
grep -q "Vulkan0" "$out/visor-engine.txt" || fail "visor engine shows no Vulkan device: llama-server would run on the CPU"
"$loader" --library-path "$lib:$nvlib" "$check" -visor "$work/visor" -server "$server" -work "$work" -out "$out" "$@"
