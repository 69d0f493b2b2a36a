package slots

import "testing"

// TestTableTransitions walks one table through the allocator's decisions; each step names the rule it checks.
func TestTableTransitions(t *testing.T) {
	tb := New(3)
	steps := []struct {
		name string
		op   func(Table) (Table, int)
		want int
	}{
		{"a first request takes the lowest free slot", func(t Table) (Table, int) { return t.Take("a", -1) }, 0},
		{"another conversation takes the next", func(t Table) (Table, int) { return t.Take("b", -1) }, 1},
		{"a released slot remembers its conversation", func(t Table) (Table, int) { return t.Release(0, "a"), 0 }, 0},
		{"a third conversation takes the lowest free slot, a's", func(t Table) (Table, int) { return t.Take("c", -1) }, 0},
		{"c done: slot 0 is c's now", func(t Table) (Table, int) { return t.Release(0, "c"), 0 }, 0},
		{"a comes back: its slot is c's, so the lowest free", func(t Table) (Table, int) { return t.Take("a", -1) }, 0},
		{"a done again", func(t Table) (Table, int) { return t.Release(0, "a"), 0 }, 0},
		{"b done", func(t Table) (Table, int) { return t.Release(1, "b"), 1 }, 1},
		{"b comes back to its own slot, not the lowest", func(t Table) (Table, int) { return t.Take("b", -1) }, 1},
		{"a prefill for a waiting d takes the highest free slot", func(t Table) (Table, int) { return t.Reserve("d") }, 2},
		{"d admitted onto its reserved slot", func(t Table) (Table, int) { return t.Take("d", 2) }, 2},
		{"a prefill for a returning a takes a's own slot", func(t Table) (Table, int) { return t.Reserve("a") }, 0},
		{"no free slot: no prefill", func(t Table) (Table, int) { return t.Reserve("e") }, -1},
		{"no free slot: no admission", func(t Table) (Table, int) { return t.Take("e", -1) }, -1},
		{"a's request not admitted: its prefill slot is given back", func(t Table) (Table, int) { return t.Unreserve(0), 0 }, 0},
		{"a claim outside the queue marks the free slot for e", func(t Table) (Table, int) { return t.Claim("e") }, 0},
		{"e's request then finds that slot", func(t Table) (Table, int) { return t.Take("e", -1) }, 0},
		{"e done", func(t Table) (Table, int) { return t.Release(0, "e"), 0 }, 0},
		{"releasing a slot nobody holds changes nothing", func(t Table) (Table, int) { return t.Release(0, "x"), 0 }, 0},
	}
	for _, s := range steps {
		var got int
		tb, got = s.op(tb)
		if got != s.want {
			t.Fatalf("%s: slot %d, want %d", s.name, got, s.want)
		}
	}
	if tb.Held(0) || !tb.Held(1) || !tb.Held(2) || tb.Reserved() != 0 || tb.Last(0) != "e" {
		t.Fatalf("end state: held %v %v %v, reserved %d, last(0) %q", tb.Held(0), tb.Held(1), tb.Held(2), tb.Reserved(), tb.Last(0))
	}
}

func TestTableValuesAreIndependent(t *testing.T) {
	a := New(2)
	b, slot := a.Take("x", -1)
	if slot != 0 || a.Held(0) || !b.Held(0) {
		t.Fatalf("Take changed its receiver: a.Held(0)=%v b.Held(0)=%v", a.Held(0), b.Held(0))
	}
}
