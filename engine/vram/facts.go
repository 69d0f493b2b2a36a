package vram

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/visorhq/visor/engine/gguf"
)

// Facts are the model properties the plan needs, read from a GGUF header. They are plain data (JSON-friendly) so
// tests and callers can build them without a file.
type Facts struct {
	Path string `json:"path,omitempty"`
	Arch string `json:"arch"`
	Name string `json:"name,omitempty"`

	// Params is the number of weight elements; WeightBytes their exact storage size.
	Params      uint64            `json:"params"`
	WeightBytes uint64            `json:"weight_bytes"`
	BytesByType map[string]uint64 `json:"bytes_by_type"`
	// HostBytes is the part of WeightBytes llama.cpp keeps in host memory even with -ngl 999: the token-embedding
	// table (a get_rows lookup, cheap on the CPU). For tied embeddings the output head is a GPU copy of it.
	HostBytes uint64 `json:"host_bytes"`
	// GPUCopyBytes is weight data the GPU holds in addition to WeightBytes - HostBytes (the tied output head).
	GPUCopyBytes uint64 `json:"gpu_copy_bytes,omitempty"`
	ExpertBytes  uint64 `json:"expert_bytes,omitempty"`
	// LayerBytes are the tensor bytes of each block (blk.N), OutputBytes those of the output head and every other
	// tensor but token_embd: a layer split (-ts) places them per device. Empty for hand-built facts.
	LayerBytes  []uint64 `json:"layer_bytes,omitempty"`
	OutputBytes uint64   `json:"output_bytes,omitempty"`

	Layers      int `json:"layers"`       // main decoder layers (block_count − NextNLayers)
	NextNLayers int `json:"nextn_layers"` // MTP/NextN layers appended after the main ones
	EmbedDim    int `json:"embed_dim"`
	FFDim       int `json:"ff_dim,omitempty"`
	Vocab       int `json:"vocab"`
	CtxTrain    int `json:"ctx_train"`

	// Attn lists the main layers that own KV cache; NextNAttn the MTP layers (they get their own draft context).
	Attn      []AttnLayer `json:"attn_layers"`
	NextNAttn []AttnLayer `json:"nextn_attn_layers,omitempty"`
	MaxHeads  int         `json:"max_heads"`

	// Recurrent (Gated DeltaNet, Mamba) layers and their per-sequence F32 state.
	RecurrentLayers   int    `json:"recurrent_layers,omitempty"`
	RecurrentSeqBytes uint64 `json:"recurrent_seq_bytes,omitempty"` // all recurrent layers, one sequence
	ConvChannels      int    `json:"conv_channels,omitempty"`
	InnerDim          int    `json:"inner_dim,omitempty"`

	Experts        int `json:"experts,omitempty"`
	ExpertsUsed    int `json:"experts_used,omitempty"`
	ExpertFF       int `json:"expert_ff,omitempty"`
	SharedExpertFF int `json:"shared_expert_ff,omitempty"`

	// Projector facts, for an mmproj file (Arch "clip").
	Projector *Projector `json:"projector,omitempty"`
}

// AttnLayer is one layer with a KV cache.
type AttnLayer struct {
	Index  int `json:"index"`
	HeadKV int `json:"head_kv"`
	KeyDim int `json:"key_dim"`
	ValDim int `json:"val_dim"`
}

// Projector describes a vision encoder + projector (mmproj).
type Projector struct {
	Type      string `json:"type"`
	ImageSize int    `json:"image_size"`
	PatchSize int    `json:"patch_size"`
	MergeSize int    `json:"merge_size,omitempty"`
	// Patches and TokensPerImage are for an ImageSize×ImageSize image: the fixed input of a CLIP-style encoder,
	// and the ubatch vision modes use. A dynamic-resolution encoder (Qwen-VL) takes larger images, up to MaxPixels.
	Patches        int `json:"patches"`
	TokensPerImage int `json:"tokens_per_image"`
	// Dynamic is Qwen-VL's dynamic resolution: an image's tokens follow its size (ImageTokens).
	Dynamic bool `json:"dynamic,omitempty"`
	// MinPixels and MaxPixels bound the resized image (clip.vision.image_min_pixels/image_max_pixels, or
	// llama.cpp's defaults for the type); MaxImageTokens is the largest image's tokens, WarmupTokens the size of
	// the image llama.cpp reserves the encoder's compute buffer for at load.
	MinPixels      int `json:"min_pixels,omitempty"`
	MaxPixels      int `json:"max_pixels,omitempty"`
	MaxImageTokens int `json:"max_image_tokens,omitempty"`
	WarmupTokens   int `json:"warmup_tokens,omitempty"`
	EmbedDim       int `json:"embed_dim"`
	FFDim          int `json:"ff_dim"`
	Blocks         int `json:"blocks"`
}

