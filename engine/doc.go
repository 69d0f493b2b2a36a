// Package engine talks to a model server over the OpenAI-compatible API (llama-server or any remote endpoint),
// including the llama.cpp fields go-openai lacks. Subpackages own the GGUF format (gguf), the llama-server process
// (llamacpp) and VRAM planning.
package engine
