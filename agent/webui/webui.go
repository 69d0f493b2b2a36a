// Package webui serves a browser chat with screenshots over a visor agent: paste or drop an image and the server
// has the engine encode it at once (Agent.Prefill), while the question is still being typed; answers, tool calls
// and tool results stream back as server-sent events from the agent's event stream. It listens on loopback only
// and keeps sessions in memory's store when one is given. It does not build the agent or start the engine.
package webui

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/tools"
)

//go:embed index.html
var indexHTML []byte

// Agent is what the UI needs from the agent; *agent.Agent implements it.
type Agent interface {
	Run(ctx context.Context, history []agent.Message, user agent.Message, emit func(agent.Event)) agent.Finished
	Prefill(ctx context.Context, history []agent.Message, user agent.Message) (*engine.Timings, error)
}

// Store keeps conversations; *memory.Store implements it. Nil keeps them in this process only.
type Store interface {
	agent.TurnStore
	CreateSession(ctx context.Context, sess memory.Session) (memory.Session, error)
}

// Config sets up a Server.
type Config struct {
	Agent  Agent
	Store  Store // optional
	Name   string
	Logger *slog.Logger
	// MaxImageBytes bounds one attached image; default 20 MiB.
	MaxImageBytes int
}

// Server is the chat's HTTP handler.
type Server struct {
	cfg Config
	mux *http.ServeMux

	mu       sync.Mutex
	sessions map[string]*session
}

type session struct {
	mu      sync.Mutex // one turn at a time
	id      string
	history []agent.Message
	pending []tools.Image
	prefill chan struct{} // closed when the pending images' prefill finished
}

// New returns the chat server.
func New(cfg Config) (*Server, error) {
	if cfg.Agent == nil {
		return nil, errors.New("webui: Config.Agent is nil")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxImageBytes <= 0 {
		cfg.MaxImageBytes = 20 << 20
	}
	if cfg.Name == "" {
		cfg.Name = "visor"
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), sessions: map[string]*session{}}
	s.mux.HandleFunc("GET /{$}", s.index)
	s.mux.HandleFunc("POST /api/sessions", s.newSession)
	s.mux.HandleFunc("POST /api/sessions/{id}/attach", s.attach)
	s.mux.HandleFunc("POST /api/sessions/{id}/send", s.send)
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// ListenAndServe serves on addr (a loopback address) until ctx ends; ready, when set, receives the bound address.
func (s *Server) ListenAndServe(ctx context.Context, addr string, ready func(net.Addr)) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("webui: address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("webui: %s is not a loopback address: the chat has no authentication, so it serves on 127.0.0.1 only", addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("webui: %w", err)
	}
	if ready != nil {
		ready(l.Addr())
	}
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(shut)
	}()
	if err := hs.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (s *Server) index(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(indexHTML)
}

func httpError(w http.ResponseWriter, status int, format string, a ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": fmt.Sprintf(format, a...)})
}

func (s *Server) newSession(w http.ResponseWriter, r *http.Request) {
	sess := &session{}
	if s.cfg.Store != nil {
		st, err := s.cfg.Store.CreateSession(r.Context(), memory.Session{Title: "web chat " + time.Now().Format("2006-01-02 15:04"), Agent: "web"})
		if err != nil {
			httpError(w, http.StatusInternalServerError, "create session: %v", err)
			return
		}
		sess.id = st.ID
	} else {
		sess.id = fmt.Sprintf("local-%d", time.Now().UnixNano())
	}
	s.mu.Lock()
	s.sessions[sess.id] = sess
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"session": sess.id})
}

func (s *Server) session(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[id]
}

// attach takes one image (the raw file bytes as the body) for the session's next message and prefills it.
func (s *Server) attach(w http.ResponseWriter, r *http.Request) {
	sess := s.session(r.PathValue("id"))
	if sess == nil {
		httpError(w, http.StatusNotFound, "no session %q: create one with POST /api/sessions", r.PathValue("id"))
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(s.cfg.MaxImageBytes)))
	if err != nil {
		httpError(w, http.StatusRequestEntityTooLarge, "the image is larger than %d bytes or could not be read: %v", s.cfg.MaxImageBytes, err)
		return
	}
	if len(data) == 0 {
		httpError(w, http.StatusBadRequest, "empty attachment: send the image file's bytes as the request body")
		return
	}
	mime := http.DetectContentType(data)
	switch mime {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
	default:
		httpError(w, http.StatusUnsupportedMediaType, "the attachment is %s, not a PNG, JPEG, GIF or WebP image", mime)
		return
	}
	sess.mu.Lock()
	sess.waitPrefill()
	sess.pending = append(sess.pending, tools.Image{MIME: mime, Data: data})
	history, user := append([]agent.Message(nil), sess.history...), agent.Message{Role: "user", Images: sess.pending}
	done := make(chan struct{})
	sess.prefill = done
	sess.mu.Unlock()
	// The encode runs while the user types; the answer waits for it (send), so the two never race for a slot.
	go func() {
		defer close(done)
		if _, err := s.cfg.Agent.Prefill(context.WithoutCancel(r.Context()), history, user); err != nil {
			s.cfg.Logger.Warn("prefill failed; the image will be encoded with the question", "err", err)
		}
	}()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"attached": len(user.Images), "bytes": len(data), "mime": mime})
}

func (sess *session) waitPrefill() {
	if sess.prefill != nil {
		<-sess.prefill
		sess.prefill = nil
	}
}

// send runs one turn for {"text": …} with the attached images and streams its events as server-sent events.
func (s *Server) send(w http.ResponseWriter, r *http.Request) {
	sess := s.session(r.PathValue("id"))
	if sess == nil {
		httpError(w, http.StatusNotFound, "no session %q: create one with POST /api/sessions", r.PathValue("id"))
		return
	}
	var in struct {
		Text string `json:"text"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&in); err != nil || strings.TrimSpace(in.Text) == "" {
		httpError(w, http.StatusBadRequest, `send {"text": "your message"} as JSON`)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		httpError(w, http.StatusInternalServerError, "streaming unsupported")
		return
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	sess.waitPrefill()
	user := agent.Message{Role: "user", Content: in.Text, Images: sess.pending}
	sess.pending = nil
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	event := func(kind string, v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", kind, b)
		flusher.Flush()
	}
	var store agent.TurnStore
	if s.cfg.Store != nil {
		store = s.cfg.Store
	}
	f, added, storeErr := agent.RunStored(r.Context(), s.cfg.Agent, store, sess.id, sess.history, user, func(ev agent.Event) {
		switch e := ev.(type) {
		case agent.Token:
			event("token", map[string]string{"text": e.Text})
		case agent.ReasoningToken:
			event("reasoning", map[string]string{"text": e.Text})
		case agent.ImagesPending:
			event("images", map[string]int{"count": e.Count})
		case agent.ToolCallStarted:
			event("call", map[string]any{"name": e.Call.Name, "arguments": e.Call.Arguments})
		case agent.ToolCallFinished:
			event("result", map[string]any{"name": e.Call.Name, "text": e.Result.Text, "error": e.Result.IsError,
				"images": len(e.Result.Images), "ms": e.Duration.Milliseconds()})
		}
	})
	sess.history = append(sess.history, added...)
	done := map[string]any{"reason": f.Reason, "steps": f.Steps}
	if t := f.Final.Timings; t != nil {
		done["tokens_per_second"], done["cached_tokens"], done["prompt_tokens"] = t.PredictedPerSecond, t.CacheN, t.PromptN
	}
	if err := errors.Join(f.Err, storeErr); err != nil {
		done["error"] = err.Error()
	}
	event("done", done)
}
