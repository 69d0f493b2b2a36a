// Package webui serves a browser chat with screenshots over a visor agent: paste or drop an image and the server
// has the engine encode it at once (Agent.Prefill), while the question is still being typed; answers, tool calls
// and tool results stream back as server-sent events from the agent's event stream. Every request passes
// httpguard (loopback Host, same Origin, JSON or image bodies, the page's token; an API key off loopback), and
// what a chat holds in memory is bounded (images per message and per chat, chats by count and idle time). It
// keeps sessions in memory's store when one is given. It does not build the agent or start the engine.
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
	"github.com/visorhq/visor/images"
	"github.com/visorhq/visor/internal/httpguard"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/tools"
)

//go:embed index.html
var indexHTML string

// tokenSlot is replaced in index.html by the page's token.
const tokenSlot = "{{VISOR_PAGE_TOKEN}}"

// Defaults for Config's bounds. With them a chat server holds at most 8 × 64 MiB of images.
const (
	DefaultMaxImagesPerMessage = 8
	DefaultMaxSessionImages    = 64 << 20
	DefaultMaxSessions         = 8
	DefaultSessionIdle         = 30 * time.Minute
)

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
	// APIKey, when set, is required as "Authorization: Bearer KEY" on every request, and lets ListenAndServe use
	// a non-loopback address. KeyHint says how the user sets it, for the error when it is missing.
	APIKey, KeyHint string
	// AllowedHosts and AllowedOrigins extend the loopback-only Host and same-origin checks (see httpguard).
	AllowedHosts, AllowedOrigins []string
	// MaxImageBytes bounds one attached image; default images.DefaultMaxBytes (20 MiB).
	MaxImageBytes int
	// MaxImagesPerMessage bounds the images attached to one message; default DefaultMaxImagesPerMessage.
	MaxImagesPerMessage int
	// MaxSessionImages bounds the image bytes one chat holds (its history and its pending attachments), since
	// every image of the conversation stays in memory and is sent again with each turn; default
	// DefaultMaxSessionImages.
	MaxSessionImages int
	// MaxSessions bounds the chats kept in memory; the least recently used idle one is dropped for a new one.
	// Default DefaultMaxSessions.
	MaxSessions int
	// SessionIdle drops a chat unused for this long; default DefaultSessionIdle.
	SessionIdle time.Duration
	// Now is the clock for idle times; default time.Now.
	Now func() time.Time
}

// Server is the chat's HTTP handler.
type Server struct {
	cfg     Config
	guard   *httpguard.Guard
	handler http.Handler

	mu       sync.Mutex
	sessions map[string]*session
}

