package vram

import (
	"fmt"
	"strings"
	"time"
)

// StepCosts are what a step of a vision session costs in each mode, for ranking KV cache precisions against
// what they buy: a quantized cache is a little slower to decode, while the CPU encoder it can spare takes
// seconds per screenshot and a cut context truncates long tasks. Measured on the H200 (docs/engine-notes.md §9,
// Vulkan, the Qwen3.6-35B-A3B stand-in) unless a field says otherwise.
type StepCosts struct {
	// TokensPerSecond is decode speed per mode at f16 KV; KVSpeed scales it per KV cache type.
	TokensPerSecond map[Mode]float64
	KVSpeed         map[string]float64
	KVSpeedSource   string
	// EncodeGPU and EncodeCPU are an image's encode per image token, on the GPU and on the CPU.
	EncodeGPU, EncodeCPU time.Duration
	// Swap is one MTP↔vision swap (mtp-swap), paid per image run.
	Swap time.Duration
	// A step: OutputTokens generated and ImagesPerStep new images of ImageTokens each.
	OutputTokens, ImageTokens int
	ImagesPerStep             float64
}

// DefaultStepCosts are §9's numbers. KV speed relative to f16, measured on the H200 (scripts/gpu-window-check.sh:
// Vulkan, the stand-in at -c 65536 with MTP at synthetic acceptance 2.6; two runs of 4 requests of 256 tokens,
// pooled medians): f16 193 tokens/s (162–214), q8_0 158 (138–179), q4_0 180 (162–208). One run's medians swing
// by up to a fifth (f16 204 then 168), so the ranking leans on the spread between types, not their order.
func DefaultStepCosts() StepCosts {
	return StepCosts{
		TokensPerSecond: map[Mode]float64{ModeResident: 199, ModeVisionCPU: 192.5, ModeVisionNoMTP: 164.5, ModeTextOnly: 191,
			ModeSwap: 195, ModeProjectorApart: 199, ModeDraftApart: 185, ModeSplit: 180},
		KVSpeed:       map[string]float64{"f16": 1, "q8_0": 0.82, "q4_0": 0.93},
		KVSpeedSource: "measured on the H200: f16 193, q8_0 158, q4_0 180 tokens/s",
		EncodeGPU:     370 * time.Microsecond, EncodeCPU: 13 * time.Millisecond, Swap: 753 * time.Millisecond,
		OutputTokens: 300, ImageTokens: 1054, ImagesPerStep: 1,
	}
}

// Step is what one step costs in mode m with KV cache kv; ok is false for a mode that cannot take images.
func (c StepCosts) Step(m Mode, kv string) (time.Duration, bool) {
	tps := c.TokensPerSecond[m] * c.kvSpeed(kv)
	if tps <= 0 {
		return 0, false
	}
	d := time.Duration(float64(c.OutputTokens) / tps * float64(time.Second))
	img := time.Duration(c.ImagesPerStep * float64(c.ImageTokens))
	switch m {
	case ModeTextOnly:
		return d, false
	case ModeVisionCPU:
		d += img * c.EncodeCPU
	case ModeSwap:
		d += img*c.EncodeGPU + time.Duration(c.ImagesPerStep*float64(c.Swap))
	default:
		d += img * c.EncodeGPU
	}
	return d, true
}

func (c StepCosts) kvSpeed(kv string) float64 {
	if v, ok := c.KVSpeed[kv]; ok {
		return v
	}
	return 1
}

// KVChoice says which KV cache type the plan chose when none was asked for, and why.
type KVChoice struct {
	Cache string        `json:"cache"`
	Mode  Mode          `json:"mode"`
	Step  time.Duration `json:"step"` // the chosen mode's cost per step
	Why   string        `json:"why"`
}

// kvTypes are the cache types the plan tries, most precise first.
var kvTypes = []string{"f16", "q8_0", "q4_0"}

// precisionSlack is how much slower per step a more precise KV cache may be and still be chosen: q8_0 keeps a
// long context's recall close to f16's and q4_0 does not (llama.cpp's KV-quantization perplexity results; not
// measured here), which is worth a quarter of a step's time.
const precisionSlack = 1.25

// chooseKV plans a vision session with each KV cache type and keeps the most precise type whose recommended
// mode, at the full requested context, costs at most precisionSlack times the cheapest one per step; a type whose
// best mode cuts the context ranks below every full one (as in Candidates). It returns the f16 plan unchanged when that is
// the choice, or when no type keeps the context.
func chooseKV(model Facts, proj *Facts, gpu GPU, opts Options, f16 Result, costs StepCosts) (Result, *KVChoice) {
	type cand struct {
		kv   string
		res  Result
		mode ModePlan
		step time.Duration
	}
	var cands []cand
	var lines []string
	for _, kv := range kvTypes {
		res := f16
		if kv != "f16" {
			o := opts
			o.CacheK, o.CacheV = kv, kv
			r, err := plan(model, proj, gpu, o)
			if err != nil {
				continue // the head size does not suit the block size
			}
			res = r
		}
		rec, ok := res.Recommended()
		switch {
		case !ok:
			lines = append(lines, fmt.Sprintf("%s: nothing fits", kv))
			continue
		case !rec.Fits:
			lines = append(lines, fmt.Sprintf("%s: %s cuts the context to %d", kv, rec.Mode, rec.LaunchCtx()))
			continue
		}
		step, ok := costs.Step(rec.Mode, kv)
		if !ok {
			lines = append(lines, fmt.Sprintf("%s: %s cannot take images", kv, rec.Mode))
			continue
		}
		lines = append(lines, fmt.Sprintf("%s: %s %s", kv, rec.Mode, step.Round(10*time.Millisecond)))
		cands = append(cands, cand{kv: kv, res: res, mode: rec, step: step})
	}
	if len(cands) == 0 {
		return f16, nil
	}
	fastest := cands[0].step
	for _, c := range cands {
		fastest = min(fastest, c.step)
	}
	var best *cand
	for i := range cands { // most precise first
		if float64(cands[i].step) <= precisionSlack*float64(fastest) {
			best = &cands[i]
			break
		}
	}
	why := fmt.Sprintf("%s KV: %s (%s) at the full %d tokens. Per step with %g screenshot(s) of %d tokens and %d "+
		"output tokens: %s (KV decode speed %s; encode %s/token on the GPU, %s on the CPU)", best.kv, best.mode.Mode,
		best.mode.Description, best.res.Options.Ctx, costs.ImagesPerStep, costs.ImageTokens, costs.OutputTokens,
		strings.Join(lines, "; "), costs.KVSpeedSource, costs.EncodeGPU, costs.EncodeCPU)
	why += fmt.Sprintf("; the most precise cache within %.0f%% of the fastest", 100*(precisionSlack-1))
	if best.kv == "f16" {
		return f16, nil
	}
	return best.res, &KVChoice{Cache: best.kv, Mode: best.mode.Mode, Step: best.step, Why: why}
}
