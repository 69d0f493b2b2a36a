package session

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine/slots"
	"github.com/visorhq/visor/engine/swap"
)

// The engine queue admits turns of every session onto the engine, Config.Slots at a time, first come first
// served, and pins each to one server slot, so that a session's conversation stays cached in its slot. A turn
// that waits is lookahead: its history and its images are known, so they are evaluated into a server slot of
// their own while it waits, and the turn then runs on that slot with only its new text left to evaluate.
//
// A queued turn's prefill never takes a slot that holds a running turn's conversation: llama-server keeps one
// sequence per slot (and cannot cut a recurrent model's state back), so the running turn's next request would
// evaluate its whole prompt again, and the prefill would be lost to that request in turn. Nor does it start
// while a running turn is generating: an image encode stops every slot's decoding until it is done. So it runs
// in a server slot no admitted turn needs, while the running turns' tools execute.

// ticket is one turn in the engine queue.
type ticket struct {
	sess    *Session
	id      string          // sess's id when it entered: the queue's logs and events name it off the session's lock
	ctx     context.Context // the request's: it ending cancels the prefill
	history []agent.Message
	user    agent.Message
	emit    func(agent.Event)

	// Under engineQueue.mu:
	slot       int  // the server slot it holds (running, or reserved by its prefill); -1 for none
	running    bool // admitted
	generating bool // running, and a step's request is out (from StepStarted until its tools start)
	ahead      aheadState
	done       chan struct{} // closed when its prefill ends
}

// aheadState is where a queued turn's prefill stands.
type aheadState int

const (
	aheadNone    aheadState = iota // nothing to prefill (no images, or the scheduler said no)
	aheadWanted                    // to prefill when a server slot is free
	aheadRunning                   // in flight
	aheadDone                      // its images are in its slot's cache
	aheadFailed                    // failed: the images are encoded with the request
)

// Slots is a server's slots as the queued-prefill policy sees them (the one allocator's, engine/slots).
type Slots = slots.Usage

// QueuedPrefill says whether a queued request's images may be evaluated now, and why (slots.QueuedPrefill: a
// slot no running request holds nor the next admitted one needs, while none generates unless that is unseen).
func QueuedPrefill(s Slots) (bool, string) { return slots.QueuedPrefill(s) }

// nextPrefill picks the queued turn to prefill now, in queue order, and says why; -1 when none may start.
func nextPrefill(s Slots, states []aheadState) (int, string) {
	for i, st := range states {
		if st == aheadWanted {
			ok, why := QueuedPrefill(s)
			if !ok {
				return -1, why
			}
			return i, why
		}
	}
	return -1, "no queued turn has images to prefill"
}

type engineQueue struct {
	svc     *Service
	slots   int // turns at once
	server  int // the server's slots
	mu      sync.Mutex
	running []*ticket
	waiting []*ticket
	table   slots.Table // the server's slots: who holds each, which session each served last
	changed chan struct{}
}

func newEngineQueue(svc *Service, admit, server int) *engineQueue {
	server = max(server, admit)
	return &engineQueue{svc: svc, slots: admit, server: server, table: slots.New(server), changed: make(chan struct{})}
}

func (q *engineQueue) slotsLocked() Slots {
	s := Slots{Server: q.server, Admit: q.slots, Running: len(q.running), Reserved: q.table.Reserved()}
	for _, t := range q.running {
		if t.generating {
			s.Generating++
		}
	}
	return s
}

// key is the allocator's name for a session's conversation: the session itself, not its id, which compaction
// changes under the session's lock while the queue's is held here.
func key(sess *Session) slots.Key { return slots.Key(fmt.Sprintf("%p", sess)) }

