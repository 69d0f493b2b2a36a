package testmodel

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/visorhq/visor/engine/gguf"
)

// ProjectorOptions sizes the vision projector. Zero fields take the defaults, which make a projector that loads in
// milliseconds and encodes an image in about as long; raise ImageSize (with PatchSize), Blocks and
// EmbeddingLength to make encoding cost seconds on a CPU, a stand-in for a real encoder.
//
// Encoding cost grows with patches × weights: patches = (ImageSize/PatchSize)², weights ≈ Blocks ×
// 12 × EmbeddingLength². Measured with llama-server b11669 on a busy 2-core machine: ImageSize 224, PatchSize
// 14, EmbeddingLength 512, Blocks 8, Heads 8 gives 256 image tokens and 25 M weights (a 103 MB file, written in
// about 2 s), and the first request with an image took 5.7 s against 0.1 s with the default projector.
type ProjectorOptions struct {
	// ImageSize is the side of the square the encoder sees, in pixels (default 32). Images are resized to it.
	ImageSize int
	// PatchSize is the side of one patch (default 8); it must divide ImageSize. The image adds
	// (ImageSize/PatchSize)² tokens to the prompt: 16 by default.
	PatchSize int
	// EmbeddingLength is the encoder's hidden size (default 32); a multiple of Heads.
	EmbeddingLength int
	// Blocks is the number of encoder blocks (default 2). LLaVA's projector reads the next-to-last block's output,
	// so Blocks−1 of them run.
	Blocks int
	// Heads is the number of attention heads (default 4).
	Heads int
	// FeedForwardLength is the encoder's MLP width (default 4 × EmbeddingLength).
	FeedForwardLength int
	// TextEmbeddingLength is the projector's output size, which must equal the text model's n_embd (default
	// ChatEmbeddingLength, the chat model of this package). At that width the output only uses the dimensions the
	// chat model keeps free for images, so images never change its answers.
	TextEmbeddingLength int
}

// SlowProjector is a projector whose one encode takes seconds on a CPU, a stand-in for a real vision encoder in
// benchmarks of work done ahead of time: 448 px images in 14 px patches (1,024 image tokens, about a real 1080p
// screenshot's count), width 512, 8 blocks (a 105 MB file). Measured with llama-server b11669 on the shared
// 2-core machine: 1.9–3.8 s for a turn with one image against 0.09 s with it cached; the log (-lv 4) put the
// encode alone at several seconds under load.
var SlowProjector = ProjectorOptions{ImageSize: 448, PatchSize: 14, EmbeddingLength: 512, Blocks: 8, Heads: 8}

// Default projector shape.
const (
	defaultImageSize = 32
	defaultPatchSize = 8
	defaultVisionEmb = 32
	defaultBlocks    = 2
	defaultHeads     = 4
	projectorSeed    = 0x7e57_b16a_c0de_0002
	weightScale      = 0.05 // keeps activations small and finite; the values carry no meaning
	// maxProjectorWeights caps the projector at 4 GiB of F32.
	maxProjectorWeights = 1 << 30
)

func p2(n int) uint64 { return uint64(n) * uint64(n) }

