// Package modelgen builds GGUF files for tests and the GPU check: header-only (sparse) copies of real
// models' shapes, and small random llama models a real llama-server loads.
package modelgen

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/visorhq/visor/engine/gguf"
)

// Qwen36 hyperparameters of Qwen3.6-35B-A3B (docs/engine-notes.md §8, key names from llama.cpp's llama-arch.cpp).
const (
	qEmbd      = 2048
	qBlocks    = 41 // 40 main + 1 NextN
	qHeads     = 16
	qHeadsKV   = 2
	qHeadDim   = 256
	qExperts   = 256
	qUsed      = 8
	qExpFF     = 512
	qVocab     = 248320
	qCtx       = 262144
	qConv      = 4
	qState     = 128
	qGroups    = 16
	qDtRank    = 32
	qInner     = 4096
	qInterval  = 4
	qNextN     = 1
	qTotalBlog = 17_197_000_000
)

// Qwen36 returns metadata and a data-less tensor table with Qwen3.6-35B-A3B's shapes and a UD-Q3_K_XL-like quant
// mix whose size is within 0.1% of the 17.197 GB file of the blog post.
func Qwen36() ([]gguf.KV, []gguf.Tensor) {
	const a = "qwen35moe."
	kv := []gguf.KV{
		{Key: "general.architecture", Value: "qwen35moe"},
		{Key: "general.name", Value: "Qwen3.6-35B-A3B (header only)"},
		{Key: a + "block_count", Value: uint32(qBlocks)},
		{Key: a + "context_length", Value: uint32(qCtx)},
		{Key: a + "embedding_length", Value: uint32(qEmbd)},
		{Key: a + "attention.head_count", Value: uint32(qHeads)},
		{Key: a + "attention.head_count_kv", Value: uint32(qHeadsKV)},
		{Key: a + "attention.key_length", Value: uint32(qHeadDim)},
		{Key: a + "attention.value_length", Value: uint32(qHeadDim)},
		{Key: a + "attention.layer_norm_rms_epsilon", Value: float32(1e-6)},
		{Key: a + "rope.freq_base", Value: float32(1e7)},
		{Key: a + "rope.dimension_count", Value: uint32(64)},
		{Key: a + "rope.dimension_sections", Value: []int32{11, 11, 10, 0}},
		{Key: a + "expert_count", Value: uint32(qExperts)},
		{Key: a + "expert_used_count", Value: uint32(qUsed)},
		{Key: a + "expert_feed_forward_length", Value: uint32(qExpFF)},
		{Key: a + "expert_shared_feed_forward_length", Value: uint32(qExpFF)},
		{Key: a + "ssm.conv_kernel", Value: uint32(qConv)},
		{Key: a + "ssm.state_size", Value: uint32(qState)},
		{Key: a + "ssm.group_count", Value: uint32(qGroups)},
		{Key: a + "ssm.time_step_rank", Value: uint32(qDtRank)},
		{Key: a + "ssm.inner_size", Value: uint32(qInner)},
		{Key: a + "full_attention_interval", Value: uint32(qInterval)},
		{Key: a + "nextn_predict_layers", Value: uint32(qNextN)},
	}
	kv = append(kv, Vocab(qVocab)...)
	t := func(name string, ty gguf.Type, shape ...uint64) gguf.Tensor {
		return gguf.Tensor{Name: name, Type: ty, Shape: shape}
	}
	// Expert down projections in Q4_K for the first downQ4 layers, Q3_K after: tuned to the blog's file size.
	const downQ4 = 19
	ts := []gguf.Tensor{
		t("token_embd.weight", gguf.TypeQ4_K, qEmbd, qVocab),
		t("output_norm.weight", gguf.TypeF32, qEmbd),
		t("output.weight", gguf.TypeQ6_K, qEmbd, qVocab),
	}
	for i := range qBlocks {
		p := "blk." + strconv.Itoa(i) + "."
		ts = append(ts, t(p+"attn_norm.weight", gguf.TypeF32, qEmbd), t(p+"post_attention_norm.weight", gguf.TypeF32, qEmbd))
		if i < qBlocks-qNextN && (i+1)%qInterval != 0 {
			ts = append(ts,
				t(p+"attn_qkv.weight", gguf.TypeQ8_0, qEmbd, qInner+2*qGroups*qState),
				t(p+"attn_gate.weight", gguf.TypeQ8_0, qEmbd, qInner),
				t(p+"ssm_conv1d.weight", gguf.TypeF32, qConv, qInner+2*qGroups*qState),
				t(p+"ssm_dt.bias", gguf.TypeF32, qDtRank),
				t(p+"ssm_a", gguf.TypeF32, qDtRank),
				t(p+"ssm_beta.weight", gguf.TypeQ8_0, qEmbd, qDtRank),
				t(p+"ssm_alpha.weight", gguf.TypeQ8_0, qEmbd, qDtRank),
				t(p+"ssm_norm.weight", gguf.TypeF32, qState),
				t(p+"ssm_out.weight", gguf.TypeQ8_0, qInner, qEmbd))
		} else {
			ts = append(ts,
				t(p+"attn_q.weight", gguf.TypeQ8_0, qEmbd, 2*qHeads*qHeadDim), // query and output gate
				t(p+"attn_k.weight", gguf.TypeQ8_0, qEmbd, qHeadsKV*qHeadDim),
				t(p+"attn_v.weight", gguf.TypeQ8_0, qEmbd, qHeadsKV*qHeadDim),
				t(p+"attn_output.weight", gguf.TypeQ8_0, qHeads*qHeadDim, qEmbd),
				t(p+"attn_q_norm.weight", gguf.TypeF32, qHeadDim),
				t(p+"attn_k_norm.weight", gguf.TypeF32, qHeadDim))
		}
		down := gguf.TypeQ3_K
		if i < downQ4 {
			down = gguf.TypeQ4_K
		}
		ts = append(ts,
			t(p+"ffn_gate_inp.weight", gguf.TypeF32, qEmbd, qExperts),
			t(p+"ffn_gate_exps.weight", gguf.TypeQ3_K, qEmbd, qExpFF, qExperts),
			t(p+"ffn_up_exps.weight", gguf.TypeQ3_K, qEmbd, qExpFF, qExperts),
			t(p+"ffn_down_exps.weight", down, qExpFF, qEmbd, qExperts),
			t(p+"ffn_gate_inp_shexp.weight", gguf.TypeF32, qEmbd),
			t(p+"ffn_gate_shexp.weight", gguf.TypeQ8_0, qEmbd, qExpFF),
			t(p+"ffn_up_shexp.weight", gguf.TypeQ8_0, qEmbd, qExpFF),
			t(p+"ffn_down_shexp.weight", gguf.TypeQ8_0, qExpFF, qEmbd))
		if i >= qBlocks-qNextN {
			ts = append(ts,
				t(p+"nextn.eh_proj.weight", gguf.TypeQ8_0, 2*qEmbd, qEmbd),
				t(p+"nextn.enorm.weight", gguf.TypeF32, qEmbd),
				t(p+"nextn.hnorm.weight", gguf.TypeF32, qEmbd),
				t(p+"nextn.shared_head_norm.weight", gguf.TypeF32, qEmbd))
		}
	}
	return kv, ts
}

