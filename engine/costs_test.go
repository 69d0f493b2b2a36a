package engine

import (
	"testing"
	"time"
)

func TestMeasureCosts(t *testing.T) {
	text := []Timings{
		{PromptN: 900, PromptMS: 300}, // 3,000 tokens/s
		{PromptN: 100, PromptMS: 33.333333},
		{PromptN: 0, PromptMS: 5}, // evaluated nothing: ignored
	}
	// 1,054 image tokens and 46 text tokens in 13.7 s: the text is 46/3000 s, the rest is the image's.
	images := []ImageSample{{Timings: Timings{PromptN: 1100, PromptMS: 13700}, ImageTokens: 1054}, {Timings: Timings{PromptN: 10, PromptMS: 1}, ImageTokens: 0}}
	c := MeasureCosts(text, images)
	if c.TextSamples != 2 || c.ImageSamples != 1 {
		t.Fatalf("samples %+v", c)
	}
	if d := c.PromptTokensPerSecond - 3000; d > 0.01 || d < -0.01 {
		t.Errorf("prompt rate %.3f, want 3000", c.PromptTokensPerSecond)
	}
	perToken := (13700 - 46.0/3) / 1054 * float64(time.Millisecond)
	want := time.Duration(perToken)
	if d := c.ImagePerToken - want; d > time.Microsecond || d < -time.Microsecond {
		t.Errorf("image per token %v, want %v", c.ImagePerToken, want)
	}
	// Without a text rate the whole prompt time is the image's.
	whole := 13700.0 / 1054 * float64(time.Millisecond)
	if c := MeasureCosts(nil, images); c.ImagePerToken != time.Duration(whole) || c.PromptTokensPerSecond != 0 {
		t.Errorf("without text samples: %+v", c)
	}
	if c := MeasureCosts(nil, nil); c != (Costs{}) {
		t.Errorf("no samples: %+v", c)
	}
}
