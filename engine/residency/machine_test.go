package residency

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// fmtEffects writes effects as short lines ("admit 1 a", "swap c stop a b") so a table reads like the story.
func fmtEffects(m *machine, effs []effect) string {
	var out []string
	name := func(i int) string { return m.models[i].cfg.Name }
	for _, e := range effs {
		switch e.kind {
		case effAdmit:
			s := fmt.Sprintf("admit %d %s", e.id, name(e.model))
			if e.slot >= 0 {
				s += fmt.Sprintf(" slot %d", e.slot)
			}
			if e.waited > 0 {
				s += fmt.Sprintf(" waited %s", e.waited)
			}
			out = append(out, s)
		case effRefuse:
			why := map[error]string{ErrBusy: "busy", ErrClosed: "closed", ErrCanceled: "canceled"}[e.err]
			out = append(out, fmt.Sprintf("refuse %d %s", e.id, why))
		case effSwap, effStop:
			s := "stop"
			if e.kind == effSwap {
				s = "swap " + name(e.model)
				if len(e.stop) > 0 {
					s += " stop"
				}
			}
			for _, i := range e.stop {
				s += " " + name(i)
			}
			if e.id != 0 {
				s += fmt.Sprintf(" answer %d", e.id)
			}
			out = append(out, s)
		case effAnswer:
			s := fmt.Sprintf("answer %d", e.id)
			if e.found {
				s += " found"
			}
			if e.why != "" {
				s += fmt.Sprintf(" slot %d", e.slot)
			}
			out = append(out, s)
		case effUnloaded:
			out = append(out, fmt.Sprintf("unloaded %d", e.n))
		}
	}
	return strings.Join(out, "; ")
}