// QwenVLProjector returns a BF16 qwen3vl_merger projector header of the size Qwen3.6's mmproj has: a 27-block
// ViT of width 1152 (FFN 4304), 768 px images in 16 px patches merged 2×2 into 576 tokens, projected to 2048.
func QwenVLProjector() ([]gguf.KV, []gguf.Tensor) {
	const e, ff, blocks, patch, img, merge, out = 1152, 4304, 27, 16, 768, 2, qEmbd
	kv := []gguf.KV{
		{Key: "general.architecture", Value: "clip"},
		{Key: "general.name", Value: "Qwen3.6 vision projector (header only)"},
		{Key: "clip.projector_type", Value: "qwen3vl_merger"},
		{Key: "clip.has_vision_encoder", Value: true},
		{Key: "clip.vision.image_size", Value: uint32(img)},
		{Key: "clip.vision.patch_size", Value: uint32(patch)},
		{Key: "clip.vision.embedding_length", Value: uint32(e)},
		{Key: "clip.vision.feed_forward_length", Value: uint32(ff)},
		{Key: "clip.vision.block_count", Value: uint32(blocks)},
		{Key: "clip.vision.attention.head_count", Value: uint32(16)},
		{Key: "clip.vision.spatial_merge_size", Value: uint32(merge)},
		{Key: "clip.vision.projection_dim", Value: uint32(out)},
		{Key: "clip.vision.attention.layer_norm_epsilon", Value: float32(1e-6)},
		{Key: "clip.vision.image_mean", Value: []float32{0.5, 0.5, 0.5}},
		{Key: "clip.vision.image_std", Value: []float32{0.5, 0.5, 0.5}},
		{Key: "clip.use_gelu", Value: true},
	}
	bf := gguf.TypeBF16
	t := func(name string, ty gguf.Type, shape ...uint64) gguf.Tensor {
		return gguf.Tensor{Name: name, Type: ty, Shape: shape}
	}
	side := uint64(img / patch)
	ts := []gguf.Tensor{
		// Qwen-VL's patch convolution spans two temporal frames, stored as two 4-D slices as llama.cpp reads them.
		t("v.patch_embd.weight", bf, patch, patch, 3, e),
		t("v.patch_embd.weight.1", bf, patch, patch, 3, e),
		t("v.patch_embd.bias", gguf.TypeF32, e),
		t("v.position_embd.weight", gguf.TypeF32, e, side*side), // F32: llama.cpp interpolates it per image
	}
	for i := range blocks {
		p := "v.blk." + strconv.Itoa(i) + "."
		ts = append(ts,
			t(p+"attn_qkv.weight", bf, e, 3*e), t(p+"attn_qkv.bias", gguf.TypeF32, 3*e),
			t(p+"attn_out.weight", bf, e, e), t(p+"attn_out.bias", gguf.TypeF32, e),
			t(p+"ln1.weight", gguf.TypeF32, e), t(p+"ln1.bias", gguf.TypeF32, e),
			t(p+"ln2.weight", gguf.TypeF32, e), t(p+"ln2.bias", gguf.TypeF32, e),
			t(p+"ffn_up.weight", bf, e, ff), t(p+"ffn_up.bias", gguf.TypeF32, ff),
			t(p+"ffn_down.weight", bf, ff, e), t(p+"ffn_down.bias", gguf.TypeF32, e))
	}
	m := uint64(e * merge * merge)
	ts = append(ts,
		t("v.post_ln.weight", gguf.TypeF32, e), t("v.post_ln.bias", gguf.TypeF32, e),
		t("mm.0.weight", bf, m, m), t("mm.0.bias", gguf.TypeF32, m),
		t("mm.2.weight", bf, m, out), t("mm.2.bias", gguf.TypeF32, out))
	return kv, ts
}

