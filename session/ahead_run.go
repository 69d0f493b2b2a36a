package session

import (
	"context"
	"errors"
	"time"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/engine/swap"
	"github.com/visorhq/visor/tools"
)

// This file carries out the ahead-of-time machine's effects (ahead.go). The session's lock is held only to feed
// the machine an event and copy what the effect it asks for needs; the scheduler, the store, a relaunch and the
// engine are reached after it is released.

// chainJob is one effect with what it needs, copied under the session's lock.
type chainJob struct {
	eff chainEffect
	// effPlan: what the scheduler is shown.
	cached  swap.Context
	pending []swap.PendingImage
	records []swap.StepRecord
	known   time.Time
	// effPrefill: what the request carries, its image tokens not in the cache, and the note its run goes in.
	history []agent.Message
	user    *agent.Message
	images  int
	tokens  int
	expect  int // the images the next request adds, for a cut's prefill (planCut)
	note    *aheadNote
}

// stepLocked feeds ev to the machine with the session's facts, keeps the new state, wakes whoever waits when a
// chain ends and publishes the status; it returns the job of the effect the machine asks for, nil when none.
// Called with s.mu held; the caller carries the job out (start) after releasing it.
func (s *Session) stepLocked(ev chainEvent) *chainJob {
	st := s.ahead
	st.NoPrefill = s.svc.cfg.NoPrefill
	st.Pending, st.History, st.HistoryImages = len(s.pending), len(s.history), countImages(s.history)
	st.CutAhead, st.CutExpect = false, 0
	if st.Pending == 0 && st.HistoryImages > 0 {
		if p := s.cutPlanLocked(); p.Ahead {
			st.CutAhead, st.CutExpect = true, p.Expected
		}
	}
	was := st.chain()
	st, effs := decide(st, ev)
	s.ahead = st
	if !was && st.chain() {
		s.prefill = make(chan struct{})
	}
	var job *chainJob
	for _, e := range effs {
		if e.kind == effDone {
			if s.prefill != nil {
				close(s.prefill)
				s.prefill = nil
			}
			s.chainNote = nil
			continue
		}
		job = s.jobLocked(e)
	}
	s.publishLocked()
	return job
}

// jobLocked copies what effect e needs.
func (s *Session) jobLocked(e chainEffect) *chainJob {
	svc := s.svc
	job := &chainJob{eff: e}
	switch e.kind {
	case effPlan:
		job.records = append([]swap.StepRecord(nil), s.records...)
		if e.history {
			for _, m := range s.history {
				for _, im := range m.Images {
					// Known since the session was opened (or the engine came back): stats count the lead from there.
					job.pending = append(job.pending, swap.PendingImage{ID: len(job.pending), Tokens: svc.imageTokens(im),
						Known: s.used.Sub(svc.started)})
				}
			}
			job.known = s.used
			break
		}
		for i, im := range s.pending {
			job.pending = append(job.pending, swap.PendingImage{ID: i, Tokens: svc.imageTokens(im), Known: s.pendingAt[i].Sub(svc.started)})
		}
		job.cached = contextOf(s.history, svc.imageTokens)
		job.known = time.Now()
		if len(s.pendingAt) > 0 {
			job.known = s.pendingAt[0]
		}
	case effPrefill:
		job.history = append([]agent.Message(nil), s.history...)
		// The image tokens this run encodes: those of the history the launch has not evaluated, and, for
		// attachments, the ones no earlier prefill of this launch did.
		job.tokens = s.uncachedTokensLocked(job.history, e.gen)
		job.images = countImages(job.history) // a history prefill encodes them all; an attachment's, the new ones
		if e.images > 0 {
			prev := 0
			if s.ahead.WarmGen == e.gen {
				prev = min(s.ahead.Prefilled, e.images)
			}
			ims := append([]tools.Image(nil), s.pending[:e.images]...)
			job.tokens += svc.tokensOf(ims[prev:])
			job.user = &agent.Message{Role: "user", Images: ims}
			job.images = len(ims)
			if e.adopt {
				// Attached while the chain evaluated the history (or it restarted with the engine): no plan of
				// their own was made, the running chain takes them.
				s.chainNote = &aheadNote{action: swap.Action{Kind: swap.ActPrefill, Images: make([]int, e.images),
					Reason: "attached while a prefill ran: the running prefill takes them"}, carried: "yes", at: s.pendingAt[0]}
				s.notes = append(s.notes, s.chainNote)
			}
		}
		if e.expect > 0 && job.user == nil {
			// The window's cut, evaluated ahead: its own note, with the scheduler's reason.
			job.expect = e.expect
			job.tokens = 0 // kept images re-encoded with text: no clean sample for the cost model
			s.chainNote = &aheadNote{action: swap.Action{Kind: swap.ActPrefill, Reason: s.cutPlanLocked().Reason},
				carried: "yes", at: time.Now(), history: true}
			s.notes = append(s.notes, s.chainNote)
		}
		if s.chainNote == nil {
			s.chainNote = &aheadNote{action: swap.Action{Kind: swap.ActPrefill}, carried: "yes", at: time.Now(), history: job.user == nil}
			s.notes = append(s.notes, s.chainNote)
		}
		job.note = s.chainNote
	}
	return job
}

