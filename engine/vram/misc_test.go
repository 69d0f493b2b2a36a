package vram

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/visorhq/visor/engine/gguf"
)

func TestParseSize(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]uint64{
		"24GiB": 24 << 30, "23.4GB": 23_400_000_000, "24G": 24 << 30, "24576MiB": 24 << 30, "512m": 512 << 20,
		"1000": 1000, " 2 TiB ": 2 << 40, "1.5KB": 1500,
	} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "GiB", "12XB", "-3G", "1e30GB", "abc"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
}

func TestResolveGPU(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := StaticGPUs{{Index: 0, Name: "a", Free: 10}, {Index: 1, Name: "b", Free: 20}}
	if g, err := ResolveGPU(ctx, src, "auto"); err != nil || g.Name != "b" {
		t.Errorf("auto: %+v %v", g, err)
	}
	if g, err := ResolveGPU(ctx, src, "0"); err != nil || g.Name != "a" {
		t.Errorf("index: %+v %v", g, err)
	}
	if _, err := ResolveGPU(ctx, src, "7"); err == nil || !strings.Contains(err.Error(), "no such device") {
		t.Errorf("bad index: %v", err)
	}
	if g, err := ResolveGPU(ctx, nil, "24GiB"); err != nil || g.Free != 24<<30 || g.Source != "manual" {
		t.Errorf("size: %+v %v", g, err)
	}
	if _, err := ResolveGPU(ctx, StaticGPUs{}, "auto"); !errors.Is(err, ErrNoGPU) || !strings.Contains(err.Error(), "--gpu SIZE") {
		t.Errorf("no GPU: %v", err)
	}
}

// TestNVMLWithoutDriver: on machines without an NVIDIA driver the reader must fail cleanly, pointing at --gpu.
func TestNVMLWithoutDriver(t *testing.T) {
	t.Parallel()
	gpus, err := NVML{}.GPUs(context.Background())
	if err == nil {
		t.Skipf("NVML works here (%d GPUs): nothing to check", len(gpus))
	}
	if !errors.Is(err, ErrNoGPU) {
		t.Errorf("error %v should wrap ErrNoGPU", err)
	}
	_, err = ResolveGPU(context.Background(), NVML{}, "auto")
	if !strings.Contains(err.Error(), "--gpu SIZE") {
		t.Errorf("error %v should tell how to plan without a driver", err)
	}
}

func TestPlanErrors(t *testing.T) {
	t.Parallel()
	m := Facts{Path: "m.gguf", Arch: "llama", CtxTrain: 4096, Attn: []AttnLayer{{HeadKV: 1, KeyDim: 8, ValDim: 8}}}
	if _, err := Plan(m, nil, GPU{Free: 1 << 30}, Options{CacheK: "q8_0"}); err == nil || !strings.Contains(err.Error(), "head size") {
		t.Errorf("q8_0 cache with head size 8: %v", err)
	}
	if _, err := Plan(m, nil, GPU{Free: 1 << 30}, Options{CacheK: "q9"}); err == nil || !strings.Contains(err.Error(), "-ctk") {
		t.Errorf("bad cache type: %v", err)
	}
	if _, err := Plan(m, &Facts{Path: "x.gguf", Arch: "llama"}, GPU{}, Options{}); err == nil || !strings.Contains(err.Error(), "not a vision projector") {
		t.Errorf("text model as projector: %v", err)
	}
	if _, err := PlanFiles(context.Background(), FileOptions{}); err == nil || !strings.Contains(err.Error(), "--model") {
		t.Errorf("no model: %v", err)
	}
}

