package residency

import (
	"fmt"
	"time"

	"github.com/visorhq/visor/engine/slots"
)

// machine is the pool's decision core: which models are loaded, which requests run, what a request that needs
// another model evicts, and when. It is pure (no goroutines, no clocks, no engines: events carry the time and
// name models by index), so every transition is tested without a process (machine_test.go). The loop feeds it
// events and carries out the effects it returns.
//
// The rules, after llama-swap's: a model that cannot stay loaded beside the ones loaded waits until the requests
// on those have finished, then they are stopped and it is started, one swap at a time; a model of a non-empty
// group stays loaded beside the models of its group; a remote model takes no memory, so it never evicts and is
// never evicted. While a request waits for a swap, new requests for the models it would evict wait too, so a
// steady stream on the loaded model cannot starve it.
type machine struct {
	models   []*model
	index    map[string]int
	waiters  []waiter // in arrival order
	unloads  []unload // management unloads waiting for their model's requests
	swapping int      // the model a swap is loading, -1 for none
	closing  int      // the Close waiting for a swap to end, 0 for none
	closed   bool
	maxQueue int
	idle     time.Duration
	swaps    int // swaps that stopped another model
}

type model struct {
	cfg      Model
	loaded   bool // its engine exists (loading or answering)
	ready    bool // its engine answered
	since    time.Time
	inflight int
	lastUsed time.Time
	table    slots.Table // with ServerSlots > Slots: the server's slots; zero otherwise
}

func (m *model) pinned() bool { return m.table.Len() > 0 }

type waiter struct {
	id       int
	model    int
	key      slots.Key
	reserved int       // a slot its prefill holds, -1 for none
	wanted   time.Time // when it began waiting for its model to load; zero if it was loaded
}

type unload struct {
	id    int
	model int
}

type eventKind int

const (
	evAcquire   eventKind = iota // request id wants model (key, reserved)
	evCancel                     // request id stops waiting (its context ended, or the queue timeout); answered at -id
	evRelease                    // a request on model ended on slot, leaving key's conversation there
	evSwapped                    // the swap's stops are done and model's engine exists
	evReady                      // model's engine answered
	evReserve                    // request id asks for a spare slot of model for its prefill
	evUnreserve                  // a prefill's slot goes back
	evTick                       // the idle reaper's clock
	evUnload                     // management: unload model once its requests end (id answers)
	evClose                      // stop everything (id answers)
)

type event struct {
	kind     eventKind
	id       int
	model    int
	key      slots.Key
	slot     int
	reserved int
	at       time.Time
}

type effectKind int

const (
	effAdmit    effectKind = iota // request id runs on model, on slot (-1: not pinned); waited for a swap
	effRefuse                     // request id is refused with err
	effSwap                       // stop the models in stop, then create load's engine (then evSwapped)
	effStop                       // stop the models in stop; answer id (if set, with n) when done
	effAnswer                     // answer id: slot and why (evReserve), or found (evCancel, evUnload)
	effUnloaded                   // the idle reaper stopped n models (for the log)
)

type effect struct {
	kind   effectKind
	id     int
	model  int
	slot   int
	waited time.Duration
	err    error
	stop   []int
	found  bool
	why    string
	n      int
}

func newMachine(models []Model, maxQueue int, idle time.Duration) (*machine, error) {
	m := &machine{index: map[string]int{}, swapping: -1, maxQueue: maxQueue, idle: idle}
	for _, c := range models {
		if c.Name == "" {
			return nil, fmt.Errorf("residency: a model needs a name")
		}
		if _, dup := m.index[c.Name]; dup {
			return nil, fmt.Errorf("residency: model %q is listed twice", c.Name)
		}
		c.Slots = max(c.Slots, 1)
		md := &model{cfg: c}
		if c.ServerSlots > c.Slots && !c.Remote {
			md.table = slots.New(c.ServerSlots)
		}
		m.index[c.Name] = len(m.models)
		m.models = append(m.models, md)
	}
	return m, nil
}

