// Package session is the layer every front end stands on: it opens, resumes and forks conversations, keeps one
// lock per session, runs a turn (agent loop, storage, compaction, crash recovery), takes images in under one
// policy (package images), and knows each session's lookahead — what its next requests will carry — so the
// engine can prepare for them off the critical path (the attached image is prefilled at once). With
// Config.Slots, turns of all sessions queue for the engine, each pinned to one server slot, and a waiting turn's
// images are prefilled in a spare slot (queue.go; QueuedPrefill is the rule, which the gateway uses too). It
// measures what the engine's work costs (every request, prefill, warm-up and relaunch) into that engine's cost
// model, kept in the store, which the scheduler (engine/swap) plans with, and says why it did what it did
// (agent.Explain).
//
// `visor ask`, `run`, `chat`, `web`, `mcp serve` and the gateway are thin front ends over a Service: they parse
// input and render the typed event stream (agent.Event plus this package's Notice), and hold no policy. The
// service does not start engines (engine/conductor does) nor build tools (package tools does).
package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/agent/toolcall"
	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/engine/swap"
	"github.com/visorhq/visor/images"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/tools"
)

// Engine is what the service needs from the engine conductor; *conductor.Conductor implements it.
type Engine interface {
	EnsureReady(ctx context.Context) (conductor.Ready, error)
	Recover(ctx context.Context) (conductor.Ready, error)
}

// Store keeps conversations; *memory.Store implements it.
type Store interface {
	agent.TurnStore
	catalog
	CreateSession(ctx context.Context, sess memory.Session) (memory.Session, error)
	ResolveSessionID(ctx context.Context, prefix string) (string, error)
	Session(ctx context.Context, id string) (memory.Session, error)
	Messages(ctx context.Context, sessionID string) ([]memory.Message, error)
	CreateLinkedSession(ctx context.Context, parentID string, summary memory.Message, keepFrom int64) (memory.Session, error)
	Fork(ctx context.Context, sessionID string, atMessageID int64) (memory.Session, error)
	MarkRejected(ctx context.Context, sessionID string) error
	RecordEngineEvent(ctx context.Context, ev memory.EngineEvent) (int64, error)
	UpdateSession(ctx context.Context, sess memory.Session) error
	Lister
}

// AgentConfig is how each turn's agent is built.
type AgentConfig struct {
	Tools       *tools.Registry
	System      string
	MaxSteps    int
	MaxTokens   int
	ToolChoice  string
	Temperature *float32
	// Raw renders the tool prompt in visor and parses calls from text even where the server's template
	// renders tools; without it that happens only where the template cannot.
	Raw    bool
	Format toolcall.Format
	// ImageWindow bounds the images each request carries (window.go); the zero value lets the cost model choose.
	ImageWindow ImageWindow
}

// Vision says what is known about the engine's projector before it is loaded: a server visor starts has one
// exactly when a projector file was given; a remote one is known only once its /props is read.
type Vision int

const (
	VisionUnknown Vision = iota
	VisionYes
	VisionNo
)

