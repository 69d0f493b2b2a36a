package session

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"path/filepath"
	"strings"
	"testing"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/engine/swap"
	"github.com/visorhq/visor/memory"
)

// gate holds each named call until the test lets it go, telling the test which one waits.
type gate struct {
	block   map[string]bool
	entered chan string
	release chan struct{}
}

func (g *gate) wait(name string) {
	if g.block[name] {
		g.entered <- name
		<-g.release
	}
}

// gatedStore is the real store whose engine-event writes wait at the gate: the write a plan does.
type gatedStore struct {
	*memory.Store
	g *gate
}

func (s gatedStore) RecordEngineEvent(ctx context.Context, ev memory.EngineEvent) (int64, error) {
	s.g.wait("record " + string(ev.Kind))
	return s.Store.RecordEngineEvent(ctx, ev)
}

// gatedEngine is ready once the gate lets it be: it stands in for a conductor bringing a server up.
type gatedEngine struct{ g *gate }

func (e gatedEngine) EnsureReady(context.Context) (conductor.Ready, error) {
	e.g.wait("ready")
	return conductor.Ready{Client: engine.NewClient("http://127.0.0.1:9", ""), Generation: 1}, nil
}

func (e gatedEngine) Recover(ctx context.Context) (conductor.Ready, error) { return e.EnsureReady(ctx) }

// gatedAgent answers and prefills once the gate lets it: a turn's request and a prefill in flight.
type gatedAgent struct{ g *gate }

func (a gatedAgent) Run(ctx context.Context, history []agent.Message, user agent.Message, emit func(agent.Event)) agent.Finished {
	a.g.wait("run")
	answer := agent.Message{Role: "assistant", Content: "ok"}
	emit(agent.StepFinished{Step: 1, Messages: []agent.Message{user, answer}})
	return agent.Finished{Final: answer, Steps: 1, Reason: "answer"}
}

func (a gatedAgent) Prefill(context.Context, []agent.Message, agent.Message) (*engine.Timings, error) {
	a.g.wait("prefill")
	return &engine.Timings{}, nil
}

func testPNG(t *testing.T) []byte {
	t.Helper()
	im := image.NewRGBA(image.Rect(0, 0, 8, 8))
	for i := range im.Pix {
		im.Pix[i] = byte(i)
	}
	im.Set(0, 0, color.RGBA{1, 2, 3, 255})
	var b bytes.Buffer
	if err := png.Encode(&b, im); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestStatusDoesNotWaitForTheSessionsWork holds each piece of a session's work in turn — the scheduler's
// decision being stored, the engine coming up, a prefill, the turn's request — and, while it is held, checks that
// the session's lock is free and its Status (the terminal's 100 ms poll) answers with what is going on. Before,
// the plan stored its decisions under the session's lock, and the status poll took that lock.
func TestStatusDoesNotWaitForTheSessionsWork(t *testing.T) {
	ctx := context.Background()
	st, err := memory.Open(ctx, filepath.Join(t.TempDir(), "v.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	row, err := st.CreateSession(ctx, memory.Session{Title: "held"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.BeginTurn(ctx, row.ID); err != nil {
		t.Fatal(err)
	}
	if err := st.AppendStep(ctx, row.ID, memory.Step{Messages: []memory.Message{{Role: "user", Content: "hi"},
		{Role: "assistant", Content: "hello"}}}); err != nil {
		t.Fatal(err)
	}
	if err := st.EndTurn(ctx, row.ID); err != nil {
		t.Fatal(err)
	}
	g := &gate{block: map[string]bool{"record " + string(memory.EngineDecision): true, "record " + string(memory.EnginePrefill): true,
		"ready": true, "prefill": true, "run": true}, entered: make(chan string), release: make(chan struct{})}
	svc, err := New(Config{Engine: gatedEngine{g}, Store: gatedStore{st, g}, Vision: VisionYes,
		Scheduler: &swap.Scheduler{Costs: swap.SeedCosts()},
		NewAgent:  func(conductor.Ready, llamacpp.Props) (Agent, error) { return gatedAgent{g}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := svc.Open(ctx, OpenOptions{Resume: row.ID})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()

	held := map[string]int{}
	// hold serves the gate until done closes: at every held call the lock must be free and the status current.
	hold := func(done <-chan struct{}, check func(name string, st Status)) {
		t.Helper()
		for {
			select {
			case name := <-g.entered:
				held[name]++
				if !sess.mu.TryLock() {
					t.Errorf("while %q is held the session's lock is taken: the status poll would wait for it", name)
				} else {
					sess.mu.Unlock()
				}
				check(name, sess.Status())
				_ = svc.Lookahead() // the service's view reads the same snapshot
				g.release <- struct{}{}
			case <-done:
				return
			}
		}
	}

	// The plan, its stored decisions and the prefill run in the chain, after Attach has returned.
	chained := make(chan struct{})
	go func() {
		defer close(chained)
		if _, err := sess.Attach(ctx, testPNG(t)); err != nil {
			t.Error(err)
		}
		_ = sess.WaitAhead(ctx)
	}()
	hold(chained, func(name string, st Status) {
		if st.PendingImages != 1 || st.Busy {
			t.Errorf("while %q is held: status %+v, want the attached image pending and no turn", name, st)
		}
		if name == "prefill" && st.Ahead != "encoding 1 image ahead" {
			t.Errorf("while the prefill runs the status says %q, want it encoding the image", st.Ahead)
		}
	})
	if held["record "+string(memory.EngineDecision)] == 0 || held["prefill"] == 0 || held["ready"] == 0 {
		t.Fatalf("held %v: the chain did not plan, get the engine and prefill, so the test shows nothing", held)
	}
	if s := sess.Status(); s.Prefilled != 1 || s.Ahead != "1 image encoded" {
		t.Fatalf("after the chain: %+v, want the image encoded ahead", s)
	}

	turned := make(chan struct{})
	var res Result
	go func() {
		defer close(turned)
		res, err = sess.Turn(ctx, "what is it?", nil, nil)
	}()
	hold(turned, func(name string, st Status) {
		if name == "run" && (!st.Busy || st.PendingImages != 1) {
			t.Errorf("while the turn's request is out: status %+v, want busy with the image", st)
		}
	})
	if err != nil || res.Final.Content != "ok" || held["run"] != 1 {
		t.Fatalf("turn: %+v %v (held %v)", res.Final, err, held)
	}
	if s := sess.Status(); s.Busy || s.PendingImages != 0 || s.Stats.Turns != 1 || !s.Stored {
		t.Fatalf("after the turn: %+v", s)
	}
	evs, err := st.EngineEvents(ctx, row.ID, 100)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, string(e.Kind))
	}
	if got := strings.Join(kinds, " "); !strings.Contains(got, string(memory.EngineDecision)) || !strings.Contains(got, string(memory.EnginePrefill)) {
		t.Fatalf("stored events %q: the decision and the prefill should be kept", got)
	}
}
