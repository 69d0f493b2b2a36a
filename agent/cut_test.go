package agent_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/engine/swap"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testmodel"
	"github.com/visorhq/visor/tools"
)

// TestWindowCutEvaluatedWhileTheScreenshotToolRuns: a conversation of three screenshots (window keep 2, batch 2)
// asks again; the model calls its one screenshot tool, whose image is the fourth and moves the window's cut. With
// the cut planned ahead the loop evaluates the shortened prefix while the tool runs, so the request after the tool
// evaluates only what follows the last kept image (the tool's result and its image) and reuses all the prefill
// left; planned not ahead (the baseline, same server) that request evaluates the kept image again too. On the
// hybrid model, whose cache cannot be cut back, a prefill that did not end where the request continues would
// show as a re-evaluation.
func TestWindowCutEvaluatedWhileTheScreenshotToolRuns(t *testing.T) {
	srv := enginetest.TinyHybrid(t, true, testmodel.ProjectorOptions{ImageSize: 64}, llamacpp.Config{Parallel: 1})
	ctx := context.Background()
	shot := 0
	reg := tools.NewRegistry()
	// The tiny model calls list_dir whenever tools are offered and no tool has answered yet.
	if err := reg.Register(tools.New("list_dir", "Take a screenshot", func(ctx context.Context, in struct {
		Path string `json:"path"`
	}) (tools.Result, error) {
		shot++
		return tools.Result{Text: "screenshot taken", Images: []tools.Image{{MIME: "image/png", Data: testPNG(t, uint8(100+shot))}}}, nil
	}, tools.ReturnsImages())); err != nil {
		t.Fatal(err)
	}
	var history []agent.Message
	for i := range 3 {
		history = append(history,
			agent.Message{Role: "user", Content: fmt.Sprintf("screen %d?", i), Images: []tools.Image{{MIME: "image/png", Data: testPNG(t, uint8(10+i))}}},
			agent.Message{Role: "assistant", Content: testmodel.Answer})
	}
	run := func(ahead bool) (prefills []*engine.Timings, expects []int, last *engine.Timings) {
		var mu sync.Mutex
		var a *agent.Agent
		cfg := agent.Config{Model: engine.NewClient(srv.URL(), ""), Tools: reg, MaxSteps: 4,
			ImageWindow: agent.ImageWindow{Keep: 2, Batch: 2},
			PlanCut: func(n swap.CutNeeds) swap.CutPlan {
				p := swap.PlanCut(swap.H200Costs(), n)
				p.Ahead = p.Ahead && ahead
				return p
			},
			OnImagesReady: func(ctx context.Context, h []agent.Message, expect int) {
				tm, err := a.PrefillHistoryExpecting(ctx, h, expect)
				if err != nil {
					t.Errorf("prefill expecting %d: %v", expect, err)
				}
				mu.Lock()
				prefills, expects = append(prefills, tm), append(expects, expect)
				mu.Unlock()
			}}
		var err error
		if a, err = agent.New(cfg); err != nil {
			t.Fatal(err)
		}
		f := a.Run(ctx, history, agent.Message{Role: "user", Content: "take a screenshot"}, nil)
		if f.Err != nil || f.Steps != 2 || f.Final.Timings == nil || f.Final.Content != testmodel.Answer {
			t.Fatalf("ahead %v: run %+v", ahead, f)
		}
		return prefills, expects, f.Final.Timings
	}
	basePre, _, base := run(false)
	pre, expects, tm := run(true)
	if len(basePre) != 0 {
		t.Errorf("the baseline prefilled %d times, want none (one tool, nothing to hide an image in)", len(basePre))
	}
	if len(pre) != 1 || pre[0] == nil || len(expects) != 1 || expects[0] != 1 {
		t.Fatalf("planned ahead: prefills %+v expecting %v, want one expecting the tool's 1 image", pre, expects)
	}
	const imageTokens = 64
	t.Logf("baseline: request after the tool prompt_n %d cache_n %d; ahead: prefill %d (cached %d), request prompt_n %d cache_n %d",
		base.PromptN, base.CacheN, pre[0].PromptN, pre[0].CacheN, tm.PromptN, tm.CacheN)
	if prefilled := pre[0].PromptN + pre[0].CacheN; tm.CacheN < prefilled {
		t.Errorf("the request after the tool reused %d cached tokens, want the %d the cut's prefill left", tm.CacheN, prefilled)
	}
	if tm.PromptN+imageTokens > base.PromptN {
		t.Errorf("the request after the tool evaluated %d tokens with the cut planned ahead, %d without: the kept image's "+
			"%d tokens should have left the critical path", tm.PromptN, base.PromptN, imageTokens)
	}
	if tm.PromptN+tm.CacheN != base.PromptN+base.CacheN {
		t.Errorf("the two runs' last requests differ in length (%d and %d tokens): the planned cut rendered another prompt",
			tm.PromptN+tm.CacheN, base.PromptN+base.CacheN)
	}
}
