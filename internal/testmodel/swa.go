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
	// Gemma scales token embeddings by √d; the final RMS norm takes the scale out again, so the logit table is the
	// llama model's.
	tensors := w.outerTensors()
	for b := range swaBlocks {
		p := fmt.Sprintf("blk.%d.", b)
		tensors = append(tensors,
			normTensor(p+"attn_norm.weight", d),
			zeroTensor(p+"attn_q.weight", d, chatHeads*hd),
			zeroTensor(p+"attn_k.weight", d, chatHeads*hd),
			zeroTensor(p+"attn_v.weight", d, chatHeads*hd),
			zeroTensor(p+"attn_output.weight", chatHeads*hd, d),
			normTensor(p+"attn_q_norm.weight", hd),
			normTensor(p+"attn_k_norm.weight", hd),
			normTensor(p+"post_attention_norm.weight", d),
			normTensor(p+"ffn_norm.weight", d),
			zeroTensor(p+"ffn_gate.weight", d, chatFeedForward),
			zeroTensor(p+"ffn_up.weight", d, chatFeedForward),
			zeroTensor(p+"ffn_down.weight", chatFeedForward, d),
			normTensor(p+"post_ffw_norm.weight", d))
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
