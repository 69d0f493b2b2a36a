package session

import (
	"fmt"
	"time"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine/llamacpp"
)

// Status is what front ends show about a session (a terminal's status line, a page's): a snapshot published at
// every change, so reading it never waits for the session's turn or its work ahead.
type Status struct {
	ID    string
	Title string
	// Stored: the session has a row in the store (it is created with the first message stored).
	Stored bool
	// Busy says a turn runs; Queued how many more wait for it.
	Busy   bool
	Queued int
	// PendingImages are attached for the next message (PendingBytes of them, the first KnownSince); Prefilled of
	// them the engine has evaluated ahead.
	PendingImages int
	PendingBytes  int64
	KnownSince    time.Time
	Prefilled     int
	// Ahead says what is being evaluated ahead of the next message ("encoding 1 image ahead"), "" for nothing.
	Ahead string
	Stats Stats
}

// Stats are a session's numbers since it was opened, as its status line shows them.
type Stats struct {
	Turns int `json:"turns"`
	// ContextUsed is the last request's prompt plus its answer, in tokens (the history's on open).
	ContextUsed     int     `json:"context_used"`
	TokensPerSecond float64 `json:"tokens_per_second"` // the last request's generation rate
	// DraftAccepted of Drafted speculative (MTP or draft-model) tokens.
	Drafted       int `json:"drafted"`
	DraftAccepted int `json:"draft_accepted"`
}

// TurnStats are one turn's numbers, as the one-shot front ends print them.
type TurnStats struct {
	Steps     int
	Generated int     // tokens generated over the turn's requests
	Rate      float64 // the last request's tokens per second
	// FirstToken is the turn's first request's time to its first token; Took the whole turn.
	FirstToken, Took time.Duration
	// Answered says the model answered at least once: a turn that failed before is no turn to report.
	Answered bool
}

// EngineStatus is what front ends show about the engine, from the properties of its latest launch.
type EngineStatus struct {
	// Model is the session label of Config.Model.
	Model string `json:"model"`
	// ContextSize is the server's context in tokens (0: not known yet).
	ContextSize int `json:"context_size"`
	// Resident lists what is loaded beside the model weights ("projector", "MTP").
	Resident []string `json:"resident"`
	// Running and Waiting count the turns on the engine and in its queue (Config.Slots; both 0 without it).
	Running int `json:"running"`
	Waiting int `json:"waiting"`
}

// Status is the session's snapshot; it takes no lock the session's work holds.
func (s *Session) Status() Status {
	if st := s.status.Load(); st != nil {
		return *st
	}
	return Status{ID: s.ID(), Title: s.title}
}

// publishLocked makes the session's current state its Status. Called with s.mu held, at every change.
func (s *Session) publishLocked() {
	st := &Status{ID: s.id, Title: s.title, Stored: s.rowMade.Load(), Busy: s.ahead.Busy, Queued: s.queued,
		PendingImages: len(s.pending), PendingBytes: imagesSize(s.pending), Prefilled: s.ahead.Prefilled, Stats: s.stats}
	if len(s.pendingAt) > 0 {
		st.KnownSince = s.pendingAt[0]
	}
	if n := len(s.pending); n > 0 {
		if left := n - s.ahead.Prefilled; left > 0 {
			st.Ahead = fmt.Sprintf("encoding %d image%s ahead", left, plural(left))
		} else {
			st.Ahead = fmt.Sprintf("%d image%s encoded", n, plural(n))
		}
	}
	s.status.Store(st)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// observeStep keeps the session's numbers from a finished step, for the status line while the turn goes on.
func (s *Session) observeStep(sf agent.StepFinished) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range sf.Messages {
		t := m.Timings
		if m.Role != "assistant" || t == nil {
			continue
		}
		s.stats.ContextUsed = t.PromptN + t.CacheN + t.PredictedN
		if t.PredictedPerSecond > 0 {
			s.stats.TokensPerSecond = t.PredictedPerSecond
		}
		s.stats.Drafted += t.DraftN
		s.stats.DraftAccepted += t.DraftNAccepted
	}
	s.publishLocked()
}

// turnStats sums a turn's added messages.
func turnStats(f agent.Finished, added []agent.Message, took time.Duration) TurnStats {
	ts := TurnStats{Steps: f.Steps, Took: took}
	for _, m := range added {
		if m.Role != "assistant" {
			continue
		}
		ts.Answered = true
		if ts.FirstToken == 0 {
			ts.FirstToken = m.TTFT
		}
		if t := m.Timings; t != nil {
			ts.Generated += t.PredictedN
			ts.Rate = t.PredictedPerSecond
		}
	}
	return ts
}

// Status describes the engine as of its latest launch whose properties were read, and the engine queue now. It
// never waits for the engine: before the first launch it has the model's label alone.
func (s *Service) Status() EngineStatus {
	st := EngineStatus{Model: s.cfg.Model, Resident: []string{}}
	s.propsMu.Lock()
	p, ok := s.props[s.lastGen]
	s.propsMu.Unlock()
	if ok {
		st.ContextSize = p.NCtx
		st.Resident = resident(p)
	}
	if s.queue != nil {
		st.Running, st.Waiting = s.queue.counts()
	}
	return st
}

func resident(p llamacpp.Props) []string {
	out := []string{}
	if p.Vision {
		out = append(out, "projector")
	}
	if p.Speculating() {
		out = append(out, "MTP")
	}
	return out
}