// Config sets up a Service. Engine is required.
type Config struct {
	Engine Engine
	// Store keeps sessions; nil keeps them in this process only.
	Store Store
	Agent AgentConfig
	// Vision is known before any model load (see Vision), so an image for a model without a projector is refused
	// before the engine starts.
	Vision Vision
	// Images bounds one image; MaxPendingImages and MaxPendingBytes bound what one message may carry (defaults 8
	// and 64 MiB).
	Images           images.Limits
	MaxPendingImages int
	MaxPendingBytes  int64
	// AgentName and Model label stored sessions; EngineProfile is stored with a new session, for resuming it
	// with the same model and engine settings (cmd/visor writes JSON there).
	AgentName, Model, EngineProfile string
	// CompactAt is the share of the server's context a stored conversation may fill before older turns are
	// summarized into a linked session (default 0.75); KeepTurns user turns stay verbatim (default 2).
	CompactAt float64
	KeepTurns int
	// Prefill evaluates an attached image ahead of the question; default true (set NoPrefill to turn it off, for
	// baselines).
	NoPrefill bool
	// MaxSessionImageBytes bounds the image bytes one in-memory conversation holds (history and attachments),
	// since every image stays in it and is sent again with each turn; default 256 MiB.
	MaxSessionImageBytes int64
	// NewAgent builds a turn's agent for a ready engine; the default is agent.New with Agent's settings. It is a
	// seam for front-end tests that are about their own requests, not the model.
	NewAgent func(r conductor.Ready, p llamacpp.Props) (Agent, error)
	// Scheduler decides what to do ahead of each request from the lookahead (engine/swap): prefill attached
	// images now or wait for announced ones, relaunch into another profile. Nil prefills every attached image
	// at once. Profile is the engine's current profile for it (default resident, or text-only without vision).
	Scheduler *swap.Scheduler
	Profile   swap.Profile
	// Relauncher carries out the scheduler's relaunches; nil: the engine cannot relaunch (a remote server).
	Relauncher Relauncher
	// EngineCosts names a ready engine's cost model; with it every evaluation, generation and relaunch the
	// service observes is measured into that model (Costs keeps it between processes) and the scheduler plans
	// with it. Nil: the scheduler keeps Scheduler.Costs as given.
	EngineCosts func(r conductor.Ready) (EngineCosts, bool)
	Costs       CostBook
	// ImageTokens is how many prompt tokens a w×h image takes in this engine (its projector's rule); default
	// Qwen-VL's (swap.ImageTokens).
	ImageTokens func(w, h int) int
	// Slots is how many turns, of all sessions, use the engine at once; more wait in a queue, first come first
	// served. 0 sends every turn to the engine at once (a remote server queues for itself). ServerSlots is the
	// server's own slot count (llama-server --parallel), default Slots; each turn is pinned to one slot
	// (id_slot) so its conversation stays cached there. A server slot beyond those the admitted turns need
	// takes a queued turn's images while it waits, and the turn then runs on that slot.
	Slots, ServerSlots int
	Logger             *slog.Logger
}

// Agent is what a turn needs from the agent; *agent.Agent implements it.
type Agent interface {
	agent.Runner
	Prefill(ctx context.Context, history []agent.Message, user agent.Message) (*engine.Timings, error)
}

// Sentinel errors of a turn, wrapped with the details.
var (
	// ErrNoVision: an image for a model without a vision projector.
	ErrNoVision = errors.New("the model has no vision projector")
	// ErrRejected: the engine refused the turn for its content; the turn is stored as rejected and not replayed.
	ErrRejected = errors.New("the engine rejected the request")
	// ErrEngineCrashed: the engine died during the turn; it has been restarted and the message can be sent again.
	ErrEngineCrashed = errors.New("the engine crashed during the turn")
	// ErrBusy: another turn of the same session is running.
	ErrBusy = errors.New("the session is busy with another turn")
	// ErrLimit: an attachment would pass a bound of the message or the conversation.
	ErrLimit = errors.New("attachment limit reached")
	// ErrNotFound: no such session.
	ErrNotFound = errors.New("no such session")
	// ErrNotStored: the turn ran and its answer stands, but keeping it in the store failed.
	ErrNotStored = errors.New("the answer was not stored")
	// ErrBadInput: a title, a query or another value a front end passed on is unusable; the message says why.
	ErrBadInput = errors.New("bad input")
	// ErrNoStore: the service keeps no sessions (started without a store), so there is nothing to manage.
	ErrNoStore = errors.New("sessions are not stored (started with --no-store)")
)

