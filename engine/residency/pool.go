// Package residency decides which of several models stay loaded on one machine and admits requests onto them:
// a pure swapper (machine.go: what a request for an unloaded model evicts, and when) and a run loop that owns
// its state and carries out its effects (stopping and creating engines) outside of it, reporting back as
// events. Requests beyond a model's slots wait in a bounded queue; a model with more server slots than requests
// pins each request to a slot (engine/slots). The gateway reaches it through the session service; each model's
// engine is a conductor (engine/conductor) that starts its server on the first EnsureReady.
package residency

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/slots"
)

// Engine is one model's server; *conductor.Conductor implements it.
type Engine interface {
	EnsureReady(ctx context.Context) (conductor.Ready, error)
	Recover(ctx context.Context) (conductor.Ready, error)
	Close(ctx context.Context) error
}

// Model is one model the pool serves.
type Model struct {
	Name string
	// Open returns a fresh engine for the model; nothing need be started until its EnsureReady. It is called on
	// every load (a closed engine is not reused).
	Open func() Engine
	// Group: models of one non-empty group may stay loaded together; any other load unloads them first.
	Group string
	// Remote models (another server) take no memory here: they are never unloaded and never swap others out.
	Remote bool
	// Slots is how many requests run on the model at once; more wait. Default 1.
	Slots int
	// ServerSlots is the server's own slot count when it has more than Slots: then every request is pinned to a
	// slot (the one that served its conversation last where it is free) and spare ones take queued prefills.
	ServerSlots int
}

// Config sets up a Pool.
type Config struct {
	Models []Model
	// MaxQueue bounds the requests waiting (default 64): one more is refused with ErrBusy.
	MaxQueue int
	// QueueTimeout bounds one request's wait (default 2 minutes): then ErrQueueTimeout.
	QueueTimeout time.Duration
	// IdleUnload unloads a model nobody used for this long; 0 keeps models loaded.
	IdleUnload time.Duration
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
	// OnIdleUnload, when set, is told how many models the idle reaper stopped.
	OnIdleUnload func(n int)
}

// Refusals the client should retry later, and the pool's end.
var (
	ErrBusy         = errors.New("the queue is full")
	ErrQueueTimeout = errors.New("timed out waiting in the queue")
	ErrClosed       = errors.New("the model pool is closed")
)

// Pool admits requests onto models, loading and swapping them. Its methods are safe for concurrent use; all its
// state belongs to one goroutine.
type Pool struct {
	cfg    Config
	events chan loopEvent
	done   chan struct{}
	ids    atomic.Int64
	stops  sync.WaitGroup // engines being stopped off the loop
	names  []string

	// Owned by the loop goroutine:
	m       *machine
	engines []Engine
	replies map[int]chan answer
}

type loopEvent struct {
	event
	reply chan answer // evAcquire, evCancel, evReserve, evUnload, evClose
	eng   Engine      // evSwapped
	query func(*machine)
}

type answer struct {
	lease *Lease
	err   error
	slot  int
	why   string
	found bool
	n     int
}

