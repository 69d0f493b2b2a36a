package swap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"strings"
	"time"
)

// Duration is a time.Duration written in JSON as a Go duration string ("213ms", "1.5s"), so cost files and
// traces stay readable and a bare number cannot be misread as nanoseconds or seconds.
type Duration time.Duration

// D is the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration %s: write durations as strings such as \"1.5s\" or \"213ms\"", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	if v < 0 {
		return fmt.Errorf("duration %q is negative", s)
	}
	*d = Duration(v)
	return nil
}

// Key names the engine a cost model belongs to: the same model, projector, GPU and launch flags cost the same.
type Key struct {
	Model     string `json:"model"`               // model file name or digest
	Projector string `json:"projector,omitempty"` // projector file name or digest; empty without vision
	GPU       string `json:"gpu,omitempty"`       // device name as the driver reports it; empty for the CPU
	Flags     string `json:"flags,omitempty"`     // the launch flags that change speed (FlagsKey)
}

// String is the key as one line, for a store's lookup column.
func (k Key) String() string { return k.Model + "|" + k.Projector + "|" + k.GPU + "|" + k.Flags }

// speedFlags are the llama-server flags that change what an engine costs; the others (ports, paths, logging)
// do not, so two launches differing only in those share a cost model.
var speedFlags = map[string]bool{
	"-c": true, "--ctx-size": true, "-ngl": true, "--n-gpu-layers": true, "-fa": true, "--flash-attn": true,
	"-ctk": true, "--cache-type-k": true, "-ctv": true, "--cache-type-v": true, "-ub": true, "--ubatch-size": true,
	"-b": true, "--batch-size": true, "-np": true, "--parallel": true, "--spec-type": true,
	"--spec-draft-n-max": true, "-t": true,
	"--threads": true, "--mtmd-batch-max-tokens": true,
}

// switches are speed flags without a value.
var switches = map[string]bool{"--mmproj-gpu-swap": true, "--no-mmproj-offload": true, "--mmproj-offload": true}

// FlagsKey reduces a llama-server argument list to the flags that change its costs, in a stable order.
func FlagsKey(args []string) string {
	var kept []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case switches[a]:
			kept = append(kept, a)
		case speedFlags[a] && i+1 < len(args):
			kept = append(kept, a+" "+args[i+1])
			i++
		}
	}
	return strings.Join(kept, " ")
}

// Endpoint is a second server that describes images for an engine running text-only (VisionEndpoint).
type Endpoint struct {
	Latency         Duration `json:"latency"`           // request overhead, network included
	EncodePerToken  Duration `json:"encode_per_token"`  // its image encode
	TokensPerSecond float64  `json:"tokens_per_second"` // its generation speed
	CaptionTokens   int      `json:"caption_tokens"`    // the length of one description
}

// Costs is one engine's cost model: what each kind of work takes. The zero value is not usable; start from
// SeedCosts or H200Costs and Update it with measured Samples.
type Costs struct {
	Key    Key    `json:"key"`
	Source string `json:"source,omitempty"` // where the numbers come from, for people reading the file
	// Profiles are the profiles this engine can launch in (the VRAM plan and the binary's flags decide), in
	// the order the engine prefers at launch when nothing is known about the workload.
	Profiles []Profile `json:"profiles"`
	// TokensPerSecond is the generation speed per profile; for speculative profiles it is measured at
	// DraftAcceptance and scales with acceptance (TokensPerSecondAt). VisionEndpoint defaults to TextOnly's.
	TokensPerSecond map[Profile]float64 `json:"tokens_per_second"`
	// DraftAcceptance is the fraction of drafted tokens accepted, DraftMax the drafts per step.
	DraftAcceptance float64 `json:"draft_acceptance"`
	DraftMax        int     `json:"draft_max"`
	// EncodeGPU and EncodeCPU are the time per image token of an un-cached image's encode.
	EncodeGPU Duration `json:"encode_gpu_per_token"`
	EncodeCPU Duration `json:"encode_cpu_per_token"`
	// CachedImage is what a request pays for an image already in the prompt cache (hashing, lookup).
	CachedImage Duration `json:"cached_image"`
	// SwapIn and SwapOut are one MTP↔vision swap (--mmproj-gpu-swap), paid per run of adjacent images.
	SwapIn  Duration `json:"swap_in"`
	SwapOut Duration `json:"swap_out"`
	// Relaunch is a restart into another profile until ready; it loses the KV cache, so the conversation is
	// evaluated again at PrefillTokensPerSecond (and its images encoded again).
	Relaunch               Duration `json:"relaunch"`
	PrefillTokensPerSecond float64  `json:"prefill_tokens_per_second"`
	// PipelineCompile is the one-time cost of the first image after an install (GPU shader compiles); the
	// driver's cache keeps it across relaunches.
	PipelineCompile Duration `json:"pipeline_compile"`
	// ImageTokenBudget is the most tokens one image may take; intake sizes each image to it once (SizeImage).
	ImageTokenBudget int       `json:"image_token_budget"`
	Endpoint         *Endpoint `json:"endpoint,omitempty"`
	// Samples counts the measurements folded into each field, so the first measurement replaces a default.
	Samples map[string]int `json:"samples,omitempty"`
}

