package swap_test

import (
	"strings"
	"testing"
	"time"

	"github.com/visorhq/visor/engine/swap"
)

// TestPlanCut: the cut is planned ahead only when the next images move it, are more likely than not, and their
// own prefill could not hide its re-evaluation.
func TestPlanCut(t *testing.T) {
	c := swap.H200Costs()
	w := swap.Window{Keep: 2, Batch: 2}
	for _, k := range []struct {
		name        string
		n           swap.CutNeeds
		cut, ahead  bool
		dropped     int
		reasonWords string
	}{
		{"no window", swap.CutNeeds{Images: 9, Expected: 1, Sure: 1}, false, false, 0, "no more"},
		{"the next image does not move the cut", swap.CutNeeds{Window: w, Images: 4, Expected: 1, Sure: 1}, false, false, 2, "no more"},
		{"nothing expected", swap.CutNeeds{Window: w, Images: 3, Sure: 1}, false, false, 0, "no more"},
		{"a screenshot tool's result moves it: ahead", swap.CutNeeds{Window: w, Images: 3, Expected: 1, Sure: 1, Profile: swap.Resident},
			true, true, 2, "done now"},
		{"an unlikely image: not ahead", swap.CutNeeds{Window: w, Images: 3, Expected: 1, Sure: 0.5, Profile: swap.Resident},
			true, false, 2, "only 50%"},
		{"a long lead hides it in the attachment's prefill", swap.CutNeeds{Window: w, Images: 3, Expected: 1, Sure: 1,
			Lead: 6 * time.Second, Profile: swap.Resident}, true, false, 2, "lead"},
		{"a short lead does not", swap.CutNeeds{Window: w, Images: 3, Expected: 1, Sure: 1,
			Lead: 50 * time.Millisecond, Profile: swap.Resident}, true, true, 2, "done now"},
		{"two images at once move it by a batch", swap.CutNeeds{Window: w, Images: 4, Expected: 2, Sure: 1}, true, true, 4, "cuts 2"},
	} {
		p := swap.PlanCut(c, k.n)
		if p.Cut != k.cut || p.Ahead != k.ahead || p.Dropped != k.dropped || !strings.Contains(p.Reason, k.reasonWords) {
			t.Errorf("%s: %+v, want cut %v ahead %v dropped %d and %q in the reason", k.name, p, k.cut, k.ahead, k.dropped, k.reasonWords)
		}
		if p.Cut && p.Reeval <= 0 {
			t.Errorf("%s: a cut re-evaluates something, got %s", k.name, p.Reeval)
		}
	}
	// Without costs (an agent outside a session) a likely image is always planned ahead.
	if p := swap.PlanCut(swap.Costs{}, swap.CutNeeds{Window: w, Images: 3, Expected: 1, Sure: 1}); !p.Ahead {
		t.Errorf("no costs: %+v, want ahead", p)
	}
}
