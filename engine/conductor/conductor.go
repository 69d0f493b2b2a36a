// Package conductor supervises one model server: a single goroutine owns its state (idle, starting, ready,
// restarting, relaunching, stopping, stopped, failed) and every transition, and callers only ask
// EnsureReady(ctx) or report a failed request with Recover(ctx). Crash restarts (within a budget), start-time
// warm-up and relaunching in another mode happen here, as effects of the pure decisions in machine.go — the
// shape of llama-swap's router (one owner of the state, slow work elsewhere reporting back), which avoids the
// "check, then act" races of callers inspecting a process and restarting it themselves.
//
// It does not decide which mode to run (the VRAM plan and the swap scheduler do) and does not know how a server
// is launched: Config.Launch does (llama-server by the plan, a `visor serve` engine, or a remote endpoint).
package conductor

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/visorhq/visor/engine"
)

// Process is a running model server; *llamacpp.Server implements it. A server visor does not own (an
// --endpoint, or one `visor serve` runs) is a Process whose Done never closes and whose Stop does nothing.
type Process interface {
	URL() string
	Done() <-chan struct{}
	Err() error
	Stop(ctx context.Context) error
}

// Launch starts a server in mode ("" is the default mode) and returns once it answers, or fails with the reason.
type Launch func(ctx context.Context, mode string) (Process, error)

// Ready is a server that answers requests.
type Ready struct {
	Client     *engine.Client
	URL        string
	Process    Process
	Mode       string
	Generation int // increases with every launch: a cache the server held belongs to one generation
}

// EventKind names what happened to the server.
type EventKind string

const (
	EventStarting    EventKind = "starting"
	EventReady       EventKind = "ready"
	EventCrashed     EventKind = "crashed"
	EventRestarting  EventKind = "restarting"
	EventRelaunching EventKind = "relaunching"
	EventFailed      EventKind = "failed"
	EventStopped     EventKind = "stopped"
	EventWarmedUp    EventKind = "warmed-up"
)

// ErrNoWarmup is returned by a Config.Warmup that had nothing to warm (a server on the CPU, say).
var ErrNoWarmup = errors.New("no warm-up needed")

// Event is reported to Config.OnEvent, from the conductor's goroutine (observers must not block).
type Event struct {
	Kind     EventKind
	Mode     string
	Err      error
	Duration time.Duration // how long the launch or warm-up took, where it applies
	URL      string
}

// ErrClosed is returned once Close was called.
var ErrClosed = errors.New("conductor: the engine was stopped")

// Config sets up a Conductor. Launch is required.
type Config struct {
	Launch Launch
	APIKey string // for the client of a remote server
	// StreamIdle bounds the silence of a started answer stream (engine.Client.SetStreamIdle): 0 is
	// engine.DefaultStreamIdle, a negative value no bound.
	StreamIdle time.Duration
	// Mode is the first launch's mode; "" is the launcher's default.
	Mode string
	// RestartBudget is how many crashes within RestartWindow are restarted (default 3 within a minute); one more
	// and the conductor gives up, so a server that crashes at every start is not restarted forever.
	RestartBudget int
	RestartWindow time.Duration
	// Warmup, when set, runs after every launch in the background (first image, first long prompt), so one-time
	// pipeline compiles happen before a user's request needs them. ErrNoWarmup says a launch needed none: no
	// EventWarmedUp follows.
	Warmup  func(ctx context.Context, r Ready) error
	OnEvent func(Event)
	Logger  *slog.Logger
	// ProbeTimeout bounds how long Recover waits for a dead-looking server to show whether it has exited
	// (its exit is seen once its output is drained); default 5 s.
	ProbeTimeout time.Duration
}

// Conductor owns one model server. Its methods are safe for concurrent use.
type Conductor struct {
	cfg    Config
	events chan event
	reqs   chan request
	quit   chan struct{}
	done   chan struct{}

	stateMu sync.Mutex
	state   State
}

type request struct {
	kind  eventKind
	mode  string
	reply chan result
}

type result struct {
	ready Ready
	err   error
}

// New starts the conductor's goroutine. Nothing is launched until the first EnsureReady (or Recover).
func New(cfg Config) *Conductor {
	if cfg.RestartBudget <= 0 {
		cfg.RestartBudget = 3
	}
	if cfg.RestartWindow <= 0 {
		cfg.RestartWindow = time.Minute
	}
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Conductor{cfg: cfg, events: make(chan event, 16), reqs: make(chan request), quit: make(chan struct{}),
		done: make(chan struct{})}
	go c.loop()
	return c
}

// EnsureReady returns a ready server, launching it first if it is not running yet, or waiting for a launch or
// restart in progress. It fails with the launch's error, or after Close with ErrClosed.
func (c *Conductor) EnsureReady(ctx context.Context) (Ready, error) { return c.ask(ctx, evEnsure, "") }

// Recover is what a caller does after a request to the server failed: the conductor checks the server and, if it
// is gone, restarts it (within the budget); it returns once a server is ready again.
func (c *Conductor) Recover(ctx context.Context) (Ready, error) { return c.ask(ctx, evSuspect, "") }

// Relaunch stops the server and launches it again in mode (the swap scheduler's profile change); it returns
// when the new server is ready.
func (c *Conductor) Relaunch(ctx context.Context, mode string) (Ready, error) {
	return c.ask(ctx, evRelaunch, mode)
}

// State reports the current state.
func (c *Conductor) State() State {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	return c.state
}