// TestFactsDenseAndTied covers a dense model with tied embeddings: the output head is a GPU copy of token_embd.
func TestFactsDenseAndTied(t *testing.T) {
	t.Parallel()
	f := &gguf.File{Name: "tied.gguf", KV: []gguf.KV{
		{Key: "general.architecture", Value: "llama"},
		{Key: "llama.block_count", Value: uint32(2)},
		{Key: "llama.embedding_length", Value: uint32(64)},
		{Key: "llama.attention.head_count", Value: uint32(4)},
		{Key: "llama.attention.head_count_kv", Value: []int32{4, 2}},
		{Key: "llama.context_length", Value: uint32(1000)},
	}, Tensors: []gguf.TensorInfo{{Name: "token_embd.weight", Shape: []uint64{64, 100}, Type: gguf.TypeF16}}}
	fa, err := FactsFromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	if fa.HostBytes != 12800 || fa.GPUCopyBytes != 12800 || len(fa.Attn) != 2 || fa.Attn[1].HeadKV != 2 || fa.Attn[0].KeyDim != 16 {
		t.Errorf("facts %+v", fa)
	}
	res, err := Plan(fa, nil, GPU{Free: 2 << 30}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := res.Modes[0]
	// (4+2 heads) × 16 dims × 2 (K,V) × 2 bytes = 384 B/token, 1024 cells (1000 padded to 256).
	if kv := component(p, "KV cache"); kv != 384*1024 {
		t.Errorf("KV %d", kv)
	}
	if p.MaxCtx != 1000-1000%256 || !p.Fits {
		t.Errorf("max ctx %d (training context 1000 rounds down to 768), fits %v", p.MaxCtx, p.Fits)
	}
}

// BenchmarkPlan measures planning the 35B model: the pure Plan, and PlanFiles including the header parse of the
// 248K-token vocabulary.
func BenchmarkPlan(b *testing.B) {
	model, mmproj := blogFiles(b)
	src := blogGPU
	b.Run("PlanFiles", func(b *testing.B) {
		for b.Loop() {
			if _, err := PlanFiles(context.Background(), FileOptions{Model: model, MMProj: mmproj, Source: src, Options: blogOptions()}); err != nil {
				b.Fatal(err)
			}
		}
	})
	res, _ := PlanFiles(context.Background(), FileOptions{Model: model, MMProj: mmproj, Source: src, Options: blogOptions()})
	b.Run("Plan", func(b *testing.B) {
		for b.Loop() {
			if _, err := Plan(res.Model, res.Projector, src[0], blogOptions()); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestFactsHostileHeader: hyperparameters no real model has must come back as errors, not as a slice sized from
// them (out of memory) or a division by an overflowed zero (panic).
func TestFactsHostileHeader(t *testing.T) {
	t.Parallel()
	for name, kv := range map[string][]gguf.KV{
		"huge block_count": {
			{Key: "general.architecture", Value: "llama"},
			{Key: "llama.block_count", Value: uint64(1) << 40},
		},
		"block_count above the layer limit": {
			{Key: "general.architecture", Value: "llama"},
			{Key: "llama.block_count", Value: uint32(1) << 30},
		},
		"merge size squaring to zero": {
			{Key: "general.architecture", Value: "clip"},
			{Key: "clip.vision.image_size", Value: uint32(448)},
			{Key: "clip.vision.patch_size", Value: uint32(14)},
			{Key: "clip.vision.spatial_merge_size", Value: uint64(1) << 32},
		},
	} {
		_, err := FactsFromGGUF(&gguf.File{Name: "hostile.gguf", KV: kv})
		if err == nil || !strings.Contains(err.Error(), "hostile.gguf") || !strings.Contains(err.Error(), "corrupt") {
			t.Errorf("%s: err = %v, want an error naming the file and calling the header corrupt", name, err)
		}
	}
}

// TestNVMLReadsTheGPU runs where an NVIDIA driver is present (the lent H200): NVML must report each device with
// consistent memory figures. CI and CPU machines have no GPU, so it skips there with a message.
func TestNVMLReadsTheGPU(t *testing.T) {
	gpus, err := NVML{}.GPUs(context.Background())
	if errors.Is(err, ErrNoGPU) {
		t.Skipf("no NVIDIA GPU on this machine (%v); run this test on a GPU machine", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus) == 0 {
		t.Fatal("NVML initialised but reported no device")
	}
	for _, g := range gpus {
		t.Logf("%s: total %d MiB, free %d MiB, used %d MiB, %d processes", g.Name, g.Total>>20, g.Free>>20, g.Used>>20, len(g.Processes))
		if g.Name == "" || g.Total == 0 || g.Free > g.Total || g.Used > g.Total {
			t.Errorf("inconsistent device %+v", g)
		}
	}
	if _, err := ResolveGPU(context.Background(), NVML{}, "0"); err != nil {
		t.Errorf("device 0: %v", err)
	}
}
