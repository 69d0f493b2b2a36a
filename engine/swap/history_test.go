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
