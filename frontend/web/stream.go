package web

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// tokenFlushEvery is how long streamed text may wait before it is sent. A fast model writes hundreds of tokens
// a second, and an event and a flush each cost the page a read, a parse and a wake-up each: for a long answer it
// then spends its time on the stream, not on the text. The text of one interval goes out as one event; 25 ms is
// below what a reader notices.
const tokenFlushEvery = 25 * time.Millisecond

// eventStream writes server-sent events: the text of "token" (and "reasoning") events is joined and sent at
// most every tokenFlushEvery, every other event (a tool call, the end of the turn) at once, after the text
// before it.
type eventStream struct {
	mu       sync.Mutex
	w        io.Writer
	flusher  http.Flusher
	kind     string // of the text held
	held     strings.Builder
	stop     chan struct{}
	finished chan struct{}
}

func newEventStream(w io.Writer, f http.Flusher) *eventStream {
	s := &eventStream{w: w, flusher: f, stop: make(chan struct{}), finished: make(chan struct{})}
	go s.flushLoop()
	return s
}

func (s *eventStream) flushLoop() {
	defer close(s.finished)
	t := time.NewTicker(tokenFlushEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.mu.Lock()
			if s.writeHeld() {
				s.flusher.Flush()
			}
			s.mu.Unlock()
		case <-s.stop:
			return
		}
	}
}

// writeHeld writes the held text as one event and reports whether there was any. Called with s.mu held.
func (s *eventStream) writeHeld() bool {
	if s.held.Len() == 0 {
		return false
	}
	s.write(s.kind, map[string]string{"text": s.held.String()})
	s.held.Reset()
	return true
}

func (s *eventStream) write(kind string, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", kind, b)
}

// text holds streamed text of kind ("token" or "reasoning") for the next flush.
func (s *eventStream) text(kind, t string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if kind != s.kind {
		s.writeHeld()
		s.kind = kind
	}
	s.held.WriteString(t)
}

// send writes an event at once, after the text held before it.
func (s *eventStream) send(kind string, v any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writeHeld()
	s.write(kind, v)
	s.flusher.Flush()
}

// close stops the timer and sends what is held; the handler may return after it.
func (s *eventStream) close() {
	close(s.stop)
	<-s.finished
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.writeHeld() {
		s.flusher.Flush()
	}
}