// storeErr gives a store error the service's kind as well (ErrNotFound, ErrBadInput), so front ends tell
// outcomes apart by the service's errors without importing the store; the store's error stays in the chain.
func storeErr(err error) error {
	switch {
	case err == nil, errors.Is(err, ErrNotFound), errors.Is(err, ErrBadInput):
		return err
	case errors.Is(err, memory.ErrNotFound):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case errors.Is(err, memory.ErrInvalidInput), errors.Is(err, memory.ErrBadQuery):
		return fmt.Errorf("%w: %w", ErrBadInput, err)
	}
	return err
}

// Service runs sessions. It is safe for concurrent use; one turn runs at a time per session.
type Service struct {
	cfg Config

	mu          sync.Mutex
	open        map[string]*Session
	touched     map[string]bool // stored sessions that used the engine in this process: they get its events
	local       int
	started     time.Time
	profile     swap.Profile // the engine's current profile, for the scheduler
	relaunching bool
	propsMu     sync.Mutex
	props       map[int]llamacpp.Props // by engine generation
	lastGen     int                    // the newest generation in props
	queue       *engineQueue           // nil without Config.Slots
	costMu      sync.Mutex
	cost        *engineCosts // the running engine's, nil until it is first ready
	relaunchAt  bool         // a relaunch was reported and its ready event is still to come
	windows     windows      // the image window per engine launch, and the encoded images (window.go)
}

// New checks cfg and returns a Service.
func New(cfg Config) (*Service, error) {
	if cfg.Engine == nil {
		return nil, errors.New("session: Config.Engine is nil: pass the engine conductor")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.CompactAt <= 0 || cfg.CompactAt >= 1 {
		cfg.CompactAt = 0.75
	}
	if cfg.KeepTurns <= 0 {
		cfg.KeepTurns = 2
	}
	if cfg.MaxPendingImages <= 0 {
		cfg.MaxPendingImages = 8
	}
	if cfg.MaxPendingBytes <= 0 {
		cfg.MaxPendingBytes = 64 << 20
	}
	if cfg.MaxSessionImageBytes <= 0 {
		cfg.MaxSessionImageBytes = 256 << 20
	}
	if cfg.Profile == "" {
		cfg.Profile = swap.Resident
		if cfg.Vision == VisionNo {
			cfg.Profile = swap.TextOnly
		}
	}
	if cfg.AgentName == "" {
		cfg.AgentName = "visor"
	}
	if cfg.Slots < 0 || cfg.ServerSlots < 0 {
		return nil, fmt.Errorf("session: Config.Slots %d, ServerSlots %d: give 0 or more", cfg.Slots, cfg.ServerSlots)
	}
	svc := &Service{cfg: cfg, started: time.Now(), profile: cfg.Profile, open: map[string]*Session{}, touched: map[string]bool{}, props: map[int]llamacpp.Props{}}
	if cfg.Slots > 0 {
		svc.queue = newEngineQueue(svc, cfg.Slots, cfg.ServerSlots)
	}
	return svc, nil
}

// Stored reports whether sessions are kept in a store.
func (s *Service) Stored() bool { return s.cfg.Store != nil }

// OpenOptions say which session to open.
type OpenOptions struct {
	// Resume is the id (or a unique prefix) of a stored session to continue; empty starts a new one.
	Resume string
	// Title names a new session; the first message's text is used when empty.
	Title string
}

// Open starts or resumes a session. Opening the same stored session twice in one process gives the same
// *Session, so its lock is shared by every front end; Close releases it.
func (s *Service) Open(ctx context.Context, o OpenOptions) (*Session, error) {
	st := s.cfg.Store
	if st == nil {
		if o.Resume != "" {
			s.mu.Lock()
			sess := s.open[o.Resume]
			if sess != nil {
				sess.refs++
			}
			s.mu.Unlock()
			if sess == nil {
				return nil, fmt.Errorf("session %q: %w: sessions are not stored (no database), so only this process's own can be continued", o.Resume, ErrNotFound)
			}
			return sess, nil
		}
		s.mu.Lock()
		s.local++
		id := fmt.Sprintf("local-%d-%d", time.Now().Unix(), s.local)
		s.mu.Unlock()
		return s.register(&Session{svc: s, id: id, title: Title(o.Title)}), nil
	}
	if o.Resume == "" {
		// The row is made when the engine first answers in it (store.go): the id is chosen now.
		id, err := newSessionID()
		if err != nil {
			return nil, err
		}
		return s.register(&Session{svc: s, id: id, title: Title(o.Title)}), nil
	}
	s.mu.Lock()
	if sess := s.open[o.Resume]; sess != nil {
		// Open in this process, stored or not yet (a chat whose first answer is still to come).
		sess.refs++
		s.mu.Unlock()
		return sess, nil
	}
	s.mu.Unlock()
	full, err := st.ResolveSessionID(ctx, o.Resume)
	if err != nil {
		if errors.Is(err, memory.ErrNotFound) {
			return nil, fmt.Errorf("session %q: %w", o.Resume, storeErr(err)) // the store's error names visor sessions list
		}
		return nil, fmt.Errorf("session %q: %w: list them with `visor sessions list`", o.Resume, storeErr(err))
	}
	s.mu.Lock()
	if sess := s.open[full]; sess != nil {
		sess.refs++
		s.mu.Unlock()
		return sess, nil
	}
	s.mu.Unlock()
	msgs, err := st.Messages(ctx, full)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", full, err)
	}
	meta, err := st.Session(ctx, full)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", full, err)
	}
	sess := &Session{svc: s, id: full, title: meta.Title, history: agent.Resumable(msgs), used: time.Now()}
	sess.rowMade.Store(true)
	sess = s.register(sess)
	// The next request carries the history's images, which a new engine launch has not evaluated: do it now,
	// while the user reads and types.
	sess.step(ctx, chainEvent{kind: evRewarm})
	return sess, nil
}