// Close stops the server (if visor owns it) and the conductor. It is safe to call more than once.
func (c *Conductor) Close(ctx context.Context) error {
	_, err := c.ask(ctx, evClose, "")
	if errors.Is(err, ErrClosed) {
		err = nil
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return err
}

func (c *Conductor) ask(ctx context.Context, kind eventKind, mode string) (Ready, error) {
	r := request{kind: kind, mode: mode, reply: make(chan result, 1)}
	select {
	case c.reqs <- r:
	case <-c.done:
		return Ready{}, ErrClosed
	case <-ctx.Done():
		return Ready{}, ctx.Err()
	}
	select {
	case res := <-r.reply:
		return res.ready, res.err
	case <-ctx.Done():
		return Ready{}, ctx.Err()
	}
}

func (c *Conductor) loop() {
	defer close(c.done)
	m := &machine{budget: c.cfg.RestartBudget, window: c.cfg.RestartWindow, mode: c.cfg.Mode}
	var (
		proc    Process
		ready   Ready
		waiters []chan result
		closeW  []chan result
		started time.Time
		bg      = context.Background()
	)
	apply := func(effs []effect) {
		for _, e := range effs {
			switch e.kind {
			case effLaunch:
				started = time.Now()
				gen, mode := e.gen, e.mode
				go func() {
					p, err := c.cfg.Launch(bg, mode)
					c.events <- event{kind: evLaunched, gen: gen, err: err, mode: mode, at: time.Now(), proc: p}
				}()
			case effStop, effStopForMode:
				p, gen, kind := proc, e.gen, e.kind
				go func() {
					if p != nil {
						_ = p.Stop(bg)
					}
					if kind == effStop {
						c.events <- event{kind: evStopped, gen: gen}
					} else if p == nil || !isOwned(p) {
						// Nothing exits for a server visor does not own: go on as if it had.
						c.events <- event{kind: evExited, gen: gen, at: time.Now()}
					}
				}()
			case effProbe:
				p, gen := proc, e.gen
				go c.probe(p, gen)
			case effAnswer:
				for _, w := range waiters {
					w <- result{ready: ready}
				}
				waiters = nil
			case effFail:
				for _, w := range waiters {
					w <- result{err: e.err}
				}
				waiters = nil
			case effReport:
				ev := e.report
				ev.URL = ready.URL
				if ev.Kind == EventReady {
					ev.Duration = time.Since(started)
				}
				c.report(ev)
			case effWarmup:
				if c.cfg.Warmup != nil {
					r := ready
					go func() {
						t := time.Now()
						if err := c.cfg.Warmup(bg, r); err != nil {
							if !errors.Is(err, ErrNoWarmup) {
								c.cfg.Logger.Warn("engine warm-up failed", "err", err)
							}
							return
						}
						c.events <- event{kind: evWarmedUp, gen: r.Generation, at: t}
					}()
				}
			}
		}
		c.stateMu.Lock()
		c.state = m.state
		c.stateMu.Unlock()
	}
	for {
		select {
		case r := <-c.reqs:
			if r.kind == evClose {
				closeW = append(closeW, r.reply)
			} else {
				waiters = append(waiters, r.reply)
			}
			apply(m.step(event{kind: r.kind, mode: r.mode}))
		case ev := <-c.events:
			switch ev.kind {
			case evLaunched:
				if ev.err == nil && ev.gen == m.gen {
					proc = ev.proc
					client := engine.NewClient(proc.URL(), c.cfg.APIKey)
					if c.cfg.StreamIdle != 0 {
						client.SetStreamIdle(max(c.cfg.StreamIdle, 0))
					}
					ready = Ready{Client: client, URL: proc.URL(), Process: proc, Mode: ev.mode, Generation: ev.gen}
					p, gen := proc, ev.gen
					go func() {
						<-p.Done()
						c.events <- event{kind: evExited, gen: gen, err: p.Err(), at: time.Now()}
					}()
				}
			case evWarmedUp:
				if ev.gen == m.gen {
					c.report(Event{Kind: EventWarmedUp, Mode: m.mode, Duration: time.Since(ev.at), URL: ready.URL})
				}
				continue
			}
			apply(m.step(ev))
		}
		if m.state == StateStopped {
			for _, w := range waiters {
				w <- result{err: ErrClosed}
			}
			for _, w := range closeW {
				w <- result{}
			}
			// Late events from goroutines still running must not block them forever.
			go func() {
				for range c.events {
				}
			}()
			return
		}
	}
}

func (c *Conductor) report(ev Event) {
	c.cfg.Logger.Info("engine", "event", ev.Kind, "mode", ev.Mode, "err", ev.Err, "took", ev.Duration)
	if c.cfg.OnEvent != nil {
		c.cfg.OnEvent(ev)
	}
}

// probe checks a server a caller could not use: one that answers /health is fine (the caller's failure was its
// own); one that does not gets a moment to show it has exited, and is stopped if it has not, so the exit event
// restarts it.
func (c *Conductor) probe(p Process, gen int) {
	if p == nil || !isOwned(p) {
		// A server visor does not own is not restarted from here: its callers see its errors.
		c.events <- event{kind: evEnsure, gen: gen}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL()+"/health", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			c.events <- event{kind: evEnsure, gen: gen}
			return
		}
	}
	select {
	case <-p.Done():
		return // the exit event is on its way
	case <-time.After(c.cfg.ProbeTimeout):
	}
	c.cfg.Logger.Warn("llama-server does not answer and has not exited; stopping it to restart it")
	_ = p.Stop(context.Background())
}

// owned is implemented by processes visor can restart; remote servers report false.
type owned interface{ Owned() bool }

func isOwned(p Process) bool {
	if o, ok := p.(owned); ok {
		return o.Owned()
	}
	return true
}