// SeedCosts are the seed system's numbers (docs/engine-notes.md §4): the fork with --mmproj-gpu-swap on a 24 GB RTX
// 5090 laptop GPU, Qwen3.6-35B-A3B. Measured there: swap 213 ms in, 540 ms out; 250.54 tokens/s MTP text-only,
// 243.59 with the swap flag; ~1–2 s to encode a large (~1,000-token) image on the GPU, 30–60 s on the CPU.
// Not measured there, so taken from elsewhere and said so: no speculation 136 tokens/s (Gemma 4's published
// ratio); draft acceptance 0.53 (§9's mean accepted length 2.6 of 3); re-prefill 3,500 tokens/s (§9); a
// relaunch 20 s (a cautious guess: §9 saw 5 s page-cached, 15 s cold). Resident is not offered: upstream builds
// of that time disabled speculation with a projector loaded, and the fork's answer was the swap. A CUDA build
// has no Vulkan pipeline compile, so none is charged.
func SeedCosts() Costs {
	return Costs{
		Key:      Key{Model: "Qwen3.6-35B-A3B-UD-Q3_K_XL", Projector: "mmproj-qwen3vl", GPU: "RTX 5090 Laptop 24GB", Flags: "--spec-type draft-mtp --spec-draft-n-max 3 --mmproj-gpu-swap"},
		Source:   "seed system (docs/engine-notes.md §4); unmeasured fields from §9 or guessed, see SeedCosts",
		Profiles: []Profile{MTPSwap, VisionCPU, VisionNoMTP, TextOnly},
		TokensPerSecond: map[Profile]float64{
			MTPSwap: 243.59, TextOnly: 250.54, VisionCPU: 250.54, VisionNoMTP: 136,
		},
		DraftAcceptance: 0.533, DraftMax: 3,
		EncodeGPU: Duration(1500 * time.Microsecond), EncodeCPU: Duration(45 * time.Millisecond),
		CachedImage: Duration(70 * time.Millisecond),
		SwapIn:      Duration(213 * time.Millisecond), SwapOut: Duration(540 * time.Millisecond),
		Relaunch: Duration(20 * time.Second), PrefillTokensPerSecond: 3500,
		ImageTokenBudget: 4096,
	}
}

// H200Costs are docs/engine-notes.md §9: Debian's upstream llama-server on the H200 through Vulkan, the full-size
// Qwen3.6-35B-A3B stand-in, -c 65536 q4_0 KV, MTP with 3 drafts at a synthetic mean accepted length of 2.6.
// Speeds are the middle of each measured range. No --mmproj-gpu-swap (upstream lacks it), so no MTPSwap.
func H200Costs() Costs {
	return Costs{
		Key:      Key{Model: "Qwen3.6-35B-A3B stand-in (qwen35moe)", Projector: "qwen3vl_merger", GPU: "NVIDIA H200 (Vulkan)", Flags: "-ngl 999 -np 1 -fa on -c 65536 -ctk q4_0 -ctv q4_0 --spec-type draft-mtp --spec-draft-n-max 3"},
		Source:   "docs/engine-notes.md §9 (H200, Vulkan, Dec 2026)",
		Profiles: []Profile{Resident, VisionCPU, VisionNoMTP, TextOnly},
		TokensPerSecond: map[Profile]float64{
			Resident: 199, VisionCPU: 192.5, VisionNoMTP: 164.5, TextOnly: 191,
		},
		DraftAcceptance: 0.533, DraftMax: 3,
		// 0.39 s for a 1,054-token image on the GPU; 13.7 s on 16 CPU cores.
		EncodeGPU: Duration(370 * time.Microsecond), EncodeCPU: Duration(13 * time.Millisecond),
		CachedImage: Duration(75 * time.Millisecond),
		Relaunch:    Duration(5 * time.Second), PrefillTokensPerSecond: 3500,
		// 12.9 s measured for a 512² image; a fresh 1080p ask saw up to 56 s before its first token, load included.
		PipelineCompile:  Duration(12900 * time.Millisecond),
		ImageTokenBudget: 4096,
	}
}