// hybridArchs are the Qwen3-Next family: a full-attention layer every full_attention_interval layers, Gated
// DeltaNet layers between.
var hybridArchs = map[string]bool{"qwen3next": true, "qwen35": true, "qwen35moe": true}

// FactsFromGGUF extracts Facts from a parsed header (a language model or an mmproj).
func FactsFromGGUF(f *gguf.File) (Facts, error) {
	fa := Facts{Path: f.Name, Arch: f.Arch(), BytesByType: map[string]uint64{}}
	fa.Name, _ = f.String("general.name")
	if fa.Arch == "" {
		return fa, fmt.Errorf("vram: %s has no general.architecture: not a llama.cpp model", f.Name)
	}
	for _, t := range f.Tensors {
		b := t.Bytes()
		fa.Params += t.Elements()
		fa.WeightBytes += b
		fa.BytesByType[t.Type.String()] += b
		if strings.Contains(t.Name, "_exps") {
			fa.ExpertBytes += b
		}
	}
	if fa.Arch == "clip" {
		return fa, projectorFacts(f, &fa)
	}
	tok, hasTok := f.Tensor("token_embd.weight")
	if hasTok {
		fa.HostBytes = tok.Bytes()
		if _, hasOut := f.Tensor("output.weight"); !hasOut {
			fa.GPUCopyBytes = tok.Bytes()
		}
	}
	key := func(k string) string { return fa.Arch + "." + k }
	h := hyperparams{f: f}
	u := func(k string) int { return h.get(key(k)) }

	blocks := u("block_count")
	if h.err != nil {
		return fa, h.err
	}
	if blocks <= 0 {
		return fa, fmt.Errorf("vram: %s: %s missing or zero: cannot plan", f.Name, key("block_count"))
	}
	if blocks > maxBlocks {
		return fa, fmt.Errorf("vram: %s: %s is %d, far above llama.cpp's limit of 512 layers: the header is corrupt; re-download or re-convert the model", f.Name, key("block_count"), blocks)
	}
	fa.LayerBytes, fa.OutputBytes = layerBytes(f, blocks)
	fa.NextNLayers = u("nextn_predict_layers")
	if fa.NextNLayers >= blocks {
		return fa, fmt.Errorf("vram: %s: %d nextn layers of %d blocks", f.Name, fa.NextNLayers, blocks)
	}
	fa.Layers = blocks - fa.NextNLayers
	fa.EmbedDim = u("embedding_length")
	fa.CtxTrain = u("context_length")
	if ff, ok := f.Ints(key("feed_forward_length")); ok {
		fa.FFDim = int(maxOf(ff))
	}
	fa.Experts, fa.ExpertsUsed = u("expert_count"), u("expert_used_count")
	fa.ExpertFF, fa.SharedExpertFF = u("expert_feed_forward_length"), u("expert_shared_feed_forward_length")
	if toks, ok := f.Array("tokenizer.ggml.tokens"); ok {
		fa.Vocab = toks.Len()
	} else {
		fa.Vocab = u("vocab_size")
	}

	heads := perLayer(f, key("attention.head_count"), blocks)
	headsKV := perLayer(f, key("attention.head_count_kv"), blocks)
	if _, ok := f.Get(key("attention.head_count_kv")); !ok {
		headsKV = heads
	}
	recurrent := make([]bool, blocks)
	if rl, ok := f.Ints(key("attention.recurrent_layers")); ok && len(rl) == blocks {
		for i, v := range rl {
			recurrent[i] = v != 0
		}
	} else if hybridArchs[fa.Arch] {
		interval := 4
		if v, ok := f.Uint(key("full_attention_interval")); ok && v > 0 {
			interval = int(v)
		}
		for i := 0; i < fa.Layers; i++ {
			recurrent[i] = (i+1)%interval != 0
		}
	} else if _, ssm := f.Get(key("ssm.state_size")); ssm {
		// Other hybrids (Jamba, Granite-H, Nemotron-H) mark recurrent layers with zero KV heads.
		for i := range blocks {
			recurrent[i] = headsKV[i] == 0 && i < fa.Layers
		}
	}
	for i := range blocks {
		fa.MaxHeads = max(fa.MaxHeads, heads[i])
		if recurrent[i] {
			fa.RecurrentLayers++
			continue
		}
		if headsKV[i] == 0 {
			continue
		}
		kd, vd := u("attention.key_length"), u("attention.value_length")
		if kd == 0 && heads[i] > 0 {
			kd = fa.EmbedDim / heads[i]
		}
		if vd == 0 {
			vd = kd
		}
		l := AttnLayer{Index: i, HeadKV: headsKV[i], KeyDim: kd, ValDim: vd}
		if i < fa.Layers {
			fa.Attn = append(fa.Attn, l)
		} else {
			fa.NextNAttn = append(fa.NextNAttn, l)
		}
	}
	if fa.RecurrentLayers > 0 {
		dConv, dState := u("ssm.conv_kernel"), u("ssm.state_size")
		nGroup, dInner := u("ssm.group_count"), u("ssm.inner_size")
		fa.InnerDim = dInner
		fa.ConvChannels = dInner + 2*nGroup*dState
		conv := uint64(max(dConv-1, 0)) * uint64(fa.ConvChannels)
		state := uint64(dState) * uint64(dInner)
		fa.RecurrentSeqBytes = 4 * (conv + state) * uint64(fa.RecurrentLayers)
	}
	return fa, h.err
}

