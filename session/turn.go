package session

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/engine/swap"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/tools"
)

// Session is one open conversation. Its methods are safe for concurrent use; turns run one at a time.
type Session struct {
	svc     *Service
	id      string
	title   string
	created bool
	refs    int
	lock    chan struct{} // one turn at a time; a channel so waiting respects ctx

	mu         sync.Mutex // guards the fields below
	history    []agent.Message
	pending    []tools.Image
	pendBytes  int64
	knownSince time.Time
	prefilled  int
	prefill    chan struct{} // closed when the latest prefill ended
	turns      int
	records    []swap.StepRecord // finished steps, for the scheduler
	notes      []*aheadNote      // actions taken for the next message, for --explain
	busy       bool
	queued     int
}

// ID is the session's id (a stored session's, or a process-local one without a store).
func (s *Session) ID() string { return s.id }

// History returns a copy of the conversation as the next request will send it.
func (s *Session) History() []agent.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]agent.Message(nil), s.history...)
}

// Pending is how many images are attached for the next message.
func (s *Session) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// Close releases the session; the last Close of a session forgets its in-memory state (a stored session can be
// opened again).
func (s *Session) Close() {
	s.waitPrefill()
	svc := s.svc
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if s.refs--; s.refs <= 0 {
		delete(svc.open, s.id)
	}
}

// CheckImage applies the image policy without attaching: the engine must be able to see, and the bytes must be
// an acceptable image. Front ends that take images with the message (ask, run, MCP) call Turn with them; this is
// for refusing early.
func (s *Session) CheckImage(data []byte) (tools.Image, error) { return s.svc.CheckImage(data) }

// CheckImage applies the image policy of the service: see Session.CheckImage. Front ends that create a session
// per request check images with it first, so a refused image leaves no session behind.
func (s *Service) CheckImage(data []byte) (tools.Image, error) {
	if s.cfg.Vision == VisionNo {
		return tools.Image{}, fmt.Errorf("%w: start visor with --mmproj FILE.gguf (the model's projector) to send images", ErrNoVision)
	}
	im, err := s.cfg.Images.Check(data)
	if err != nil {
		return tools.Image{}, err
	}
	return tools.Image{MIME: im.MIME, Data: im.Data}, nil
}

// Attach takes an image for the next message and has the engine evaluate it at once, in the background, so its
// encode (and an engine's MTP↔vision swap) happens while the user is still typing. At most one prefill per
// session runs: images attached meanwhile are taken by one more prefill after it, so a burst of N attachments
// costs two requests, not N. (Each request carries the images before the new ones, since a prompt is sent whole;
// the server's cache keeps those from being encoded again.)
func (s *Session) Attach(ctx context.Context, data []byte) (tools.Image, error) {
	im, err := s.CheckImage(data)
	if err != nil {
		return im, err
	}
	cfg := s.svc.cfg
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending)+1 > cfg.MaxPendingImages {
		return im, fmt.Errorf("%w: this message already has %d images, the most one message may carry: send it, then attach more to the next one", ErrLimit, len(s.pending))
	}
	if s.pendBytes+int64(len(im.Data)) > cfg.MaxPendingBytes {
		return im, fmt.Errorf("%w: the attached images would pass %d MiB for one message: send this message first", ErrLimit, cfg.MaxPendingBytes>>20)
	}
	if held := imageBytes(s.history) + s.pendBytes; held+int64(len(im.Data)) > cfg.MaxSessionImageBytes {
		return im, fmt.Errorf("%w: this conversation already holds %s of images and this one would pass its %s limit "+
			"(every image stays in the conversation): start a new session", ErrLimit, size(held), size(cfg.MaxSessionImageBytes))
	}
	if len(s.pending) == 0 {
		s.knownSince = time.Now()
	}
	s.pending = append(s.pending, im)
	s.pendBytes += int64(len(im.Data))
	if !cfg.NoPrefill && s.prefill == nil {
		if note := s.aheadLocked(); note != nil {
			done := make(chan struct{})
			s.prefill = done
			go s.prefillChain(context.WithoutCancel(ctx), done, note)
		}
	}
	return im, nil
}