// Presets are the named default cost models (visor simulate --costs NAME).
func Presets() map[string]Costs { return map[string]Costs{"seed": SeedCosts(), "h200": H200Costs()} }

// Validate says what is wrong with a cost model, naming the field and the fix.
func (c Costs) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if len(c.Profiles) == 0 {
		bad("profiles: empty: list the profiles this engine can launch in, e.g. [\"mtp-swap\", \"text-only\"]")
	}
	seen := map[Profile]bool{}
	for _, p := range c.Profiles {
		if !p.valid() {
			bad("profiles: unknown profile %q (want one of %v)", p, AllProfiles)
			continue
		}
		if seen[p] {
			bad("profiles: %q listed twice", p)
		}
		seen[p] = true
		if tps := c.TokensPerSecondAt(p, -1); !plausibleSpeed(tps) {
			bad("tokens_per_second[%q] = %v: give the measured generation speed of every listed profile (%g to %g)",
				p, tps, minSpeed, maxSpeed)
		}
		switch p {
		case MTPSwap:
			if c.SwapIn <= 0 && c.SwapOut <= 0 {
				bad("swap_in/swap_out: zero, yet %q is listed: give the measured swap times", p)
			}
			fallthrough
		case Resident, VisionNoMTP:
			if c.EncodeGPU <= 0 {
				bad("encode_gpu_per_token: zero, yet %q encodes on the GPU: give the measured time per image token", p)
			}
		case VisionCPU:
			if c.EncodeCPU <= 0 {
				bad("encode_cpu_per_token: zero, yet %q encodes on the CPU: give the measured time per image token", p)
			}
		case VisionEndpoint:
			if c.Endpoint == nil || c.Endpoint.TokensPerSecond <= 0 || c.Endpoint.CaptionTokens <= 0 {
				bad("endpoint: %q is listed: give the endpoint's tokens_per_second and caption_tokens", p)
			}
		}
	}
	if c.DraftAcceptance < 0 || c.DraftAcceptance > 1 || math.IsNaN(c.DraftAcceptance) {
		bad("draft_acceptance = %v: a fraction from 0 to 1", c.DraftAcceptance)
	}
	if c.DraftMax < 0 {
		bad("draft_max = %d: negative", c.DraftMax)
	}
	if !plausibleSpeed(c.PrefillTokensPerSecond) {
		bad("prefill_tokens_per_second = %v: give the measured prompt evaluation speed (%g to %g)",
			c.PrefillTokensPerSecond, minSpeed, maxSpeed)
	}
	for name, d := range map[string]Duration{"encode_gpu_per_token": c.EncodeGPU, "encode_cpu_per_token": c.EncodeCPU} {
		if d > maxPerToken {
			bad("%s = %s: more than %s per image token is not a measurement", name, d.D(), maxPerToken.D())
		}
	}
	for name, d := range map[string]Duration{"swap_in": c.SwapIn, "swap_out": c.SwapOut, "relaunch": c.Relaunch,
		"pipeline_compile": c.PipelineCompile, "cached_image": c.CachedImage} {
		if d > maxFixed {
			bad("%s = %s: more than %s is not a measurement", name, d.D(), maxFixed.D())
		}
	}
	if e := c.Endpoint; e != nil && (e.Latency > maxFixed || e.EncodePerToken > maxPerToken ||
		(e.TokensPerSecond != 0 && !plausibleSpeed(e.TokensPerSecond)) || e.CaptionTokens < 0 || e.CaptionTokens > 100_000) {
		bad("endpoint: latency at most %s, encode_per_token at most %s, tokens_per_second %g to %g, caption_tokens 0 to 100000",
			maxFixed.D(), maxPerToken.D(), minSpeed, maxSpeed)
	}
	if c.ImageTokenBudget < 0 {
		bad("image_token_budget = %d: negative (0 means no limit)", c.ImageTokenBudget)
	}
	return errors.Join(errs...)
}

// Bounds of a plausible measurement; they also keep the simulator's sums far from overflowing.
const (
	minSpeed    = 1.0 // tokens per second
	maxSpeed    = 1e6
	maxPerToken = Duration(time.Second)
	maxFixed    = Duration(time.Hour)
)

func plausibleSpeed(v float64) bool { return v >= minSpeed && v <= maxSpeed }

