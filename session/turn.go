package session

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
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
	svc   *Service
	id    string // changed by compaction (keep) under mu and svc.mu: read it under either, or its own turn
	title string
	refs  int
	lock  chan struct{} // one turn at a time; a channel so waiting respects ctx

	mu        sync.Mutex // guards the fields below; held only to read or change them, never across I/O
	history   []agent.Message
	pending   []tools.Image
	pendingAt []time.Time // when each pending image became known
	turnAt    time.Time   // when the running (or last) turn began: an attachment's lead ends there
	// ahead is the ahead-of-time machine's state (ahead.go): what the engine's cache holds of this session and
	// what its chain is doing. prefill is closed when the running chain ends; nil when none runs. chainNote is
	// the note the chain's prefill runs are kept in, for --explain.
	ahead     chainState
	prefill   chan struct{}
	chainNote *aheadNote
	used      time.Time         // last opened or answered: after a restart the engine re-warms this session first
	records   []swap.StepRecord // finished steps, for the scheduler
	notes     []*aheadNote      // actions taken for the next message, for --explain
	queued    int
	stats     Stats

	// status is the snapshot Status returns, published under mu at every change, read without it.
	status atomic.Pointer[Status]

	// rowMade says the session has its row in the store (store.go); it turns true once, under evMu, which also
	// guards held: the engine events kept for the row until then. evMu is taken before mu, never inside it.
	rowMade atomic.Bool
	evMu    sync.Mutex
	held    []memory.EngineEvent
}