func (q *engineQueue) broadcastLocked() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// enter queues a turn and waits until it may use the engine; release must be called when the turn ends. While
// it waits, its images are prefilled when the scheduler agrees and the policy finds a slot. It returns ctx's
// error if the request ends first; its prefill is canceled then.
func (q *engineQueue) enter(ctx context.Context, t *ticket) (release func(), err error) {
	// Compaction moves the session to its linked one under the session's lock, which the queue's other goroutines
	// (the prefill, another session's turn starting it) do not take: the id is read once, here, under it.
	t.ctx, t.slot, t.id = ctx, -1, t.sess.ID()
	if len(t.user.Images) > 0 && !q.svc.cfg.NoPrefill {
		// The scheduler is asked (and its decision stored) outside the queue's lock; what it sees of the queue
		// may be a moment old.
		q.mu.Lock()
		waits, ahead := len(q.running) >= q.slots || len(q.waiting) > 0, len(q.waiting)
		q.mu.Unlock()
		carried := "yes: in a spare server slot, while no running turn generates"
		if q.server <= q.slots {
			carried = fmt.Sprintf("no: all %d server slot(s) are kept for running turns; start llama-server with one more --parallel slot "+
				"than turns for lookahead", q.server)
		}
		if waits && q.svc.planQueued(t, ahead, carried) && q.server > q.slots {
			t.ahead = aheadWanted
		}
	}
	q.mu.Lock()
	q.waiting = append(q.waiting, t)
	for {
		if len(q.running) < q.slots && q.waiting[0] == t {
			q.table, t.slot = q.table.Take(key(t.sess), t.slot)
			q.waiting = q.waiting[1:]
			t.running = true
			q.running = append(q.running, t)
			done := t.done
			q.kickLocked()
			q.mu.Unlock()
			if done != nil {
				<-done // its prefill ends first: the request continues that sequence
			}
			var once sync.Once
			return func() { once.Do(func() { q.leave(t) }) }, nil
		}
		q.kickLocked()
		ch := q.changed
		q.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			// Out of the waiting list and its prefill read in one hold of the lock: between two, a kick could
			// start a prefill whose failure gives back the slot this then gives back again, by then perhaps
			// another waiting turn's reservation.
			q.mu.Lock()
			for i, w := range q.waiting {
				if w == t {
					q.waiting = append(q.waiting[:i:i], q.waiting[i+1:]...)
					break
				}
			}
			done := t.done
			q.mu.Unlock()
			if done != nil {
				// Its prefill runs on ctx: it stops now. Its slot stays held until it has, and nothing more reaches
				// a request that ended.
				<-done
			}
			q.mu.Lock()
			if t.slot >= 0 { // a failed prefill gave its slot back already
				q.table = q.table.Unreserve(t.slot)
			}
			t.slot = -1
			q.kickLocked()
			q.broadcastLocked()
			q.mu.Unlock()
			return nil, ctx.Err()
		}
		q.mu.Lock()
	}
}

func (q *engineQueue) leave(t *ticket) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, r := range q.running {
		if r == t {
			q.running = append(q.running[:i:i], q.running[i+1:]...)
			break
		}
	}
	q.table = q.table.Release(t.slot, key(t.sess))
	t.running, t.generating, t.slot = false, false, -1
	q.kickLocked()
	q.broadcastLocked()
}

// observe follows a running turn's events: while a step's request is out it is generating, and its tools
// running is the gap a prefill may use.
func (q *engineQueue) observe(t *ticket, ev agent.Event) {
	switch ev.(type) {
	case agent.StepStarted:
		q.mu.Lock()
		t.generating = true
		q.mu.Unlock()
	case agent.ToolCallStarted:
		q.mu.Lock()
		if t.generating {
			t.generating = false
			q.kickLocked()
		}
		q.mu.Unlock()
	}
}

// kickLocked starts the prefills the policy allows now; each runs on its request's context.
func (q *engineQueue) kickLocked() {
	for {
		states := make([]aheadState, len(q.waiting))
		for i, t := range q.waiting {
			states[i] = t.ahead
		}
		i, why := nextPrefill(q.slotsLocked(), states)
		if i < 0 {
			return
		}
		t := q.waiting[i]
		if q.table, t.slot = q.table.Reserve(key(t.sess)); t.slot < 0 {
			return
		}
		t.ahead, t.done = aheadRunning, make(chan struct{})
		q.svc.cfg.Logger.Info("prefilling a queued turn", "session", t.id, "images", len(t.user.Images), "slot", t.slot, "why", why)
		go q.prefill(t, t.slot, t.done)
	}
}

