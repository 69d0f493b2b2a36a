package testmodel

import (
	"fmt"

	"github.com/visorhq/visor/engine/gguf"
)

// Shape of the sliding-window chat model (architecture gemma3): llama.cpp makes every sixth layer global and the
// others attend to the last SWAWindow tokens only, and llama-server, like for a recurrent model, cannot cut such a
// cache back further than the window.
const (
	swaBlocks = 6
	// SWAWindow is the sliding window, far shorter than any prompt, so that a request diverging a few tokens
	// before the cached end cannot be served by cutting the cache back.
	SWAWindow = 4
)

// swaModel returns the metadata and tensors of the sliding-window chat model. It has the llama model's
// vocabulary, template, embeddings and logit table but every attention and MLP output is zero, so its logits
// depend on the last token only: it answers "Hi!" (and never calls a tool, which needs the feature heads).
func swaModel() ([]gguf.KV, []gguf.Tensor, error) {
	w, err := newChatWiring()
	if err != nil {
		return nil, nil, err
	}
	const a = "gemma3."
	kv := append(chatHeaderKV("gemma3", "visor tiny-swa", swaBlocks), []gguf.KV{
		{Key: a + "attention.sliding_window", Value: uint32(SWAWindow)},
		{Key: a + "rope.freq_base", Value: float32(chatRopeBase)},
		{Key: a + "vocab_size", Value: uint32(VocabSize)},
	}...)
	kv = append(kv, w.tokenizerKV()...)
	const d, hd = ChatEmbeddingLength, chatHeadDim
	ones := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 1
		}
		return v
	}
	// Gemma scales token embeddings by √d; the final RMS norm takes the scale out again, so the logit table is the
	// llama model's.
	tensors := []gguf.Tensor{
		f32Tensor("token_embd.weight", w.embd, d, VocabSize),
		f32Tensor("output_norm.weight", ones(d), d),
		f32Tensor("output.weight", w.output, d, VocabSize),
	}
	for b := range swaBlocks {
		p := fmt.Sprintf("blk.%d.", b)
		tensors = append(tensors,
			f32Tensor(p+"attn_norm.weight", ones(d), d),
			zeroTensor(p+"attn_q.weight", d, chatHeads*hd),
			zeroTensor(p+"attn_k.weight", d, chatHeads*hd),
			zeroTensor(p+"attn_v.weight", d, chatHeads*hd),
			zeroTensor(p+"attn_output.weight", chatHeads*hd, d),
			f32Tensor(p+"attn_q_norm.weight", ones(hd), hd),
			f32Tensor(p+"attn_k_norm.weight", ones(hd), hd),
			f32Tensor(p+"post_attention_norm.weight", ones(d), d),
			f32Tensor(p+"ffn_norm.weight", ones(d), d),
			zeroTensor(p+"ffn_gate.weight", d, chatFeedForward),
			zeroTensor(p+"ffn_up.weight", d, chatFeedForward),
			zeroTensor(p+"ffn_down.weight", chatFeedForward, d),
			f32Tensor(p+"post_ffw_norm.weight", ones(d), d))
	}
	return kv, tensors, nil
}

// WriteSWAFile writes the sliding-window chat model (GGUF v3, gemma3, all F32) to path.
func WriteSWAFile(path string) error {
	kv, tensors, err := swaModel()
	if err != nil {
		return err
	}
	if err := gguf.WriteFile(path, kv, tensors); err != nil {
		return fmt.Errorf("testmodel: write sliding-window model: %w", err)
	}
	return nil
}