type session struct {
	id     string
	token  string             // the page that created it; only that page may use it
	ctx    context.Context    // ends when the session is dropped, stopping its prefill
	cancel context.CancelFunc //
	used   time.Time          // guarded by Server.mu
	busy   int                // requests in flight; guarded by Server.mu

	mu         sync.Mutex // one turn at a time; guards the fields below
	history    []agent.Message
	imageBytes int // in history and pending
	pending    []tools.Image
	prefill    chan struct{} // closed when the running prefill chain has caught up with pending; nil when idle
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
		cfg.MaxImageBytes = images.DefaultMaxBytes
	}
	if cfg.MaxImagesPerMessage <= 0 {
		cfg.MaxImagesPerMessage = DefaultMaxImagesPerMessage
	}
	if cfg.MaxSessionImages <= 0 {
		cfg.MaxSessionImages = DefaultMaxSessionImages
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.SessionIdle <= 0 {
		cfg.SessionIdle = DefaultSessionIdle
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Name == "" {
		cfg.Name = "visor"
	}
	guard, err := httpguard.New(httpguard.Config{Name: "web chat", APIKey: cfg.APIKey, KeyHint: cfg.KeyHint,
		AllowedHosts: cfg.AllowedHosts, AllowedOrigins: cfg.AllowedOrigins, PageToken: true,
		BodyTypes:    []string{"image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp"},
		MaxBodyBytes: int64(max(cfg.MaxImageBytes, 1<<20))})
	if err != nil {
		return nil, fmt.Errorf("webui: %w", err)
	}
	s := &Server{cfg: cfg, guard: guard, sessions: map[string]*session{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.index)
	mux.HandleFunc("POST /api/sessions", s.newSession)
	mux.HandleFunc("POST /api/sessions/{id}/attach", s.attach)
	mux.HandleFunc("POST /api/sessions/{id}/send", s.send)
	s.handler = guard.Handler(mux)
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// ListenAndServe serves on addr until ctx ends; ready, when set, receives the bound address. addr must be
// loopback unless Config.APIKey is set.
func (s *Server) ListenAndServe(ctx context.Context, addr string, ready func(net.Addr)) error {
	if err := s.guard.CheckAddr(addr); err != nil {
		return err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("web chat: %w", err)
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

// index serves the page with a fresh token: the page's script sends it back on every request, and the chats
// it creates answer only to it.
func (s *Server) index(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "frame-ancestors 'none'")
	_, _ = io.WriteString(w, strings.Replace(indexHTML, tokenSlot, s.guard.IssueToken(), 1))
}

func httpError(w http.ResponseWriter, status int, format string, a ...any) {
	httpguard.Error(w, status, format, a...)
}

func (s *Server) newSession(w http.ResponseWriter, r *http.Request) {
	if !s.makeRoom() {
		httpError(w, http.StatusServiceUnavailable, "all %d chats are busy answering: wait for one to finish, then try again",
			s.cfg.MaxSessions)
		return
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	sess := &session{token: s.guard.Token(r), ctx: ctx, cancel: cancel}
	if s.cfg.Store != nil {
		st, err := s.cfg.Store.CreateSession(r.Context(), memory.Session{Title: "web chat " + time.Now().Format("2006-01-02 15:04"), Agent: "web"})
		if err != nil {
			cancel()
			httpError(w, http.StatusInternalServerError, "create session: %v", err)
			return
		}
		sess.id = st.ID
	} else {
		sess.id = fmt.Sprintf("local-%d", time.Now().UnixNano())
	}
	s.mu.Lock()
	sess.used = s.cfg.Now()
	s.sessions[sess.id] = sess
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"session": sess.id})
}

// makeRoom drops chats idle for longer than SessionIdle and, if the cap is still reached, the least recently
// used one that is not busy. It reports whether there is room for one more.
func (s *Server) makeRoom() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	var lru *session
	for id, sess := range s.sessions {
		if sess.busy > 0 {
			continue
		}
		if now.Sub(sess.used) > s.cfg.SessionIdle {
			s.drop(id, sess, "idle")
			continue
		}
		if lru == nil || sess.used.Before(lru.used) {
			lru = sess
		}
	}
	if len(s.sessions) < s.cfg.MaxSessions {
		return true
	}
	if lru == nil {
		return false
	}
	s.drop(lru.id, lru, "least recently used")
	return true
}

// drop forgets a chat (its stored turns stay in the store). Called with s.mu held.
func (s *Server) drop(id string, sess *session, why string) {
	delete(s.sessions, id)
	sess.cancel()
	s.cfg.Logger.Info("web chat dropped from memory", "session", id, "why", why)
}

// acquire finds the session of r and marks it busy; release undoes that. It writes the refusal itself.
func (s *Server) acquire(w http.ResponseWriter, r *http.Request) (*session, func()) {
	id := r.PathValue("id")
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[id]
	if sess != nil && s.cfg.Now().Sub(sess.used) > s.cfg.SessionIdle && sess.busy == 0 {
		s.drop(id, sess, "idle")
		sess = nil
	}
	if sess == nil {
		httpError(w, http.StatusNotFound, "no chat %q (chats unused for %s are dropped, and at most %d are kept): "+
			"reload the page, or create one with POST /api/sessions", id, s.cfg.SessionIdle, s.cfg.MaxSessions)
		return nil, nil
	}
	if sess.token != s.guard.Token(r) {
		httpError(w, http.StatusForbidden, "chat %q belongs to another page: use the chat this page created, "+
			"or create one with POST /api/sessions", id)
		return nil, nil
	}
	sess.busy++
	return sess, func() {
		s.mu.Lock()
		sess.busy--
		sess.used = s.cfg.Now()
		s.mu.Unlock()
	}
}

// attach takes one image (the raw file bytes as the body, with the image's Content-Type) for the session's next
// message and prefills it.
func (s *Server) attach(w http.ResponseWriter, r *http.Request) {
	sess, release := s.acquire(w, r)
	if sess == nil {
		return
	}
	defer release()
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(s.cfg.MaxImageBytes)))
	if err != nil {
		httpError(w, http.StatusRequestEntityTooLarge, "the image is larger than %d bytes (%d MiB) or could not be read (%v): "+
			"attach a smaller image", s.cfg.MaxImageBytes, s.cfg.MaxImageBytes>>20, err)
		return
	}
	if len(data) == 0 {
		httpError(w, http.StatusBadRequest, "empty attachment: send the image file's bytes as the request body")
		return
	}
	mime := http.DetectContentType(data)
	switch mime {
	case "image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp":
	default:
		httpError(w, http.StatusUnsupportedMediaType, "the attachment is %s, not a PNG, JPEG, GIF or WebP image", mime)
		return
	}
	sess.mu.Lock()
	if n := len(sess.pending); n >= s.cfg.MaxImagesPerMessage {
		sess.mu.Unlock()
		httpError(w, http.StatusRequestEntityTooLarge, "this message already has %d images, the most one message may carry: "+
			"send it, then attach more to the next one", n)
		return
	}
	if total := sess.imageBytes + len(data); total > s.cfg.MaxSessionImages {
		held := sess.imageBytes
		sess.mu.Unlock()
		httpError(w, http.StatusRequestEntityTooLarge, "this chat already holds %d MiB of images and this one would pass its "+
			"%d MiB limit (every image stays in the conversation): start a new chat (reload the page)",
			held>>20, s.cfg.MaxSessionImages>>20)
		return
	}
	sess.imageBytes += len(data)
	sess.pending = append(sess.pending, tools.Image{MIME: mime, Data: data})
	n := len(sess.pending)
	s.startPrefill(sess)
	sess.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"attached": n, "bytes": len(data), "mime": mime})
}