// maxBlocks bounds block_count before per-layer slices are sized from it.
const maxBlocks = 1 << 12

// hyperparams reads integer hyperparameters the way llama.cpp does, as uint32. A larger value is a corrupt or
// hostile header: let through, it would size slices from it or overflow the arithmetic (a merge size of 2^32
// squares to 0 and divides by it). The first such key is kept in err and the value read as 0.
type hyperparams struct {
	f   *gguf.File
	err error
}

func (h *hyperparams) get(key string) int {
	v, _ := h.f.Uint(key)
	if v > math.MaxUint32 {
		if h.err == nil {
			h.err = fmt.Errorf("vram: %s: %s is %d, too large for llama.cpp (a uint32): the header is corrupt; re-download or re-convert the model", h.f.Name, key, v)
		}
		return 0
	}
	return int(v)
}

func projectorFacts(f *gguf.File, fa *Facts) error {
	h := hyperparams{f: f}
	u := h.get
	p := &Projector{
		ImageSize: u("clip.vision.image_size"), PatchSize: u("clip.vision.patch_size"),
		MergeSize: u("clip.vision.spatial_merge_size"), EmbedDim: u("clip.vision.embedding_length"),
		FFDim: u("clip.vision.feed_forward_length"), Blocks: u("clip.vision.block_count"),
	}
	if h.err != nil {
		return h.err
	}
	p.Type, _ = f.String("clip.projector_type")
	if p.Type == "" {
		p.Type, _ = f.String("clip.vision.projector_type")
	}
	if p.ImageSize == 0 || p.PatchSize == 0 {
		return fmt.Errorf("vram: %s: projector without clip.vision.image_size/patch_size (text-only or audio mmproj?)", f.Name)
	}
	side := p.ImageSize / p.PatchSize
	p.Patches = side * side
	p.TokensPerImage = p.Patches
	if p.MergeSize > 1 {
		p.TokensPerImage = p.Patches / (p.MergeSize * p.MergeSize)
	}
	p.imageLimits(u("clip.vision.image_min_pixels"), u("clip.vision.image_max_pixels"))
	if h.err != nil {
		return h.err
	}
	fa.Projector = p
	return nil
}

// perLayer reads a hyperparameter that may be a scalar or a per-layer array.
func perLayer(f *gguf.File, key string, n int) []int {
	out := make([]int, n)
	v, ok := f.Ints(key)
	if !ok || len(v) == 0 {
		return out
	}
	for i := range out {
		if len(v) == 1 {
			out[i] = int(v[0])
		} else if i < len(v) {
			out[i] = int(v[i])
		}
	}
	return out
}

func maxOf(v []int64) int64 {
	var m int64
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// TypesByBytes lists BytesByType largest first, for display.
func (fa Facts) TypesByBytes() []string {
	ts := make([]string, 0, len(fa.BytesByType))
	for t := range fa.BytesByType {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool {
		if fa.BytesByType[ts[i]] != fa.BytesByType[ts[j]] {
			return fa.BytesByType[ts[i]] > fa.BytesByType[ts[j]]
		}
		return ts[i] < ts[j]
	})
	return ts
}