// TestMachineTransitions is the swapper's story on four models: a and b share group g, c stands alone, r is
// remote, and p (2 requests on 3 server slots) pins its requests. Each row is one event and the effects it
// must give; no process runs.
func TestMachineTransitions(t *testing.T) {
	m, err := newMachine([]Model{{Name: "a", Group: "g"}, {Name: "b", Group: "g"}, {Name: "c"},
		{Name: "r", Remote: true, Slots: 4}, {Name: "p", Slots: 2, ServerSlots: 3}}, 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	const a, b, c, r, p = 0, 1, 2, 3, 4
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	acq := func(id, model, s int) event {
		return event{kind: evAcquire, id: id, model: model, at: at(s), reserved: -1}
	}
	rel := func(model, s int) event { return event{kind: evRelease, model: model, slot: -1, at: at(s)} }
	steps := []struct {
		name string
		ev   event
		want string
	}{
		{"a request for an unloaded model loads it; nothing to stop", acq(1, a, 0), "swap a"},
		{"a second request waits while the swap runs", acq(2, b, 0), ""},
		{"a loaded: its request runs, and b (same group) loads beside it", event{kind: evSwapped, model: a, at: at(1)}, "admit 1 a waited 1s; swap b"},
		{"b loaded: its request runs", event{kind: evSwapped, model: b, at: at(2)}, "admit 2 b waited 2s"},
		{"a remote model swaps nothing out", acq(3, r, 2), "swap r"},
		{"the remote loaded", event{kind: evSwapped, model: r, at: at(2)}, "admit 3 r"},
		{"c waits: a and b have requests running", acq(4, c, 3), ""},
		{"a new request for a waits too: c is first in line", acq(5, a, 3), ""},
		{"the queue (2) is full: one more for a is refused", acq(6, a, 3), "refuse 6 busy"},
		{"a's request ends; b's still runs, so no swap", rel(a, 4), ""},
		{"b's ends: a and b stop and c loads, the remote kept", rel(b, 5), "swap c stop a b"},
		{"c loaded: c runs; the request for a now waits to swap c out", event{kind: evSwapped, model: c, at: at(6)}, "admit 4 c waited 3s"},
		{"the waiting request for a gives up", event{kind: evCancel, id: 5, at: at(7)}, "refuse 5 canceled; answer -5 found"},
		{"a cancel for a request already admitted finds nothing", event{kind: evCancel, id: 4, at: at(7)}, "answer -4"},
		{"c's request ends", rel(c, 8), ""},
		{"the reaper: nothing idle for a minute yet", event{kind: evTick, id: 7, at: at(30)}, "answer 7"},
		{"the reaper: c idle for a minute stops; the remote stays", event{kind: evTick, id: 8, at: at(70)}, "stop c answer 8; unloaded 1"},
		{"an unload of a model not loaded answers at once", event{kind: evUnload, id: 9, model: c, at: at(70)}, "answer 9"},
		{"p loads for its first request", acq(10, p, 71), "swap p"},
		{"p loaded: pinned to slot 0", event{kind: evSwapped, model: p, at: at(72)}, "admit 10 p slot 0 waited 1s"},
		{"a second conversation gets slot 1", event{kind: evAcquire, id: 11, model: p, key: "k2", reserved: -1, at: at(72)}, "admit 11 p slot 1"},
		{"a third waits (2 requests at once), and its prefill takes the spare slot 2", event{kind: evReserve, id: 12, model: p, key: "k3"}, "answer 12 slot 2"},
		{"no second prefill: no spare slot left", event{kind: evReserve, id: 13, model: p, key: "k4"}, "answer 13 slot -1"},
		{"the third request queues with its reserved slot", event{kind: evAcquire, id: 14, model: p, key: "k3", reserved: 2, at: at(73)}, ""},
		{"slot 1's request ends: the third runs on its reserved slot", event{kind: evRelease, model: p, slot: 1, key: "k2", at: at(74)}, "admit 14 p slot 2"},
		{"k2 comes back to its own slot", event{kind: evAcquire, id: 15, model: p, key: "k2", reserved: -1, at: at(74)}, ""},
		{"slot 2 frees: k2 waits for admission, then takes slot 1, its own", event{kind: evRelease, model: p, slot: 2, key: "k3", at: at(75)}, "admit 15 p slot 1"},
		{"a management unload waits for p's requests", event{kind: evUnload, id: 16, model: p, at: at(75)}, ""},
		{"p's requests end: the unload stops it", event{kind: evRelease, model: p, slot: 0, at: at(76)}, ""},
		{"the last request on p ends: the unload stops it", event{kind: evRelease, model: p, slot: 1, key: "k2", at: at(76)}, "stop p answer 16"},
		{"close stops what is loaded (the remote) and answers", event{kind: evClose, id: 17, at: at(77)}, "stop r answer 17"},
		{"after close, requests are refused", acq(18, a, 78), "refuse 18 closed"},
	}
	for _, s := range steps {
		got := fmtEffects(m, m.decide(s.ev))
		if got != s.want {
			t.Fatalf("%s:\n got  %q\n want %q", s.name, got, s.want)
		}
	}
	if m.swaps != 1 {
		t.Fatalf("swaps %d, want 1: only a and b → c stopped another model", m.swaps)
	}
	if len(steps) < 15 {
		t.Fatal("the table must cover at least 15 transitions")
	}
}

// TestMachineCloseWaitsForASwap: a Close during a swap answers only once the swap has ended, and stops what it
// loaded, so no server outlives the pool.
func TestMachineCloseWaitsForASwap(t *testing.T) {
	m, _ := newMachine([]Model{{Name: "a"}, {Name: "b"}}, 8, 0)
	now := time.Unix(0, 0)
	steps := []struct {
		ev   event
		want string
	}{
		{event{kind: evAcquire, id: 1, model: 0, reserved: -1, at: now}, "swap a"},
		{event{kind: evClose, id: 2, at: now}, ""},
		{event{kind: evAcquire, id: 3, model: 1, reserved: -1, at: now}, "refuse 3 closed"},
		{event{kind: evSwapped, model: 0, at: now}, "refuse 1 closed; stop a answer 2"},
	}
	for i, s := range steps {
		if got := fmtEffects(m, m.decide(s.ev)); got != s.want {
			t.Fatalf("step %d: got %q, want %q", i, got, s.want)
		}
	}
	if _, err := newMachine([]Model{{Name: "a"}, {Name: "a"}}, 1, 0); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("a name listed twice: %v", err)
	}
}
