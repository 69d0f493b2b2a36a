package testmodel

import (
	"fmt"
	"io"

	"github.com/visorhq/visor/engine/gguf"
)

// Shape of the hybrid chat model (architecture qwen35, the Qwen3.5/3.6 dense layout): Gated DeltaNet
// (linear-attention) layers with a full-attention layer every hybridAttnInterval-th, as llama.cpp's qwen35 loader
// builds them. Its tokenizer, template, embeddings, logit table and feature heads are the llama chat model's, so it
// answers exactly the same; only the memory it keeps is different: llama-server holds a recurrent state for layers
// 0–2 that it can extend but not cut back, which is what makes prefix reuse behave as on the real Qwen3.5/3.6.
const (
	hybridBlocks       = 4
	hybridAttnInterval = 4 // layer 3 is full attention; 0–2 are Gated DeltaNet
	hybridRopeDims     = 16
	// hybridQKNorm is the q_norm and k_norm weight on the feature dimension. Qwen3.5 RMS-normalises q and k per
	// head, so a head vector with one nonzero entry becomes √32 there whatever the projection's scale; the
	// score of a marked token is then (√32·n)²/√32 = √32·n² ≈ 90 for n = 4, as in the llama model.
	hybridQKNorm = 4
	// Gated DeltaNet sizes: head size (state) 32, 2 key heads, 4 value heads, inner size 4 × 32.
	hybridConv    = 4
	hybridState   = 32
	hybridGroups  = 2
	hybridDtRank  = 4
	hybridInner   = hybridState * hybridDtRank
	hybridConvDim = 2*hybridGroups*hybridState + hybridInner
)

// hybridRopeSections splits the rotary pairs into Qwen3.5's multimodal sections (time, height, width, extra);
// they sum to hybridRopeDims/2. The feature heads use dimension rotaryDim (30), beyond the 16 rotary ones, so
// positions never touch them.
var hybridRopeSections = []int32{3, 3, 2, 0}

// hybridModel returns the metadata and tensors of the hybrid chat model.
func hybridModel() ([]gguf.KV, []gguf.Tensor, error) {
	w, err := newChatWiring()
	if err != nil {
		return nil, nil, err
	}
	const a = "qwen35."
	kv := append(chatHeaderKV("qwen35", "visor tiny-hybrid", hybridBlocks), []gguf.KV{
		{Key: a + "rope.dimension_count", Value: uint32(hybridRopeDims)},
		{Key: a + "rope.dimension_sections", Value: hybridRopeSections},
		{Key: a + "rope.freq_base", Value: float32(chatRopeBase)},
		{Key: a + "ssm.conv_kernel", Value: uint32(hybridConv)},
		{Key: a + "ssm.state_size", Value: uint32(hybridState)},
		{Key: a + "ssm.group_count", Value: uint32(hybridGroups)},
		{Key: a + "ssm.time_step_rank", Value: uint32(hybridDtRank)},
		{Key: a + "ssm.inner_size", Value: uint32(hybridInner)},
		{Key: a + "full_attention_interval", Value: uint32(hybridAttnInterval)},
		{Key: a + "vocab_size", Value: uint32(VocabSize)},
	}...)
	kv = append(kv, w.tokenizerKV()...)

	const d, hd = ChatEmbeddingLength, chatHeadDim
	// The full-attention layer projects q and an output gate together: per head, hd query rows then hd gate
	// rows. The gate rows are zero, so the gate is sigmoid(0) = ½ and attn_output carries twice the llama value.
	wq := make([]float32, 2*chatHeads*hd*d)
	wk := make([]float32, d*d)
	wv := make([]float32, d*d)
	wo := make([]float32, d*d)
	qkNorm := make([]float32, hd)
	for i := range qkNorm {
		qkNorm[i] = 1
	}
	qkNorm[rotaryDim] = hybridQKNorm
	for h, head := range w.heads {
		q := h*2*hd + rotaryDim
		k := h*hd + rotaryDim
		val := h * hd
		for c := range w.nClass {
			wq[q*d+c] = 1 // any positive entry: q_norm scales it to √hd
		}
		for _, m := range head.tokens {
			wk[k*d+w.class[m.token]] = 1
			wv[val*d+w.class[m.token]] = m.value
		}
		wo[head.dim*d+val] = 2 * featureOut
	}

	tensors := w.outerTensors()
	for b := range hybridBlocks {
		p := fmt.Sprintf("blk.%d.", b)
		tensors = append(tensors,
			normTensor(p+"attn_norm.weight", d),
			normTensor(p+"post_attention_norm.weight", d))
		if (b+1)%hybridAttnInterval == 0 {
			tensors = append(tensors,
				f32Tensor(p+"attn_q.weight", wq, d, 2*chatHeads*hd),
				f32Tensor(p+"attn_k.weight", wk, d, chatHeads*hd),
				f32Tensor(p+"attn_v.weight", wv, d, chatHeads*hd),
				f32Tensor(p+"attn_output.weight", wo, chatHeads*hd, d),
				f32Tensor(p+"attn_q_norm.weight", qkNorm, hd),
				f32Tensor(p+"attn_k_norm.weight", qkNorm, hd))
		} else {
			// A Gated DeltaNet layer whose output projection is zero: it keeps a (zero) recurrent state and adds
			// nothing to the residual stream. Norm weights are ones so that no norm divides zero by zero.
			tensors = append(tensors,
				zeroTensor(p+"attn_qkv.weight", d, hybridConvDim),
				zeroTensor(p+"attn_gate.weight", d, hybridInner),
				zeroTensor(p+"ssm_conv1d.weight", hybridConv, hybridConvDim),
				zeroTensor(p+"ssm_dt.bias", hybridDtRank),
				zeroTensor(p+"ssm_a", hybridDtRank),
				zeroTensor(p+"ssm_beta.weight", d, hybridDtRank),
				zeroTensor(p+"ssm_alpha.weight", d, hybridDtRank),
				normTensor(p+"ssm_norm.weight", hybridState),
				zeroTensor(p+"ssm_out.weight", hybridInner, d))
		}
		// ffn_down is zero: the MLPs add nothing, as in the llama model.
		tensors = append(tensors,
			zeroTensor(p+"ffn_gate.weight", d, chatFeedForward),
			zeroTensor(p+"ffn_up.weight", d, chatFeedForward),
			zeroTensor(p+"ffn_down.weight", chatFeedForward, d))
	}
	return kv, tensors, nil
}

