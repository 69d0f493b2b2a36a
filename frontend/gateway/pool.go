package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/session"
)

// Engine is one model's server, as the gateway uses it; *conductor.Conductor implements it.
type Engine interface {
	EnsureReady(ctx context.Context) (conductor.Ready, error)
	Recover(ctx context.Context) (conductor.Ready, error)
	Close(ctx context.Context) error
}

// Model is one name the gateway serves.
type Model struct {
	Name string
	// Open returns a fresh engine for the model; nothing need be started until its EnsureReady. The gateway calls
	// it on every load (a closed engine is not reused).
	Open func() Engine
	// Group: models of one non-empty group may stay loaded together; any other load unloads them first.
	Group string
	// Remote models (another server) take no memory here: they are never unloaded and never swap others out.
	Remote bool
	// Slots is how many requests run on the model at once (its llama-server --parallel); more wait in the
	// gateway's queue. Default 1.
	Slots int
	// ServerSlots is the server's own slot count when it has more than Slots: then every request is pinned to
	// a slot (id_slot, the one that served its conversation last where it is free), and a request that has to
	// wait has its images evaluated in a spare slot meanwhile, and is sent to that slot. Default Slots.
	ServerSlots int
	// UpstreamModel replaces the request's "model" before it is sent on (a remote server's own name); empty sends
	// the body unchanged.
	UpstreamModel string
	// ToolFormat is the dialect calls left in text are parsed as; ToolsAsText renders tools into the prompt.
	ToolFormat  string
	ToolsAsText bool
	// APIKey is sent to the server (remote endpoints).
	APIKey string

	// What /v1/models says of the model. Vision: it has a projector, so requests may carry images (one without
	// is refused before the engine); Embeddings: its server runs with --embeddings; Ctx: the context length
	// it is started with (0: the model's own, read from the server once loaded); MTP: it speculates with MTP.
	Vision, Embeddings, MTP bool
	Ctx                     int
	// Aliases are other names requests may use for the model; answers carry the name the request used.
	Aliases []string
}

// errBusy and errQueueTimeout are refusals the client should retry later (429 and 503 with Retry-After).
var (
	errBusy         = errors.New("the gateway's queue is full")
	errQueueTimeout = errors.New("timed out waiting in the gateway's queue")
)

// pool decides which models are loaded and admits requests: a request for a model that is not loaded waits
// until the requests on the models it would unload have finished, then swaps (llama-swap's rule: one model, or
// one group, at a time); requests beyond a model's slots wait in a bounded queue. All state is under mu, and
// every change closes changed so waiters look again.
type pool struct {
	mu      sync.Mutex
	changed chan struct{}
	entries map[string]*entry
	order   []string
	waiting int
	swapRun bool // a swap (unload + load) is being carried out

	maxQueue     int
	queueTimeout time.Duration
	idle         time.Duration
	now          func() time.Time
	m            *metrics
}

type entry struct {
	m        Model
	eng      Engine // nil when not loaded
	ready    bool   // eng answered: loaded rather than loading
	loadFrom time.Time
	inflight int
	wanted   int // requests waiting for this model to be loaded
	lastUsed time.Time
	// With ServerSlots > Slots: the slots held by requests in flight or by queued prefills, the conversation
	// each served last, and how many queued prefills hold one.
	busy     []bool
	key      []uint64
	reserved int
}

func (e *entry) pinned() bool { return len(e.busy) > 0 }

func newPool(models []Model, maxQueue int, queueTimeout, idle time.Duration, m *metrics) (*pool, error) {
	p := &pool{changed: make(chan struct{}), entries: map[string]*entry{}, maxQueue: maxQueue,
		queueTimeout: queueTimeout, idle: idle, now: time.Now, m: m}
	for _, md := range models {
		if md.Name == "" || md.Open == nil {
			return nil, fmt.Errorf("gateway: model %q needs a name and an Open function", md.Name)
		}
		if _, dup := p.entries[md.Name]; dup {
			return nil, fmt.Errorf("gateway: model %q is listed twice", md.Name)
		}
		if md.Slots <= 0 {
			md.Slots = 1
		}
		e := &entry{m: md}
		if md.ServerSlots > md.Slots && !md.Remote {
			e.busy, e.key = make([]bool, md.ServerSlots), make([]uint64, md.ServerSlots)
		}
		p.entries[md.Name] = e
		p.order = append(p.order, md.Name)
	}
	return p, nil
}

func (p *pool) broadcast() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// conflicts reports whether a and b cannot be loaded together.
func conflicts(a, b *entry) bool {
	if a == b || a.m.Remote || b.m.Remote {
		return false
	}
	return a.m.Group == "" || a.m.Group != b.m.Group
}

