package vram

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/visorhq/visor/engine/gguf"
	"github.com/visorhq/visor/engine/modelgen"
)

// blogFiles writes header-only GGUFs of Qwen3.6-35B-A3B and its projector (sparse: no disk space).
const storiesPath = "/work/shared/models/stories260K.gguf"

func blogFiles(t testing.TB) (model, mmproj string) {
	t.Helper()
	dir := t.TempDir()
	model, mmproj = filepath.Join(dir, "qwen3.6-35b-a3b.gguf"), filepath.Join(dir, "mmproj.gguf")
	kv, ts := modelgen.Qwen36()
	if err := gguf.WriteFile(model, kv, ts); err != nil {
		t.Fatal(err)
	}
	kv, ts = modelgen.QwenVLProjector()
	if err := gguf.WriteFile(mmproj, kv, ts); err != nil {
		t.Fatal(err)
	}
	return model, mmproj
}

// blogOptions are the blog's flags: --spec-type draft-mtp --spec-draft-n-max 3 -ctk q4_0 -ctv q4_0 -np 1 -fa on
// -c 262144 -ub 2048, with the fork's swap available.
func blogOptions() Options {
	return Options{Ctx: 262144, CacheK: "q4_0", CacheV: "q4_0", UBatch: 2048, Parallel: 1, DraftMax: 3, SwapSupported: true}
}

// blogGPU is the 24 GB laptop card of the blog with 23.4 GB (10^9 B) usable.
var blogGPU = StaticGPUs{{Index: 0, Name: "24 GB card, 23.4 GB free", Total: 24e9, Free: 23.4e9, Source: "test"}}

func component(p ModePlan, name string) uint64 {
	for _, c := range p.Components {
		if c.Name == name {
			return c.Bytes
		}
	}
	return 0
}

// TestBlogCase reproduces the seed's 24 GB budget from metadata alone and checks each component against the
// buffers llama-server allocated for the same header on the H200 (engine-notes §8).
func TestBlogCase(t *testing.T) {
	t.Parallel()
	model, mmproj := blogFiles(t)
	res, err := PlanFiles(context.Background(), FileOptions{Model: model, MMProj: mmproj, GPU: "auto", Source: blogGPU, Options: blogOptions()})
	if err != nil {
		t.Fatal(err)
	}
	var tbl bytes.Buffer
	if err := res.WriteTable(&tbl); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", tbl.String())

	m := res.Model
	if m.Arch != "qwen35moe" || m.Layers != 40 || m.NextNLayers != 1 || len(m.Attn) != 10 || m.RecurrentLayers != 30 ||
		len(m.NextNAttn) != 1 || m.Experts != 256 || m.Vocab != 0 && m.Vocab != 248320 {
		t.Errorf("facts: %+v", m)
	}
	if d := math.Abs(float64(m.WeightBytes)/17.197e9 - 1); d > 0.001 {
		t.Errorf("tensor bytes %d, want 17.197 GB ±0.1%%", m.WeightBytes)
	}
	if p := res.Projector.Projector; p.TokensPerImage != 576 || p.Patches != 2304 {
		t.Errorf("projector: %+v", p)
	}

	resident, _ := res.Mode(ModeResident)
	// Measured on the H200 (MiB): weights 16,127; KV 1,440; MTP KV 512; recurrent 251; compute 1,328 / 1,192;
	// projector 861 + 248.
	for _, c := range []struct {
		name     string
		measured float64
		tol      float64
	}{
		{"weights", 16127, 0.01},
		{"KV cache", 1440, 0.01},
		{"MTP KV", 512, 0.01},
		{"recurrent state", 251, 0.01},
		{"compute", 1328, 0.05},
		{"MTP compute", 1192, 0.05},
		{"projector", 861, 0.05},
		{"encoder compute", 248, 0.05},
	} {
		got := float64(component(resident, c.name)) / MiB
		if d := math.Abs(got/c.measured - 1); d > c.tol {
			t.Errorf("%s: planned %.0f MiB, llama-server allocated %.0f MiB (%.1f%% off, tolerance %.0f%%)",
				c.name, got, c.measured, 100*d, 100*c.tol)
		} else {
			t.Logf("%-16s planned %6.0f MiB, measured %6.0f MiB (%+.1f%%)", c.name, got, c.measured, 100*(got/c.measured-1))
		}
	}
	// nvidia-smi showed 22,062 MiB with everything resident (including ~100 MiB of Vulkan context).
	if d := math.Abs(float64(resident.Total)/MiB/22062 - 1); d > 0.02 {
		t.Errorf("resident total %.0f MiB, measured 22,062", float64(resident.Total)/MiB)
	}

	if resident.Fits {
		t.Errorf("everything resident at 262K with q4_0 KV must not fit in 23.4 GB: total %s, usable %s", mib(resident.Total), mib(res.Usable))
	}
	if resident.MaxCtx >= 262144 || resident.MaxCtx < 150000 || resident.MaxCtx%256 != 0 {
		t.Errorf("resident max ctx %d", resident.MaxCtx)
	}
	swap, _ := res.Mode(ModeSwap)
	if !swap.Fits || swap.MaxCtx != 262144 {
		t.Errorf("swap mode must fit at 262,144: fits=%v max ctx %d total %s", swap.Fits, swap.MaxCtx, mib(swap.Total))
	}
	if a := strings.Join(swap.Args, " "); !strings.Contains(a, "--mmproj-gpu-swap") || !strings.Contains(a, "-c 262144") ||
		!strings.Contains(a, "--spec-type draft-mtp") || !strings.Contains(a, "-ctk q4_0") {
		t.Errorf("swap args: %s", a)
	}
	if a := strings.Join(resident.Args, " "); !strings.Contains(a, "-c "+itoa(resident.MaxCtx)) {
		t.Errorf("resident args should use the largest fitting context %d: %s", resident.MaxCtx, a)
	}
	for _, m := range []Mode{ModeVisionCPU, ModeTextOnly} {
		if p, _ := res.Mode(m); !p.Fits {
			t.Errorf("%s should fit: %s", m, mib(p.Total))
		}
	}
	// With the default -ub 512 llama-server's everything-resident total was 20,137 MiB, and fit kept 262,144.
	o := blogOptions()
	o.UBatch = 512
	res512, err := PlanFiles(context.Background(), FileOptions{Model: model, MMProj: mmproj, Source: blogGPU, Options: o})
	if err != nil {
		t.Fatal(err)
	}
	r512, _ := res512.Mode(ModeResident)
	// ub 512 is below the image's 576 tokens, so vision modes raise the ubatch; compare the text-only shape too.
	t.Logf("ubatch 512: resident %s at ubatch %d (measured 20,137 MiB), fits=%v", mib(r512.Total), r512.UBatch, r512.Fits)
	if d := math.Abs(float64(r512.Total)/MiB/20137 - 1); d > 0.03 || !r512.Fits {
		t.Errorf("ubatch 512 resident total %s, measured 20,137 MiB; fits=%v", mib(r512.Total), r512.Fits)
	}
	if _, err := json.Marshal(res); err != nil {
		t.Errorf("result is not JSON-serialisable: %v", err)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
