package swap_test

import (
	"strings"
	"testing"
	"time"

	"github.com/visorhq/visor/engine/swap"
)

// TestWindowBeatsKeepAllAndDropEach is issue 25's simulator line: on the screenshot-heavy traces (a computer-use
// agent with 50 screenshots, a 40-turn screenshot chat) the window ChooseWindow picks waits less in total than
// re-sending every image and than dropping the oldest image on every turn, with the seed's costs and the
// H200's, at the seed's full 262,144-token context.
func TestWindowBeatsKeepAllAndDropEach(t *testing.T) {
	traces := loadTraces(t)
	for name, c := range swap.Presets() {
		p := c.Profiles[0]
		for _, file := range []string{"computer-use-long.json", "chat-40.json"} {
			t.Run(name+"/"+file, func(t *testing.T) {
				rs, err := swap.CompareHistory(traces[file], c, p, 262144)
				if err != nil {
					t.Fatal(err)
				}
				var b strings.Builder
				if err := swap.WriteHistoryTable(&b, p, rs); err != nil {
					t.Fatal(err)
				}
				t.Log("\n" + b.String())
				keep, drop, win := rs[0], rs[1], rs[2]
				if win.Window.Keep < 2 || win.Window.Batch < 1 {
					t.Fatalf("window %+v", win.Window)
				}
				if win.EngineWait >= keep.EngineWait || win.EngineWait >= drop.EngineWait {
					t.Errorf("window waits %v; keep-all %v, drop-each-turn %v: it must beat both", win.EngineWait,
						keep.EngineWait, drop.EngineWait)
				}
				if win.MaxCarried > win.Window.Keep+win.Window.Batch-1 || keep.MaxCarried < 30 {
					t.Errorf("most images in one request: window %d (keep %d batch %d), keep-all %d", win.MaxCarried,
						win.Window.Keep, win.Window.Batch, keep.MaxCarried)
				}
				if drop.Cuts <= win.Cuts {
					t.Errorf("drop-each-turn cut %d times, the window %d: batches must cut less often", drop.Cuts, win.Cuts)
				}
			})
		}
	}
}

// TestChooseWindow: the window follows the costs: cheap history images keep more of them, a context too small
// for them keeps fewer, and a cut that cannot hide makes the batches larger.
func TestChooseWindow(t *testing.T) {
	c := swap.H200Costs()
	base := swap.ChooseWindow(c, swap.WindowNeeds{Profile: swap.Resident, ContextTokens: 262144, ImageTokens: 1000})
	if base.Keep != 2 || base.Reason == "" || base.Keep+base.Batch-1 > 3 {
		t.Errorf("H200, 75 ms per history image: %+v, want keep 2 and at most 3 images a request (30%% over a "+
			"short conversation's time to first token)", base)
	}
	cheap := c
	cheap.CachedImage = swap.Duration(5 * time.Millisecond)
	if w := swap.ChooseWindow(cheap, swap.WindowNeeds{Profile: swap.Resident, ContextTokens: 262144, ImageTokens: 1000}); w.Keep <= base.Keep {
		t.Errorf("5 ms history images: keep %d, want more than %d", w.Keep, base.Keep)
	}
	if w := swap.ChooseWindow(cheap, swap.WindowNeeds{Profile: swap.Resident, ContextTokens: 8192, ImageTokens: 1000}); w.Keep+w.Batch-1 > 2 {
		t.Errorf("an 8K context holds 2 images in its quarter: %+v", w)
	}
	hidden := swap.ChooseWindow(c, swap.WindowNeeds{Profile: swap.Resident, ContextTokens: 262144, ImageTokens: 1000,
		Leads: []time.Duration{time.Minute}})
	exposed := swap.ChooseWindow(c, swap.WindowNeeds{Profile: swap.VisionCPU, ContextTokens: 262144, ImageTokens: 1000,
		Leads: []time.Duration{0}})
	if hidden.Batch != 1 || exposed.Batch <= hidden.Batch {
		t.Errorf("a cut always hidden: batch %d (want 1); a CPU cut never hidden: batch %d (want more)", hidden.Batch, exposed.Batch)
	}
}