// blocked reports whether new requests for e must wait because another model is waiting to swap it out:
// otherwise a steady stream of requests for the loaded model would starve the other one forever.
func (p *pool) blocked(e *entry) bool {
	for _, o := range p.entries {
		if o.wanted > 0 && o.eng == nil && conflicts(o, e) {
			return true
		}
	}
	return false
}

// acquire admits a request for model name and returns its engine and the release to call when the response is
// done. swapWait reports how long the request waited for a swap (exposed swap time).
func (p *pool) acquire(ctx context.Context, name string) (eng Engine, release func(), swapWait time.Duration, err error) {
	eng, release, swapWait, _, err = p.acquireSlot(ctx, name, 0, -1)
	return eng, release, swapWait, err
}

// acquireSlot is acquire for a request of conversation key that may hold a slot reserved by its prefill
// (reserved ≥ 0; given back if the request is not admitted). slot is the server slot to send it to, -1 when the
// model's requests are not pinned.
func (p *pool) acquireSlot(ctx context.Context, name string, key uint64, reserved int) (eng Engine, release func(), swapWait time.Duration, slot int, err error) {
	p.mu.Lock()
	e := p.entries[name]
	slot = -1
	if reserved >= 0 {
		defer func() {
			if err != nil {
				p.mu.Lock()
				p.unreserve(e, reserved)
				p.mu.Unlock()
			}
		}()
	}
	if p.waiting >= p.maxQueue && !(e.eng != nil && e.inflight < e.m.Slots && !p.blocked(e)) {
		p.mu.Unlock()
		return nil, nil, 0, -1, errBusy
	}
	var timer <-chan time.Time
	queued, wanting := false, false
	defer func() {
		if queued || wanting {
			p.mu.Lock()
			if queued {
				p.waiting--
				p.m.queueDepth.Store(int64(p.waiting))
			}
			if wanting {
				e.wanted--
			}
			p.mu.Unlock()
		}
	}()
	var swapStart time.Time
	for {
		if e.eng != nil && e.inflight < e.m.Slots && !p.blocked(e) {
			e.inflight++
			eng = e.eng
			if e.pinned() {
				slot = p.takeSlot(e, key, reserved)
			}
			p.mu.Unlock()
			if !swapStart.IsZero() {
				swapWait = time.Since(swapStart)
			}
			var once sync.Once
			return eng, func() { once.Do(func() { p.release(e, slot, key) }) }, swapWait, slot, nil
		}
		if e.eng == nil {
			if !wanting {
				wanting = true
				e.wanted++
				swapStart = time.Now()
			}
			if !p.swapRun && p.victimsIdle(e) {
				p.swap(e) // unlocks and relocks
				continue
			}
		}
		if !queued {
			queued = true
			p.waiting++
			p.m.queueDepth.Store(int64(p.waiting))
			t := time.NewTimer(p.queueTimeout)
			defer t.Stop()
			timer = t.C
		}
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-timer:
			return nil, nil, 0, -1, errQueueTimeout
		case <-ctx.Done():
			return nil, nil, 0, -1, ctx.Err()
		}
		p.mu.Lock()
	}
}

func (p *pool) victimsIdle(e *entry) bool {
	for _, o := range p.entries {
		if o.eng != nil && conflicts(o, e) && o.inflight > 0 {
			return false
		}
	}
	return true
}

// swap unloads the models that conflict with e and loads e's engine (its server starts on the first
// EnsureReady). Called with mu held; it releases mu while servers stop, so the memory is free before the next
// one starts.
func (p *pool) swap(e *entry) {
	p.swapRun = true
	var victims []Engine
	for _, name := range p.order {
		o := p.entries[name]
		if o.eng != nil && conflicts(o, e) {
			victims = append(victims, o.eng)
			o.eng, o.ready = nil, false
		}
	}
	p.mu.Unlock()
	for _, v := range victims {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_ = v.Close(ctx)
		cancel()
	}
	eng := e.m.Open()
	p.mu.Lock()
	e.eng, e.ready, e.loadFrom = eng, false, p.now()
	e.lastUsed = p.now()
	p.swapRun = false
	if len(victims) > 0 {
		p.m.swaps.Add(1)
	}
	p.broadcast()
}

