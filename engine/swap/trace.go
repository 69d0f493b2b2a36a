package swap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
)

// Trace is an agent session as the simulator replays it: a list of requests (steps), what each carries, and
// when what it carries becomes known. trace.md documents the JSON format; a real session exports to it.
type Trace struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// SystemTokens is the first request's prefix that is known at start (system prompt and tool schemas): the
	// scheduler may evaluate it before the first request.
	SystemTokens int `json:"system_tokens,omitempty"`
	// Expect is what the session knows about its workload before its first request (the agent's declared
	// tools, the user's past sessions), or nil when nothing is known.
	Expect *Expect `json:"expect,omitempty"`
	Steps  []Step  `json:"steps"`
}

// Expect is a prior over the coming steps: rates, not the steps themselves.
type Expect struct {
	ImagesPerStep float64  `json:"images_per_step"`
	ImageTokens   int      `json:"image_tokens,omitempty"` // per image
	ImageLead     Duration `json:"image_lead,omitempty"`   // how long before its request an image is usually known
	OutputTokens  int      `json:"output_tokens,omitempty"`
	Wait          Duration `json:"wait,omitempty"` // usual time between a reply and the next request
}

// Step is one request to the engine and the wait before it.
type Step struct {
	// Repeat replays this step this many times (0 and 1: once), to keep long loops short to write.
	Repeat int    `json:"repeat,omitempty"`
	Note   string `json:"note,omitempty"`
	// NewSession starts another conversation on the same engine before this step: the cache's conversation
	// is replaced, and the system prompt (SystemTokens) is evaluated again, ahead if the scheduler chooses.
	NewSession bool `json:"new_session,omitempty"`
	// User and Tools are the time between the previous reply and this request: a person reading and typing,
	// tools running. The engine is idle then unless the scheduler gives it work.
	User  Duration `json:"user,omitempty"`
	Tools Duration `json:"tools,omitempty"`
	// PromptTokens are the request's new text tokens (the user's message, tool results).
	PromptTokens int `json:"prompt_tokens"`
	// Images are the request's new images, in the order they become known.
	Images []TraceImage `json:"images,omitempty"`
	// OutputTokens are the tokens the model generates, thinking included.
	OutputTokens int `json:"output_tokens"`
	// Acceptance is this step's draft acceptance, when it differs from the cost model's (tool-call JSON drafts
	// well; free prose after an image may not). Nil: the cost model's.
	Acceptance *float64 `json:"acceptance,omitempty"`
}

// TraceImage is one new image of a step.
type TraceImage struct {
	// Tokens is the image's size in image tokens after intake; or give Width and Height and intake sizes it
	// to the cost model's image_token_budget (SizeImage).
	Tokens int `json:"tokens,omitempty"`
	Width  int `json:"width,omitempty"`
	Height int `json:"height,omitempty"`
	// KnownAhead is how long before the step's request is ready the image's pixels are known (attached while
	// the user still types; returned by a tool while a slower one runs). 0: only with the request. A lead
	// longer than the step's wait means it was known earlier still, but it cannot be prefilled before the
	// previous reply ends (the prompt prefix before it is not final until then).
	KnownAhead Duration `json:"known_ahead,omitempty"`
	// AnnouncedAhead is how long before the request the agent knows an image is coming (a screenshot tool
	// started) without having it yet; at least KnownAhead.
	AnnouncedAhead Duration `json:"announced_ahead,omitempty"`
}

// Limits that keep a hostile or mistaken trace from overflowing the simulator's arithmetic.
const (
	maxSteps     = 100_000
	maxTokens    = 1_000_000
	maxStepDelay = Duration(30 * 24 * time.Hour)
)

// ParseTrace reads and checks a trace, naming the step and field at fault.
func ParseTrace(data []byte) (Trace, error) {
	// Steps are decoded one by one so that an error names the step it is in.
	var raw struct {
		Trace
		Steps []json.RawMessage `json:"steps"`
	}
	if err := strictDecode(data, &raw); err != nil {
		return Trace{}, fmt.Errorf("swap: trace: %w", err)
	}
	t := raw.Trace
	t.Steps = make([]Step, len(raw.Steps))
	for i, r := range raw.Steps {
		if err := strictDecode(r, &t.Steps[i]); err != nil {
			return Trace{}, fmt.Errorf("swap: trace %q: steps[%d]: %w", t.Name, i, err)
		}
	}
	if err := t.Validate(); err != nil {
		return Trace{}, fmt.Errorf("swap: trace %q: %w", t.Name, err)
	}
	return t, nil
}