// aheadLocked asks the scheduler what to do now that the lookahead changed, and returns the prefill action it
// chose (nil: none), kept for --explain with the others. Called with s.mu held. Without a scheduler every
// attached image is prefilled at once.
func (s *Session) aheadLocked() *aheadNote {
	sched := s.svc.scheduler()
	if sched == nil {
		n := &aheadNote{action: swap.Action{Kind: swap.ActPrefill, Images: make([]int, len(s.pending)),
			Reason: "every attached image is evaluated at once"}, carried: "yes", at: time.Now()}
		s.notes = append(s.notes, n)
		return n
	}
	obs := swap.Observation{Now: time.Since(s.svc.started), Profile: s.svc.currentProfile(), Compiled: true,
		Context: contextOf(s.history, s.svc.imageTokens), History: s.records, LastRelaunch: -1}
	for i, im := range s.pending {
		obs.Pending = append(obs.Pending, swap.PendingImage{ID: i, Tokens: s.svc.imageTokens(im), Known: time.Since(s.svc.started)})
	}
	var prefill *aheadNote
	for _, a := range sched.Plan(obs) {
		carried := "yes"
		n := &aheadNote{action: a, at: time.Now()}
		switch a.Kind {
		case swap.ActPrefill:
			prefill = n
		case swap.ActRelaunch:
			carried = s.svc.relaunch(a.Profile)
		default:
			carried = "no: the conductor warms the engine up at start"
		}
		n.carried = carried
		s.notes = append(s.notes, n)
		s.svc.recordDecision(s.id, a, carried)
	}
	return prefill
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

// prefillChain evaluates the pending images until it has caught up with them.
func (s *Session) prefillChain(ctx context.Context, done chan struct{}, note *aheadNote) {
	defer close(done)
	sent := 0
	for {
		s.mu.Lock()
		if len(s.pending) == sent || len(s.pending) == 0 {
			s.prefill = nil
			s.mu.Unlock()
			return
		}
		prev := s.prefilled
		sent = len(s.pending)
		history := append([]agent.Message(nil), s.history...)
		user := agent.Message{Role: "user", Images: append([]tools.Image(nil), s.pending...)}
		s.mu.Unlock()
		r, p, err := s.svc.ready(ctx, false)
		if err == nil {
			var a Agent
			if a, err = s.svc.build(r, p, nil); err == nil {
				start := time.Now()
				var tm *engine.Timings
				tm, err = a.Prefill(ctx, history, user)
				s.mu.Lock()
				note.runs = append(note.runs, prefillRun{images: len(user.Images), start: start, took: time.Since(start), err: err})
				s.mu.Unlock()
				if err == nil {
					s.mu.Lock()
					s.prefilled = len(user.Images)
					s.mu.Unlock()
					took := time.Since(start)
					s.svc.cfg.Logger.Info("prefilled", "session", s.id, "images", len(user.Images), "took", took)
					s.svc.recordPrefill(s.id, len(user.Images), took, tm)
					// Images an earlier prefill evaluated come from the cache: only the new ones are encoded.
					tokens := 0
					for _, im := range user.Images[min(prev, len(user.Images)):] {
						tokens += s.svc.imageTokens(im)
					}
					s.svc.observe(s.svc.evalSample(tm, tokens, s.svc.measuredTextRate()))
				}
			}
		}
		if err != nil {
			s.svc.cfg.Logger.Warn("prefill failed; the images will be encoded with the question", "err", err)
		}
	}
}

func size(n int64) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d bytes", n)
}

func imageBytes(msgs []agent.Message) int64 {
	var n int64
	for _, m := range msgs {
		for _, im := range m.Images {
			n += int64(len(im.Data))
		}
	}
	return n
}

// ClearAttachments drops the images attached for the next message.
func (s *Session) ClearAttachments() {
	s.waitPrefill()
	s.mu.Lock()
	s.pending, s.pendBytes, s.prefilled, s.notes = nil, 0, 0, nil
	s.mu.Unlock()
}

func (s *Session) waitPrefill() {
	s.mu.Lock()
	p := s.prefill
	s.mu.Unlock()
	if p != nil {
		<-p
	}
}

func (s *Session) lookahead() SessionLookahead {
	s.mu.Lock()
	defer s.mu.Unlock()
	return SessionLookahead{ID: s.id, PendingImages: len(s.pending), PendingBytes: s.pendBytes, KnownSince: s.knownSince,
		Prefilled: s.prefilled, Busy: s.busy, Queued: s.queued}
}

