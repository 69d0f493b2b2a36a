package swap

import (
	"fmt"
	"math"
	"time"
)

// Window is the image window of a session's requests (agent.ImageWindow): the most recent Keep images go out
// as they are, older ones are left out of the request Batch at a time. Keep 0 sends every image.
type Window struct {
	Keep   int    `json:"keep"`
	Batch  int    `json:"batch"`
	Reason string `json:"reason,omitempty"`
}

// Dropped is how many of the oldest images a request holding total images leaves out (agent.ImageWindow.Dropped).
func (w Window) Dropped(total int) int {
	if w.Keep <= 0 || total <= w.Keep {
		return 0
	}
	b := max(w.Batch, 1)
	return (total - w.Keep) / b * b
}

// WindowNeeds is what the window is chosen for.
type WindowNeeds struct {
	Profile Profile
	// ContextTokens is the engine's context (n_ctx); the images a request carries may take a quarter of it.
	ContextTokens int
	// ImageTokens is a typical image's tokens (0: the cost model's budget, at most 1,024).
	ImageTokens int
	// StepTokens is the text of one step, prompt and answer (0: 600).
	StepTokens int
	// Leads are how long before their requests recent images were known (a typing user: seconds; a screenshot
	// sent at once: 0): a cut's re-evaluation hides in them. None: half the steps are taken as sent at once.
	Leads []time.Duration
	// MinKeep is the fewest images every request keeps (0: 2, the screen now and the one before).
	MinKeep int
}

// Window limits.
const (
	maxWindowBatch = 8
	// imageContextShare is the share of the context the images of one request may take.
	imageContextShare = 4
	// ttftGrowth is how much slower than a short conversation's a long one's request may be for its images.
	ttftGrowth = 0.3
	// requestFloor is what a request costs the server before any image or new text: the H200 run of issue 25
	// measured 0.225 s to the first token of a cached conversation with one screenshot, ~55 ms of it the image.
	requestFloor = 170 * time.Millisecond
)

// typicalStep is the size of one step a window is planned for, an image's tokens and the step's text: those
// given, or where none is given (0) an image of the cost model's budget, at most 1,024 tokens, and 600 of text.
func typicalStep(c Costs, imageTokens, stepTokens int) (image, text int) {
	image, text = imageTokens, stepTokens
	if image <= 0 {
		image = min(max(c.ImageTokenBudget, 1), 1024)
	}
	if text <= 0 {
		text = 600
	}
	return image, text
}

// ChooseWindow picks the window from the cost model. Each image a request carries costs CachedImage on the
// server (decoded and hashed again before the cache can match it), on every request; a cut (the window moving)
// makes the server evaluate the conversation again from the first new stub on: the kept images' encodes and the
// text of their steps, which hides in the time the user types or tools run when that is long enough. Keep is the
// fewest images the request should show the model (MinKeep), more while their cost stays under a tenth of a
// second per request; Batch minimizes the expected exposed time per step, history images plus the cut's
// exposed share once per Batch images; the images of one request stay within a quarter of the context.
func ChooseWindow(c Costs, n WindowNeeds) Window {
	tokens, text := typicalStep(c, n.ImageTokens, n.StepTokens)
	keep := n.MinKeep
	if keep <= 0 {
		keep = 2
	}
	per := c.CachedImage.D()
	if per > 0 {
		keep = max(keep, int(100*time.Millisecond/per))
	} else {
		keep = max(keep, 8)
	}
	capImages := math.MaxInt
	if n.ContextTokens > 0 {
		capImages = max(1, n.ContextTokens/imageContextShare/tokens)
	}
	growth := capImages
	if per > 0 {
		// A long session's requests should answer about as fast as a short one's: the images a request carries
		// beyond a short conversation's two may add at most ttftGrowth of that request's own time (its two
		// images, its text, the first token).
		short := requestFloor + 2*per + c.Prefill(text) + c.Generate(n.Profile, 1, -1)
		growth = 2 + int(ttftGrowth*float64(short)/float64(per))
		capImages = min(capImages, max(keep, growth))
	}
	keep = min(keep, capImages)
	leads := n.Leads
	if len(leads) == 0 {
		leads = []time.Duration{0, time.Hour}
	}
	// A cut of b images re-evaluates from the oldest of them: the b stubs, the keep-1 older images still sent
	// (the newest is encoded anyway) and the text of those keep+b-1 steps.
	reeval := func(b int) time.Duration {
		return c.Encode(n.Profile, (keep-1)*tokens) + c.Prefill((keep+b-1)*text) + time.Duration(keep)*per
	}
	exposed := func(b int) time.Duration {
		var sum time.Duration
		for _, l := range leads {
			sum += max(0, reeval(b)-l)
		}
		return sum / time.Duration(len(leads))
	}
	cost := func(b int) time.Duration {
		// A request carries keep to keep+b-1 images, keep+(b-1)/2 on average; a cut comes once per b images.
		return time.Duration(float64(per)*(float64(keep)+float64(b-1)/2)) + exposed(b)/time.Duration(b)
	}
	best := 1
	for b := 2; b <= maxWindowBatch && keep+b-1 <= capImages; b++ {
		if cost(b) < cost(best) {
			best = b
		}
	}
	cut, exposedCut := reeval(best), exposed(best)
	w := Window{Keep: keep, Batch: best}
	w.Reason = fmt.Sprintf("each image a request carries costs %s on the server; a cut re-evaluates %d images and their "+
		"text (%s, %s of it exposed on average): keep %d, drop %d at a time (%s per step, against %s dropping one each turn)",
		per.Round(time.Millisecond), keep, cut.Round(time.Millisecond), exposedCut.Round(time.Millisecond), keep, best,
		cost(best).Round(time.Millisecond), cost(1).Round(time.Millisecond))
	if capImages < math.MaxInt && keep+best-1 >= capImages {
		w.Reason += fmt.Sprintf("; at most %d images a request, so that it stays within %.0f%% of a short conversation's "+
			"time to first token and a quarter of the context", capImages, 100*ttftGrowth)
	}
	return w
}