// ID is the session's id (a stored session's, or a process-local one without a store). Compaction moves the
// session to its linked one while front ends read the id (a web page's list, a gateway's log), so it is read
// under mu, as keep writes it.
func (s *Session) ID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

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
	_ = s.WaitAhead(context.Background())
	svc := s.svc
	svc.mu.Lock()
	last := false
	if s.refs--; s.refs <= 0 {
		delete(svc.open, s.id)
		last = true
		if !s.isStored() {
			delete(svc.touched, s.id)
		}
	}
	svc.mu.Unlock()
	if last && !s.isStored() {
		// Never stored: what was kept for its row goes with it.
		s.evMu.Lock()
		s.held = nil
		s.evMu.Unlock()
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
// the server's cache keeps those from being encoded again.) An image attached while a turn runs is for the
// message after it: it is prefilled as soon as that turn's answer is in.
func (s *Session) Attach(ctx context.Context, data []byte) (tools.Image, error) {
	im, err := s.CheckImage(data)
	if err != nil {
		return im, err
	}
	s.mu.Lock()
	if err := s.boundsLocked([]tools.Image{im}, true); err != nil {
		s.mu.Unlock()
		return im, err
	}
	s.queueLocked([]tools.Image{im})
	job := s.stepLocked(chainEvent{kind: evAttached})
	s.mu.Unlock()
	s.start(ctx, job)
	return im, nil
}

// boundsLocked checks that the next message can take ims beside the images attached for it (at most
// MaxPendingImages, MaxPendingBytes) and that the conversation can hold them (MaxSessionImageBytes: every image
// stays in it and goes out again with every request). attaching words the error for one more attachment; else
// for the images sent with a message.
func (s *Session) boundsLocked(ims []tools.Image, attaching bool) error {
	if len(ims) == 0 {
		return nil
	}
	cfg := s.svc.cfg
	add := imagesSize(ims)
	pendBytes := imagesSize(s.pending)
	switch {
	case attaching && len(s.pending)+len(ims) > cfg.MaxPendingImages:
		return fmt.Errorf("%w: this message already has %d images, the most one message may carry: send it, then attach more to the next one", ErrLimit, len(s.pending))
	case len(s.pending)+len(ims) > cfg.MaxPendingImages:
		return fmt.Errorf("%w: the message has %d images (%d sent with it, %d attached before), the most one message may carry is %d: send them over more messages",
			ErrLimit, len(s.pending)+len(ims), len(ims), len(s.pending), cfg.MaxPendingImages)
	case attaching && pendBytes+add > cfg.MaxPendingBytes:
		return fmt.Errorf("%w: the attached images would pass %d MiB for one message: send this message first", ErrLimit, cfg.MaxPendingBytes>>20)
	case pendBytes+add > cfg.MaxPendingBytes:
		return fmt.Errorf("%w: the message's images (%s) pass %d MiB for one message: send them over more messages", ErrLimit, size(pendBytes+add), cfg.MaxPendingBytes>>20)
	}
	if held := imageBytes(s.history) + pendBytes; held+add > cfg.MaxSessionImageBytes {
		return fmt.Errorf("%w: this conversation already holds %s of images and %s more would pass its %s limit "+
			"(every image stays in the conversation): start a new session", ErrLimit, size(held), size(add), size(cfg.MaxSessionImageBytes))
	}
	return nil
}

// queueLocked adds images to the next message.
func (s *Session) queueLocked(ims []tools.Image) {
	if len(ims) == 0 {
		return
	}
	for _, im := range ims {
		s.pending = append(s.pending, im)
		s.pendingAt = append(s.pendingAt, time.Now())
	}
}

// prefillOnce has the engine evaluate history and user's images, up to where user's text will go, on server
// slot slot (any when < 0).
func (svc *Service) prefillOnce(ctx context.Context, history []agent.Message, user agent.Message, slot int) (*engine.Timings, error) {
	r, p, err := svc.ready(ctx, false)
	if err != nil {
		return nil, err
	}
	a, err := svc.build(r, p, slot, nil)
	if err != nil {
		return nil, err
	}
	return a.Prefill(ctx, history, user)
}

// WaitAhead waits until the session's background prefill (attached images, a resumed history) has ended, or ctx
// is done. A turn does not need it: it waits for a running prefill itself, since the prefill's work is its own.
func (s *Session) WaitAhead(ctx context.Context) error {
	s.mu.Lock()
	p := s.prefill
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	select {
	case <-p:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func countImages(msgs []agent.Message) int {
	n := 0
	for _, m := range msgs {
		n += len(m.Images)
	}
	return n
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
		n += imagesSize(m.Images)
	}
	return n
}

func imagesSize(ims []tools.Image) int64 {
	var n int64
	for _, im := range ims {
		n += int64(len(im.Data))
	}
	return n
}

// ClearAttachments drops the images attached for the next message.
func (s *Session) ClearAttachments() {
	_ = s.WaitAhead(context.Background())
	s.mu.Lock()
	s.pending, s.pendingAt = nil, nil
	s.stepLocked(chainEvent{kind: evCleared})
	// The attachments' notes go with them; a history prefill's still explains the next message.
	var kept []*aheadNote
	for _, n := range s.notes {
		if n.history {
			kept = append(kept, n)
		}
	}
	s.notes = kept
	s.mu.Unlock()
}

// dropSentLocked removes the first n attachments, which a turn took; any attached since are the next message's.
func (s *Session) dropSentLocked(n int) {
	n = min(n, len(s.pending))
	s.pending = append([]tools.Image(nil), s.pending[n:]...)
	s.pendingAt = append([]time.Time(nil), s.pendingAt[n:]...)
}

func (s *Session) lookahead() SessionLookahead {
	st := s.Status()
	return SessionLookahead{ID: st.ID, PendingImages: st.PendingImages, PendingBytes: st.PendingBytes, KnownSince: st.KnownSince,
		Prefilled: st.Prefilled, Busy: st.Busy, Queued: st.Queued}
}

// Result is what a turn did.
type Result struct {
	agent.Finished
	// SessionID is where the turn was stored; it differs from the session's id after a compaction moved the
	// conversation into a linked session.
	SessionID string
	Added     []agent.Message
	// Stats are the turn's numbers.
	Stats TurnStats
	// Stored: the session has its row in the store after the turn. A new session gets it when the engine first
	// answers, so a turn that failed before leaves no session to continue.
	Stored bool
}

// Turn sends the user's text with the attached images and extra, images that came from CheckImage (every front
// end checks at intake, before it opens a session: decoding a 1440p screenshot again would cost ~35 ms more on
// the turn's critical path), and runs the agent until it answers. extra counts toward the message's and the
// conversation's bounds (ErrLimit). Events stream to emit, one at a time. A failed turn returns
// an error wrapping ErrNoVision, ErrRejected, ErrEngineCrashed or the engine's error; the session stays usable.
// ErrNotStored alone means the turn ran and its answer (Result) stands, but the store did not keep it.
func (s *Session) Turn(ctx context.Context, text string, extra []tools.Image, emit func(agent.Event)) (Result, error) {
	if emit == nil {
		emit = func(agent.Event) {}
	}
	x := &explains{emit: emit}
	res, err := s.turn(ctx, text, extra, nil, x.event)
	x.keep(s, res)
	return res, err
}

// turn is Turn; next are images the message after this one carries, known now: they are queued as that
// message's attachments once this turn's own are taken, so the engine evaluates them as soon as this turn's
// answer is in.
func (s *Session) turn(ctx context.Context, text string, extra, next []tools.Image, emit func(agent.Event)) (Result, error) {
	if emit == nil {
		emit = func(agent.Event) {}
	}
	svc := s.svc
	s.mu.Lock()
	s.queued++
	s.publishLocked()
	s.mu.Unlock()
	select {
	case s.lock <- struct{}{}:
	case <-ctx.Done():
		s.mu.Lock()
		s.queued--
		s.publishLocked()
		id := s.id // another turn of this session may be compacting it, which moves the id under s.mu
		s.mu.Unlock()
		return Result{SessionID: id}, ctx.Err()
	}
	defer func() { <-s.lock }()
	// Busy first, so nothing starts another prefill; then wait for the running one, whose work this turn's
	// request reuses (a request sent beside it would evaluate the same prefix again).
	s.mu.Lock()
	s.queued--
	if svc.cfg.Store == nil && s.title == "" {
		s.title = Title(text) // a stored session is titled with its row
	}
	s.turnAt = time.Now()
	s.stepLocked(chainEvent{kind: evTurnStarted})
	running := s.prefill != nil
	s.mu.Unlock()
	crashed := false
	defer func() {
		// What the next request carries and the cache lacks: images queued for it, or, after the engine
		// restarted under this turn, the whole history.
		s.mu.Lock()
		s.used = time.Now()
		job := s.stepLocked(chainEvent{kind: evTurnEnded, crashed: crashed})
		s.mu.Unlock()
		s.start(ctx, job)
	}()
	sent := time.Now()
	if err := s.WaitAhead(ctx); err != nil {
		return Result{SessionID: s.id}, err
	}
	waited := time.Since(sent)
	if running {
		// The request waits for the prefill's end: that part of its time is exposed, not hidden.
		svc.recordPrefillWait(s.id, waited)
	}
	s.mu.Lock()
	// The images sent with the message count toward the same bounds as attached ones (an MCP call or ask
	// --image brings them with its text).
	if err := s.boundsLocked(extra, false); err != nil {
		s.mu.Unlock()
		return Result{SessionID: s.id}, err
	}
	var explained []string
	for _, n := range s.notes {
		explained = append(explained, n.explain(sent, waited))
	}
	s.notes = nil
	// The attachments were all evaluated ahead, by the launch aheadGen: the request finds them in its cache.
	userAhead := len(extra) == 0 && len(s.pending) > 0 && s.ahead.Prefilled == len(s.pending)
	aheadGen := s.ahead.WarmGen
	taken := len(s.pending)
	user := agent.Message{Role: "user", Content: text, Images: append(append([]tools.Image(nil), s.pending...), extra...)}
	history := append([]agent.Message(nil), s.history...)
	s.queueLocked(next)
	s.mu.Unlock()
	for _, line := range explained {
		emit(agent.Explain{Text: line})
	}
	slot := -1
	if q := svc.queue; q != nil {
		// Wait for the engine behind the other sessions' turns; while waiting, this turn's images are evaluated
		// ahead when a server slot is free, and the running turns' events tell the queue when one is.
		t := &ticket{sess: s, history: history, user: user, emit: emit}
		release, err := q.enter(ctx, t)
		if err != nil {
			return Result{SessionID: s.id}, err
		}
		defer release()
		slot = t.slot
		inner := emit
		emit = func(ev agent.Event) {
			q.observe(t, ev)
			inner(ev)
		}
	}

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
	watch := &turnWatch{svc: svc, session: s.id, userAhead: userAhead && aheadGen == r.Generation, profile: svc.currentProfile()}
	a, err := svc.build(r, props, slot, watch)
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
	var ts *turnStore
	if svc.cfg.Store != nil {
		ts = &turnStore{s: s, st: svc.cfg.Store, ctx: ctx, text: text}
		store = ts
	}
	shown := emit
	watch.emit = func(ev agent.Event) {
		if ts != nil && engineOutput(ev) {
			// The engine answers: a new session is stored from here (its row, the turn, the events kept for it).
			if err := ts.answered(ctx, sessionID); err != nil {
				svc.cfg.Logger.Warn("store the session", "session", sessionID, "err", err)
			}
		}
		if sf, ok := ev.(agent.StepFinished); ok {
			s.observeStep(sf) // before the front end hears of it, so its status line has the step's numbers
		}
		shown(ev)
	}
	f, added, storeErr := agent.RunStored(ctx, a, store, sessionID, history, user, watch.event)
	if ts != nil {
		storeErr = errors.Join(storeErr, ts.err)
	}
	res := Result{Finished: f, SessionID: sessionID, Added: added, Stats: turnStats(f, added, time.Since(sent)), Stored: s.isStored()}
	kept := added
	if ts != nil && !ts.begun {
		// Nothing of the turn was stored (the engine never answered): it leaves nothing in memory either, so the
		// conversation stays what the store has.
		kept = nil
	} else if ts != nil {
		s.titleFrom(ctx, sessionID, text)
	}
	s.mu.Lock()
	s.stats.Turns++
	s.publishLocked()
	s.mu.Unlock()
	if f.Err != nil && ctx.Err() == nil {
		if rejected(f.Err) {
			// Replaying a turn the engine refused would fail every later turn: keep it for the record, never send it.
			if ts != nil {
				storeErr = errors.Join(storeErr, ts.refused(ctx, sessionID))
				if ts.begun {
					storeErr = errors.Join(storeErr, svc.cfg.Store.MarkRejected(context.WithoutCancel(ctx), sessionID))
				}
				res.Stored = s.isStored()
			}
			s.mu.Lock()
			s.dropSentLocked(taken)
			s.stepLocked(chainEvent{kind: evDropped})
			s.mu.Unlock()
			return res, errors.Join(fmt.Errorf("%w: %v%s; the turn is kept but will not be sent again", ErrRejected, f.Err,
				overflowHint(f.Err, svc.cfg.Agent.Tools, props.NCtx)), storeErr)
		}
		// The conductor checks the server (one /health request; a dead one is restarted) and says, by a new
		// launch generation, whether the failure was the engine's.
		back, _, rerr := svc.ready(ctx, true)
		if rerr != nil {
			return res, fmt.Errorf("%w (%v), and restarting it failed: %w", ErrEngineCrashed, f.Err, rerr)
		}
		if back.Generation != r.Generation {
			emit(agent.Notice{Text: "the engine crashed and was restarted: send the message again"})
			crashed = true
			s.keep(sessionID, kept, taken, 0, watch.measured())
			return res, errors.Join(fmt.Errorf("%w: %v; it was restarted: send the message again", ErrEngineCrashed, f.Err), storeErr)
		}
	}
	gen := 0 // the cache holds this history only when the turn ended well
	if f.Err == nil {
		gen = r.Generation
	}
	s.keep(sessionID, kept, taken, gen, watch.measured())
	if f.Err != nil {
		return res, errors.Join(f.Err, storeErr)
	}
	if storeErr != nil {
		return res, fmt.Errorf("%w: %w", ErrNotStored, storeErr)
	}
	return res, nil
}

// keep measures the turn's requests (samples) into the engine's cost model, appends the turn's messages to the
// in-memory history, drops the taken attachments (those queued since stay for the next message) and moves the
// session to where it was stored. gen is the engine launch whose cache now holds the history, 0 when unknown.
func (s *Session) keep(sessionID string, added []agent.Message, taken, gen int, samples []swap.Sample) {
	s.svc.observe(samples...)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.svc.noteRequests(s.history, added)
	s.history = append(s.history, added...)
	first := true
	for _, m := range added {
		if m.Role == "assistant" && m.Timings != nil {
			r := swap.StepRecord{PromptTokens: m.Timings.PromptN, OutputTokens: m.Timings.PredictedN, Acceptance: -1}
			if m.Timings.DraftN > 0 {
				r.Acceptance = float64(m.Timings.DraftNAccepted) / float64(m.Timings.DraftN)
			}
			if first {
				// The attachments the turn took: how long before it they were known (the scheduler's lead).
				for i := 0; i < taken && i < len(s.pendingAt); i++ {
					r.Images = append(r.Images, swap.ImageRecord{Tokens: s.svc.imageTokens(s.pending[i]), Lead: max(s.turnAt.Sub(s.pendingAt[i]), 0)})
				}
			}
			first = false
			s.records = append(s.records, r)
		}
	}
	s.dropSentLocked(taken)
	if sessionID != s.id {
		svc := s.svc
		svc.touch(sessionID)
		svc.mu.Lock()
		delete(svc.open, s.id)
		s.id = sessionID
		svc.open[s.id] = s
		svc.mu.Unlock()
	}
	s.stepLocked(chainEvent{kind: evKept, gen: gen})
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
	// No launch's cache holds the compacted history (it starts with the summary), whatever its length: until a
	// turn on it ends well, every image in it counts as not evaluated.
	s.stepLocked(chainEvent{kind: evCompacted})
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