// Result is what a turn did.
type Result struct {
	agent.Finished
	// SessionID is where the turn was stored; it differs from the session's id after a compaction moved the
	// conversation into a linked session.
	SessionID string
	Added     []agent.Message
}

// Turn sends the user's text with the attached images (and extra images, already checked with CheckImage or
// taken here) and runs the agent until it answers. Events stream to emit, one at a time. A failed turn returns
// an error wrapping ErrNoVision, ErrRejected, ErrEngineCrashed or the engine's error; the session stays usable.
func (s *Session) Turn(ctx context.Context, text string, extra []tools.Image, emit func(agent.Event)) (Result, error) {
	if emit == nil {
		emit = func(agent.Event) {}
	}
	svc := s.svc
	for i, im := range extra {
		if _, err := s.CheckImage(im.Data); err != nil {
			return Result{SessionID: s.id}, fmt.Errorf("image %d: %w", i+1, err)
		}
	}
	s.mu.Lock()
	s.queued++
	s.mu.Unlock()
	select {
	case s.lock <- struct{}{}:
	case <-ctx.Done():
		s.mu.Lock()
		s.queued--
		s.mu.Unlock()
		return Result{SessionID: s.id}, ctx.Err()
	}
	defer func() { <-s.lock }()
	sent := time.Now()
	s.waitPrefill()
	waited := time.Since(sent)
	s.mu.Lock()
	var explained []string
	for _, n := range s.notes {
		explained = append(explained, n.explain(sent, waited))
	}
	s.notes = nil
	userAhead := len(extra) == 0 && len(s.pending) > 0 && s.prefilled == len(s.pending)
	s.queued--
	s.busy = true
	user := agent.Message{Role: "user", Content: text, Images: append(append([]tools.Image(nil), s.pending...), extra...)}
	history := append([]agent.Message(nil), s.history...)
	s.mu.Unlock()
	for _, line := range explained {
		emit(agent.Explain{Text: line})
	}

	defer func() {
		s.mu.Lock()
		s.busy = false
		s.mu.Unlock()
	}()

	// Recover, not EnsureReady: a server that died while the user was typing is found (one /health request) and
	// brought back before the message goes out, instead of failing the turn.
	svc.touch(s.id)
	r, props, err := svc.ready(ctx, true)
	if err != nil {
		return Result{SessionID: s.id}, fmt.Errorf("the engine: %w", err)
	}
	if len(user.Images) > 0 && !props.Vision && svc.cfg.Vision != VisionYes {
		return Result{SessionID: s.id}, fmt.Errorf("%w: start visor with --mmproj FILE.gguf (the model's projector) to send images", ErrNoVision)
	}
	watch := &turnWatch{svc: svc, session: s.id, userAhead: userAhead, profile: svc.currentProfile()}
	a, err := svc.build(r, props, watch)
	if err != nil {
		return Result{SessionID: s.id}, err
	}
	sessionID := s.id
	if svc.cfg.Store != nil {
		if sessionID, history, err = s.compact(ctx, r, props, history, emit); err != nil {
			return Result{SessionID: s.id}, err
		}
	}
	var store agent.TurnStore
	if svc.cfg.Store != nil {
		store = svc.cfg.Store
	}
	watch.emit = emit
	f, added, storeErr := agent.RunStored(ctx, a, store, sessionID, history, user, watch.event)
	res := Result{Finished: f, SessionID: sessionID, Added: added}
	s.mu.Lock()
	s.turns++
	s.mu.Unlock()
	if f.Err != nil && ctx.Err() == nil {
		if rejected(f.Err) {
			// Replaying a turn the engine refused would fail every later turn: keep it for the record, never send it.
			if svc.cfg.Store != nil {
				storeErr = errors.Join(storeErr, svc.cfg.Store.MarkRejected(context.WithoutCancel(ctx), sessionID))
			}
			s.mu.Lock()
			s.pending, s.pendBytes, s.prefilled = nil, 0, 0
			s.mu.Unlock()
			return res, errors.Join(fmt.Errorf("%w: %v; the turn is kept but will not be sent again", ErrRejected, f.Err), storeErr)
		}
		// The conductor checks the server (one /health request; a dead one is restarted) and says, by a new
		// launch generation, whether the failure was the engine's.
		back, _, rerr := svc.ready(ctx, true)
		if rerr != nil {
			return res, fmt.Errorf("%w (%v), and restarting it failed: %w", ErrEngineCrashed, f.Err, rerr)
		}
		if back.Generation != r.Generation {
			emit(agent.Notice{Text: "the engine crashed and was restarted: send the message again"})
			s.keep(sessionID, added, watch.measured())
			return res, errors.Join(fmt.Errorf("%w: %v; it was restarted: send the message again", ErrEngineCrashed, f.Err), storeErr)
		}
	}
	s.keep(sessionID, added, watch.measured())
	if f.Err != nil {
		return res, errors.Join(f.Err, storeErr)
	}
	return res, storeErr
}

