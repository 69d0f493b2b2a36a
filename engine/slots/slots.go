// Package slots is the one allocator of a llama-server's slots, used by the session service's engine queue and
// by the gateway. llama-server keeps one cached sequence per slot (--parallel), so which slot a request is sent
// to decides what it has to evaluate again: a conversation sent back to the slot that served it last continues
// its cache, one sent elsewhere starts over (and a recurrent model's state cannot be cut back to a shorter
// prefix). The allocator remembers which conversation each slot served last and holds the slots of running
// requests and of queued requests' prefills.
//
// Every decision is a pure function of a Table value: callers keep the table under their own state's owner
// (the queue's lock, a run loop) and the rules are tested without a server (slots_test.go).
package slots

import "fmt"

// Key names a conversation: the session's id, or a digest of a stateless client's first messages. "" is no
// conversation and matches no slot.
type Key string

// Table is one server's slots. The zero Table has no slots; copies are independent.
type Table struct {
	held     []bool
	last     []Key // the conversation each slot served last
	reserved int   // held slots that hold a queued request's prefill
}

// New is a table of n free slots.
func New(n int) Table { return Table{held: make([]bool, max(n, 0)), last: make([]Key, max(n, 0))} }

// Len is the server's slot count.
func (t Table) Len() int { return len(t.held) }

// Held reports whether slot is held.
func (t Table) Held(slot int) bool { return slot >= 0 && slot < len(t.held) && t.held[slot] }

// Last is the conversation slot served last.
func (t Table) Last(slot int) Key {
	if slot < 0 || slot >= len(t.last) {
		return ""
	}
	return t.last[slot]
}

// Reserved is how many held slots hold a queued request's prefill.
func (t Table) Reserved() int { return t.reserved }

func (t Table) clone() Table {
	return Table{held: append([]bool(nil), t.held...), last: append([]Key(nil), t.last...), reserved: t.reserved}
}

// Free is the free slot for key: the one that served it last, else the lowest free one; -1 when all are held.
// It changes nothing.
func (t Table) Free(key Key) int {
	free := -1
	for i, h := range t.held {
		if h {
			continue
		}
		if key != "" && t.last[i] == key {
			return i
		}
		if free < 0 {
			free = i
		}
	}
	return free
}

// Take holds a slot for an admitted request of conversation key: reserved, when its prefill holds one (≥ 0),
// else Free(key). It returns -1, and the table unchanged, when no slot is free.
func (t Table) Take(key Key, reserved int) (Table, int) {
	if reserved >= 0 && t.Held(reserved) {
		t = t.clone()
		t.reserved--
		return t, reserved
	}
	slot := t.Free(key)
	if slot < 0 {
		return t, -1
	}
	t = t.clone()
	t.held[slot] = true
	return t, slot
}

// Reserve holds a slot for a queued request's prefill: the free one that served key last, else the highest free
// one, so the low slots that running conversations come back to keep their caches. -1 when none is free.
func (t Table) Reserve(key Key) (Table, int) {
	slot := -1
	for i := len(t.held) - 1; i >= 0; i-- {
		if t.held[i] {
			continue
		}
		if key != "" && t.last[i] == key {
			slot = i
			break
		}
		if slot < 0 {
			slot = i
		}
	}
	if slot < 0 {
		return t, -1
	}
	t = t.clone()
	t.held[slot] = true
	t.reserved++
	t.last[slot] = key // its cache now holds key's prefix
	return t, slot
}

// Unreserve gives back a prefill's slot whose request was not admitted (or whose prefill failed).
func (t Table) Unreserve(slot int) Table {
	if !t.Held(slot) {
		return t
	}
	t = t.clone()
	t.held[slot] = false
	t.reserved--
	return t
}

// Release frees an admitted request's slot, which now holds key's conversation.
func (t Table) Release(slot int, key Key) Table {
	if !t.Held(slot) {
		return t
	}
	t = t.clone()
	t.held[slot], t.last[slot] = false, key
	return t
}

// Claim marks a free slot as key's (a prefill outside any queue, so the request that follows finds it there)
// and returns it: Free(key), or -1 when every slot is held.
func (t Table) Claim(key Key) (Table, int) {
	slot := t.Free(key)
	if slot < 0 {
		return t, -1
	}
	t = t.clone()
	t.last[slot] = key
	return t, slot
}

// Usage is a server's slots as the queued-prefill policy sees them.
type Usage struct {
	Server     int // the server's slots (--parallel)
	Admit      int // requests that may run at once
	Running    int // requests running, each holding a slot
	Reserved   int // slots holding a queued request's prefill
	Generating int // running requests whose model call is out
	// Unseen says the caller cannot tell when running requests generate (the gateway: each request is one model
	// call, and its client's tools run between requests, where the gateway sees nothing).
	Unseen bool
}

// spare is how many server slots a prefill may take: those neither held nor needed by requests that may still
// be admitted before the queue moves.
func (s Usage) spare() int {
	return s.Server - s.Running - s.Reserved - max(0, s.Admit-s.Running)
}

// QueuedPrefill says whether a queued request's images may be evaluated now, and why. A prefill takes a slot
// no running request holds (one sequence per slot: it would cost a running request its cache, and be lost to
// that request's next call in turn) nor the next admitted request needs. Where running requests are seen, it
// waits until none generates, since an image encode stops every slot's decoding until it is done; where they are
// not (Unseen), it starts at once.
func QueuedPrefill(s Usage) (bool, string) {
	switch {
	case s.spare() <= 0:
		return false, fmt.Sprintf("no spare server slot (%d slots: %d running, %d prefilled, %d kept for requests): a queued "+
			"request is prefilled only in a slot no running one holds; give llama-server one more --parallel slot than requests",
			s.Server, s.Running, s.Reserved, max(0, s.Admit-s.Running))
	case s.Unseen:
		return true, fmt.Sprintf("%d spare server slot(s): evaluate the queued request's images now (the running requests' "+
			"gaps are not seen here, so an encode may hold their tokens back while it runs)", s.spare())
	case s.Generating > 0:
		return false, fmt.Sprintf("%d running request(s) generating: an image encode would stall their tokens, so the "+
			"prefill waits until their tools run", s.Generating)
	}
	return true, fmt.Sprintf("%d spare server slot(s) and no running request generating: evaluate the queued request's images now",
		s.spare())
}
