package modelgen

import (
	"bytes"
	"strings"
	"testing"

	"github.com/visorhq/visor/engine/gguf"
)

func TestLlamaRefusesBadShapes(t *testing.T) {
	t.Parallel()
	tok := &gguf.File{Name: "tok", KV: Vocab(16)}
	good := LlamaShape{Embd: 64, Layers: 2, Heads: 4, HeadsKV: 2, FF: 128, Ctx: 256, Type: gguf.TypeF32}
	for name, edit := range map[string]func(*LlamaShape){
		"no heads":                 func(s *LlamaShape) { s.Heads = 0 },
		"no kv heads":              func(s *LlamaShape) { s.HeadsKV = 0 },
		"heads not dividing embd":  func(s *LlamaShape) { s.Heads = 5 },
		"kv heads not dividing":    func(s *LlamaShape) { s.HeadsKV = 3 },
		"no layers":                func(s *LlamaShape) { s.Layers = 0 },
		"random quantised weights": func(s *LlamaShape) { s.Random, s.Type = true, gguf.TypeQ4_0 },
	} {
		s := good
		edit(&s)
		if _, _, err := Llama(s, tok); err == nil || !strings.Contains(err.Error(), "modelgen: llama shape") {
			t.Errorf("%s: err = %v, want a shape error", name, err)
		}
	}
}

// TestLlamaReadsBack writes a random model and parses it: the header carries the shape and the tokenizer, and
// every tensor's data is there.
func TestLlamaReadsBack(t *testing.T) {
	t.Parallel()
	tok := &gguf.File{Name: "tok", KV: Vocab(16)}
	s := LlamaShape{Embd: 64, Layers: 2, Heads: 4, HeadsKV: 2, FF: 128, Ctx: 256, Type: gguf.TypeF16, Random: true, Seed: 7}
	kv, ts, err := Llama(s, tok)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := gguf.Write(&buf, kv, ts); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.ReadAt(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "llama")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := f.Uint("llama.block_count"); n != 2 {
		t.Errorf("block_count %d, want 2", n)
	}
	if toks, _ := f.Strings("tokenizer.ggml.tokens"); len(toks) != 16 {
		t.Errorf("%d tokens, want the 16 of the tokenizer", len(toks))
	}
	if k, ok := f.Tensor("blk.1.attn_k.weight"); !ok || k.Type != gguf.TypeF16 || k.Shape[1] != 32 {
		t.Errorf("attn_k %+v %v, want F16 64×32 (2 kv heads of 16)", k, ok)
	}
	if norm, _ := f.Tensor("output_norm.weight"); norm.Type != gguf.TypeF32 {
		t.Errorf("norm type %v, want F32", norm.Type)
	}
}