// ParseCosts reads a cost model from JSON (a --costs file or the store's blob), rejecting unknown fields and
// invalid numbers. Fields left out keep SeedCosts' values, so a file may give only what was measured.
func ParseCosts(data []byte) (Costs, error) {
	c := SeedCosts()
	c.TokensPerSecond = nil // a file's speeds replace the seed's, not merge with them
	// The key names the engine the numbers were measured on: a file's key is whole (its empty fields, such as
	// the GPU of a CPU engine, are left out of the JSON), never the seed's with some fields replaced.
	c.Key = Key{}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Costs{}, fmt.Errorf("swap: cost model: %w", err)
	}
	if c.TokensPerSecond == nil {
		c.TokensPerSecond = SeedCosts().TokensPerSecond
	}
	if err := c.Validate(); err != nil {
		return Costs{}, fmt.Errorf("swap: cost model: %w", err)
	}
	return c, nil
}

// TokensPerSecondAt is p's generation speed at draft acceptance a (a < 0: the model's own). Speculation emits
// 1 + a·DraftMax tokens per verification step, so speed scales with that; §9's all-rejected run (78–83 t/s
// against 178–204 at a mean length of 2.6) agrees within a few per cent.
func (c Costs) TokensPerSecondAt(p Profile, a float64) float64 {
	tps := c.TokensPerSecond[p]
	if p == VisionEndpoint {
		tps = c.TokensPerSecond[TextOnly]
		if v, ok := c.TokensPerSecond[VisionEndpoint]; ok {
			tps = v
		}
	}
	if a < 0 || !p.Speculative() || c.DraftMax == 0 {
		return tps
	}
	return tps * (1 + a*float64(c.DraftMax)) / (1 + c.DraftAcceptance*float64(c.DraftMax))
}

// Generate is the time to generate n tokens in p at draft acceptance a (a < 0: the model's own).
func (c Costs) Generate(p Profile, n int, a float64) time.Duration {
	tps := c.TokensPerSecondAt(p, a)
	if n <= 0 || tps <= 0 {
		return 0
	}
	return time.Duration(float64(n) / tps * float64(time.Second))
}

// Prefill is the time to evaluate n prompt tokens of text.
func (c Costs) Prefill(n int) time.Duration {
	if n <= 0 || c.PrefillTokensPerSecond <= 0 {
		return 0
	}
	return time.Duration(float64(n) / c.PrefillTokensPerSecond * float64(time.Second))
}

// Swap is what one run of adjacent images pays around its encode in p (zero outside MTPSwap).
func (c Costs) Swap(p Profile) time.Duration {
	if p == MTPSwap {
		return c.SwapIn.D() + c.SwapOut.D()
	}
	return 0
}

// Encode is the time to encode an image of n tokens in p, swap excluded. For VisionEndpoint it is the
// endpoint's whole answer: latency, encode and description.
func (c Costs) Encode(p Profile, n int) time.Duration {
	switch p {
	case Resident, MTPSwap, VisionNoMTP:
		return time.Duration(n) * c.EncodeGPU.D()
	case VisionCPU:
		return time.Duration(n) * c.EncodeCPU.D()
	case VisionEndpoint:
		if e := c.Endpoint; e != nil && e.TokensPerSecond > 0 {
			return e.Latency.D() + time.Duration(n)*e.EncodePerToken.D() +
				time.Duration(float64(e.CaptionTokens)/e.TokensPerSecond*float64(time.Second))
		}
	}
	return 0
}

// Compiles reports whether the first image in p pays PipelineCompile (a GPU encode).
func (c Costs) Compiles(p Profile) bool {
	return c.PipelineCompile > 0 && (p == Resident || p == MTPSwap || p == VisionNoMTP)
}

// captionTokens is how many text tokens one image becomes in VisionEndpoint.
func (c Costs) captionTokens() int {
	if c.Endpoint == nil {
		return 0
	}
	return c.Endpoint.CaptionTokens
}

