package swap_test

import (
	"testing"
	"time"

	"github.com/visorhq/visor/engine/swap"
)

// TestCachedImageCost: the per-image cost is the slope of the requests' overhead over their images, the fixed
// part (HTTP, text) left out; too few requests or one image count give no measurement.
func TestCachedImageCost(t *testing.T) {
	ms := func(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }
	// The H200 chat of docs/engine-notes.md §11: ~55 ms a 1080p screenshot over a fixed ~20 ms.
	pts := []swap.RequestCost{{1, ms(75)}, {2, ms(130)}, {3, ms(185)}, {2, ms(131)}, {3, ms(184)}}
	got, ok := swap.CachedImageCost(pts)
	if !ok || got < ms(54) || got > ms(56) {
		t.Errorf("slope %s (%v), want 55 ms", got, ok)
	}
	if _, ok := swap.CachedImageCost(pts[:3]); ok {
		t.Error("three requests gave a measurement")
	}
	if _, ok := swap.CachedImageCost([]swap.RequestCost{{2, ms(100)}, {2, ms(120)}, {2, ms(90)}, {2, ms(110)}}); ok {
		t.Error("one image count gave a slope")
	}
	if got, ok := swap.CachedImageCost([]swap.RequestCost{{1, ms(100)}, {2, ms(90)}, {1, ms(110)}, {2, ms(95)}}); !ok || got != 0 {
		t.Errorf("a falling overhead: %s %v, want 0 (noise, not a negative cost)", got, ok)
	}
	r := swap.OverheadOf(2, ms(300), 150, 10, 100)
	if r.Images != 2 || r.Overhead != ms(140) {
		t.Errorf("OverheadOf: %+v, want 2 images, 140 ms (300 less 150 of prompt and 10 of the first token)", r)
	}
	c := swap.H200Costs().Update(swap.Sample{CachedImage: swap.Duration(ms(40))})
	if c.CachedImage.D() != ms(40) {
		t.Errorf("the first measured per-image cost should replace the preset: %s", c.CachedImage.D())
	}
	if z := swap.H200Costs().Update(swap.Sample{CachedImageFit: true}); z.CachedImage != 0 || z.Samples["cached_image"] != 1 {
		t.Errorf("a fitted per-image cost of zero (images cheaper than the noise) should replace the preset: %s from %d samples",
			z.CachedImage.D(), z.Samples["cached_image"])
	}
	if z := swap.H200Costs().Update(swap.Sample{}); z.CachedImage != swap.H200Costs().CachedImage || z.Samples["cached_image"] != 0 {
		t.Errorf("a sample without a per-image fit changed it: %s from %d samples", z.CachedImage.D(), z.Samples["cached_image"])
	}
	w := swap.ChooseWindow(c, swap.WindowNeeds{Profile: swap.Resident, ContextTokens: 262144})
	if w0 := swap.ChooseWindow(swap.H200Costs(), swap.WindowNeeds{Profile: swap.Resident, ContextTokens: 262144}); w.Keep < w0.Keep {
		t.Errorf("a cheaper measured image should keep at least as many: %+v against the preset's %+v", w, w0)
	}
}
