package session

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine/swap"
)

// turnWatch follows one turn's events: it measures each request into the engine's cost model, says (as
// agent.Explain) what each request did with its images, and carries out the loop's prefill of a tool's images
// while slower tools of the step still run, measuring that too.
type turnWatch struct {
	svc     *Service
	session string
	// userAhead: the user's attachments were all evaluated ahead (the prefill covered them).
	userAhead bool
	profile   swap.Profile
	emit      func(agent.Event)

	mu     sync.Mutex
	step   int
	seen   bool // the turn's first request has been measured
	images int  // images new in the next request's input, and their tokens
	tokens int
	// covered and coveredTokens are the images of this step's tool results a prefill evaluated; aheadNext
	// says the next request's images all were.
	covered, coveredTokens int
	aheadNext              bool
	lines                  []string // explanations of the step's tool prefills, emitted with the step
	samples                []swap.Sample
	text                   float64 // the text prompt rate, for telling an encode from its request's text
}

// event is the turn's emit: every event goes on; a finished step is measured and explained.
func (w *turnWatch) event(ev agent.Event) {
	w.emit(ev)
	switch e := ev.(type) {
	case agent.StepStarted:
		w.mu.Lock()
		w.step = e.Step
		w.mu.Unlock()
	case agent.StepFinished:
		for _, line := range w.finished(e) {
			w.emit(agent.Explain{Step: e.Step, Text: line})
		}
	}
}

// finished measures a step's request and returns what to explain about it.
func (w *turnWatch) finished(f agent.StepFinished) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.seen && w.text == 0 {
		w.text = w.svc.measuredTextRate()
	}
	out := w.lines
	w.lines = nil
	for _, m := range f.Messages {
		if m.Role != "assistant" {
			for _, im := range m.Images {
				w.images++
				w.tokens += w.svc.imageTokens(im)
			}
			continue
		}
		ahead := w.aheadNext
		if !w.seen {
			ahead = w.userAhead
		}
		if tm := m.Timings; tm != nil {
			tokens := w.tokens
			if ahead {
				tokens = 0 // they came from the cache: the request measures text only
			}
			smp := w.svc.evalSample(tm, tokens, w.text)
			if smp.PromptTokens > 0 {
				w.text = float64(smp.PromptTokens) / smp.PromptTime.D().Seconds()
			}
			if w.images > 0 {
				// Whether the request encoded its images is known from what ran ahead, not from the timings: a
				// tiny encode is lost in the text's noise, and the sample then only says its time is unknown.
				if !ahead {
					took := "too short to tell from the text in"
					if smp.ImageTokens > 0 {
						took = smp.Encode.D().Round(time.Millisecond).String() + " of"
					}
					out = append(out, fmt.Sprintf("step %d: the request encoded its %d new image(s) (%d tokens) itself, on the "+
						"critical path: %s its %s prompt evaluation (nothing known ahead to prefill)", f.Step, w.images, w.tokens,
						took, msDuration(tm.PromptMS).Round(time.Millisecond)))
				} else {
					out = append(out, fmt.Sprintf("step %d: the request found its %d image(s) in the cache (evaluated ahead) and "+
						"evaluated %d prompt tokens in %s: their encode was hidden", f.Step, w.images, tm.PromptN,
						msDuration(tm.PromptMS).Round(time.Millisecond)))
				}
			}
			if tm.PredictedN > 0 && tm.PredictedMS > 0 {
				smp.Profile = w.profile
				smp.Generated, smp.GenTime = tm.PredictedN, swap.Duration(tm.PredictedMS*float64(time.Millisecond))
				smp.Drafted, smp.Accepted = tm.DraftN, tm.DraftNAccepted
			}
			w.samples = append(w.samples, smp)
		}
		w.seen, w.images, w.tokens = true, 0, 0
	}
	// The step's tool results are the next request's new input; its prefills ran while the tools did.
	w.aheadNext = w.images > 0 && w.covered >= w.images
	w.covered, w.coveredTokens = 0, 0
	return out
}

// measured are the turn's request samples, for the cost model.
func (w *turnWatch) measured() []swap.Sample {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]swap.Sample(nil), w.samples...)
}

// prefillTools evaluates the conversation up to the tool results that finished so far (the loop calls it while
// the step's slower tools run, or before they run to evaluate an image window cut ahead: expect images still to
// come), and measures the encode of the images it added.
func (w *turnWatch) prefillTools(ctx context.Context, a *agent.Agent, history []agent.Message, expect int) {
	n, tokens := 0, 0
	for i := len(history) - 1; i >= 0 && history[i].Role != "assistant"; i-- {
		for _, im := range history[i].Images {
			n++
			tokens += w.svc.imageTokens(im)
		}
	}
	start := time.Now()
	tm, err := a.PrefillHistoryExpecting(ctx, history, expect)
	took := time.Since(start)
	w.mu.Lock()
	newImages, newTokens, step := n-w.covered, tokens-w.coveredTokens, w.step
	cut := n == 0 && expect > 0
	switch {
	case cut && err == nil:
		w.lines = append(w.lines, fmt.Sprintf("step %d: re-evaluated the prompt the image window's cut shortens, before the "+
			"tools' %d image(s) arrived — done in %s, hidden", step, expect, took.Round(time.Millisecond)))
	case cut && errors.Is(err, agent.ErrNothingToPrefill):
		err = nil // the shortened prompt keeps no image: its text is cheap in the request itself
		w.lines = append(w.lines, fmt.Sprintf("step %d: the image window's cut leaves no earlier image to re-evaluate", step))
	case cut:
		w.lines = append(w.lines, fmt.Sprintf("step %d: re-evaluating the prompt the image window's cut shortens failed (%v): "+
			"the next request does it", step, err))
	case err == nil:
		w.covered, w.coveredTokens = n, tokens
		w.lines = append(w.lines, fmt.Sprintf("step %d: prefilled %d tool image(s) (%d tokens) while slower tools of the step "+
			"ran — done in %s, hidden", step, newImages, newTokens, took.Round(time.Millisecond)))
	default:
		w.lines = append(w.lines, fmt.Sprintf("step %d: prefilling %d tool image(s) failed (%v): the next request encodes them",
			step, newImages, err))
	}
	w.mu.Unlock()
	if err != nil {
		w.svc.cfg.Logger.Warn("prefill tool images", "err", err)
		return
	}
	if cut {
		// Kept images re-encoded and text mixed: no clean sample for the cost model.
		if tm != nil {
			w.svc.recordPrefill(w.session, 0, took, tm, "cut")
		}
		return
	}
	w.svc.recordPrefill(w.session, newImages, took, tm, "tool")
	w.svc.observe(w.svc.evalSample(tm, newTokens, w.svc.measuredTextRate()))
}