// Sample is one measurement from the running engine; zero fields were not measured.
type Sample struct {
	Profile Profile `json:"profile,omitempty"` // the profile the engine ran in (for generation speed)
	// A generation: tokens, its time, and llama-server's draft_n / draft_n_accepted.
	Generated int      `json:"generated,omitempty"`
	GenTime   Duration `json:"gen_time,omitempty"`
	Drafted   int      `json:"drafted,omitempty"`
	Accepted  int      `json:"accepted,omitempty"`
	// An image encode of ImageTokens, on the CPU or the GPU.
	ImageTokens int      `json:"image_tokens,omitempty"`
	Encode      Duration `json:"encode,omitempty"`
	OnCPU       bool     `json:"on_cpu,omitempty"`
	// A prompt evaluation of PromptTokens text tokens.
	PromptTokens int      `json:"prompt_tokens,omitempty"`
	PromptTime   Duration `json:"prompt_time,omitempty"`
	SwapIn       Duration `json:"swap_in,omitempty"`
	SwapOut      Duration `json:"swap_out,omitempty"`
	Relaunch     Duration `json:"relaunch,omitempty"`
	Compile      Duration `json:"compile,omitempty"`
	// CachedImage is what each image a request carries cost it, fitted over recent requests (CachedImageCost).
	CachedImage Duration `json:"cached_image,omitempty"`
	// CachedImageFit marks CachedImage as such a fit, which counts at zero too: CachedImageCost answers zero when
	// the images cost less than the requests' noise, and that is a measurement, not a missing one.
	CachedImageFit bool `json:"cached_image_fit,omitempty"`
}

// MinAlpha is the weight a new measurement keeps once a field has several: an exponentially weighted moving
// average that follows a drifting engine within a few samples but ignores one noisy run.
const MinAlpha = 0.2

// Update folds a measurement into the cost model and returns the new model; c is not changed. A field's first
// measurement replaces its default (a measured number beats one from another machine); later ones move it by
// max(MinAlpha, 1/(n+1)), a running mean that becomes an EWMA. Implausible values (zero, negative) are ignored,
// save a fitted per-image cost's zero (CachedImageFit).
func (c Costs) Update(s Sample) Costs {
	out := c
	out.TokensPerSecond = maps.Clone(c.TokensPerSecond)
	if out.TokensPerSecond == nil {
		out.TokensPerSecond = map[Profile]float64{}
	}
	out.Samples = maps.Clone(c.Samples)
	if out.Samples == nil {
		out.Samples = map[string]int{}
	}
	ewma := func(field string, old, x float64) float64 {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return old
		}
		n := out.Samples[field]
		out.Samples[field] = n + 1
		alpha := max(MinAlpha, 1/float64(n+1))
		return old + alpha*(x-old)
	}
	dur := func(field string, old *Duration, x Duration) {
		if x > 0 && x <= maxFixed {
			*old = Duration(ewma(field, float64(*old), float64(x)))
		}
	}
	if s.Drafted > 0 && s.Accepted >= 0 && s.Accepted <= s.Drafted {
		out.DraftAcceptance = ewma("draft_acceptance", c.DraftAcceptance, float64(s.Accepted)/float64(s.Drafted))
	}
	if tps := float64(s.Generated) / s.GenTime.D().Seconds(); s.Generated > 0 && s.GenTime > 0 && s.Profile.valid() &&
		plausibleSpeed(tps) {
		// Keep speeds at the model's acceptance: normalise this run's speed from its own acceptance.
		if s.Profile.Speculative() && s.Drafted > 0 && c.DraftMax > 0 {
			a := float64(s.Accepted) / float64(s.Drafted)
			n := float64(c.DraftMax)
			tps *= (1 + out.DraftAcceptance*n) / (1 + a*n)
		}
		field := "tokens_per_second." + string(s.Profile)
		out.TokensPerSecond[s.Profile] = ewma(field, c.TokensPerSecond[s.Profile], tps)
	}
	if per := Duration(int64(s.Encode) / int64(max(1, s.ImageTokens))); s.ImageTokens > 0 && s.Encode > 0 && per <= maxPerToken {
		if s.OnCPU {
			dur("encode_cpu_per_token", &out.EncodeCPU, per)
		} else {
			dur("encode_gpu_per_token", &out.EncodeGPU, per)
		}
	}
	if tps := float64(s.PromptTokens) / s.PromptTime.D().Seconds(); s.PromptTokens > 0 && s.PromptTime > 0 && plausibleSpeed(tps) {
		out.PrefillTokensPerSecond = ewma("prefill_tokens_per_second", c.PrefillTokensPerSecond, tps)
	}
	dur("swap_in", &out.SwapIn, s.SwapIn)
	dur("swap_out", &out.SwapOut, s.SwapOut)
	dur("relaunch", &out.Relaunch, s.Relaunch)
	dur("pipeline_compile", &out.PipelineCompile, s.Compile)
	if s.CachedImageFit && s.CachedImage == 0 {
		out.CachedImage = Duration(ewma("cached_image", float64(c.CachedImage), 0))
	} else {
		dur("cached_image", &out.CachedImage, s.CachedImage)
	}
	return out
}