func (q *engineQueue) prefill(t *ticket, slot int, done chan struct{}) {
	defer close(done)
	svc := q.svc
	start := time.Now()
	tm, err := svc.prefillOnce(t.ctx, t.history, t.user, slot)
	took := time.Since(start)
	q.mu.Lock()
	if err == nil {
		t.ahead = aheadDone
	} else {
		// The slot goes back: the turn takes a free one when admitted.
		q.table, t.ahead, t.slot = q.table.Unreserve(slot), aheadFailed, -1
	}
	q.kickLocked()
	q.broadcastLocked()
	q.mu.Unlock()
	switch {
	case err == nil:
		svc.cfg.Logger.Info("prefilled a queued turn", "session", t.id, "images", len(t.user.Images), "slot", slot, "took", took)
		svc.recordPrefill(t.id, len(t.user.Images), took, tm, "queued")
		svc.observe(svc.evalSample(tm, svc.tokensOf(t.user.Images), svc.measuredTextRate()))
		t.emit(agent.Notice{Text: fmt.Sprintf("waiting for the engine: the message's %d image(s) were evaluated ahead (%s)",
			len(t.user.Images), took.Round(time.Millisecond))})
	case t.ctx.Err() != nil:
		svc.cfg.Logger.Info("queued prefill stopped: the request ended", "session", t.id, "err", errors.Join(err, context.Cause(t.ctx)))
	default:
		svc.cfg.Logger.Warn("queued prefill failed; the images will be encoded with the request", "session", t.id, "err", err)
	}
}

// planQueued asks the scheduler about a turn that has to wait for the engine behind ahead others, records its
// decisions (a prefill with carried, what will become of it) and reports whether to prefill the turn's images
// while it waits. Without a scheduler it does.
func (svc *Service) planQueued(t *ticket, ahead int, carried string) bool {
	sched := svc.scheduler()
	if sched == nil {
		return true
	}
	s := t.sess
	s.mu.Lock()
	records := append([]swap.StepRecord(nil), s.records...)
	s.mu.Unlock()
	now := time.Since(svc.started)
	obs := swap.Observation{Now: now, Profile: svc.currentProfile(), Compiled: true, Context: contextOf(t.history, svc.imageTokens),
		History: records, LastRelaunch: -1, Queued: ahead + 1}
	for i, im := range t.user.Images {
		obs.Pending = append(obs.Pending, swap.PendingImage{ID: i, Tokens: svc.imageTokens(im), Known: now})
	}
	prefill := false
	for _, a := range sched.Plan(obs) {
		why := carried
		switch a.Kind {
		case swap.ActPrefill:
			prefill = true
		case swap.ActRelaunch:
			// Relaunching would throw away the running turns' caches.
			why = "no: other turns are running on the engine"
		default:
			why = "no: the conductor warms the engine up at start"
		}
		svc.recordDecision(t.id, a, why)
	}
	return prefill
}

// affinity is the server slot for a prefill of sess's next turn outside the queue (an attached image): its
// own slot, or a free one that becomes its own, so the turn finds the prefill where it will run; -1 (the server
// chooses) when every slot is held by another session's turn.
func (q *engineQueue) affinity(sess *Session) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, t := range append(append([]*ticket(nil), q.running...), q.waiting...) {
		if t.sess == sess && t.slot >= 0 {
			return t.slot
		}
	}
	var slot int
	q.table, slot = q.table.Claim(key(sess))
	return slot
}

// counts reports the turns running on the engine and waiting for it.
func (q *engineQueue) counts() (running, waiting int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.running), len(q.waiting)
}
