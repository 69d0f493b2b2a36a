package modelgen

import (
	"strconv"

	"github.com/visorhq/visor/engine/gguf"
)

// WriteTextless writes a tiny llama-arch model (width 64, one layer, context ctx) whose vocabulary has only
// multi-character tokens and no merges: llama.cpp tokenizes every text to nothing with it, which is what the
// header-only stand-ins did before Vocab had byte tokens. Tests of the tokenizer check use it.
func WriteTextless(path string, ctx int) error {
	toks := make([]string, 512)
	types := make([]int32, len(toks))
	for i := range toks {
		toks[i], types[i] = "t"+strconv.Itoa(i), 1
	}
	vocab := &gguf.File{Name: "bytes-less", KV: []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: "gpt2"}, {Key: "tokenizer.ggml.pre", Value: "default"},
		{Key: "tokenizer.ggml.tokens", Value: toks}, {Key: "tokenizer.ggml.token_type", Value: types},
		{Key: "tokenizer.ggml.merges", Value: []string{}}}}
	kv, ts, err := Llama(LlamaShape{Embd: 64, Layers: 1, Heads: 4, HeadsKV: 4, FF: 128, Ctx: ctx, Type: gguf.TypeF32}, vocab)
	if err != nil {
		return err
	}
	return gguf.WriteFile(path, kv, ts)
}
