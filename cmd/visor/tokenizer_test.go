package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/visorhq/visor/engine/enginetest"
	"github.com/visorhq/visor/engine/gguf"
	"github.com/visorhq/visor/engine/modelgen"
	"github.com/visorhq/visor/engine/testmodel"
)

// TestAskRefusesVisionModelWithoutTextTokens: a model whose vocabulary turns all text into no tokens would make
// every image request a prompt of only the image, on which llama-server aborts; ask must stop at start with an
// error naming the model, before any request.
func TestAskRefusesVisionModelWithoutTextTokens(t *testing.T) {
	enginetest.Binary(t)
	dir := t.TempDir()
	toks := make([]string, 512)
	types := make([]int32, len(toks))
	for i := range toks {
		toks[i], types[i] = "t"+strconv.Itoa(i), 1
	}
	vocab := &gguf.File{Name: "bytes-less", KV: []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: "gpt2"}, {Key: "tokenizer.ggml.pre", Value: "default"},
		{Key: "tokenizer.ggml.tokens", Value: toks}, {Key: "tokenizer.ggml.token_type", Value: types},
		{Key: "tokenizer.ggml.merges", Value: []string{}}}}
	kv, ts, err := modelgen.Llama(modelgen.LlamaShape{Embd: 64, Layers: 1, Heads: 4, HeadsKV: 4, FF: 128, Ctx: 1024,
		Type: gguf.TypeF32}, vocab)
	if err != nil {
		t.Fatal(err)
	}
	model, proj := filepath.Join(dir, "no-bytes.gguf"), filepath.Join(dir, "mmproj.gguf")
	if err := gguf.WriteFile(model, kv, ts); err != nil {
		t.Fatal(err)
	}
	if err := testmodel.WriteProjectorFile(proj, testmodel.ProjectorOptions{TextEmbeddingLength: 64}); err != nil {
		t.Fatal(err)
	}
	_, errOut, err := visor(t, "ask", "hi", "--model", model, "--mmproj", proj, "--plan", "off", "--no-store")
	if err == nil || !strings.Contains(err.Error(), "no-bytes.gguf turns text into no tokens") {
		t.Fatalf("ask on a model without text tokens: %v\n%s", err, errOut)
	}
}
