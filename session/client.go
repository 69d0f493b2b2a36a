package session

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"

	"github.com/visorhq/visor/memory"
)

// A client turn is one exchange of a stateless API client (the gateway's OpenAI routes): the client sends the
// whole conversation every time and visor answers one assistant message. Such turns are stored as sessions like
// visor's own, searchable and shown by `visor sessions`.

// ClientExchange is one answered client request.
type ClientExchange struct {
	Model     string
	Request   []byte // the client's chat body (OpenAI's shape)
	Content   string
	Reasoning string
	ToolCalls []ClientCall
	Finish    string
}

// ClientCall is a tool call in an answer.
type ClientCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ClientStore is what ClientRecorder needs of visor's store (*memory.Store).
type ClientStore interface {
	CreateSession(ctx context.Context, sess memory.Session) (memory.Session, error)
	BeginTurn(ctx context.Context, sessionID string) (int, error)
	AppendStep(ctx context.Context, sessionID string, step memory.Step) error
	EndTurn(ctx context.Context, sessionID string) error
}

// ClientRecorder stores client turns as sessions. A request whose history up to its last assistant message is
// one this recorder stored continues that session with only its new messages; any other starts a session. Writes
// happen on one goroutine, in arrival order, off the response's path; when the backlog is full an exchange is
// dropped with a warning rather than slowing clients down.
type ClientRecorder struct {
	store  ClientStore
	logger *slog.Logger
	ch     chan ClientExchange
	done   chan struct{}

	mu    sync.Mutex
	known map[[32]byte]convo // hash of a stored history → where it lives
}

type convo struct {
	session string
	n       int // messages stored
}

// NewClientRecorder starts the recorder's writer; Close stops it after the backlog is written.
func NewClientRecorder(store ClientStore, logger *slog.Logger) *ClientRecorder {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	r := &ClientRecorder{store: store, logger: logger, ch: make(chan ClientExchange, 256), done: make(chan struct{}),
		known: map[[32]byte]convo{}}
	go r.run()
	return r
}

// Record queues x for storage; it never blocks.
func (r *ClientRecorder) Record(_ context.Context, x ClientExchange) {
	select {
	case r.ch <- x:
	default:
		r.logger.Warn("gateway: the session store is behind; an exchange was not stored", "model", x.Model)
	}
}

// Close writes what is queued and stops.
func (r *ClientRecorder) Close() {
	close(r.ch)
	<-r.done
}

func (r *ClientRecorder) run() {
	defer close(r.done)
	for x := range r.ch {
		if err := r.store1(context.Background(), x); err != nil {
			r.logger.Warn("gateway: storing an exchange failed", "model", x.Model, "err", err)
		}
	}
}

// clientCall is a tool call in OpenAI's chat shape.
type clientCall struct {
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type clientMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	ReasoningContent string          `json:"reasoning_content"`
	ToolCalls        []clientCall    `json:"tool_calls"`
	ToolCallID       string          `json:"tool_call_id"`
	Name             string          `json:"name"`
}

func (r *ClientRecorder) store1(ctx context.Context, x ClientExchange) error {
	var req struct {
		Messages []clientMessage `json:"messages"`
	}
	if err := json.Unmarshal(x.Request, &req); err != nil {
		return err
	}
	msgs := make([]memory.Message, 0, len(req.Messages)+1)
	for _, m := range req.Messages {
		msgs = append(msgs, toMemory(m))
	}
	answer := memory.Message{Role: "assistant", Content: x.Content, Reasoning: x.Reasoning, FinishReason: x.Finish}
	for _, c := range x.ToolCalls {
		args := json.RawMessage(c.Arguments)
		if !json.Valid(args) {
			args = json.RawMessage("{}")
		}
		answer.ToolCalls = append(answer.ToolCalls, memory.ToolCall{ID: c.ID, Name: c.Name, Arguments: args})
	}
	r.mu.Lock()
	var cv convo
	for i := len(msgs); i > 0; i-- {
		if msgs[i-1].Role != "assistant" {
			continue
		}
		if c, ok := r.known[historyHash(msgs[:i])]; ok {
			cv = c
			break
		}
	}
	r.mu.Unlock()
	if cv.session == "" {
		title := ""
		for _, m := range msgs {
			if m.Role == "user" {
				title = m.Content
				break
			}
		}
		s, err := r.store.CreateSession(ctx, memory.Session{Title: Title(title), Agent: "gateway", Model: x.Model})
		if err != nil {
			return err
		}
		cv.session = s.ID
	}
	fresh := append(msgs[cv.n:], answer)
	if _, err := r.store.BeginTurn(ctx, cv.session); err != nil {
		return err
	}
	if err := r.store.AppendStep(ctx, cv.session, memory.Step{Messages: fresh}); err != nil {
		return err
	}
	if err := r.store.EndTurn(ctx, cv.session); err != nil {
		return err
	}
	all := append(msgs, answer)
	r.mu.Lock()
	if len(r.known) > 4096 {
		clear(r.known) // later requests of old conversations start new sessions; memory stays bounded
	}
	r.known[historyHash(all)] = convo{session: cv.session, n: len(all)}
	r.mu.Unlock()
	return nil
}

func toMemory(m clientMessage) memory.Message {
	out := memory.Message{Role: m.Role, Reasoning: m.ReasoningContent, ToolCallID: m.ToolCallID, ToolName: m.Name}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		out.Content = s
	} else {
		var parts []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			ImageURL struct {
				URL string `json:"url"`
			} `json:"image_url"`
		}
		_ = json.Unmarshal(m.Content, &parts)
		var b strings.Builder
		for _, p := range parts {
			switch p.Type {
			case "text":
				b.WriteString(p.Text)
			case "image_url":
				if meta, data, ok := strings.Cut(p.ImageURL.URL, ","); ok && strings.HasPrefix(meta, "data:") && strings.HasSuffix(meta, ";base64") {
					if raw, err := base64.StdEncoding.DecodeString(data); err == nil {
						out.Images = append(out.Images, memory.Image{Data: raw,
							MIME: strings.TrimSuffix(strings.TrimPrefix(meta, "data:"), ";base64")})
					}
				}
			}
		}
		out.Content = b.String()
	}
	for _, c := range m.ToolCalls {
		args := json.RawMessage(c.Function.Arguments)
		if !json.Valid(args) {
			args = json.RawMessage("{}")
		}
		out.ToolCalls = append(out.ToolCalls, memory.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: args})
	}
	return out
}

// historyHash identifies a conversation by what was said (roles, text, calls), not by how a client spelled
// the JSON, so a client that sends content null where the answer had "" still continues its session.
func historyHash(msgs []memory.Message) [32]byte {
	h := sha256.New()
	for _, m := range msgs {
		h.Write([]byte(m.Role))
		h.Write([]byte{0})
		h.Write([]byte(strings.TrimSpace(m.Content)))
		h.Write([]byte{0})
		for _, c := range m.ToolCalls {
			h.Write([]byte(c.Name))
			h.Write([]byte{0})
			h.Write(c.Arguments)
			h.Write([]byte{0})
		}
		h.Write([]byte{1})
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}
