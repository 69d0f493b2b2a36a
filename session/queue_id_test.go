package session

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/tools"
)

// TestQueuedPrefillWhileCompacting queues a turn with an image behind another session's running turn, so the
// queue prefills it in the spare server slot, while the session's id is moved to its linked session under the
// session's lock, as compaction's keep does (run with -race: the queue's kick and its prefill goroutine read
// the id without that lock). The prefill is still kept as the session's queued engine event.
func TestQueuedPrefillWhileCompacting(t *testing.T) {
	ctx := context.Background()
	st, err := memory.Open(ctx, filepath.Join(t.TempDir(), "v.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	g := &gate{block: map[string]bool{}} // nothing held: the engine and the agent answer at once
	svc, err := New(Config{Engine: gatedEngine{g}, Store: st, Vision: VisionYes, Slots: 1, ServerSlots: 2,
		NewAgent: func(conductor.Ready, llamacpp.Props) (Agent, error) { return gatedAgent{g}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	other, err := svc.Open(ctx, OpenOptions{Title: "running"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	row, err := st.CreateSession(ctx, memory.Session{Title: "queued"})
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
	sess, err := svc.Open(ctx, OpenOptions{Resume: row.ID})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if err := sess.WaitAhead(ctx); err != nil { // the resumed history's prefill: done before the test's goroutines start
		t.Fatal(err)
	}
	first := sess.ID()
	linked, err := st.CreateLinkedSession(ctx, first, memory.Message{Role: "user", Content: "summary: hi, hello"}, 0)
	if err != nil {
		t.Fatal(err)
	}

	q := svc.queue
	leave, err := q.enter(ctx, &ticket{sess: other, emit: func(agent.Event) {}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sess.mu.Lock()
		sess.id = linked.ID
		sess.mu.Unlock()
	}()
	prefilled := make(chan string, 1)
	queued := &ticket{sess: sess, user: agent.Message{Role: "user", Content: "what is it?", Images: []tools.Image{{Data: testPNG(t), MIME: "image/png"}}},
		emit: func(ev agent.Event) {
			if n, ok := ev.(agent.Notice); ok {
				prefilled <- n.Text
			}
		}}
	admitted := make(chan error, 1)
	var release func()
	go func() {
		var err error
		release, err = q.enter(ctx, queued)
		admitted <- err
	}()
	notice := <-prefilled
	leave()
	if err := <-admitted; err != nil {
		t.Fatal(err)
	}
	release()
	wg.Wait()
	if !strings.Contains(notice, "evaluated ahead") {
		t.Fatalf("the queued turn's notice is %q: want its image evaluated ahead while it waited", notice)
	}
	var kept []string
	for _, id := range []string{first, linked.ID} {
		evs, err := st.EngineEvents(ctx, id, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Kind == memory.EnginePrefill && strings.Contains(string(e.Detail), `"source":"queued"`) {
				kept = append(kept, id)
			}
		}
	}
	if len(kept) != 1 {
		t.Fatalf("queued prefill events kept under %v: want one, under %s or its linked %s", kept, first, linked.ID)
	}
}
