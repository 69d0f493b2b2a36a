package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// sseStarted is the response writer of a stream whose headers went out before the engine was ready (the
// client was shown the model loading): later headers are dropped, and errors go out as a stream event.
type sseStarted struct {
	http.ResponseWriter
	mu sync.Mutex // the loading comments are written from their own goroutine
}

func (s *sseStarted) WriteHeader(int) {}

func (s *sseStarted) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ResponseWriter.Write(b)
}

func (s *sseStarted) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// streamError ends a started stream with an error event in OpenAI's shape (the SDKs raise it) and [DONE].
func streamError(w io.Writer, typ, code, msg string) {
	e := map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}
	if code != "" {
		e["code"] = code
	}
	b, _ := json.Marshal(map[string]any{"error": e})
	fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// showLoading starts a streamed answer while name's engine loads: the headers go out at once, then an SSE
// comment (which clients ignore) after a second and every 5 s, saying how long the load has taken, so a client
// waiting on a large model sees progress rather than a silent connection it may time out. Not more often:
// go-openai counts such lines against its limit of 300 empty messages. go-openai also reads every line that is
// not data into the error it parses should an error event follow, so after a comment a failed load reached it
// as "unexpected end of JSON input"; a Go client that names itself no other way (go-openai sends Go's own
// User-Agent) is sent empty lines instead, which it and every SSE parser skip. stop ends the notices.
func showLoading(w http.ResponseWriter, r *http.Request, name string) (started *sseStarted, stop func()) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	s := &sseStarted{ResponseWriter: w}
	t0 := time.Now()
	comments := !strings.HasPrefix(r.UserAgent(), "Go-http-client/")
	say := func() {
		if comments {
			fmt.Fprintf(s, ": loading model %s (%.0f s)\n\n", name, time.Since(t0).Seconds())
		} else {
			_, _ = io.WriteString(s, "\n")
		}
		s.Flush()
	}
	s.Flush()
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTimer(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				say()
				t.Reset(5 * time.Second)
			}
		}
	}()
	return s, func() {
		close(done)
		<-finished
	}
}