// startPrefill has the engine encode the pending images while the user types. At most one prefill per chat
// runs: images attached while it runs are taken by one more prefill after it, so a burst of N attachments
// costs two requests, not N requests each carrying every image so far. (Each request still carries the images
// before the new ones, since a prompt is sent whole; the server's cache keeps those from being encoded again.)
// Called with sess.mu held.
func (s *Server) startPrefill(sess *session) {
	if sess.prefill != nil {
		return // the running chain sees the new image when its current request returns
	}
	done := make(chan struct{})
	sess.prefill = done
	go func() {
		defer close(done)
		sent := 0
		for {
			sess.mu.Lock()
			if len(sess.pending) == sent || sess.ctx.Err() != nil {
				sess.prefill = nil
				sess.mu.Unlock()
				return
			}
			sent = len(sess.pending)
			history := append([]agent.Message(nil), sess.history...)
			user := agent.Message{Role: "user", Images: append([]tools.Image(nil), sess.pending...)}
			sess.mu.Unlock()
			// The answer waits for this (send), so the two never race for a slot.
			if _, err := s.cfg.Agent.Prefill(sess.ctx, history, user); err != nil {
				s.cfg.Logger.Warn("prefill failed; the images will be encoded with the question", "err", err)
			}
		}
	}()
}

// waitPrefill waits for the session's prefill chain to finish. Called with sess.mu held; it lets go of it
// while waiting so the chain can read the pending images.
func imageBytes(msgs []agent.Message) int {
	n := 0
	for _, m := range msgs {
		for _, im := range m.Images {
			n += len(im.Data)
		}
	}
	return n
}

func (sess *session) waitPrefill() {
	for sess.prefill != nil {
		done := sess.prefill
		sess.mu.Unlock()
		<-done
		sess.mu.Lock()
	}
}

// send runs one turn for {"text": …} with the attached images and streams its events as server-sent events.
func (s *Server) send(w http.ResponseWriter, r *http.Request) {
	sess, release := s.acquire(w, r)
	if sess == nil {
		return
	}
	defer release()
	var in struct {
		Text string `json:"text"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&in); err != nil || strings.TrimSpace(in.Text) == "" {
		httpError(w, http.StatusBadRequest, `send {"text": "your message"} as JSON, at most 1 MiB`)
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
	// Tool results (a screenshot tool, view_image) add images too: they count against the chat's bound.
	sess.imageBytes = imageBytes(sess.history)
	done := map[string]any{"reason": f.Reason, "steps": f.Steps}
	if t := f.Final.Timings; t != nil {
		done["tokens_per_second"], done["cached_tokens"], done["prompt_tokens"] = t.PredictedPerSecond, t.CacheN, t.PromptN
	}
	if err := errors.Join(f.Err, storeErr); err != nil {
		done["error"] = err.Error()
	}
	event("done", done)
}