// uncachedTokensLocked is how many image tokens of history the engine launch gen has not evaluated: those after
// the prefix its cache holds, or all of them when another launch evaluated it (or none did).
func (s *Session) uncachedTokensLocked(history []agent.Message, gen int) int {
	from := 0
	if s.ahead.WarmGen == gen && s.ahead.WarmLen <= len(history) {
		from = s.ahead.WarmLen
	}
	n := 0
	for _, m := range history[from:] {
		n += s.svc.tokensOf(m.Images)
	}
	return n
}

// step feeds ev to the machine and starts the chain it asks for.
func (s *Session) step(ctx context.Context, ev chainEvent) {
	s.mu.Lock()
	job := s.stepLocked(ev)
	s.mu.Unlock()
	s.start(ctx, job)
}

// start runs a chain for job in the background; nil starts nothing. The machine asks for an effect from outside
// a chain only when none runs, so a session has one chain at a time.
func (s *Session) start(ctx context.Context, job *chainJob) {
	if job != nil {
		go s.drive(context.WithoutCancel(ctx), job)
	}
}

// drive is the session's chain: it carries out one effect at a time and feeds back its outcome until the
// machine asks for none.
func (s *Session) drive(ctx context.Context, job *chainJob) {
	var r conductor.Ready
	var p llamacpp.Props
	for job != nil {
		var ev chainEvent
		switch job.eff.kind {
		case effPlan:
			ev = s.plan(job)
		case effReady:
			var err error
			r, p, err = s.svc.ready(ctx, false)
			ev = chainEvent{kind: evEngine, gen: r.Generation, failed: err != nil}
			if err != nil {
				s.svc.cfg.Logger.Warn("prefill: the engine is not ready; the images will be encoded with the next request", "err", err)
			}
		case effPrefill:
			ev = s.prefillRun(ctx, r, p, job)
		}
		s.mu.Lock()
		job = s.stepLocked(ev)
		s.mu.Unlock()
	}
}

// plan asks the scheduler (planning with the running engine's measured costs) what to do for job's images,
// carries out its actions but the prefill, records each and keeps it as a note for --explain; the prefill's note
// becomes the chain's. Without a scheduler everything is prefilled at once.
func (s *Session) plan(job *chainJob) chainEvent {
	svc := s.svc
	history := job.eff.history
	var notes []*aheadNote
	var prefill *aheadNote
	if sched := svc.scheduler(); sched == nil {
		reason := "every attached image is evaluated at once"
		if history {
			reason = "a history with images the engine has not evaluated is evaluated at once"
		}
		prefill = &aheadNote{action: swap.Action{Kind: swap.ActPrefill, Images: make([]int, len(job.pending)), Reason: reason},
			carried: "yes", at: job.known, history: history}
		notes = append(notes, prefill)
	} else {
		obs := swap.Observation{Now: time.Since(svc.started), Profile: svc.currentProfile(), Compiled: true,
			Context: job.cached, History: job.records, LastRelaunch: -1, Pending: job.pending}
		for _, a := range sched.Plan(obs) {
			n := &aheadNote{action: a, at: job.known, history: history, carried: "yes"}
			switch a.Kind {
			case swap.ActPrefill:
				prefill = n
			case swap.ActRelaunch:
				n.carried = svc.relaunch(a.Profile)
			default:
				n.carried = "no: the conductor warms the engine up at start"
			}
			notes = append(notes, n)
			svc.recordDecision(s.ID(), a, n.carried)
		}
	}
	s.mu.Lock()
	s.notes = append(s.notes, notes...)
	if prefill != nil {
		s.chainNote = prefill
	}
	s.mu.Unlock()
	return chainEvent{kind: evPlanned, prefill: prefill != nil}
}