// conflicts reports whether a and b cannot be loaded together.
func (m *machine) conflicts(a, b int) bool {
	x, y := m.models[a].cfg, m.models[b].cfg
	if a == b || x.Remote || y.Remote {
		return false
	}
	return x.Group == "" || x.Group != y.Group
}

// blocked reports whether a request for model i must wait because one that came before it (in ahead) waits
// to swap model i out: first come, first served across models.
func (m *machine) blocked(i int, ahead []waiter) bool {
	for _, w := range ahead {
		if !m.models[w.model].loaded && m.conflicts(w.model, i) {
			return true
		}
	}
	return false
}

// admissible reports whether a request for model i, behind the waiters in ahead, may run now.
func (m *machine) admissible(i int, ahead []waiter) bool {
	md := m.models[i]
	return md.loaded && md.inflight < md.cfg.Slots && !m.blocked(i, ahead)
}

// victimsIdle reports whether every loaded model that i would evict has no request running.
func (m *machine) victimsIdle(i int) bool {
	for j, o := range m.models {
		if o.loaded && m.conflicts(i, j) && o.inflight > 0 {
			return false
		}
	}
	return true
}

func (m *machine) decide(ev event) []effect {
	switch ev.kind {
	case evAcquire:
		if m.closed || m.closing != 0 {
			return []effect{{kind: effRefuse, id: ev.id, err: ErrClosed}}
		}
		if len(m.waiters) >= m.maxQueue && !m.admissible(ev.model, m.waiters) {
			return m.refuse(ev.id, ev.model, ev.reserved, ErrBusy)
		}
		w := waiter{id: ev.id, model: ev.model, key: ev.key, reserved: ev.reserved}
		if !m.models[ev.model].loaded {
			w.wanted = ev.at
		}
		m.waiters = append(m.waiters, w)
		return m.reconsider(ev.at)
	case evCancel:
		for i, w := range m.waiters {
			if w.id == ev.id {
				m.waiters = append(m.waiters[:i:i], m.waiters[i+1:]...)
				m.unreserve(w.model, w.reserved)
				out := []effect{{kind: effRefuse, id: ev.id, err: ErrCanceled}, {kind: effAnswer, id: -ev.id, found: true}}
				return append(out, m.reconsider(ev.at)...)
			}
		}
		return []effect{{kind: effAnswer, id: -ev.id}} // admitted meanwhile: the caller releases it
	case evRelease:
		md := m.models[ev.model]
		md.inflight--
		md.lastUsed = ev.at
		if md.pinned() && ev.slot >= 0 {
			md.table = md.table.Release(ev.slot, ev.key)
		}
		return m.reconsider(ev.at)
	case evSwapped:
		md := m.models[ev.model]
		md.loaded, md.ready, md.since, md.lastUsed = true, false, ev.at, ev.at
		m.swapping = -1
		return m.reconsider(ev.at)
	case evReady:
		if md := m.models[ev.model]; md.loaded {
			md.ready = true
		}
		return nil
	case evReserve:
		md := m.models[ev.model]
		if !md.pinned() || !md.loaded {
			return []effect{{kind: effAnswer, id: ev.id, slot: -1,
				why: "the model's server has no slot beyond the requests it runs (set its slots above them), or it is not loaded"}}
		}
		ok, why := slots.QueuedPrefill(slots.Usage{Server: md.table.Len(), Admit: md.cfg.Slots, Running: md.inflight,
			Reserved: md.table.Reserved(), Unseen: true})
		if !ok {
			return []effect{{kind: effAnswer, id: ev.id, slot: -1, why: why}}
		}
		var slot int
		if md.table, slot = md.table.Reserve(ev.key); slot < 0 {
			why = "no free slot"
		}
		return []effect{{kind: effAnswer, id: ev.id, slot: slot, why: why}}
	case evUnreserve:
		m.unreserve(ev.model, ev.slot)
		return m.reconsider(ev.at)
	case evTick:
		if m.idle <= 0 || m.swapping >= 0 || m.closed {
			return []effect{{kind: effAnswer, id: ev.id}}
		}
		var stop []int
		for i, md := range m.models {
			if md.loaded && !md.cfg.Remote && md.inflight == 0 && ev.at.Sub(md.lastUsed) >= m.idle {
				m.unloadModel(i)
				stop = append(stop, i)
			}
		}
		if len(stop) == 0 {
			return []effect{{kind: effAnswer, id: ev.id}}
		}
		out := []effect{{kind: effStop, stop: stop, id: ev.id, n: len(stop)}, {kind: effUnloaded, n: len(stop)}}
		return append(out, m.reconsider(ev.at)...)
	case evUnload:
		m.unloads = append(m.unloads, unload{id: ev.id, model: ev.model})
		return m.reconsider(ev.at)
	case evClose:
		m.closing = ev.id
		return m.reconsider(ev.at)
	}
	return nil
}

