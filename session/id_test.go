package session_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testkit"
	"github.com/visorhq/visor/session"
)

// TestIDWhileCompacting reads the session's id and status from another goroutine, as a front end's list does,
// while a turn compacts the conversation into a linked session and moves the session to it (run with -race: the
// id was read without the lock keep writes it under). The id read afterwards is the linked session's.
func TestIDWhileCompacting(t *testing.T) {
	srv := enginetest.Tiny(t, false, llamacpp.Config{Ctx: 1536})
	st := openStore(t)
	svc := testkit.Service(t, srv, st, nil)
	ctx := context.Background()
	sess, err := svc.Open(ctx, session.OpenOptions{Title: "long"})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	// ~1,320 byte tokens in a 1,536-token context: over 3/4 of it, so the next turn compacts first.
	if _, err := sess.Turn(ctx, strings.Repeat("lorem ", 220), nil, nil); err != nil {
		t.Fatal(err)
	}
	first := sess.ID()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	seen := map[string]bool{}
	reading := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		once := sync.OnceFunc(func() { close(reading) })
		for {
			seen[sess.ID()] = true
			_ = sess.Status()
			once()
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	// The turn starts once the reader has read: on a busy machine the reader's goroutine could otherwise first
	// run after the compaction, and never see the old id.
	<-reading
	res, err := sess.Turn(ctx, "And now?", nil, nil)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.SessionID == first || sess.ID() != res.SessionID {
		t.Fatalf("after compaction the session is %q (turn said %q, before %q): want the linked session", sess.ID(), res.SessionID, first)
	}
	if !seen[first] {
		t.Errorf("the reader never saw the id before compaction: %v", seen)
	}
	if parent, err := st.Session(ctx, res.SessionID); err != nil || parent.ParentID != first {
		t.Errorf("linked session %+v (%v): want one whose parent is %s", parent, err, first)
	}
}
