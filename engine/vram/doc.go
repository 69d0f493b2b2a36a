// Package vram plans how a llama.cpp model fits in GPU memory: weights, KV cache, recurrent state, compute
// buffers, the MTP draft context and a vision projector, for several placement modes, with the largest context
// that fits and the llama-server arguments that realise each mode.
//
// Plan is pure arithmetic over Facts (read from GGUF headers by FactsFromGGUF) and a GPU (read from NVML, or given
// as a size); PlanFiles wires the two for the CLI. PlanDevices adds placements over several GPUs (projector or
// MTP draft on a second card, layer splits) and CheckPlacement compares one with llama-server's load log. The formulas and the measurements they were checked against are
// in README.md. The package does not start servers and does not measure anything itself; cmd/vramcheck and
// scripts/gpu-plan-check.sh do, on a real GPU.
package vram
