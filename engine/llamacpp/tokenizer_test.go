package llamacpp_test

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/visorhq/visor/engine/enginetest"
	"github.com/visorhq/visor/engine/gguf"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/engine/modelgen"
)

// TestCheckTokenizerRefusesVocabWithoutBytes starts a real server on a model whose vocabulary has only
// multi-character tokens and no merges (what header-only stand-ins had before modelgen.Vocab got its byte
// tokens): llama.cpp tokenizes every text to nothing there, so the check must refuse the model by name. TestWarmup
// checks that a working vocabulary passes.
func TestCheckTokenizerRefusesVocabWithoutBytes(t *testing.T) {
	toks := make([]string, 512)
	types := make([]int32, len(toks))
	for i := range toks {
		toks[i], types[i] = "t"+strconv.Itoa(i), 1
	}
	vocab := &gguf.File{Name: "bytes-less", KV: []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: "gpt2"}, {Key: "tokenizer.ggml.pre", Value: "default"},
		{Key: "tokenizer.ggml.tokens", Value: toks}, {Key: "tokenizer.ggml.token_type", Value: types},
		{Key: "tokenizer.ggml.merges", Value: []string{}}}}
	kv, ts, err := modelgen.Llama(modelgen.LlamaShape{Embd: 64, Layers: 1, Heads: 4, HeadsKV: 4, FF: 128, Ctx: 512,
		Type: gguf.TypeF32}, vocab)
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(t.TempDir(), "no-bytes.gguf")
	if err := gguf.WriteFile(model, kv, ts); err != nil {
		t.Fatal(err)
	}
	s := enginetest.Start(t, llamacpp.Config{Model: model, Ctx: 512, Parallel: 1})
	err = llamacpp.CheckTokenizer(context.Background(), s.Client(), "no-bytes.gguf")
	if err == nil || !strings.Contains(err.Error(), "no-bytes.gguf") || !strings.Contains(err.Error(), "no tokens") {
		t.Fatalf("CheckTokenizer = %v, want an error naming no-bytes.gguf and saying text gives no tokens", err)
	}
}