// TestPlannedCutLeavesTheCriticalPath: a cut PlanCut plans ahead is evaluated while the tools run, so on the
// computer-use trace (every screenshot sent the moment its tool returns, no lead to hide a cut in) the window
// with its cuts planned ahead exposes less re-evaluation and waits less than the window alone, with the same
// cuts and no wrong guess; on the chat trace (screenshots mostly attached while the question is typed) it plans
// nothing, and waits no more.
func TestPlannedCutLeavesTheCriticalPath(t *testing.T) {
	traces := loadTraces(t)
	for name, c := range swap.Presets() {
		p := c.Profiles[0]
		t.Run(name, func(t *testing.T) {
			rs, err := swap.CompareHistory(traces["computer-use-long.json"], c, p, 262144)
			if err != nil {
				t.Fatal(err)
			}
			win, ahead := rs[2], rs[3]
			if win.Policy != swap.HistoryWindow || ahead.Policy != swap.HistoryWindowAhead || ahead.Window != win.Window {
				t.Fatalf("policies %s (%+v), %s (%+v)", win.Policy, win.Window, ahead.Policy, ahead.Window)
			}
			if ahead.PlannedAhead == 0 || ahead.Missed != 0 || ahead.Cuts != win.Cuts {
				t.Errorf("computer-use-long: %d cuts planned ahead, %d missed, %d cuts (the window alone %d): want every cut planned, none missed",
					ahead.PlannedAhead, ahead.Missed, ahead.Cuts, win.Cuts)
			}
			if ahead.Reeval.Exposed >= win.Reeval.Exposed || ahead.EngineWait >= win.EngineWait {
				t.Errorf("computer-use-long: planned ahead, re-evaluation exposed %v and engine wait %v; the window alone %v and %v",
					ahead.Reeval.Exposed, ahead.EngineWait, win.Reeval.Exposed, win.EngineWait)
			}
			rs, err = swap.CompareHistory(traces["chat-40.json"], c, p, 262144)
			if err != nil {
				t.Fatal(err)
			}
			if win, ahead := rs[2], rs[3]; ahead.EngineWait > win.EngineWait {
				t.Errorf("chat-40: planned ahead waits %v, the window alone %v", ahead.EngineWait, win.EngineWait)
			}
		})
	}
}

// TestPlannedCutMissed: when the images a cut was planned for do not come, the request sends the images the
// plan left out and the server evaluates its prompt again from the first of them: the guess costs a
// re-evaluation on the critical path, which the simulator charges.
func TestPlannedCutMissed(t *testing.T) {
	c := swap.H200Costs()
	p := c.Profiles[0]
	shot := []swap.TraceImage{{Tokens: 1000}}
	tr := swap.Trace{Name: "missed", SystemTokens: 2000, Steps: []swap.Step{
		{User: swap.Duration(10 * time.Second), PromptTokens: 100, OutputTokens: 100, Images: shot},
		{Tools: swap.Duration(time.Second), PromptTokens: 50, OutputTokens: 100, Images: shot, Repeat: 4},
		{Tools: swap.Duration(time.Second), PromptTokens: 50, OutputTokens: 100}, // the screenshot did not come
	}}
	w := swap.Window{Keep: 2, Batch: 2}
	win, err := swap.SimulateHistory(tr, c, p, swap.HistoryPolicy{Name: swap.HistoryWindow, Window: w})
	if err != nil {
		t.Fatal(err)
	}
	ahead, err := swap.SimulateHistory(tr, c, p, swap.HistoryPolicy{Name: swap.HistoryWindowAhead, Window: w, PlanCut: true})
	if err != nil {
		t.Fatal(err)
	}
	if ahead.Missed != 1 {
		t.Fatalf("planned %d, missed %d: want the last step's plan missed", ahead.PlannedAhead, ahead.Missed)
	}
	// Undone, the cut re-evaluates from the third image on: the last request waits at least for the encode of
	// the two older images it sends again, which the window alone had in the cache.
	if undo := ahead.LastWait - win.LastWait; undo < c.Encode(p, 2000) {
		t.Errorf("the missed plan's request waited %v more than the window alone's: want at least the encode of two "+
			"images (%v)", undo, c.Encode(p, 2000))
	}
}