// Fork branches a stored session at message at (0: its last message) into a new session sharing the history,
// and opens the branch.
func (s *Service) Fork(ctx context.Context, id string, at int64) (*Session, error) {
	if s.cfg.Store == nil {
		return nil, errors.New("fork: sessions are not stored (no database): run without --no-store")
	}
	full, err := s.cfg.Store.ResolveSessionID(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("fork %q: %w", id, err)
	}
	f, err := s.cfg.Store.Fork(ctx, full, at)
	if err != nil {
		return nil, fmt.Errorf("fork %s: %w", full, err)
	}
	return s.Open(ctx, OpenOptions{Resume: f.ID})
}

func (s *Service) register(sess *Session) *Session {
	s.touch(sess.id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.open[sess.id]; old != nil {
		old.refs++
		return old
	}
	sess.refs = 1
	sess.lock = make(chan struct{}, 1)
	sess.mu.Lock()
	sess.stats.ContextUsed = agent.ContextUsed(sess.history)
	sess.publishLocked()
	sess.mu.Unlock()
	s.open[sess.id] = sess
	return sess
}

// RecordEngineEvent stores an engine event in every open stored session, so each shows what the server did
// while it ran (starts, crashes, restarts, relaunches), and measures a relaunch's duration into the cost model of
// the engine it started. Conductor.OnEvent calls it.
func (s *Service) RecordEngineEvent(ev conductor.Event) {
	switch ev.Kind {
	case conductor.EventRelaunching:
		s.mu.Lock()
		s.relaunchAt = true
		s.mu.Unlock()
	case conductor.EventReady:
		s.mu.Lock()
		was := s.relaunchAt
		s.relaunchAt = false
		s.mu.Unlock()
		if was {
			// Before rewarm: its prefill reads the new engine's costs, which take this relaunch as their sample.
			s.noteRelaunch(ev.Duration)
		}
		s.rewarm()
	case conductor.EventWarmedUp:
		s.warmedUp()
	}
	if s.cfg.Store == nil {
		return
	}
	kind := memory.EngineStart
	switch ev.Kind {
	case conductor.EventReady:
	case conductor.EventCrashed, conductor.EventFailed:
		kind = memory.EngineCrash
	case conductor.EventStopped:
		kind = memory.EngineStop
	case conductor.EventWarmedUp:
		kind = memory.EngineWarmup
	default:
		return
	}
	detail := map[string]any{"event": string(ev.Kind), "mode": ev.Mode, "url": redact(ev.URL)}
	if ev.Err != nil {
		detail["error"] = ev.Err.Error()
	}
	b, _ := json.Marshal(detail)
	s.mu.Lock()
	ids := make([]string, 0, len(s.touched))
	for id := range s.touched {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	for _, id := range ids {
		s.record(id, memory.EngineEvent{SessionID: id, Kind: kind, Duration: ev.Duration, Detail: b}, "record engine event")
	}
}

// record stores an engine event of session id: through the open session, which keeps it for its row when it
// has none yet, or straight into the store.
func (s *Service) record(id string, ev memory.EngineEvent, what string) {
	if s.cfg.Store == nil {
		return
	}
	s.mu.Lock()
	sess := s.open[id]
	s.mu.Unlock()
	var err error
	if sess != nil {
		err = sess.record(ev)
	} else {
		_, err = s.cfg.Store.RecordEngineEvent(context.Background(), ev)
	}
	if err != nil {
		s.cfg.Logger.Warn(what, "session", id, "err", err)
	}
}

// rewarm has a new engine launch, whose cache is empty, evaluate the history of the session used last, when it
// holds images, before its next message. Only that one: with one slot, warming several would evict each other.
func (s *Service) rewarm() {
	s.mu.Lock()
	list := make([]*Session, 0, len(s.open))
	for _, sess := range s.open {
		list = append(list, sess)
	}
	s.mu.Unlock() // a session's lock is taken before the service's, never inside it
	var last *Session
	var lastUsed time.Time
	for _, sess := range list {
		sess.mu.Lock()
		used, images := sess.used, countImages(sess.history)
		sess.mu.Unlock()
		if images > 0 && (last == nil || used.After(lastUsed)) {
			last, lastUsed = sess, used
		}
	}
	if last == nil {
		return
	}
	last.step(context.Background(), chainEvent{kind: evRewarm})
}

// warmedUp tells the most recently used session with images (attached or in its history) that the engine's
// background warm-up ended: its requests ran in the server's slot and may have pushed out what the session's
// prefill left there, so the session evaluates it again now rather than on its next request's critical path.
func (s *Service) warmedUp() {
	s.propsMu.Lock()
	gen := s.lastGen
	s.propsMu.Unlock()
	s.mu.Lock()
	list := make([]*Session, 0, len(s.open))
	for _, sess := range s.open {
		list = append(list, sess)
	}
	s.mu.Unlock()
	var last *Session
	var lastUsed time.Time
	for _, sess := range list {
		sess.mu.Lock()
		used, images := sess.used, len(sess.pending)+countImages(sess.history)
		sess.mu.Unlock()
		if images > 0 && (last == nil || used.After(lastUsed)) {
			last, lastUsed = sess, used
		}
	}
	if last != nil {
		last.step(context.Background(), chainEvent{kind: evWarmedUp, gen: gen})
	}
}

func (s *Service) touch(id string) {
	if s.cfg.Store == nil {
		return
	}
	s.mu.Lock()
	s.touched[id] = true
	s.mu.Unlock()
}

// recordPrefill keeps an ahead-of-time evaluation as an engine event, so `visor stats` can show the encode time
// that left the critical path.
// source says what made the images known ahead: "attached" (the user attached them before writing), "queued"
// (the request waited for the engine behind others), "history" (a resumed or relaunched history), "tool" (a
// tool returned them while slower tools of the step ran).
func (s *Service) recordPrefill(id string, images int, took time.Duration, tm *engine.Timings, source string) {
	if s.cfg.Store == nil {
		return
	}
	d := map[string]any{"images": images, "source": source}
	if tm != nil {
		d["prompt_n"], d["cache_n"], d["prompt_ms"] = tm.PromptN, tm.CacheN, tm.PromptMS
	}
	b, _ := json.Marshal(d)
	s.record(id, memory.EngineEvent{SessionID: id, Kind: memory.EnginePrefill, Duration: took, Detail: b}, "record prefill")
}

// recordPrefillFailed keeps a prefill that failed as an engine event: the request after it evaluated the images
// itself, which is no error of the turn.
func (s *Service) recordPrefillFailed(id string, images int, took time.Duration, err error) {
	if s.cfg.Store == nil {
		return
	}
	b, _ := json.Marshal(map[string]any{"images": images, "failed": err.Error(), "took_ms": took.Milliseconds()})
	s.record(id, memory.EngineEvent{SessionID: id, Kind: memory.EnginePrefillFailed, Detail: b}, "record prefill")
}

// recordPrefillWait keeps how long a request waited for a running prefill, so `visor stats` tells the hidden part
// of the prefill from the exposed one.
func (s *Service) recordPrefillWait(id string, waited time.Duration) {
	s.record(id, memory.EngineEvent{SessionID: id, Kind: memory.EnginePrefillWait, Duration: waited}, "record prefill wait")
}

// Relauncher starts the engine again in another profile (its launch mode); *conductor.Conductor is one.
type Relauncher interface {
	Relaunch(ctx context.Context, mode string) (conductor.Ready, error)
}

func (s *Service) currentProfile() swap.Profile {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.profile
}

// relaunch carries out the scheduler's profile change in the background (the engine then evaluates the
// conversation again on the next request) and says whether it was started.
func (s *Service) relaunch(to swap.Profile) string {
	r := s.cfg.Relauncher
	if r == nil {
		return "no: the engine cannot relaunch"
	}
	s.mu.Lock()
	if s.relaunching {
		s.mu.Unlock()
		return "no: a relaunch is already running"
	}
	s.relaunching = true
	s.mu.Unlock()
	go func() {
		_, err := r.Relaunch(context.Background(), string(to))
		s.mu.Lock()
		defer s.mu.Unlock()
		s.relaunching = false
		if err != nil {
			s.cfg.Logger.Warn("relaunch", "profile", to, "err", err)
			return
		}
		s.profile = to
	}()
	return "started"
}

// recordDecision keeps one of the scheduler's actions and its reason, for `visor stats` and the log.
func (s *Service) recordDecision(id string, a swap.Action, carried string) {
	s.cfg.Logger.Info("ahead-of-time decision", "session", id, "action", a.Kind, "reason", a.Reason, "carried", carried)
	if s.cfg.Store == nil {
		return
	}
	b, _ := json.Marshal(map[string]any{"action": a.Kind, "profile": a.Profile, "images": len(a.Images),
		"tokens": a.Tokens, "reason": a.Reason, "carried": carried})
	s.record(id, memory.EngineEvent{SessionID: id, Kind: memory.EngineDecision, Detail: b}, "record decision")
}

// ready returns a ready engine and its properties (read once per launch).
func (s *Service) ready(ctx context.Context, recover bool) (conductor.Ready, llamacpp.Props, error) {
	get := s.cfg.Engine.EnsureReady
	if recover {
		get = s.cfg.Engine.Recover
	}
	r, err := get(ctx)
	if err != nil {
		return r, llamacpp.Props{}, err
	}
	s.costsFor(ctx, r)
	s.propsMu.Lock()
	p, ok := s.props[r.Generation]
	s.propsMu.Unlock()
	if ok {
		return r, p, nil
	}
	p, err = llamacpp.ReadProps(ctx, r.Client)
	if err != nil {
		// Not every OpenAI-compatible server has /props: assume native tools and unknown vision.
		s.cfg.Logger.Debug("the engine has no /props", "err", err)
		p = llamacpp.Props{TemplateCaps: map[string]bool{"supports_tools": true, "supports_tool_calls": true}, Vision: s.cfg.Vision != VisionNo}
	}
	s.propsMu.Lock()
	s.props[r.Generation] = p
	s.lastGen = max(s.lastGen, r.Generation)
	s.propsMu.Unlock()
	return r, p, nil
}

// build makes a turn's agent with every request going to server slot slot (llama-server's id_slot), so a turn
// keeps the slot that holds its conversation; slot < 0 lets the server choose. w, when set, watches the turn: it
// carries out (and measures) the prefill of a tool's images while slower tools of the step still run.
func (s *Service) build(r conductor.Ready, p llamacpp.Props, slot int, w *turnWatch) (Agent, error) {
	if s.cfg.NewAgent != nil {
		return s.cfg.NewAgent(r, p)
	}
	a := s.cfg.Agent
	mode := agent.Native
	if a.Raw || !p.ToolsInTemplate() {
		mode = agent.Raw
	}
	var extra engine.Extra
	if slot >= 0 {
		extra.IDSlot = &slot
	}
	cfg := agent.Config{Model: r.Client, Tools: a.Tools, System: a.System, Mode: mode, Format: a.Format, Extra: extra,
		MaxSteps: a.MaxSteps, MaxTokens: a.MaxTokens, ToolChoice: a.ToolChoice, Temperature: a.Temperature,
		// A tool's images are evaluated while slower tools of the step still run. That puts each result's images
		// right after it, a layout llama-server takes and strict OpenAI servers may not: only for visor's own.
		PrefillToolImages: s.cfg.Vision == VisionYes,
		// A tool's images pass the bounds a user's attachments do: the same policy, one message's bounds a step.
		ToolImages: agent.ToolImages{Limits: s.cfg.Images, MaxImages: s.cfg.MaxPendingImages,
			MaxBytes: s.cfg.MaxPendingBytes, MaxConversationBytes: s.cfg.MaxSessionImageBytes},
		ImageWindow: s.imageWindow(r, p), Images: s.imageCache(), PlanCut: s.planCut,
		Logger: s.cfg.Logger}
	if !p.Vision {
		cfg.ToolImages.Refuse = "this model cannot see images (it runs without a vision projector): use a tool that returns text"
	}
	var ag *agent.Agent
	if w != nil && cfg.PrefillToolImages {
		cfg.OnImagesReady = func(ctx context.Context, history []agent.Message, expect int) {
			w.prefillTools(ctx, ag, history, expect)
		}
	}
	ag, err := agent.New(cfg)
	return ag, err
}

// Lookahead is what the open sessions' next requests will carry, as far as the service knows now.
type Lookahead struct {
	Sessions []SessionLookahead
	// Running and Waiting count the turns on the engine and in its queue (Config.Slots; both 0 without it).
	Running, Waiting int
}

// SessionLookahead is one session's part of the Lookahead.
type SessionLookahead struct {
	ID string
	// PendingImages are attached for the next message and not yet sent; KnownSince is when the first was.
	PendingImages int
	PendingBytes  int64
	KnownSince    time.Time
	// Prefilled is how many of them the engine has already evaluated into its cache.
	Prefilled int
	// Busy says a turn is running; Queued how many more wait for it.
	Busy   bool
	Queued int
}

// Lookahead reports what the open sessions' next requests will carry.
func (s *Service) Lookahead() Lookahead {
	s.mu.Lock()
	list := make([]*Session, 0, len(s.open))
	for _, sess := range s.open {
		list = append(list, sess)
	}
	s.mu.Unlock()
	var out Lookahead
	if s.queue != nil {
		out.Running, out.Waiting = s.queue.counts()
	}
	for _, sess := range list {
		out.Sessions = append(out.Sessions, sess.lookahead())
	}
	return out
}

// redact drops credentials from a URL before it is stored.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	u.User = url.User("REDACTED")
	return u.String()
}
