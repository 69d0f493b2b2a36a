// Package web serves a browser chat with screenshots over visor's session service: paste or drop an image and
// the session has the engine encode it at once, while the question is still being typed; answers, tool calls and
// tool results stream back as server-sent events from the agent's event stream. It listens on loopback only
// (unless an API key is set) and guards every request (internal/httpguard). Conversations, image intake,
// storage and the engine are the session service's: this package only speaks HTTP.
package web

import (
	"context"
	_ "embed"
	"encoding/base64"
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
	"unicode/utf8"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/images"
	"github.com/visorhq/visor/internal/httpguard"
	"github.com/visorhq/visor/session"
)

//go:embed index.html
var indexHTML string

// tokenSlot is replaced in index.html by the page's token.
const tokenSlot = "{{VISOR_PAGE_TOKEN}}"

// Defaults for Config's bounds. A chat server holds at most DefaultMaxSessions chats, and each chat's images are
// bounded by the session service (session.Config.MaxSessionImageBytes).
const (
	DefaultMaxSessions = 8
	DefaultSessionIdle = 30 * time.Minute
)

// Config sets up a Server.
type Config struct {
	Sessions *session.Service
	Name     string
	Logger   *slog.Logger
	// APIKey, when set, is required as "Authorization: Bearer KEY" on every request, and lets ListenAndServe use
	// a non-loopback address. KeyHint says how the user sets it, for the error when it is missing.
	APIKey, KeyHint string
	// AllowedHosts and AllowedOrigins extend the loopback-only Host and same-origin checks (see httpguard).
	AllowedHosts, AllowedOrigins []string
	// MaxImageBytes bounds one request body (an attached image); default images.DefaultMaxBytes (20 MiB). The
	// image policy itself (formats, pixels, images per message and per chat) is the session service's.
	MaxImageBytes int
	// MaxSessions bounds the chats kept in memory; the least recently used idle one is dropped for a new one.
	// Default DefaultMaxSessions.
	MaxSessions int
	// SessionIdle drops a chat unused for this long; default DefaultSessionIdle.
	SessionIdle time.Duration
	// Now is the clock for idle times; default time.Now.
	Now func() time.Time
	// Status, when set, describes the model for the page's status line instead of the session service.
	Status func() Status
}

// Status is what the page's status line shows about the model and the engine (the session service's
// EngineStatus); per-chat numbers (context used, tokens/s, draft acceptance) come with each turn.
type Status = session.EngineStatus

// Server is the chat's HTTP handler.
type Server struct {
	cfg     Config
	guard   *httpguard.Guard
	handler http.Handler

	mu       sync.Mutex
	sessions map[string]*chat
}

type chat struct {
	id     string
	token  string             // the page that created it; only that page may use it
	ctx    context.Context    // ends when the session is dropped, stopping its prefill
	cancel context.CancelFunc //
	used   time.Time          // guarded by Server.mu
	busy   int                // requests in flight; guarded by Server.mu

	conv *session.Session

	// turn guards the running turn's cancel (the stop button).
	turn sync.Mutex
	stop context.CancelFunc
}