// LlamaShape describes a small llama model.
type LlamaShape struct {
	Embd, Layers, Heads, HeadsKV, FF, Ctx int
	Type                                  gguf.Type // weight type (F32 or F16)
	// Random fills the weights with small random values (seeded); otherwise the data is left sparse (zeros).
	Random bool
	Seed   uint64
}

// Llama returns a llama model with the given shape and the tokenizer of tok (a real model's header, e.g.
// stories260K.gguf: llama-server refuses a model without a working vocabulary).
func Llama(s LlamaShape, tok *gguf.File) ([]gguf.KV, []gguf.Tensor, error) {
	if err := s.check(); err != nil {
		return nil, nil, err
	}
	tokens, ok := tok.Strings("tokenizer.ggml.tokens")
	if !ok {
		return nil, nil, fmt.Errorf("modelgen: %s has no tokenizer.ggml.tokens to copy", tok.Name)
	}
	vocab := uint64(len(tokens))
	kv := []gguf.KV{
		{Key: "general.architecture", Value: "llama"},
		{Key: "general.name", Value: fmt.Sprintf("test llama e%d l%d h%d/%d", s.Embd, s.Layers, s.Heads, s.HeadsKV)},
		{Key: "llama.context_length", Value: uint32(s.Ctx)},
		{Key: "llama.embedding_length", Value: uint32(s.Embd)},
		{Key: "llama.feed_forward_length", Value: uint32(s.FF)},
		{Key: "llama.attention.head_count", Value: uint32(s.Heads)},
		{Key: "llama.attention.head_count_kv", Value: uint32(s.HeadsKV)},
		{Key: "llama.block_count", Value: uint32(s.Layers)},
		{Key: "llama.rope.dimension_count", Value: uint32(s.Embd / s.Heads)},
		{Key: "llama.attention.layer_norm_rms_epsilon", Value: float32(1e-5)},
	}
	for _, p := range tok.KV {
		if strings.HasPrefix(p.Key, "tokenizer.") {
			kv = append(kv, p)
		}
	}
	rng := rand.New(rand.NewPCG(s.Seed, 1))
	t := func(name string, shape ...uint64) gguf.Tensor {
		ty := s.Type
		if len(shape) == 1 {
			ty = gguf.TypeF32 // norms stay F32, as converters write them
		}
		out := gguf.Tensor{Name: name, Type: ty, Shape: shape}
		if s.Random {
			out.Data = randomData(rng, out)
		}
		return out
	}
	e, kvd, ff := uint64(s.Embd), uint64(s.Embd/s.Heads*s.HeadsKV), uint64(s.FF)
	ts := []gguf.Tensor{t("token_embd.weight", e, vocab), t("output_norm.weight", e), t("output.weight", e, vocab)}
	for i := range s.Layers {
		p := "blk." + strconv.Itoa(i) + "."
		ts = append(ts,
			t(p+"attn_norm.weight", e), t(p+"attn_q.weight", e, e), t(p+"attn_k.weight", e, kvd),
			t(p+"attn_v.weight", e, kvd), t(p+"attn_output.weight", e, e), t(p+"ffn_norm.weight", e),
			t(p+"ffn_gate.weight", e, ff), t(p+"ffn_up.weight", e, ff), t(p+"ffn_down.weight", ff, e))
	}
	return kv, ts, nil
}

