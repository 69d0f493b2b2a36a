package engine

import (
	"math"
	"time"
)

// Costs are the cost-model inputs one engine's timings give: how fast it evaluates prompt text, and what an
// image costs per image token on top of that (its encode plus the evaluation of its tokens, the measure of
// docs/engine-notes.md §9: 13 ms/token on 16 CPU cores, 0.37 ms on an H200). The scheduler (engine/swap) turns these
// into its own model; this struct is all the two share.
type Costs struct {
	// PromptTokensPerSecond is the text prompt rate; 0 when no text sample was given.
	PromptTokensPerSecond float64 `json:"prompt_tokens_per_second"`
	// ImagePerToken is the time an uncached image adds per image token; 0 when no image sample was given.
	ImagePerToken time.Duration `json:"image_per_token"`
	// Samples are the numbers of timings each figure was measured from.
	TextSamples  int `json:"text_samples"`
	ImageSamples int `json:"image_samples"`
}

// ImageSample is the timings of a request or prefill that evaluated uncached images, and how many prompt tokens
// those images were (the projector's tokens per image, times the images).
type ImageSample struct {
	Timings     Timings
	ImageTokens int
}

// MeasureCosts derives Costs from timings the server reported: text holds requests that evaluated text only
// (images cached or absent), images requests that evaluated images. Rates are totals over totals, so a long
// prompt weighs more than a short one whose time is mostly overhead. Samples that evaluated nothing are ignored.
// Without text samples an image's whole prompt time is charged to its tokens (an upper bound).
func MeasureCosts(text []Timings, images []ImageSample) Costs {
	var c Costs
	var n, ms float64
	for _, t := range text {
		if t.PromptN <= 0 || t.PromptMS <= 0 {
			continue
		}
		n += float64(t.PromptN)
		ms += t.PromptMS
		c.TextSamples++
	}
	if ms > 0 {
		c.PromptTokensPerSecond = n / ms * 1000
	}
	var extraMS, tokens float64
	for _, s := range images {
		t := s.Timings
		if s.ImageTokens <= 0 || t.PromptN < s.ImageTokens || t.PromptMS <= 0 {
			continue
		}
		textMS := 0.0
		if c.PromptTokensPerSecond > 0 {
			textMS = float64(t.PromptN-s.ImageTokens) / c.PromptTokensPerSecond * 1000
		}
		extraMS += math.Max(t.PromptMS-textMS, 0)
		tokens += float64(s.ImageTokens)
		c.ImageSamples++
	}
	if tokens > 0 {
		c.ImagePerToken = time.Duration(extraMS / tokens * float64(time.Millisecond))
	}
	return c
}
