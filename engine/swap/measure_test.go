package swap_test

import (
	"testing"
	"time"

	"github.com/visorhq/visor/engine/swap"
)

func TestEvalSampleReadsTextAndEncodes(t *testing.T) {
	for _, tc := range []struct {
		name        string
		promptN     int
		promptMS    float64
		imageTokens int
		textRate    float64
		onCPU       bool
		want        swap.Sample
	}{
		{"text", 400, 200, 0, 0, false, swap.Sample{PromptTokens: 400, PromptTime: swap.Duration(200 * time.Millisecond)}},
		{"a few tokens after a prefill are overhead", 15, 30, 0, 0, false, swap.Sample{}},
		{"no timings", 0, 0, 0, 0, false, swap.Sample{}},
		// 100 text tokens at 1000 t/s are 100 ms of the 600: the encode of the 256 image tokens took 500 ms.
		{"image less its text", 356, 600, 256, 1000, true, swap.Sample{ImageTokens: 256, Encode: swap.Duration(500 * time.Millisecond), OnCPU: true}},
		{"image, text rate unknown: the whole prompt", 356, 600, 256, 0, false, swap.Sample{ImageTokens: 256, Encode: swap.Duration(600 * time.Millisecond)}},
		{"text took it all: no encode measured", 356, 50, 256, 1000, false, swap.Sample{}},
		{"images from the cache count as text", 100, 40, 256, 1000, false, swap.Sample{PromptTokens: 100, PromptTime: swap.Duration(40 * time.Millisecond)}},
	} {
		if got := swap.EvalSample(tc.promptN, tc.promptMS, tc.imageTokens, tc.textRate, tc.onCPU); got != tc.want {
			t.Errorf("%s: EvalSample = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestMeasuredPrefillRateIgnoresTheDefault(t *testing.T) {
	c := swap.SeedCosts()
	if c.PrefillTokensPerSecond == 0 || c.MeasuredPrefillRate() != 0 {
		t.Fatalf("seed costs: default rate %v, measured %v; want a default and no measured rate", c.PrefillTokensPerSecond, c.MeasuredPrefillRate())
	}
	c = c.Update(swap.Sample{PromptTokens: 1000, PromptTime: swap.Duration(time.Second)})
	if got := c.MeasuredPrefillRate(); got != 1000 {
		t.Fatalf("after one sample of 1000 t/s the measured rate is %v", got)
	}
}

func TestCompileSampleIsTheWarmupBeyondItsEncode(t *testing.T) {
	c := swap.SeedCosts()
	c.EncodeGPU = swap.Duration(time.Millisecond)
	if got := swap.CompileSample(3*time.Second, 1000, c); got != (swap.Sample{Compile: swap.Duration(2 * time.Second)}) {
		t.Errorf("3 s warm-up of 1000 tokens at 1 ms: %+v, want a 2 s compile", got)
	}
	if got := swap.CompileSample(500*time.Millisecond, 1000, c); got != (swap.Sample{Compile: swap.Duration(time.Millisecond)}) {
		t.Errorf("a warm-up faster than its encode: %+v, want the 1 ms floor (a measurement of nearly nothing)", got)
	}
}

func TestLaunchedProfile(t *testing.T) {
	offers := swap.SeedCosts()
	offers.Profiles = []swap.Profile{swap.VisionCPU, swap.TextOnly}
	for _, tc := range []struct {
		name              string
		launched, current swap.Profile
		c                 swap.Costs
		want              swap.Profile
	}{
		{"the launch names it, offered or not", swap.MTPSwap, swap.Resident, offers, swap.MTPSwap},
		{"current, offered", "", swap.TextOnly, offers, swap.TextOnly},
		{"current, not offered: the model's first", "", swap.Resident, offers, swap.VisionCPU},
		{"the model offers none: current", "", swap.Resident, swap.Costs{}, swap.Resident},
	} {
		if got := swap.LaunchedProfile(tc.launched, tc.c, tc.current); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
