package session_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/engine/swap"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testkit"
	"github.com/visorhq/visor/internal/testmodel"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/session"
	"github.com/visorhq/visor/tools"
)

func openStore(t *testing.T) *memory.Store {
	t.Helper()
	st, err := memory.Open(context.Background(), filepath.Join(t.TempDir(), "v.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestRejectedTurnIsNeverReplayed sends a message the real server refuses (over its context): the turn is kept
// in the store, marked, and neither the next turn nor a resumed session sends it again.
func TestRejectedTurnIsNeverReplayed(t *testing.T) {
	srv := enginetest.Tiny(t, false, llamacpp.Config{Ctx: 512})
	st := openStore(t)
	svc := testkit.Service(t, srv, st, nil)
	ctx := context.Background()
	sess, err := svc.Open(ctx, session.OpenOptions{Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("x", 2000)
	_, err = sess.Turn(ctx, huge, nil, nil)
	if !errors.Is(err, session.ErrRejected) {
		t.Fatalf("over-context turn: %v, want ErrRejected", err)
	}
	res, err := sess.Turn(ctx, "hello", nil, nil)
	if err != nil || res.Final.Content != "Hi!" {
		t.Fatalf("the turn after a rejected one: %q %v", res.Final.Content, err)
	}
	if tm := res.Final.Timings; tm == nil || tm.PromptN+tm.CacheN > 100 {
		t.Fatalf("the next request carried the rejected text: %+v", tm)
	}
	msgs, err := st.Messages(ctx, sess.ID())
	if err != nil {
		t.Fatal(err)
	}
	rejected := 0
	for _, m := range msgs {
		if m.Content == huge {
			if !m.Rejected {
				t.Fatalf("the rejected message is stored unmarked: %+v", m)
			}
			rejected++
		}
	}
	if rejected != 1 {
		t.Fatalf("the rejected message is stored %d times, want once (kept for the record)", rejected)
	}
	sess.Close()
	again, err := svc.Open(ctx, session.OpenOptions{Resume: sess.ID()})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range again.History() {
		if m.Content == huge {
			t.Fatal("a resumed session replays the rejected turn")
		}
	}
	if res, err := again.Turn(ctx, "and now?", nil, nil); err != nil || res.Final.Content != "Hi!" {
		t.Fatalf("resumed turn: %q %v", res.Final.Content, err)
	}
}

// TestOneTurnAtATimePerSession runs turns on one session from several goroutines, as two front ends could: they
// run one after another and the history stays whole and in order.
func TestOneTurnAtATimePerSession(t *testing.T) {
	srv := enginetest.Tiny(t, false, llamacpp.Config{Parallel: 2})
	st := openStore(t)
	svc := testkit.Service(t, srv, st, nil)
	ctx := context.Background()
	a, err := svc.Open(ctx, session.OpenOptions{Title: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := svc.Open(ctx, session.OpenOptions{Resume: a.ID()})
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatal("opening an open session twice gave two handles: their turns would interleave")
	}
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := a.Turn(ctx, "hello", nil, nil); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	msgs, err := st.Messages(ctx, a.ID())
	if err != nil || len(msgs) != 8 {
		t.Fatalf("%d stored messages, %v; want 8", len(msgs), err)
	}
	for i, m := range msgs {
		want := []string{"user", "assistant"}[i%2]
		if m.Role != want {
			t.Fatalf("message %d is %s, want %s: turns interleaved", i, m.Role, want)
		}
	}
	if h := a.History(); len(h) != 8 {
		t.Fatalf("in-memory history has %d messages", len(h))
	}
}

// TestAttachIsPrefilledAndSeenInLookahead attaches a screenshot: the lookahead reports it, the engine evaluates
// it before the question, and the question's request finds it in the cache.
func TestAttachIsPrefilledAndSeenInLookahead(t *testing.T) {
	srv := enginetest.Tiny(t, true, llamacpp.Config{})
	st := openStore(t)
	svc := testkit.Service(t, srv, st, func(c *session.Config) {
		c.Vision = session.VisionYes
		c.Scheduler = &swap.Scheduler{Costs: swap.SeedCosts()}
	})
	ctx := context.Background()
	sess, err := svc.Open(ctx, session.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.Attach(ctx, testkit.PNG(t, 16, 16)); err != nil {
		t.Fatal(err)
	}
	la := svc.Lookahead()
	if len(la.Sessions) != 1 || la.Sessions[0].PendingImages != 1 || la.Sessions[0].KnownSince.IsZero() {
		t.Fatalf("lookahead %+v", la)
	}
	var pending []agent.ImagesPending
	res, err := sess.Turn(ctx, "what is it?", nil, func(ev agent.Event) {
		if p, ok := ev.(agent.ImagesPending); ok {
			pending = append(pending, p)
		}
	})
	if err != nil || res.Final.Content != "Hi!" {
		t.Fatalf("%q %v", res.Final.Content, err)
	}
	if tm := res.Final.Timings; tm == nil || tm.CacheN < 16 {
		t.Fatalf("the prefilled image was not in the cache: %+v", tm)
	}
	if la := svc.Lookahead(); la.Sessions[0].PendingImages != 0 {
		t.Fatalf("sent images still pending: %+v", la)
	}
	if _, err := sess.Attach(ctx, []byte("not an image")); err == nil {
		t.Fatal("a text file was attached")
	}
	evs, err := st.EngineEvents(ctx, sess.ID(), 100)
	if err != nil {
		t.Fatal(err)
	}
	var decided, prefilled bool
	for _, e := range evs {
		decided = decided || e.Kind == memory.EngineDecision && strings.Contains(string(e.Detail), "so the request finds them encoded")
		prefilled = prefilled || e.Kind == memory.EnginePrefill
	}
	if !decided || !prefilled {
		t.Fatalf("the scheduler's decision and the prefill it led to are not both in the store: %+v", evs)
	}
}

// TestImagesSentWithAMessageCountTowardTheBounds: images that come with a message's text (an MCP call, ask
// --image, agent-file steps) are held to the same bounds as attached ones: per message (with what was attached
// before) and per conversation, which every image stays in. Before, only Attach checked them.
func TestImagesSentWithAMessageCountTowardTheBounds(t *testing.T) {
	srv := enginetest.Tiny(t, true, llamacpp.Config{})
	shot := testkit.PNG(t, 24, 24)
	img := tools.Image{MIME: "image/png", Data: shot}
	svc := testkit.Service(t, srv, nil, func(c *session.Config) {
		c.MaxPendingImages, c.MaxSessionImageBytes = 2, int64(3*len(shot)+10)
	})
	ctx := context.Background()
	sess, err := svc.Open(ctx, session.OpenOptions{Title: "bounds"})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	wantLimit := func(what string, err error, words string) {
		t.Helper()
		if !errors.Is(err, session.ErrLimit) || !strings.Contains(err.Error(), words) {
			t.Errorf("%s: %v, want ErrLimit saying %q", what, err, words)
		}
	}
	_, err = sess.Turn(ctx, "three at once", []tools.Image{img, img, img}, nil)
	wantLimit("three images with one message", err, "the most one message may carry is 2")
	if _, err := sess.Attach(ctx, shot); err != nil {
		t.Fatal(err)
	}
	_, err = sess.Turn(ctx, "one more beside the attached one", []tools.Image{img, img}, nil)
	wantLimit("two sent beside one attached", err, "(2 sent with it, 1 attached before)")
	// The attached image is still there for the next message, and two fit.
	if _, err := sess.Turn(ctx, "and this one", []tools.Image{img}, nil); err != nil {
		t.Fatalf("two images in one message: %v", err)
	}
	if _, err := sess.Turn(ctx, "a third", []tools.Image{img}, nil); err != nil {
		t.Fatalf("the conversation's third image: %v", err)
	}
	_, err = sess.Turn(ctx, "a fourth", []tools.Image{img}, nil)
	wantLimit("the conversation's fourth image", err, "start a new session")
	_, err = sess.Steps(ctx, []session.Step{{Text: "step", Images: []tools.Image{img}}}, nil, nil)
	wantLimit("a step's image past the conversation's bound", err, "split the steps over sessions")
}

// TestAnswerStandsWhenStoringFails: the real SQLite store is closed while a turn's answer streams; the turn still
// answers, and its error says only the keeping failed (ErrNotStored), so a front end can give the
// answer and report the rest. A turn refused before it ran is never ErrNotStored.
func TestAnswerStandsWhenStoringFails(t *testing.T) {
	srv := enginetest.Tiny(t, true, llamacpp.Config{})
	st := openStore(t)
	svc := testkit.Service(t, srv, st, func(c *session.Config) { c.MaxPendingImages = 1 })
	ctx := context.Background()
	sess, err := svc.Open(ctx, session.OpenOptions{Title: "store goes away"})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	img := tools.Image{MIME: "image/png", Data: testkit.PNG(t, 24, 24)}
	if _, err := sess.Turn(ctx, "two", []tools.Image{img, img}, nil); !errors.Is(err, session.ErrLimit) || errors.Is(err, session.ErrNotStored) {
		t.Fatalf("a refused turn: %v, want ErrLimit and not ErrNotStored", err)
	}
	// The store goes away while the answer streams: the turn was begun in it, its messages cannot be written.
	var once sync.Once
	res, err := sess.Turn(ctx, "hello", nil, func(ev agent.Event) {
		if _, ok := ev.(agent.Token); ok {
			once.Do(func() { st.Close() })
		}
	})
	if !errors.Is(err, session.ErrNotStored) {
		t.Fatalf("turn on a closed store: %v, want ErrNotStored", err)
	}
	if res.Finished.Err != nil || res.Finished.Final.Content != testmodel.Answer {
		t.Fatalf("the answer did not stand: %+v", res.Finished)
	}
}