// withDefaults fills zero fields and validates the result.
func (o ProjectorOptions) withDefaults() (ProjectorOptions, error) {
	set := func(p *int, def int) {
		if *p == 0 {
			*p = def
		}
	}
	set(&o.ImageSize, defaultImageSize)
	set(&o.PatchSize, defaultPatchSize)
	set(&o.EmbeddingLength, defaultVisionEmb)
	set(&o.Blocks, defaultBlocks)
	set(&o.Heads, defaultHeads)
	set(&o.FeedForwardLength, 4*o.EmbeddingLength)
	set(&o.TextEmbeddingLength, ChatEmbeddingLength)
	for _, f := range []struct {
		name string
		v    int
	}{
		{"ImageSize", o.ImageSize}, {"PatchSize", o.PatchSize}, {"EmbeddingLength", o.EmbeddingLength},
		{"Blocks", o.Blocks}, {"Heads", o.Heads}, {"FeedForwardLength", o.FeedForwardLength},
		{"TextEmbeddingLength", o.TextEmbeddingLength},
	} {
		if f.v < 0 {
			return o, fmt.Errorf("testmodel: projector %s is %d, want ≥ 0 (0 for the default)", f.name, f.v)
		}
	}
	if o.ImageSize%o.PatchSize != 0 {
		return o, fmt.Errorf("testmodel: projector PatchSize %d does not divide ImageSize %d", o.PatchSize, o.ImageSize)
	}
	if o.EmbeddingLength%o.Heads != 0 {
		return o, fmt.Errorf("testmodel: projector EmbeddingLength %d is not a multiple of Heads %d",
			o.EmbeddingLength, o.Heads)
	}
	if o.Blocks < 2 {
		// LLaVA's graph runs Blocks−1 blocks; one block would leave an encoder that does nothing.
		return o, fmt.Errorf("testmodel: projector Blocks is %d, want ≥ 2", o.Blocks)
	}
	if o.FeedForwardLength == o.EmbeddingLength {
		// clip.cpp swaps ffn_up and ffn_down of old MLP projectors when ffn_down's rows are n_embd long, which
		// cannot be told apart from ours when the two sizes are equal.
		return o, fmt.Errorf("testmodel: projector FeedForwardLength must differ from EmbeddingLength (%d)",
			o.EmbeddingLength)
	}
	return o, nil
}

// ImageTokens is the number of prompt tokens one image adds: one per patch.
func (o ProjectorOptions) ImageTokens() (int, error) {
	o, err := o.withDefaults()
	if err != nil {
		return 0, err
	}
	n := o.ImageSize / o.PatchSize
	return n * n, nil
}