// WriteHybrid writes the hybrid chat model (GGUF v3, qwen35, all F32, about 1.3 MB) to w. The bytes are the same
// on every call.
func WriteHybrid(w io.Writer) error {
	kv, tensors, err := hybridModel()
	if err != nil {
		return err
	}
	if _, err := gguf.Write(w, kv, tensors); err != nil {
		return fmt.Errorf("testmodel: write hybrid model: %w", err)
	}
	return nil
}

// WriteHybridFile writes the hybrid chat model to path, creating or truncating it.
func WriteHybridFile(path string) error {
	kv, tensors, err := hybridModel()
	if err != nil {
		return err
	}
	if err := gguf.WriteFile(path, kv, tensors); err != nil {
		return fmt.Errorf("testmodel: write hybrid model: %w", err)
	}
	return nil
}

// chatHeaderKV is the metadata every generated chat architecture opens with: the shared shape of the tiny
// models (width, heads, feed-forward, context), named for arch.
func chatHeaderKV(arch, name string, blocks int) []gguf.KV {
	a := arch + "."
	return []gguf.KV{
		{Key: "general.architecture", Value: arch},
		{Key: "general.name", Value: name},
		{Key: "general.file_type", Value: uint32(0)}, // all F32
		{Key: a + "context_length", Value: uint32(chatContextLength)},
		{Key: a + "embedding_length", Value: uint32(ChatEmbeddingLength)},
		{Key: a + "block_count", Value: uint32(blocks)},
		{Key: a + "feed_forward_length", Value: uint32(chatFeedForward)},
		{Key: a + "attention.head_count", Value: uint32(chatHeads)},
		{Key: a + "attention.head_count_kv", Value: uint32(chatHeads)},
		{Key: a + "attention.key_length", Value: uint32(chatHeadDim)},
		{Key: a + "attention.value_length", Value: uint32(chatHeadDim)},
		{Key: a + "attention.layer_norm_rms_epsilon", Value: float32(chatRMSEpsilon)},
	}
}