// New starts a Pool's loop; Close stops it.
func New(cfg Config) (*Pool, error) {
	if cfg.MaxQueue <= 0 {
		cfg.MaxQueue = 64
	}
	if cfg.QueueTimeout <= 0 {
		cfg.QueueTimeout = 2 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	for _, md := range cfg.Models {
		if md.Open == nil {
			return nil, fmt.Errorf("residency: model %q needs an Open function", md.Name)
		}
	}
	m, err := newMachine(cfg.Models, cfg.MaxQueue, cfg.IdleUnload)
	if err != nil {
		return nil, err
	}
	p := &Pool{cfg: cfg, events: make(chan loopEvent), done: make(chan struct{}), m: m,
		engines: make([]Engine, len(cfg.Models)), replies: map[int]chan answer{}}
	for _, md := range cfg.Models {
		p.names = append(p.names, md.Name)
	}
	go p.loop()
	return p, nil
}

// Names lists the models in configuration order.
func (p *Pool) Names() []string { return append([]string(nil), p.names...) }

func (p *Pool) loop() {
	defer close(p.done)
	var tick <-chan time.Time
	if p.cfg.IdleUnload > 0 {
		t := time.NewTicker(min(max(p.cfg.IdleUnload/4, 50*time.Millisecond), 10*time.Second))
		defer t.Stop()
		tick = t.C
	}
	for !p.m.closed {
		var ev loopEvent
		select {
		case ev = <-p.events:
		case <-tick:
			ev = loopEvent{event: event{kind: evTick, at: p.cfg.Now()}}
		}
		if ev.query != nil {
			ev.query(p.m)
			close(ev.reply)
			continue
		}
		if ev.reply != nil {
			p.replies[replyID(ev.event)] = ev.reply
		}
		if ev.kind == evSwapped {
			p.engines[ev.model] = ev.eng
		}
		for _, e := range p.m.decide(ev.event) {
			p.carry(e)
		}
	}
}

// replyID is where an event's answer goes: a cancel's under the negated id of the request it cancels, whose
// own answer may still be owed.
func replyID(ev event) int {
	if ev.kind == evCancel {
		return -ev.id
	}
	return ev.id
}

func (p *Pool) answer(id int, a answer) {
	if ch := p.replies[id]; ch != nil {
		ch <- a // buffered: the caller may have stopped listening
		delete(p.replies, id)
	}
}

// carry carries out one effect. Engines stop and start on goroutines of their own, so the loop never waits on a
// process; what they did comes back as events.
func (p *Pool) carry(e effect) {
	switch e.kind {
	case effAdmit:
		l := &Lease{Engine: p.engines[e.model], Slot: e.slot, SwapWait: e.waited, p: p, model: e.model}
		p.answer(e.id, answer{lease: l})
	case effRefuse:
		p.answer(e.id, answer{err: e.err})
	case effAnswer:
		p.answer(e.id, answer{slot: e.slot, why: e.why, found: e.found})
	case effUnloaded:
		if p.cfg.OnIdleUnload != nil {
			p.cfg.OnIdleUnload(e.n)
		}
	case effSwap:
		victims := p.take(e.stop)
		open := p.cfg.Models[e.model].Open
		p.stops.Add(1)
		go func() {
			defer p.stops.Done()
			stopAll(victims) // the memory is free before the next server starts
			p.send(loopEvent{event: event{kind: evSwapped, model: e.model, at: p.cfg.Now()}, eng: open()})
		}()
	case effStop:
		victims := p.take(e.stop)
		reply := p.replies[e.id]
		delete(p.replies, e.id)
		p.stops.Add(1)
		go func() {
			defer p.stops.Done()
			err := stopAll(victims)
			if reply != nil {
				reply <- answer{found: e.found, err: err, n: e.n}
			}
		}()
	}
}

func (p *Pool) take(models []int) []Engine {
	var out []Engine
	for _, i := range models {
		if p.engines[i] != nil {
			out = append(out, p.engines[i])
			p.engines[i] = nil
		}
	}
	return out
}

func stopAll(engines []Engine) error {
	var errs []error
	for _, eng := range engines {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		errs = append(errs, eng.Close(ctx))
		cancel()
	}
	return errors.Join(errs...)
}

// send hands ev to the loop; false once the pool is closed.
func (p *Pool) send(ev loopEvent) bool {
	select {
	case p.events <- ev:
		return true
	case <-p.done:
		return false
	}
}

func (p *Pool) index(name string) (int, error) {
	i, ok := p.m.index[name] // never written after New
	if !ok {
		return 0, fmt.Errorf("residency: no model %q", name)
	}
	return i, nil
}

// Lease is an admitted request: its model's engine, the server slot to send it to (-1: not pinned) and how
// long it waited for a swap. Release must be called when the response is done.
type Lease struct {
	Engine   Engine
	Slot     int
	SwapWait time.Duration
	p        *Pool
	model    int
	once     sync.Once
}

// Release gives the request's slot back, with key's conversation now in it.
func (l *Lease) Release(key slots.Key) {
	l.once.Do(func() {
		l.p.send(loopEvent{event: event{kind: evRelease, model: l.model, slot: l.Slot, key: key, at: l.p.cfg.Now()}})
	})
}

// MarkReady notes that the lease's engine answered (loaded rather than loading).
func (l *Lease) MarkReady() {
	l.p.send(loopEvent{event: event{kind: evReady, model: l.model}})
}

// Acquire admits a request for conversation key on model name, waiting for a slot or a swap; reserved is a slot
// its prefill holds (-1 for none), given back if the request is not admitted.
func (p *Pool) Acquire(ctx context.Context, name string, key slots.Key, reserved int) (*Lease, error) {
	i, err := p.index(name)
	if err != nil {
		return nil, err
	}
	id := int(p.ids.Add(1))
	reply := make(chan answer, 1)
	if !p.send(loopEvent{event: event{kind: evAcquire, id: id, model: i, key: key, reserved: reserved, at: p.cfg.Now()}, reply: reply}) {
		return nil, ErrClosed
	}
	timer := time.NewTimer(p.cfg.QueueTimeout)
	defer timer.Stop()
	var cause error
	select {
	case a := <-reply:
		return a.lease, a.err
	case <-timer.C:
		cause = ErrQueueTimeout
	case <-ctx.Done():
		cause = ctx.Err()
	}
	gone := make(chan answer, 1)
	if !p.send(loopEvent{event: event{kind: evCancel, id: id, at: p.cfg.Now()}, reply: gone}) {
		return nil, ErrClosed
	}
	if a := <-gone; !a.found {
		// Admitted (or refused) just before: that answer is in reply.
		if a := <-reply; a.lease != nil {
			a.lease.Release(key)
		}
	}
	return nil, cause
}

// ErrCanceled answers a request that stopped waiting (to nobody: its caller returns its own cause).
var ErrCanceled = errors.New("the request stopped waiting")

// Reserve takes a spare server slot of model name for a queued request's prefill when the policy allows one
// (slots.QueuedPrefill), with the engine to evaluate it on; slot -1 and the reason otherwise.
func (p *Pool) Reserve(name string, key slots.Key) (Engine, int, string) {
	i, err := p.index(name)
	if err != nil {
		return nil, -1, err.Error()
	}
	a, ok := p.call(loopEvent{event: event{kind: evReserve, model: i, key: key}})
	if !ok {
		return nil, -1, ErrClosed.Error()
	}
	if a.slot < 0 {
		return nil, -1, a.why
	}
	var eng Engine
	p.query(func(*machine) { eng = p.engines[i] })
	return eng, a.slot, a.why
}

// Unreserve gives back a reserved slot of a request that was never sent to Acquire.
func (p *Pool) Unreserve(name string, slot int) {
	if i, err := p.index(name); err == nil && slot >= 0 {
		p.send(loopEvent{event: event{kind: evUnreserve, model: i, slot: slot, at: p.cfg.Now()}})
	}
}

// call sends ev with a fresh id and waits for its answer.
func (p *Pool) call(ev loopEvent) (answer, bool) {
	ev.id = int(p.ids.Add(1))
	ev.at = p.cfg.Now()
	ev.reply = make(chan answer, 1)
	if !p.send(ev) {
		return answer{}, false
	}
	return <-ev.reply, true
}

// query runs fn on the loop, with the state it owns.
func (p *Pool) query(fn func(*machine)) bool {
	done := make(chan answer)
	if !p.send(loopEvent{query: fn, reply: done}) {
		return false
	}
	<-done
	return true
}

// State is one model's state for listings.
type State struct {
	State    string // loaded, loading, unloaded
	Inflight int
	Since    time.Time // when the load began
}

// State reports model name's state.
func (p *Pool) State(name string) State {
	i, err := p.index(name)
	if err != nil {
		return State{State: "unloaded"}
	}
	st := State{State: "unloaded"}
	p.query(func(m *machine) {
		md := m.models[i]
		switch {
		case !md.loaded:
		case !md.ready:
			st = State{State: "loading", Inflight: md.inflight, Since: md.since}
		default:
			st = State{State: "loaded", Inflight: md.inflight, Since: md.since}
		}
	})
	return st
}

// Loaded reports which models are loaded.
func (p *Pool) Loaded() map[string]bool {
	out := map[string]bool{}
	p.query(func(m *machine) {
		for _, md := range m.models {
			out[md.cfg.Name] = md.loaded
		}
	})
	return out
}

// Waits reports whether a request for name would wait now.
func (p *Pool) Waits(name string) bool {
	i, err := p.index(name)
	if err != nil {
		return false
	}
	w := true
	p.query(func(m *machine) { w = !m.admissible(i, m.waiters) || len(m.waiters) > 0 })
	return w
}

// Stats are the pool's counters for /metrics.
type Stats struct {
	Waiting int // requests waiting
	Swaps   int // swaps that stopped another model
}

// Stats reports the pool's counters.
func (p *Pool) Stats() Stats {
	var s Stats
	p.query(func(m *machine) { s = Stats{Waiting: len(m.waiters), Swaps: m.swaps} })
	return s
}

// UnloadIdle runs the idle reaper now (it also runs on its own ticker) and returns how many models it stopped,
// once they have.
func (p *Pool) UnloadIdle() int {
	a, _ := p.call(loopEvent{event: event{kind: evTick}})
	return a.n
}

// Unload stops name's engine once the requests on it have finished; false when it was not loaded.
func (p *Pool) Unload(ctx context.Context, name string) (bool, error) {
	i, err := p.index(name)
	if err != nil {
		return false, err
	}
	ev := loopEvent{event: event{kind: evUnload, model: i, id: int(p.ids.Add(1)), at: p.cfg.Now()}, reply: make(chan answer, 1)}
	if !p.send(ev) {
		return false, ErrClosed
	}
	select {
	case a := <-ev.reply:
		return a.found, a.err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// Close stops every engine, after a swap in progress, and the loop.
func (p *Pool) Close(ctx context.Context) error {
	a, ok := p.call(loopEvent{event: event{kind: evClose}})
	if !ok {
		return nil
	}
	stopped := make(chan struct{})
	go func() { p.stops.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-ctx.Done():
		return ctx.Err()
	}
	return a.err
}