// takeSlot gives an admitted request its server slot: the one its prefill reserved, else a free one that
// served its conversation last, else any free one (the reservation rule leaves one for every admitted request).
// Called with mu held.
func (p *pool) takeSlot(e *entry, key uint64, reserved int) int {
	if reserved >= 0 {
		e.reserved--
		return reserved
	}
	free := -1
	for i, b := range e.busy {
		if !b && e.key[i] == key {
			free = i
			break
		}
		if !b && free < 0 {
			free = i
		}
	}
	if free >= 0 {
		e.busy[free] = true
	}
	return free
}

// reserve takes a spare server slot for a queued request's prefill when the policy allows one, with the
// engine to evaluate it on; slot -1 and the reason otherwise.
func (p *pool) reserve(name string) (Engine, int, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.entries[name]
	if !e.pinned() || e.eng == nil {
		return nil, -1, "the model's server has no slot beyond the requests it runs (set its slots above them), or it is not loaded"
	}
	ok, why := session.QueuedPrefill(session.Slots{Server: len(e.busy), Admit: e.m.Slots, Running: e.inflight,
		Reserved: e.reserved, Unseen: true})
	if !ok {
		return nil, -1, why
	}
	for i := len(e.busy) - 1; i >= 0; i-- {
		if !e.busy[i] {
			e.busy[i] = true
			e.reserved++
			return e.eng, i, why
		}
	}
	return nil, -1, "no free slot"
}

// unreserve gives back a reserved slot of a request that was not admitted. Called with mu held.
func (p *pool) unreserve(e *entry, slot int) {
	e.busy[slot] = false
	e.reserved--
	p.broadcast()
}

// waits reports whether a request for name would wait now.
func (p *pool) waits(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.entries[name]
	return e.eng == nil || e.inflight >= e.m.Slots || p.blocked(e) || p.waiting > 0
}

func (p *pool) release(e *entry, slot int, key uint64) {
	p.mu.Lock()
	if slot >= 0 && slot < len(e.busy) {
		e.busy[slot], e.key[slot] = false, key
	}
	e.inflight--
	e.lastUsed = p.now()
	p.broadcast()
	p.mu.Unlock()
}

// loaded lists the loaded models.
func (p *pool) loaded() map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]bool{}
	for n, e := range p.entries {
		out[n] = e.eng != nil
	}
	return out
}

// unloadIdle closes the engines nobody used for the idle time; it returns how many it unloaded.
func (p *pool) unloadIdle() int {
	if p.idle <= 0 {
		return 0
	}
	p.mu.Lock()
	var idle []Engine
	for _, e := range p.entries {
		if e.eng != nil && !e.m.Remote && e.inflight == 0 && p.now().Sub(e.lastUsed) >= p.idle && !p.swapRun {
			idle = append(idle, e.eng)
			e.eng, e.ready = nil, false
		}
	}
	if len(idle) > 0 {
		p.broadcast()
	}
	p.mu.Unlock()
	for _, eng := range idle {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_ = eng.Close(ctx)
		cancel()
	}
	return len(idle)
}

// close unloads everything.
func (p *pool) close(ctx context.Context) error {
	p.mu.Lock()
	var all []Engine
	for _, e := range p.entries {
		if e.eng != nil {
			all = append(all, e.eng)
			e.eng, e.ready = nil, false
		}
	}
	p.broadcast()
	p.mu.Unlock()
	var errs []error
	for _, eng := range all {
		errs = append(errs, eng.Close(ctx))
	}
	return errors.Join(errs...)
}

// markReady notes that name's engine answered. Its callers hold an admission, so the engine cannot have been
// swapped out meanwhile.
func (p *pool) markReady(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.entries[name]; e != nil && e.eng != nil {
		e.ready = true
	}
}

// modelState is one model's state for /v1/models and the management API.
type modelState struct {
	State    string // loaded, loading, unloaded
	Inflight int
	Since    time.Time // when the load began
}

func (p *pool) state(name string) modelState {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.entries[name]
	switch {
	case e.eng == nil:
		return modelState{State: "unloaded"}
	case !e.ready:
		return modelState{State: "loading", Inflight: e.inflight, Since: e.loadFrom}
	}
	return modelState{State: "loaded", Inflight: e.inflight, Since: e.loadFrom}
}

// unload closes name's engine once the requests on it have finished; false when it was not loaded.
func (p *pool) unload(ctx context.Context, name string) (bool, error) {
	p.mu.Lock()
	e := p.entries[name]
	for e.eng != nil && (e.inflight > 0 || p.swapRun) {
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false, ctx.Err()
		}
		p.mu.Lock()
	}
	eng := e.eng
	e.eng, e.ready = nil, false
	if eng != nil {
		p.broadcast()
	}
	p.mu.Unlock()
	if eng == nil {
		return false, nil
	}
	return true, eng.Close(ctx)
}
