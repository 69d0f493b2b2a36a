package main

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"testing"

	"github.com/visorhq/visor/engine/enginetest"
	"github.com/visorhq/visor/engine/llamacpp"
)

// TestScreenshot: the generated screenshots decode at their size, and two seeds give different images (the
// server caches images by content, so a "later image" must not be the first one again).
func TestScreenshot(t *testing.T) {
	t.Parallel()
	a, err := screenshot(2560, 1440, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := screenshot(2560, 1440, 2)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(a))
	if err != nil || img.Bounds().Dx() != 2560 || img.Bounds().Dy() != 1440 {
		t.Fatalf("decode: %v %v", err, img.Bounds())
	}
	if bytes.Equal(a, b) {
		t.Error("two seeds drew the same screenshot")
	}
	if p := os.Getenv("SEEDCHECK_SHOT"); p != "" {
		_ = os.WriteFile(p, a, 0o644)
	}
}

// TestClientsAgainstRealServer: the three measuring clients work against a real (CPU) llama-server, so a GPU
// run does not fail on a parsing slip.
func TestClientsAgainstRealServer(t *testing.T) {
	s := enginetest.Tiny(t, true, llamacpp.Config{Ctx: 2048})
	ctx := context.Background()
	tpsTokens = 64
	v, sv, err := streamVisor(ctx, s.Client())
	if err != nil || v <= 0 || sv <= 0 {
		t.Fatalf("visor stream: %v %v %v", v, sv, err)
	}
	raw, rsv, err := streamRaw(ctx, s.URL())
	if err != nil || raw <= 0 || rsv <= 0 {
		t.Fatalf("raw stream: %v %v", raw, err)
	}
	png, err := screenshot(320, 200, 3)
	if err != nil {
		t.Fatal(err)
	}
	turn := imageTurn(ctx, s.Client(), &shot{Name: "small", W: 320, H: 200, png: png})
	if turn.Err != "" || turn.TTFTSeconds <= 0 || turn.PromptN <= 0 {
		t.Fatalf("image turn: %+v", turn)
	}
	t.Logf("visor %.0f t/s, raw %.0f t/s, server %.0f t/s; image turn %+v", v, raw, sv, turn)
	if os.Getenv("SEEDCHECK_REPS") != "" {
		for range 4 {
			v, sv, _ := streamVisor(ctx, s.Client())
			raw, _, _ := streamRaw(ctx, s.URL())
			t.Logf("visor %.0f (server %.0f), raw %.0f", v, sv, raw)
		}
	}
}