func (m *machine) refuse(id, model, reserved int, err error) []effect {
	m.unreserve(model, reserved)
	return []effect{{kind: effRefuse, id: id, err: err}}
}

func (m *machine) unreserve(model, slot int) {
	if md := m.models[model]; slot >= 0 && md.pinned() {
		md.table = md.table.Unreserve(slot)
	}
}

// unloadModel marks model i stopped: its engine goes, and its slots' caches with it.
func (m *machine) unloadModel(i int) {
	md := m.models[i]
	md.loaded, md.ready = false, false
	if md.pinned() {
		md.table = slots.New(md.table.Len())
	}
}

// reconsider admits what may run now, carries out the unloads whose models are idle, and starts the next swap.
func (m *machine) reconsider(at time.Time) []effect {
	var out []effect
	if m.closing != 0 {
		if m.swapping >= 0 {
			return nil // the swap ends first, so nothing it starts outlives the pool
		}
		var stop []int
		for i, md := range m.models {
			if md.loaded {
				m.unloadModel(i)
				stop = append(stop, i)
			}
		}
		for _, w := range m.waiters {
			out = append(out, effect{kind: effRefuse, id: w.id, err: ErrClosed})
		}
		for _, u := range m.unloads {
			out = append(out, effect{kind: effAnswer, id: u.id})
		}
		m.waiters, m.unloads, m.closed = nil, nil, true
		out = append(out, effect{kind: effStop, stop: stop, id: m.closing})
		m.closing = 0
		return out
	}
	kept := m.waiters[:0:0]
	for _, w := range m.waiters {
		if !m.admissible(w.model, kept) {
			kept = append(kept, w)
			continue
		}
		md := m.models[w.model]
		md.inflight++
		md.lastUsed = at
		slot := -1
		if md.pinned() {
			md.table, slot = md.table.Take(w.key, w.reserved)
		}
		e := effect{kind: effAdmit, id: w.id, model: w.model, slot: slot}
		if !w.wanted.IsZero() {
			e.waited = at.Sub(w.wanted)
		}
		out = append(out, e)
	}
	m.waiters = kept
	keptU := m.unloads[:0:0]
	for _, u := range m.unloads {
		md := m.models[u.model]
		switch {
		case m.swapping == u.model || md.loaded && (md.inflight > 0 || m.swapping >= 0):
			keptU = append(keptU, u)
		case !md.loaded:
			out = append(out, effect{kind: effAnswer, id: u.id})
		default:
			m.unloadModel(u.model)
			out = append(out, effect{kind: effStop, stop: []int{u.model}, id: u.id, found: true})
		}
	}
	m.unloads = keptU
	if m.swapping >= 0 {
		return out
	}
	for _, w := range m.waiters {
		if m.models[w.model].loaded || !m.victimsIdle(w.model) {
			continue
		}
		var stop []int
		for j, o := range m.models {
			if o.loaded && m.conflicts(w.model, j) {
				m.unloadModel(j)
				stop = append(stop, j)
			}
		}
		if len(stop) > 0 {
			m.swaps++
		}
		m.swapping = w.model
		return append(out, effect{kind: effSwap, model: w.model, stop: stop})
	}
	return out
}
