package session_test

import (
	"context"
	"fmt"
	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/swap"
	"testing"

	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testkit"
	"github.com/visorhq/visor/internal/testmodel"
	"github.com/visorhq/visor/session"
	"github.com/visorhq/visor/tools"
)

// TestImageWindowInSessions: a stored screenshot chat on a real llama-server sends fewer image tokens per
// request with the window than with it off, while the store keeps every image either way, so a resumed session
// (and show/export) has them all. The window is on by default and can be turned off.
func TestImageWindowInSessions(t *testing.T) {
	// 64 tokens an image, so an image is longer than its stub even in the tiny model's byte-sized vocabulary.
	srv := enginetest.TinyHybrid(t, true, testmodel.ProjectorOptions{ImageSize: 64}, llamacpp.Config{Parallel: 1})
	ctx := context.Background()
	const turns = 6
	prompt := map[string]int{}
	for _, c := range []struct {
		name string
		w    session.ImageWindow
	}{{"off", session.ImageWindow{Off: true}}, {"by hand", session.ImageWindow{Keep: 2, Batch: 2}}, {"default", session.ImageWindow{}}} {
		st := openStore(t)
		svc := testkit.Service(t, srv, st, func(cfg *session.Config) {
			cfg.Agent.ImageWindow = c.w
			cfg.Vision = session.VisionYes
		})
		sess, err := svc.Open(ctx, session.OpenOptions{Title: c.name})
		if err != nil {
			t.Fatal(err)
		}
		var last int
		for i := range turns {
			im := tools.Image{MIME: "image/png", Data: testkit.PNG(t, 20+i, 20)}
			res, err := sess.Turn(ctx, fmt.Sprintf("screen %d?", i), []tools.Image{im}, nil)
			if err != nil {
				t.Fatalf("%s, turn %d: %v", c.name, i, err)
			}
			last = res.Final.Timings.PromptN + res.Final.Timings.CacheN
		}
		prompt[c.name] = last
		msgs, err := st.Messages(ctx, sess.ID())
		if err != nil {
			t.Fatal(err)
		}
		stored := 0
		for _, m := range msgs {
			stored += len(m.Images)
		}
		if stored != turns {
			t.Errorf("%s: the store holds %d images, want all %d", c.name, stored, turns)
		}
		sess.Close()
		again, err := svc.Open(ctx, session.OpenOptions{Resume: sess.ID()})
		if err != nil {
			t.Fatal(err)
		}
		held := 0
		for _, m := range again.History() {
			held += len(m.Images)
		}
		if held != turns {
			t.Errorf("%s: the resumed session holds %d images, want %d", c.name, held, turns)
		}
		again.Close()
	}
	t.Logf("last request's prompt tokens: %v", prompt)
	if prompt["by hand"] >= prompt["off"] || prompt["default"] >= prompt["off"] {
		t.Errorf("with the window the last request should be shorter than with every image: %v", prompt)
	}
}

// TestPerImageCostIsMeasured: a screenshot chat on a real llama-server with the window (2 to 3 images a request)
// measures what each image a request carries costs it, from the requests' own timings, into the engine's cost
// model in place of the preset (the model a launch's window is chosen from: Service.imageWindow).
func TestPerImageCostIsMeasured(t *testing.T) {
	srv := enginetest.TinyHybrid(t, true, testmodel.ProjectorOptions{ImageSize: 64}, llamacpp.Config{Parallel: 1})
	ctx := context.Background()
	preset := swap.H200Costs()
	svc := testkit.Service(t, srv, nil, func(cfg *session.Config) {
		cfg.Vision = session.VisionYes
		cfg.Agent.ImageWindow = session.ImageWindow{Keep: 2, Batch: 2}
		cfg.EngineCosts = func(r conductor.Ready) (session.EngineCosts, bool) {
			return session.EngineCosts{Key: swap.Key{Model: "tiny-hybrid"}, Defaults: preset}, true
		}
	})
	sess, err := svc.Open(ctx, session.OpenOptions{Title: "costs"})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	for i := range 6 {
		im := tools.Image{MIME: "image/png", Data: testkit.PNG(t, 40+i, 20)}
		if _, err := sess.Turn(ctx, fmt.Sprintf("screen %d?", i), []tools.Image{im}, nil); err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
	}
	c, ok := svc.Costs()
	if !ok {
		t.Fatal("no cost model for the engine")
	}
	t.Logf("per-image request cost %s from %d samples (preset %s)", c.CachedImage.D(), c.Samples["cached_image"], preset.CachedImage.D())
	if c.Samples["cached_image"] == 0 {
		t.Fatalf("six requests of 1 to 3 images measured no per-image cost: %v", c.Samples)
	}
	if c.CachedImage == preset.CachedImage {
		t.Errorf("the per-image cost is still the preset's %s", preset.CachedImage.D())
	}
}

// TestCutPlannedAtTurnEnd: in a chat whose screenshots are sent as soon as taken (no lead to hide anything in),
// the turn after which the next screenshot moves the window's cut ends with the session evaluating the
// shortened history ahead, so the next turn's request evaluates its new image and text but not the kept image
// again; without lookahead (the baseline, same server) it does. Asserted by the server's evaluated tokens.
func TestCutPlannedAtTurnEnd(t *testing.T) {
	srv := enginetest.TinyHybrid(t, true, testmodel.ProjectorOptions{ImageSize: 64}, llamacpp.Config{Parallel: 1})
	ctx := context.Background()
	const imageTokens = 64
	last := map[bool]int{}
	for _, ahead := range []bool{false, true} {
		svc := testkit.Service(t, srv, nil, func(cfg *session.Config) {
			cfg.Vision = session.VisionYes
			cfg.NoPrefill = !ahead
			cfg.Agent.ImageWindow = session.ImageWindow{Keep: 2, Batch: 2}
		})
		sess, err := svc.Open(ctx, session.OpenOptions{Title: fmt.Sprintf("ahead %v", ahead)})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 4 { // the fourth image moves the cut: 2 of 4 left out
			if err := sess.WaitAhead(ctx); err != nil {
				t.Fatal(err)
			}
			im := tools.Image{MIME: "image/png", Data: testkit.PNG(t, 60+i, 20)}
			res, err := sess.Turn(ctx, fmt.Sprintf("screen %d?", i), []tools.Image{im}, nil)
			if err != nil || res.Final.Timings == nil {
				t.Fatalf("ahead %v, turn %d: %+v %v", ahead, i, res.Final, err)
			}
			last[ahead] = res.Final.Timings.PromptN
		}
		sess.Close()
	}
	t.Logf("the cutting turn's request evaluated %d tokens without lookahead, %d with the cut planned ahead", last[false], last[true])
	if last[true]+imageTokens > last[false] {
		t.Errorf("the cutting turn evaluated %d tokens with the cut planned ahead, %d without: the kept image's %d tokens "+
			"should have been evaluated at the previous turn's end", last[true], last[false], imageTokens)
	}
}