// New returns the chat server.
func New(cfg Config) (*Server, error) {
	if cfg.Sessions == nil {
		return nil, errors.New("web: Config.Sessions is nil: pass the session service")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxImageBytes <= 0 {
		cfg.MaxImageBytes = images.DefaultMaxBytes
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
		BodyTypes:    []string{"image/png", "image/jpeg", "image/gif", "image/bmp", "image/webp", "application/octet-stream"},
		MaxBodyBytes: int64(max(cfg.MaxImageBytes, 1<<20))})
	if err != nil {
		return nil, fmt.Errorf("webui: %w", err)
	}
	s := &Server{cfg: cfg, guard: guard, sessions: map[string]*chat{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.index)
	mux.HandleFunc("POST /api/sessions", s.newSession)
	mux.HandleFunc("POST /api/sessions/{id}/attach", withID(s.attach))
	mux.HandleFunc("POST /api/sessions/{id}/send", withID(s.send))
	mux.HandleFunc("GET /api/sessions", s.listSessions)
	mux.HandleFunc("POST /api/sessions/{id}/resume", withID(s.resume))
	mux.HandleFunc("POST /api/sessions/{id}/stop", withID(s.stop))
	mux.HandleFunc("PATCH /api/sessions/{id}", withID(s.rename))
	mux.HandleFunc("DELETE /api/sessions/{id}", withID(s.remove))
	mux.HandleFunc("GET /api/status", s.status)
	s.handler = guard.Handler(mux)
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// ListenAndServe serves on addr until ctx ends; ready, when set, receives the bound address. addr must be
// loopback unless Config.APIKey is set.
func (s *Server) ListenAndServe(ctx context.Context, addr string, ready func(net.Addr)) error {
	return s.guard.ListenAndServe(ctx, addr, s, ready)
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

// maxID bounds a chat id in a path: ids are 16 hex digits (a prefix of one resumes it); anything much longer is
// no id, and every error naming it would repeat it whole.
const maxID = 128

// withID refuses an {id} that cannot be a chat's (too long, control characters) before h looks it up.
func withID(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if len(id) > maxID {
			httpError(w, http.StatusNotFound, "no chat with a %d-byte id (%.24q…): ids are the short hex strings "+
				"POST /api/sessions and GET /api/sessions return", len(id), id)
			return
		}
		if strings.IndexFunc(id, func(r rune) bool { return r < 0x20 || r == 0x7f || r == utf8.RuneError }) >= 0 {
			httpError(w, http.StatusNotFound, "no chat %q: an id has no control characters; ids are the short hex "+
				"strings POST /api/sessions and GET /api/sessions return", id)
			return
		}
		h(w, r)
	}
}

// decodeJSON reads one JSON value of at most limit bytes into v and nothing after it. It returns the status
// and the reason for a refusal, naming the problem (too large, not JSON, a field of the wrong type, more after
// the value); example is the body to send instead.
func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any, example string) (int, string) {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	err := dec.Decode(v)
	if err == nil {
		if _, more := dec.Token(); !errors.Is(more, io.EOF) {
			err = errors.New("more follows the JSON value")
		}
	}
	var tooLarge *http.MaxBytesError
	switch {
	case err == nil:
		return 0, ""
	case errors.As(err, &tooLarge):
		return http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is over %d KiB: send %s, shorter", limit>>10, example)
	default:
		return http.StatusBadRequest, fmt.Sprintf("send %s as JSON, at most %d KiB (%v)", example, limit>>10, err)
	}
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
	sess := &chat{token: s.guard.Token(r), ctx: ctx, cancel: cancel}
	// Titled after its first message, and stored (so listed) once the engine answers it.
	conv, err := s.cfg.Sessions.Open(r.Context(), session.OpenOptions{})
	if err != nil {
		cancel()
		httpError(w, http.StatusInternalServerError, "create session: %v", err)
		return
	}
	sess.conv, sess.id = conv, conv.ID()
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
	var lru *chat
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
func (s *Server) drop(id string, sess *chat, why string) {
	delete(s.sessions, id)
	sess.cancel()
	go sess.conv.Close()
	s.cfg.Logger.Info("web chat dropped from memory", "session", id, "why", why)
}

// acquire finds the session of r and marks it busy; release undoes that. It writes the refusal itself.
func (s *Server) acquire(w http.ResponseWriter, r *http.Request) (*chat, func()) {
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
	im, err := sess.conv.Attach(sess.ctx, data)
	if err != nil {
		status := http.StatusUnprocessableEntity
		switch {
		case errors.Is(err, session.ErrNoVision):
			status = http.StatusConflict
		case errors.Is(err, images.ErrTooLarge), errors.Is(err, images.ErrTooBig), errors.Is(err, session.ErrLimit):
			status = http.StatusRequestEntityTooLarge
		case errors.Is(err, images.ErrNotImage):
			status = http.StatusUnsupportedMediaType
		}
		httpError(w, status, "%v", err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"attached": sess.conv.Pending(), "bytes": len(data), "mime": im.MIME,
		"size": images.Describe("", data, im.Data)})
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
	if status, why := decodeJSON(w, r, 1<<20, &in, `{"text": "your message"}`); status != 0 {
		httpError(w, status, "%s", why)
		return
	}
	if strings.TrimSpace(in.Text) == "" {
		httpError(w, http.StatusBadRequest, `"text" is empty: send {"text": "your message"} as JSON`)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		httpError(w, http.StatusInternalServerError, "streaming unsupported")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	stream := newEventStream(w, flusher)
	defer stream.close()
	event := stream.send
	ctx, stop := context.WithCancel(r.Context())
	defer stop()
	sess.turn.Lock()
	sess.stop = stop
	sess.turn.Unlock()
	res, err := sess.conv.Turn(ctx, in.Text, nil, func(ev agent.Event) {
		switch e := ev.(type) {
		case agent.Token:
			stream.text("token", e.Text)
		case agent.ReasoningToken:
			stream.text("reasoning", e.Text)
		case agent.ImagesPending:
			event("images", map[string]int{"count": e.Count})
		case agent.Notice:
			event("notice", map[string]string{"text": e.Text})
		case agent.Explain:
			event("explain", map[string]any{"step": e.Step, "text": e.Text})
		case agent.ToolCallStarted:
			event("call", map[string]any{"name": e.Call.Name, "arguments": e.Call.Arguments})
		case agent.ToolCallFinished:
			event("result", map[string]any{"name": e.Call.Name, "text": e.Result.Text, "error": e.Result.IsError,
				"images": len(e.Result.Images), "ms": e.Duration.Milliseconds()})
		}
	})
	f := res.Finished
	sess.turn.Lock()
	sess.stop = nil
	sess.turn.Unlock()
	done := map[string]any{"reason": f.Reason, "steps": f.Steps, "session": res.SessionID, "stats": sess.conv.Status().Stats}
	if t := f.Final.Timings; t != nil {
		done["tokens_per_second"], done["cached_tokens"], done["prompt_tokens"] = t.PredictedPerSecond, t.CacheN, t.PromptN
	}
	if err != nil {
		done["error"] = err.Error()
	}
	event("done", done)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}

type sessionInfo struct {
	ID       string    `json:"id"`
	Title    string    `json:"title"`
	Model    string    `json:"model,omitempty"`
	Updated  time.Time `json:"updated"`
	Messages int       `json:"messages"`
}

// listSessions lists the session service's conversations, newest first: the stored ones, or without a store
// this server's chats; a chat without a message is not one yet.
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	if q := r.URL.Query().Get("q"); strings.TrimSpace(q) != "" {
		s.search(w, r, q)
		return
	}
	ss, err := s.cfg.Sessions.Sessions(r.Context(), session.ListOptions{Limit: 100})
	if err != nil {
		httpError(w, http.StatusInternalServerError, "list sessions: %v", err)
		return
	}
	out := []sessionInfo{}
	for _, st := range ss {
		out = append(out, sessionInfo{ID: st.ID, Title: st.Title, Model: st.Model, Updated: st.Updated, Messages: st.Messages})
	}
	writeJSON(w, map[string]any{"sessions": out})
}

// maxInlineImage bounds an image sent back inline with a resumed chat's messages; larger ones are left out.
const maxInlineImage = 4 << 20

type shownMessage struct {
	Role string `json:"role"`
	// Explain are the explanations kept with the turn this person's message opened; End is the turn's line, on
	// the message that ends it.
	Explain   []string `json:"explain,omitempty"`
	End       *turnEnd `json:"end,omitempty"`
	Content   string   `json:"content,omitempty"`
	Images    []string `json:"images,omitempty"` // data: URLs
	Calls     []string `json:"calls,omitempty"`
	Tool      string   `json:"tool,omitempty"`
	IsError   bool     `json:"is_error,omitempty"`
	Cut       bool     `json:"interrupted,omitempty"`
	Reasoning int      `json:"reasoning_bytes,omitempty"`
}

// resume makes the stored (or this server's) session id this page's chat and returns its messages: a reload,
// or a pick from the session list. A chat another page holds moves to this one unless it is answering.
func (s *Server) resume(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	token := s.guard.Token(r)
	s.mu.Lock()
	c := s.sessions[id]
	if c != nil && c.busy > 0 && c.token != token {
		s.mu.Unlock()
		httpError(w, http.StatusConflict, "chat %q is answering in another page: wait for it, or stop it there", id)
		return
	}
	if c != nil {
		c.token, c.used = token, s.cfg.Now()
	}
	s.mu.Unlock()
	if c == nil {
		if !s.makeRoom() {
			httpError(w, http.StatusServiceUnavailable, "all %d chats are busy answering: wait for one to finish, then try again", s.cfg.MaxSessions)
			return
		}
		conv, err := s.cfg.Sessions.Open(r.Context(), session.OpenOptions{Resume: id})
		if errors.Is(err, session.ErrNotFound) {
			httpError(w, http.StatusNotFound, "no session %q: pick one from GET /api/sessions, or create one with POST /api/sessions", id)
			return
		}
		if err != nil {
			httpError(w, http.StatusInternalServerError, "open session %q: %v", id, err)
			return
		}
		ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
		c = &chat{id: conv.ID(), token: token, ctx: ctx, cancel: cancel, conv: conv}
		s.mu.Lock()
		if have := s.sessions[c.id]; have != nil { // another request opened it meanwhile
			s.mu.Unlock()
			cancel()
			conv.Close()
			c = have
		} else {
			c.used = s.cfg.Now()
			s.sessions[c.id] = c
			s.mu.Unlock()
		}
	}
	history := c.conv.History()
	msgs := make([]shownMessage, 0, len(history))
	explained, err := s.cfg.Sessions.Explained(r.Context(), c.id)
	if err != nil {
		s.cfg.Logger.Warn("explanations for a reload", "session", c.id, "err", err)
	}
	ends, turn := turnEnds(history), 0
	for i, m := range history {
		sm := shownMessage{Role: m.Role, Content: m.Content, Tool: m.ToolName, IsError: m.IsError, Cut: m.Interrupted,
			Reasoning: len(m.Reasoning)}
		if m.Role == "user" && !m.IsError {
			turn++
			for _, e := range explained {
				if e.Turn == turn {
					sm.Explain = append(sm.Explain, e.Text)
				}
			}
		}
		if e, ok := ends[i]; ok {
			sm.End = &e
		}
		for _, im := range m.Images {
			if len(im.Data) <= maxInlineImage {
				sm.Images = append(sm.Images, "data:"+im.MIME+";base64,"+base64.StdEncoding.EncodeToString(im.Data))
			}
		}
		for _, call := range m.ToolCalls {
			sm.Calls = append(sm.Calls, call.Name+" "+string(call.Arguments))
		}
		msgs = append(msgs, sm)
	}
	writeJSON(w, map[string]any{"session": c.id, "messages": msgs, "stats": c.conv.Status().Stats})
}

// stop cancels the chat's running turn; what streamed so far is stored, marked interrupted.
func (s *Server) stop(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	c := s.sessions[id]
	owner := ""
	if c != nil {
		owner = c.token
	}
	s.mu.Unlock()
	if c == nil {
		httpError(w, http.StatusNotFound, "no chat %q", id)
		return
	}
	if owner != s.guard.Token(r) {
		httpError(w, http.StatusForbidden, "chat %q belongs to another page", id)
		return
	}
	c.turn.Lock()
	stop := c.stop
	c.turn.Unlock()
	if stop != nil {
		stop()
	}
	writeJSON(w, map[string]bool{"stopped": stop != nil})
}

func (s *Server) status(w http.ResponseWriter, _ *http.Request) {
	st := s.cfg.Sessions.Status()
	if s.cfg.Status != nil {
		st = s.cfg.Status()
	}
	if st.Model == "" {
		st.Model = s.cfg.Name
	}
	if st.Resident == nil {
		st.Resident = []string{}
	}
	writeJSON(w, st)
}
