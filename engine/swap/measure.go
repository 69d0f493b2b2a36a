package swap

import (
	"slices"
	"time"
)

// minPromptSample is the fewest prompt tokens a request must evaluate to be a prompt-speed sample: a handful of
// tokens after a prefill is mostly request overhead, not evaluation.
const minPromptSample = 16

// EvalSample is what one evaluation's timings measure (promptN tokens in promptMS milliseconds): a prompt of
// text, or, when it evaluated images of imageTokens tokens, their encode (the prompt's time less its text at
// textRate tokens a second, the measure of docs/engine-notes.md §9; 0 charges the encode the whole prompt time,
// an upper bound, rather than reduce it by another machine's rate). A request whose images came from the cache
// evaluated fewer tokens than they are, so it counts as text. onCPU says where the engine encodes images.
func EvalSample(promptN int, promptMS float64, imageTokens int, textRate float64, onCPU bool) Sample {
	var smp Sample
	if promptN <= 0 || promptMS <= 0 {
		return smp
	}
	if imageTokens > 0 && promptN >= imageTokens {
		textMS := 0.0
		if textRate > 0 {
			textMS = float64(promptN-imageTokens) / textRate * 1000
		}
		if enc := promptMS - textMS; enc > 0 {
			smp.ImageTokens = imageTokens
			smp.Encode = Duration(enc * float64(time.Millisecond))
			smp.OnCPU = onCPU
		}
		return smp
	}
	if promptN >= minPromptSample {
		smp.PromptTokens, smp.PromptTime = promptN, Duration(promptMS*float64(time.Millisecond))
	}
	return smp
}

// MeasuredPrefillRate is the prompt rate measured on this engine, 0 while only the default is known.
func (c Costs) MeasuredPrefillRate() float64 {
	if c.Samples["prefill_tokens_per_second"] == 0 {
		return 0
	}
	return c.PrefillTokensPerSecond
}

// CompileSample is the one-time pipeline compile a launch's GPU warm-up image measured: what the image request
// (took, of tokens prompt tokens) took beyond an encode at c's GPU rate. A compile the driver's cache made
// unnecessary is still a measurement, of nearly nothing.
func CompileSample(took time.Duration, tokens int, c Costs) Sample {
	compile := took - time.Duration(tokens)*c.EncodeGPU.D()
	return Sample{Compile: Duration(max(compile, time.Millisecond))}
}

// LaunchedProfile is the profile an engine that is newly ready is in: the one it was launched in when its launch
// names one (whether or not its cost model offers it for relaunches), else current while the model offers it,
// else the model's first.
func LaunchedProfile(launched Profile, c Costs, current Profile) Profile {
	switch {
	case slices.Contains(AllProfiles, launched):
		return launched
	case len(c.Profiles) > 0 && !slices.Contains(c.Profiles, current):
		return c.Profiles[0]
	}
	return current
}
