package session_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/engine/swap"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testkit"
	"github.com/visorhq/visor/internal/testmodel"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/session"
)

// prefillSlack is how many tokens beyond its new text a request after a prefill may evaluate (issue 11).
const prefillSlack = 8

// newTurnText is what a user turn adds to a prompt that ends after the previous answer's end of turn.
func newTurnText(text string) string {
	return "<|im_start|>user\n" + text + "<|im_end|>\n<|im_start|>assistant\n"
}

// storedWithImage writes a finished session whose first message carries an image, as an earlier run of visor
// would have left it: the server at hand has never seen it.
func storedWithImage(t *testing.T, st *memory.Store, seed int) string {
	t.Helper()
	ctx := context.Background()
	sess, err := st.CreateSession(ctx, memory.Session{Title: "shot", Agent: "visor"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.BeginTurn(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	if err := st.AppendStep(ctx, sess.ID, memory.Step{Messages: []memory.Message{
		{Role: "user", Content: "what is on screen?", Images: []memory.Image{{Data: testkit.PNG(t, 16+seed, 16)}}},
		{Role: "assistant", Content: testmodel.Answer},
	}}); err != nil {
		t.Fatal(err)
	}
	if err := st.EndTurn(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	return sess.ID
}

// lastPrefill is the timings of the session's latest successful prefill event.
func lastPrefill(t *testing.T, st *memory.Store, id string) engine.Timings {
	t.Helper()
	evs, err := st.EngineEvents(context.Background(), id, 100)
	if err != nil {
		t.Fatal(err)
	}
	var tm engine.Timings
	found := false
	for _, e := range evs {
		if e.Kind == memory.EnginePrefill {
			var d struct{ PromptN, CacheN int }
			var raw map[string]json.RawMessage
			_ = json.Unmarshal(e.Detail, &raw)
			_ = json.Unmarshal(raw["prompt_n"], &d.PromptN)
			_ = json.Unmarshal(raw["cache_n"], &d.CacheN)
			tm, found = engine.Timings{PromptN: d.PromptN, CacheN: d.CacheN}, true
		}
	}
	if !found {
		t.Errorf("no prefill event in session %s: %+v", id, evs)
	}
	return tm
}

// TestResumedHistoryIsPrefilled resumes stored sessions whose history holds an image on a server that has never
// seen them (on the hybrid model, whose cache cannot be cut back): with lookahead the service evaluates the
// history in the background at once, and the first turn's request evaluates only its new text, the image coming
// from the cache; without it (the baseline, same server) that request encodes the image again. Then the engine
// relaunches (its cache is gone) and the service evaluates the history again before the next turn.
func TestResumedHistoryIsPrefilled(t *testing.T) {
	var last *llamacpp.Server
	var mu sync.Mutex
	launch := func(ctx context.Context, mode string) (conductor.Process, error) {
		mu.Lock()
		defer mu.Unlock()
		if last == nil {
			last = enginetest.TinyHybrid(t, true, testmodel.ProjectorOptions{}, llamacpp.Config{Parallel: 1})
			return last, nil
		}
		srv, err := last.Restart(ctx)
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { _ = srv.Stop(context.Background()) })
		last = srv
		return srv, nil
	}
	st := openStore(t)
	ctx := context.Background()
	var svc *session.Service
	readyEvents := make(chan struct{}, 4)
	cond := conductor.New(conductor.Config{Launch: launch, OnEvent: func(ev conductor.Event) {
		if svc != nil {
			svc.RecordEngineEvent(ev)
		}
		if ev.Kind == conductor.EventReady {
			readyEvents <- struct{}{}
		}
	}})
	t.Cleanup(func() { _ = cond.Close(context.Background()) })
	newService := func(noPrefill bool) *session.Service {
		s, err := session.New(session.Config{Engine: cond, Store: st, Vision: session.VisionYes, NoPrefill: noPrefill,
			Scheduler: &swap.Scheduler{Costs: swap.SeedCosts()}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	question := "and now?"
	want := testmodel.TokenCount(newTurnText(question)) + prefillSlack
	turn := func(sess *session.Session) *engine.Timings {
		t.Helper()
		res, err := sess.Turn(ctx, question, nil, nil)
		if err != nil || res.Final.Content != testmodel.Answer || res.Final.Timings == nil {
			t.Fatalf("turn: %+v %v", res.Final, err)
		}
		return res.Final.Timings
	}

	// Without lookahead: the baseline, which must pay the image.
	base, err := newService(true).Open(ctx, session.OpenOptions{Resume: storedWithImage(t, st, 1)})
	if err != nil {
		t.Fatal(err)
	}
	off := turn(base)
	base.Close()
	<-readyEvents
	if off.PromptN <= want {
		t.Fatalf("without lookahead the resumed turn evaluated only %d tokens (≤ %d): the test cannot tell the feature", off.PromptN, want)
	}

	svc = newService(false)
	id := storedWithImage(t, st, 2)
	sess, err := svc.Open(ctx, session.OpenOptions{Resume: id})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if err := sess.WaitAhead(ctx); err != nil {
		t.Fatal(err)
	}
	on := turn(sess)
	pre := lastPrefill(t, st, id)
	t.Logf("resumed: without lookahead prompt_n %d (cache_n %d); with: prefill %d, turn prompt_n %d, cache_n %d; new text %d tokens",
		off.PromptN, off.CacheN, pre.PromptN, on.PromptN, on.CacheN, want-prefillSlack)
	if on.PromptN > want {
		t.Errorf("the first turn after resume evaluated %d tokens, want ≤ %d: the history was not prefilled", on.PromptN, want)
	}
	if on.CacheN < pre.PromptN+pre.CacheN {
		t.Errorf("the turn reused %d cached tokens, want the %d the prefill left (image included)", on.CacheN, pre.PromptN+pre.CacheN)
	}

	// The engine relaunches: its cache is empty, and the service warms the history again on its own.
	if _, err := cond.Relaunch(ctx, "again"); err != nil {
		t.Fatal(err)
	}
	<-readyEvents
	if err := sess.WaitAhead(ctx); err != nil {
		t.Fatal(err)
	}
	after := turn(sess)
	again := lastPrefill(t, st, id)
	t.Logf("after relaunch: prefill %d, turn prompt_n %d, cache_n %d", again.PromptN, after.PromptN, after.CacheN)
	if after.PromptN > want {
		t.Errorf("the first turn after a relaunch evaluated %d tokens, want ≤ %d: the history was not prefilled again", after.PromptN, want)
	}
	if again.PromptN+again.CacheN <= pre.PromptN+pre.CacheN || after.CacheN < again.PromptN+again.CacheN {
		t.Errorf("the relaunched engine's prefill (%+v) did not cover the longer history, or the turn did not reuse it (cache_n %d)", again, after.CacheN)
	}
	var decided bool
	evs, _ := st.EngineEvents(ctx, id, 100)
	for _, e := range evs {
		decided = decided || e.Kind == memory.EngineDecision && strings.Contains(string(e.Detail), "prefill")
	}
	if !decided {
		t.Errorf("the scheduler's prefill decision for the history is not stored: %+v", evs)
	}
}

// slowAgent answers once released, and records the images of each request and prefill. It stands in for the
// model only to hold a turn open at a chosen moment, which a real server cannot be asked to do.
type slowAgent struct {
	started  chan struct{} // gets a value when a turn's request is out
	release  chan struct{}
	mu       sync.Mutex
	sent     []int // images per turn
	prefills []int // images per prefill
}

func (a *slowAgent) Run(ctx context.Context, history []agent.Message, user agent.Message, emit func(agent.Event)) agent.Finished {
	a.mu.Lock()
	a.sent = append(a.sent, len(user.Images))
	a.mu.Unlock()
	a.started <- struct{}{}
	<-a.release
	answer := agent.Message{Role: "assistant", Content: "ok"}
	emit(agent.StepFinished{Messages: []agent.Message{user, answer}})
	return agent.Finished{Final: answer, Steps: 1}
}

func (a *slowAgent) Prefill(ctx context.Context, history []agent.Message, user agent.Message) (*engine.Timings, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.prefills = append(a.prefills, len(user.Images))
	return &engine.Timings{}, nil
}

// TestImageAttachedDuringATurnIsForTheNext: an image attached while a turn runs is not lost when the turn ends
// (it used to be dropped with the turn's own) and not sent mid-turn: it is the next message's, prefilled as soon
// as the turn is done.
func TestImageAttachedDuringATurnIsForTheNext(t *testing.T) {
	a := &slowAgent{started: make(chan struct{}, 2), release: make(chan struct{})}
	svc := testkit.FakeService(t, a, nil)
	ctx := context.Background()
	sess, err := svc.Open(ctx, session.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := sess.Turn(ctx, "first", nil, nil)
		done <- err
	}()
	<-a.started
	if _, err := sess.Attach(ctx, testkit.PNG(t, 8, 8)); err != nil {
		t.Fatal(err)
	}
	close(a.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := sess.WaitAhead(ctx); err != nil {
		t.Fatal(err)
	}
	if sess.Pending() != 1 {
		t.Fatalf("%d images pending after the turn, want the one attached during it", sess.Pending())
	}
	if _, err := sess.Turn(ctx, "second", nil, nil); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.sent) != 2 || a.sent[0] != 0 || a.sent[1] != 1 || len(a.prefills) != 1 || a.prefills[0] != 1 {
		t.Fatalf("images per turn %v, per prefill %v; want [0 1] and one prefill of the attached image after the first turn", a.sent, a.prefills)
	}
}