// projectorModel returns the metadata and tensors of a CLIP vision encoder with a LLaVA-1.5 MLP projector.
func projectorModel(opt ProjectorOptions) ([]gguf.KV, []gguf.Tensor, error) {
	o, err := opt.withDefaults()
	if err != nil {
		return nil, nil, err
	}
	d, ff, text := uint64(o.EmbeddingLength), uint64(o.FeedForwardLength), uint64(o.TextEmbeddingLength)
	side := uint64(o.ImageSize / o.PatchSize)
	positions := side*side + 1 // patches plus the class embedding
	// The weights are built in memory; refuse sizes that would not fit rather than fail on allocation.
	weights := p2(o.PatchSize)*3*d + d*positions + uint64(o.Blocks)*(4*d*d+2*d*ff) + d*text + text*text
	if weights > maxProjectorWeights {
		return nil, nil, fmt.Errorf("testmodel: projector of %d weights exceeds the %d limit",
			weights, uint64(maxProjectorWeights))
	}
	kv := []gguf.KV{
		{Key: "general.architecture", Value: "clip"},
		{Key: "general.name", Value: "visor tiny-mmproj"},
		{Key: "general.file_type", Value: uint32(0)},
		{Key: "clip.projector_type", Value: "mlp"},
		{Key: "clip.has_text_encoder", Value: false},
		{Key: "clip.has_vision_encoder", Value: true},
		{Key: "clip.has_llava_projector", Value: true},
		{Key: "clip.use_gelu", Value: true},
		{Key: "clip.vision.image_size", Value: uint32(o.ImageSize)},
		{Key: "clip.vision.patch_size", Value: uint32(o.PatchSize)},
		{Key: "clip.vision.embedding_length", Value: uint32(d)},
		{Key: "clip.vision.feed_forward_length", Value: uint32(ff)},
		{Key: "clip.vision.projection_dim", Value: uint32(text)},
		{Key: "clip.vision.block_count", Value: uint32(o.Blocks)},
		{Key: "clip.vision.attention.head_count", Value: uint32(o.Heads)},
		{Key: "clip.vision.attention.layer_norm_epsilon", Value: float32(1e-5)},
		// CLIP's normalisation constants, as LLaVA-1.5 ships them.
		{Key: "clip.vision.image_mean", Value: []float32{0.48145466, 0.4578275, 0.40821073}},
		{Key: "clip.vision.image_std", Value: []float32{0.26862954, 0.26130258, 0.27577711}},
	}

	rng := splitmix64{state: projectorSeed}
	// random fills a tensor with seeded noise in ±weightScale, straight into its bytes (large projectors have
	// hundreds of millions of weights). keep, when set, zeroes every row (output unit) it rejects.
	random := func(name string, keep func(row uint64) bool, shape ...uint64) gguf.Tensor {
		n := uint64(1)
		for _, s := range shape {
			n *= s
		}
		b := make([]byte, 4*n)
		for i := uint64(0); i < n; i++ {
			v := (2*rng.float32() - 1) * weightScale
			if keep != nil && !keep(i/shape[0]) {
				v = 0
			}
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		return gguf.Tensor{Name: name, Shape: shape, Type: gguf.TypeF32, Data: b}
	}
	// Image embeddings must not disturb the chat model's token logic: its block-0 attention reads the class
	// dimensions of every position, so an image embedding with values there could pass for a <tool_call>. For the
	// chat model's width the projector therefore writes only the dimensions that model leaves free.
	var imageRows func(uint64) bool
	if o.TextEmbeddingLength == ChatEmbeddingLength {
		imageRows = func(r uint64) bool { return r >= imageDimLow && r < imageDimHigh }
	}
	ones := func(name string, n uint64) gguf.Tensor {
		v := make([]float32, n)
		for i := range v {
			v[i] = 1
		}
		return gguf.Tensor{Name: name, Shape: []uint64{n}, Type: gguf.TypeF32, Data: f32Bytes(v)}
	}
	zeros := func(name string, shape ...uint64) gguf.Tensor {
		return gguf.Tensor{Name: name, Shape: shape, Type: gguf.TypeF32}
	}
	p := uint64(o.PatchSize)
	tensors := []gguf.Tensor{
		random("v.patch_embd.weight", nil, p, p, 3, d), // a conv2d kernel: one patch of 3 channels per output unit
		random("v.class_embd", nil, d),
		random("v.position_embd.weight", nil, d, positions),
		ones("v.pre_ln.weight", d),
		zeros("v.pre_ln.bias", d),
	}
	for b := range o.Blocks {
		pre := fmt.Sprintf("v.blk.%d.", b)
		tensors = append(tensors,
			random(pre+"attn_q.weight", nil, d, d), zeros(pre+"attn_q.bias", d),
			random(pre+"attn_k.weight", nil, d, d), zeros(pre+"attn_k.bias", d),
			random(pre+"attn_v.weight", nil, d, d), zeros(pre+"attn_v.bias", d),
			random(pre+"attn_out.weight", nil, d, d), zeros(pre+"attn_out.bias", d),
			ones(pre+"ln1.weight", d), zeros(pre+"ln1.bias", d),
			ones(pre+"ln2.weight", d), zeros(pre+"ln2.bias", d),
			random(pre+"ffn_up.weight", nil, d, ff), zeros(pre+"ffn_up.bias", ff),
			random(pre+"ffn_down.weight", nil, ff, d), zeros(pre+"ffn_down.bias", d),
		)
	}
	// LLaVA-1.5's projector: Linear(d → text), GELU, Linear(text → text). The text model ignores what it gets
	// (its attention output is zero), so only the shape matters; mtmd checks that the output size is n_embd.
	tensors = append(tensors,
		random("mm.0.weight", nil, d, text), zeros("mm.0.bias", text),
		random("mm.2.weight", imageRows, text, text), zeros("mm.2.bias", text),
	)
	return kv, tensors, nil
}

// WriteProjector writes a vision projector (GGUF v3, all F32) that libmtmd loads with --mmproj next to the chat
// model. With the default options it is about 215 KB; the bytes depend only on opt.
func WriteProjector(w io.Writer, opt ProjectorOptions) error {
	kv, tensors, err := projectorModel(opt)
	if err != nil {
		return err
	}
	if _, err := gguf.Write(w, kv, tensors); err != nil {
		return fmt.Errorf("testmodel: write projector: %w", err)
	}
	return nil
}

// WriteProjectorFile writes the projector to path, creating or truncating it.
func WriteProjectorFile(path string, opt ProjectorOptions) error {
	kv, tensors, err := projectorModel(opt)
	if err != nil {
		return err
	}
	if err := gguf.WriteFile(path, kv, tensors); err != nil {
		return fmt.Errorf("testmodel: write projector: %w", err)
	}
	return nil
}
