// Package engine talks to a model server over the OpenAI-compatible API (llama-server or any remote endpoint),
// including the llama.cpp fields go-openai lacks, llama-server's exact-prompt endpoints (ApplyTemplate, Evaluate:
// what a prefill that works on hybrid models needs) and the cost-model inputs its timings give (MeasureCosts). It
// does not decide when to prefill or which profile to run: that is the scheduler's (swap). Subpackages own the GGUF format (gguf), the llama-server process
// (llamacpp) and VRAM planning.
package engine