// historyPrefiller evaluates the shared prefix of a conversation's next request; *agent.Agent is one.
type historyPrefiller interface {
	PrefillHistory(ctx context.Context, history []agent.Message) (*engine.Timings, error)
}

// cutPrefiller evaluates that prefix as a next request that adds expect images renders it (the image window
// counts them); *agent.Agent is one.
type cutPrefiller interface {
	PrefillHistoryExpecting(ctx context.Context, history []agent.Message, expect int) (*engine.Timings, error)
}

// prefillRun evaluates what job carries on the ready engine r, keeps the run in its note for --explain, and
// measures it into the engine's cost model. A failed prefill is logged and kept as an engine event; the turn then
// evaluates the images itself.
func (s *Session) prefillRun(ctx context.Context, r conductor.Ready, p llamacpp.Props, job *chainJob) chainEvent {
	svc := s.svc
	slot := -1
	if q := svc.queue; q != nil {
		slot = q.affinity(s)
	}
	start := time.Now()
	var tm *engine.Timings
	a, err := svc.build(r, p, slot, nil)
	if err == nil {
		if job.user != nil {
			tm, err = a.Prefill(ctx, job.history, *job.user)
		} else if cp, ok := a.(cutPrefiller); ok && job.expect > 0 {
			tm, err = cp.PrefillHistoryExpecting(ctx, job.history, job.expect)
		} else if hp, ok := a.(historyPrefiller); ok {
			tm, err = hp.PrefillHistory(ctx, job.history)
		} else {
			err = agent.ErrNoPrefill
		}
	}
	took := time.Since(start)
	id := s.ID()
	if job.expect > 0 && errors.Is(err, agent.ErrNothingToPrefill) {
		// The cut leaves no earlier image to re-evaluate: the shortened prompt's text is cheap in the next
		// request itself. Nothing failed (every screenshot example logged it as a warning).
		svc.cfg.Logger.Debug("the image window's cut leaves no image to re-evaluate", "session", id)
		return chainEvent{kind: evPrefilled}
	}
	s.mu.Lock()
	job.note.runs = append(job.note.runs, prefillRun{images: job.images, start: start, took: took, err: err})
	s.mu.Unlock()
	if err != nil {
		svc.cfg.Logger.Warn("prefill failed; the images will be encoded with the next request", "session", id, "err", err)
		svc.recordPrefillFailed(id, job.images, took, err)
		return chainEvent{kind: evPrefilled, failed: true}
	}
	svc.cfg.Logger.Info("prefilled", "session", id, "images", job.images, "history", job.user == nil, "took", took)
	source := "attached"
	switch {
	case job.expect > 0:
		source = "cut"
	case job.user == nil:
		source = "history"
	}
	svc.recordPrefill(id, job.images, took, tm, source)
	if job.expect > 0 {
		return chainEvent{kind: evPrefilled}
	}
	svc.observe(svc.evalSample(tm, job.tokens, svc.measuredTextRate()))
	return chainEvent{kind: evPrefilled}
}

// contextOf is what the engine's cache holds for a conversation, as the scheduler counts it.
func contextOf(history []agent.Message, imageTokens func(tools.Image) int) swap.Context {
	var c swap.Context
	for _, m := range history {
		for _, im := range m.Images {
			c.Images++
			c.ImageTokens += imageTokens(im)
		}
		if m.Timings != nil {
			c.TextTokens = m.Timings.PromptN + m.Timings.CacheN + m.Timings.PredictedN - c.ImageTokens
		}
	}
	c.TextTokens = max(c.TextTokens, 0)
	return c
}
