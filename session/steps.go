package session

import (
	"context"
	"fmt"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/tools"
)

// Step is one message of a scripted conversation (an agent file's steps): its text and images, which came from
// CheckImage as a Turn's do.
type Step struct {
	Text   string
	Images []tools.Image
}

// Steps sends steps one after another in this session, each as a Turn, and stops at the first that fails. Every
// step's images are known from the start, so each next step's are queued as the next message's attachments
// while the step before it runs: the engine evaluates them (and the history before them) as soon as that step's
// answer is in, and the next step's request evaluates only its text. emit gets each event with its step's index
// (from 0), done each step's result as it ends; either may be nil.
func (s *Session) Steps(ctx context.Context, steps []Step, emit func(step int, ev agent.Event), done func(step int, res Result)) ([]Result, error) {
	cfg := s.svc.cfg
	for i, st := range steps {
		if len(st.Images) > cfg.MaxPendingImages {
			return nil, fmt.Errorf("step %d: %w: it has %d images, the most one message may carry is %d: split it into more steps",
				i+1, ErrLimit, len(st.Images), cfg.MaxPendingImages)
		}
		if n := imagesSize(st.Images); n > cfg.MaxPendingBytes {
			return nil, fmt.Errorf("step %d: %w: its images pass %d MiB for one message: split it into more steps", i+1, ErrLimit, cfg.MaxPendingBytes>>20)
		}
	}
	// Every step's images stay in the conversation: all of them must fit its bound from the start, not fail at
	// a late step.
	var add int64
	for _, st := range steps {
		add += imagesSize(st.Images)
	}
	s.mu.Lock()
	held := imageBytes(s.history) + imagesSize(s.pending)
	s.mu.Unlock()
	if held+add > cfg.MaxSessionImageBytes {
		return nil, fmt.Errorf("%w: the steps' images (%s) with the %s this conversation holds pass its %s limit (every image stays in the conversation): "+
			"use fewer or smaller images, or split the steps over sessions", ErrLimit, size(add), size(held), size(cfg.MaxSessionImageBytes))
	}
	var out []Result
	for i, st := range steps {
		var next []tools.Image
		if i+1 < len(steps) {
			next = steps[i+1].Images
		}
		var extra []tools.Image
		if i == 0 {
			extra = st.Images // the images of later steps are attached by the step before them
		}
		ev := func(e agent.Event) {
			if emit != nil {
				emit(i, e)
			}
		}
		res, err := s.turn(ctx, st.Text, extra, next, ev)
		out = append(out, res)
		if done != nil {
			done(i, res)
		}
		if err != nil {
			s.ClearAttachments()
			return out, fmt.Errorf("step %d: %w", i+1, err)
		}
	}
	return out, nil
}