// keep appends a turn's messages to the in-memory history and moves the session to where it was stored.
func (s *Session) keep(sessionID string, added []agent.Message, samples []swap.Sample) {
	s.svc.observe(samples...)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.history = append(s.history, added...)
	for _, m := range added {
		if m.Role == "assistant" && m.Timings != nil {
			r := swap.StepRecord{PromptTokens: m.Timings.PromptN, OutputTokens: m.Timings.PredictedN, Acceptance: -1}
			if m.Timings.DraftN > 0 {
				r.Acceptance = float64(m.Timings.DraftNAccepted) / float64(m.Timings.DraftN)
			}
			s.records = append(s.records, r)
		}
	}
	s.pending, s.pendBytes, s.prefilled = nil, 0, 0
	if sessionID != s.id {
		svc := s.svc
		svc.touch(sessionID)
		svc.mu.Lock()
		delete(svc.open, s.id)
		s.id = sessionID
		svc.open[s.id] = s
		svc.mu.Unlock()
	}
}

// rejected tells a request the engine refused for what it carried (HTTP 4xx: an image it could not decode, a
// prompt over its context) from a failure of the engine itself.
func rejected(err error) bool {
	st := engine.StatusCode(err)
	return st >= 400 && st < 500 && st != http.StatusUnauthorized && st != http.StatusForbidden && st != http.StatusNotFound &&
		st != http.StatusTooManyRequests
}

// compact starts a linked session from a summary when the stored conversation fills most of the server's
// context, keeping the last user turns verbatim, so long sessions keep working instead of failing with "exceeds
// the available context size". The parent session stays whole for search and export.
func (s *Session) compact(ctx context.Context, r conductor.Ready, props llamacpp.Props, history []agent.Message,
	emit func(agent.Event)) (string, []agent.Message, error) {
	svc := s.svc
	if !agent.NeedsCompaction(history, props.NCtx, svc.cfg.CompactAt) {
		return s.id, history, nil
	}
	old, recent := agent.SplitForCompaction(history, svc.cfg.KeepTurns)
	if len(old) == 0 {
		return s.id, history, nil
	}
	emit(agent.Notice{Text: fmt.Sprintf("compacting: the session uses %d of %d context tokens; summarizing %d older messages …",
		agent.ContextUsed(history), props.NCtx, len(old))})
	summary, err := agent.Summarize(ctx, r.Client, old, 1024)
	if err != nil {
		return s.id, nil, fmt.Errorf("compact session %s: %w", s.id, err)
	}
	stored, err := svc.cfg.Store.Messages(ctx, s.id)
	if err != nil {
		return s.id, nil, err
	}
	stored = resumable(stored)
	var keepFrom int64
	if len(recent) > 0 && len(old) < len(stored) {
		keepFrom = stored[len(old)].ID
	}
	text := "Summary of the earlier conversation:\n" + summary
	linked, err := svc.cfg.Store.CreateLinkedSession(ctx, s.id, memory.Message{Role: "user", Content: text}, keepFrom)
	if err != nil {
		return s.id, nil, err
	}
	emit(agent.Notice{Text: fmt.Sprintf("compacted into session %s", linked.ID)})
	history = append([]agent.Message{{Role: "user", Content: text}}, recent...)
	s.mu.Lock()
	s.history = history
	s.mu.Unlock()
	return linked.ID, history, nil
}

// resumable lines stored messages up with agent.Resumable's output (rejected turns and a cut tail dropped).
func resumable(msgs []memory.Message) []memory.Message {
	out := msgs[:0:0]
	for _, m := range msgs {
		if !m.Rejected {
			out = append(out, m)
		}
	}
	for len(out) > 0 && out[len(out)-1].Role == "assistant" && len(out[len(out)-1].ToolCalls) > 0 {
		out = out[:len(out)-1]
	}
	return out
}