// check refuses shapes that llama.cpp would refuse and that Llama itself cannot build: the head size divides
// Embd by Heads, and random data is written as F16 or F32 elements only.
func (s LlamaShape) check() error {
	switch {
	case s.Embd <= 0 || s.Layers <= 0 || s.FF <= 0 || s.Ctx <= 0:
		return fmt.Errorf("modelgen: llama shape %+v: Embd, Layers, FF and Ctx must be positive", s)
	case s.Heads <= 0 || s.HeadsKV <= 0 || s.Embd%s.Heads != 0 || s.Heads%s.HeadsKV != 0:
		return fmt.Errorf("modelgen: llama shape %+v: Heads must divide Embd and HeadsKV must divide Heads", s)
	case s.Random && s.Type != gguf.TypeF32 && s.Type != gguf.TypeF16:
		return fmt.Errorf("modelgen: llama shape %+v: random weights need Type F32 or F16, not %v", s, s.Type)
	}
	return nil
}

func randomData(rng *rand.Rand, t gguf.Tensor) []byte {
	n := (gguf.TensorInfo{Shape: t.Shape, Type: t.Type}).Elements()
	b := make([]byte, (gguf.TensorInfo{Shape: t.Shape, Type: t.Type}).Bytes())
	for i := uint64(0); i < n; i++ {
		v := uint16(rng.Uint32())
		switch t.Type {
		case gguf.TypeF16:
			// Small normal numbers: sign random, exponent 2^-10..2^-7, so activations stay finite.
			h := v&0x8000 | uint16(5+rng.IntN(4))<<10 | v&0x3ff
			b[2*i], b[2*i+1] = byte(h), byte(h>>8)
		default:
			f := uint32(v&0x8000)<<16 | uint32(117+rng.IntN(4))<<23 | uint32(v&0x3ff)<<13
			b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(f), byte(f>>8), byte(f>>16), byte(f>>24)
		}
	}
	return b
}

// Vocab returns a minimal GPT-2-style tokenizer of n distinct tokens that llama.cpp accepts. Its first 256 tokens
// are the 256 bytes in GPT-2's byte alphabet, so any text tokenizes to one token per byte (there are no merges);
// the rest are fillers ("t256", …) that text never produces. Header-only models need no better tokenizer, but
// they do need this one: llama.cpp drops the bytes a vocabulary lacks, and a vocabulary without them turns every
// text into no tokens at all, so that an image request becomes a prompt of only the image, on which llama-server
// b11669 aborts (GGML_ASSERT(batch.size() > 0) in pre_decode). With n < 256 only the first n bytes tokenize.
func Vocab(n int) []gguf.KV {
	toks := make([]string, n)
	types := make([]int32, n)
	for i := range toks {
		if i < 256 {
			toks[i] = string(byteRune(byte(i)))
		} else {
			toks[i] = "t" + strconv.Itoa(i)
		}
		types[i] = 1
	}
	return []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: "gpt2"},
		{Key: "tokenizer.ggml.pre", Value: "default"},
		{Key: "tokenizer.ggml.tokens", Value: toks},
		{Key: "tokenizer.ggml.token_type", Value: types},
		{Key: "tokenizer.ggml.merges", Value: []string{}},
	}
}

// byteRune is GPT-2's printable stand-in for byte b (bytes_to_unicode in its encoder.py, which llama.cpp's
// byte-level BPE follows): printable Latin-1 bytes stand for themselves, the other 68 take the code points from
// U+0100 on, in byte order.
func byteRune(b byte) rune {
	if gpt2Printable(b) {
		return rune(b)
	}
	n := 0
	for c := range b {
		if !gpt2Printable(c) {
			n++
		}
	}
	return rune(0x100 + n)
}

func gpt2Printable(b byte) bool {
	return ('!' <= b && b <= '~') || (0xA1 <= b && b <= 0xAC) || 0xAE <= b
}
