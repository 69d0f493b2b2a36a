package vram

import "testing"

// TestIntakeSize: intake never sends more pixels than the encoder uses and never fewer on a side than
// llama.cpp's own resize keeps.
func TestIntakeSize(t *testing.T) {
	qwen := &Projector{Type: "qwen3vl_merger", ImageSize: 768, PatchSize: 16, MergeSize: 2}
	qwen.imageLimits(0, 0)
	clip := &Projector{Type: "mlp", ImageSize: 448, PatchSize: 14, TokensPerImage: 1024}
	clip.imageLimits(0, 0)
	for _, c := range []struct {
		name         string
		p            *Projector
		w, h, cap    int
		wantW, wantH int
	}{
		{"qwen 1080p fits its limit: kept", qwen, 1920, 1080, 0, 1920, 1080},
		{"qwen 4K: its resized size", qwen, 3840, 2160, 0, 2720, 1536},
		{"qwen 1080p under a 1 MP cap", qwen, 1920, 1080, 1 << 20, 1344, 768},
		{"qwen rounding up a side: kept", qwen, 1000, 700, 0, 1000, 700},
		{"clip square", clip, 1024, 1024, 0, 448, 448},
		{"clip 16:9: shorter side 448", clip, 1920, 1080, 0, 797, 448},
		{"clip small: kept", clip, 300, 200, 0, 300, 200},
	} {
		w, h := c.p.IntakeSize(c.w, c.h, c.cap)
		if w != c.wantW || h != c.wantH {
			t.Errorf("%s: %d×%d → %d×%d, want %d×%d", c.name, c.w, c.h, w, h, c.wantW, c.wantH)
		}
		if rw, rh := c.p.ResizedSize(c.w, c.h); c.cap == 0 && w != c.w && (w < rw || h < rh) && c.p.Dynamic {
			t.Errorf("%s: %d×%d is smaller than llama.cpp's own %d×%d", c.name, w, h, rw, rh)
		}
		if !c.p.Dynamic && min(w, h) < min(c.p.ImageSize, min(c.w, c.h)) {
			t.Errorf("%s: shorter side %d below the encoder's %d", c.name, min(w, h), c.p.ImageSize)
		}
	}
}