func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// Validate checks a trace.
func (t Trace) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if len(t.Steps) == 0 {
		bad("steps: empty: a trace needs at least one request")
	}
	if t.SystemTokens < 0 || t.SystemTokens > maxTokens {
		bad("system_tokens = %d: want 0 to %d", t.SystemTokens, maxTokens)
	}
	if e := t.Expect; e != nil {
		if e.ImagesPerStep < 0 || e.ImagesPerStep > 64 || math.IsNaN(e.ImagesPerStep) {
			bad("expect.images_per_step = %v: want 0 to 64", e.ImagesPerStep)
		}
		if e.ImageTokens < 0 || e.ImageTokens > maxTokens || e.OutputTokens < 0 || e.OutputTokens > maxTokens {
			bad("expect: token counts must be 0 to %d", maxTokens)
		}
	}
	total := 0
	for i, s := range t.Steps {
		where := fmt.Sprintf("steps[%d]", i)
		if s.Repeat < 0 || s.Repeat > maxSteps {
			bad("%s.repeat = %d: want 0 to %d", where, s.Repeat, maxSteps)
		}
		total += max(1, s.Repeat)
		if s.PromptTokens < 0 || s.PromptTokens > maxTokens || s.OutputTokens < 0 || s.OutputTokens > maxTokens {
			bad("%s: prompt_tokens and output_tokens must be 0 to %d", where, maxTokens)
		}
		if s.User > maxStepDelay || s.Tools > maxStepDelay {
			bad("%s: user and tools must be at most %s", where, maxStepDelay.D())
		}
		if a := s.Acceptance; a != nil && (*a < 0 || *a > 1 || math.IsNaN(*a)) {
			bad("%s.acceptance = %v: a fraction from 0 to 1", where, *a)
		}
		if len(s.Images) > 64 {
			bad("%s: %d images in one request: at most 64", where, len(s.Images))
		}
		for j, im := range s.Images {
			w := fmt.Sprintf("%s.images[%d]", where, j)
			switch {
			case im.Tokens < 0 || im.Tokens > maxTokens:
				bad("%s.tokens = %d: want 1 to %d", w, im.Tokens, maxTokens)
			case im.Tokens == 0 && (im.Width <= 0 || im.Height <= 0 || im.Width > 1<<16 || im.Height > 1<<16):
				bad("%s: give tokens, or width and height (1 to 65536 pixels)", w)
			}
			if im.KnownAhead > maxStepDelay || im.AnnouncedAhead > maxStepDelay {
				bad("%s: known_ahead and announced_ahead must be at most %s", w, maxStepDelay.D())
			}
			if im.AnnouncedAhead != 0 && im.AnnouncedAhead < im.KnownAhead {
				bad("%s: announced_ahead %s is after known_ahead %s: an image is announced before (or when) it is known",
					w, im.AnnouncedAhead.D(), im.KnownAhead.D())
			}
		}
	}
	if total > maxSteps {
		bad("steps: %d requests after repeats: at most %d", total, maxSteps)
	}
	return errors.Join(errs...)
}

// expand returns the steps with repeats written out.
func (t Trace) expand() []Step {
	var out []Step
	for _, s := range t.Steps {
		for range max(1, s.Repeat) {
			s2 := s
			s2.Repeat = 0
			out = append(out, s2)
		}
	}
	return out
}

// ImagePatch is the pixel side of one image token for Qwen3-VL-style projectors (patch 16, merge 2):
// docs/engine-notes.md §9 counts 1024² as 1,050 tokens and 1920×1080 as ~2,000.
const ImagePatch = 32

// ImageTokens estimates the tokens of a width×height image (ceil(w/32)·ceil(h/32), without the few
// separator tokens a projector adds).
func ImageTokens(width, height int) int {
	if width <= 0 || height <= 0 {
		return 0
	}
	return ((width + ImagePatch - 1) / ImagePatch) * ((height + ImagePatch - 1) / ImagePatch)
}

// SizeImage is intake's one resize: the largest size with the image's aspect ratio whose tokens fit budget
// (0: no limit), in whole patches. It returns the new size and its tokens; an image already within budget keeps
// its size. Sizing once, at intake, keeps the bytes stable so every later turn hits the image cache, and keeps
// the encoder's shapes few so a warm-up covers them.
func SizeImage(width, height, budget int) (w, h, tokens int) {
	tokens = ImageTokens(width, height)
	if budget <= 0 || tokens <= budget {
		return width, height, tokens
	}
	scale := math.Sqrt(float64(budget) / float64(tokens))
	for {
		w = max(ImagePatch, int(float64(width)*scale)/ImagePatch*ImagePatch)
		h = max(ImagePatch, int(float64(height)*scale)/ImagePatch*ImagePatch)
		if tokens = ImageTokens(w, h); tokens <= budget || scale < 1e-3 {
			return w, h, tokens
		}
		scale *= 0.98
	}
}
