package session

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/internal/syncbuf"
	"github.com/visorhq/visor/tools"
)

// TestQueuedPrefillWhileCompacting queues a turn with an image behind another session's running turn, so the
// queue prefills it in the spare server slot, while the session's id is moved to its linked session under the
// session's lock, as compaction's keep does (run with -race: the queue's kick and its prefill goroutine read
// the id without that lock). The writer and the queue share nothing but that lock, and the queue's goroutines
// take no session lock of their own, so the race detector sees the unlocked read whichever runs first. The
// prefill is still logged under one of the session's two ids.
func TestQueuedPrefillWhileCompacting(t *testing.T) {
	ctx := context.Background()
	logs := &syncbuf.Buffer{}
	g := &gate{block: map[string]bool{}} // nothing held: the engine and the agent answer at once
	// No store: a stored event would be written through the session's own lock, which would order the
	// reads and the write and hide the race from the detector.
	svc, err := New(Config{Engine: gatedEngine{g}, Vision: VisionYes, Slots: 1, ServerSlots: 2,
		Logger:   slog.New(slog.NewTextHandler(logs, nil)),
		NewAgent: func(conductor.Ready, llamacpp.Props) (Agent, error) { return gatedAgent{g}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	other, err := svc.Open(ctx, OpenOptions{Title: "running"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	sess, err := svc.Open(ctx, OpenOptions{Title: "queued"})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	first := sess.ID()
	linked := first + "-linked"

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
		sess.id = linked
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
	var named []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `msg="prefilled a queued turn"`) {
			for _, id := range []string{linked, first} {
				if strings.Contains(line, "session="+id) {
					named = append(named, id)
					break
				}
			}
		}
	}
	if len(named) != 1 {
		t.Fatalf("the queued prefill was logged under %v: want once, under %s or %s\n%s", named, first, linked, logs.String())
	}
}
