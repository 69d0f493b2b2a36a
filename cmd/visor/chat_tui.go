package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/frontend/tui"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/session"
)

// chatBackend gives the terminal chat (frontend/tui) a session of the session service. The TUI never calls
// Send, Attach or Resume at the same time; Status comes from the UI goroutine, so the current session and the
// numbers are guarded by mu.
type chatBackend struct {
	app *app

	mu   sync.Mutex
	sess *session.Session
	st   tui.Status
}

func newChatBackend(ctx context.Context, a *app, sess *session.Session, label string) *chatBackend {
	b := &chatBackend{app: a, sess: sess}
	b.st = tui.Status{Session: sess.ID(), Model: label, ContextUsed: agent.ContextUsed(sess.History())}
	if r, err := a.cond.EnsureReady(ctx); err == nil {
		if p, err := llamacpp.ReadProps(ctx, r.Client); err == nil {
			b.st.ContextSize = p.NCtx
			if p.Vision {
				b.st.Resident = append(b.st.Resident, "projector")
			}
			if p.Speculating() {
				b.st.Resident = append(b.st.Resident, "MTP")
			}
		}
	}
	return b
}

func (b *chatBackend) session() *session.Session {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sess
}

// close releases the session the chat ends on.
func (b *chatBackend) close() { b.session().Close() }

func (b *chatBackend) Status() tui.Status {
	b.mu.Lock()
	st, sess := b.st, b.sess
	st.Resident = append([]string(nil), b.st.Resident...)
	b.mu.Unlock()
	st.Session = sess.ID()
	for _, l := range b.app.svc.Lookahead().Sessions {
		if l.ID != st.Session || l.PendingImages == 0 {
			continue
		}
		if l.Prefilled < l.PendingImages {
			st.Ahead = fmt.Sprintf("encoding %d image%s ahead", l.PendingImages-l.Prefilled, plural(l.PendingImages-l.Prefilled))
		} else {
			st.Ahead = fmt.Sprintf("%d image%s encoded", l.PendingImages, plural(l.PendingImages))
		}
	}
	return st
}

func (b *chatBackend) Send(ctx context.Context, text string, emit func(agent.Event)) agent.Finished {
	res, err := b.session().Turn(ctx, text, nil, func(ev agent.Event) {
		switch e := ev.(type) {
		case agent.StepFinished:
			b.observe(e)
		case agent.Explain:
			if !b.app.turn.explain {
				return
			}
		}
		emit(ev)
	})
	b.titleFrom(ctx, res.SessionID, text)
	f := res.Finished
	if err != nil && f.Err == nil {
		f.Err = err
		if f.Reason == "" {
			f.Reason = "error"
		}
	}
	return f
}

// titleFrom names an untitled stored session after its first message, so the picker tells chats apart.
func (b *chatBackend) titleFrom(ctx context.Context, id, text string) {
	st := b.app.store
	if st == nil || id == "" {
		return
	}
	ctx = context.WithoutCancel(ctx)
	s, err := st.Session(ctx, id)
	if err != nil || s.Title != "" {
		return
	}
	s.Title = oneLine(text, 60)
	_ = st.UpdateSession(ctx, s)
}

// observe keeps the status line's numbers from each finished step.
func (b *chatBackend) observe(sf agent.StepFinished) {
	for _, m := range sf.Messages {
		t := m.Timings
		if m.Role != "assistant" || t == nil {
			continue
		}
		b.mu.Lock()
		b.st.ContextUsed = t.PromptN + t.CacheN + t.PredictedN
		if t.PredictedPerSecond > 0 {
			b.st.TokensPerSecond = t.PredictedPerSecond
		}
		b.st.Drafted += t.DraftN
		b.st.DraftAccepted += t.DraftNAccepted
		b.mu.Unlock()
	}
}

func (b *chatBackend) Attach(ctx context.Context, path string) (string, error) {
	data, err := b.app.limits.Read(expandHome(path))
	if err != nil {
		return "", fmt.Errorf("/image %s: %w", path, err)
	}
	im, err := b.session().Attach(ctx, data)
	if err != nil {
		return "", fmt.Errorf("/image %s: %w", path, err)
	}
	return fmt.Sprintf("%s (%s)", filepath.Base(path), humanBytes(len(im.Data))), nil
}

func (b *chatBackend) Detach() { b.session().ClearAttachments() }

func (b *chatBackend) Sessions(ctx context.Context) ([]tui.SessionInfo, error) {
	if b.app.store == nil {
		return nil, errors.New("conversations are not stored (--no-store): there are no sessions to pick")
	}
	ss, err := b.app.store.ListSessions(ctx, memory.SessionFilter{Limit: 100})
	if err != nil {
		return nil, err
	}
	out := make([]tui.SessionInfo, 0, len(ss))
	for _, s := range ss {
		out = append(out, tui.SessionInfo{ID: s.ID, Title: s.Title, Model: s.Model, Updated: s.UpdatedAt, Messages: s.MessageCount})
	}
	return out, nil
}

func (b *chatBackend) Resume(ctx context.Context, id string) ([]agent.Message, error) {
	next, err := b.app.svc.Open(ctx, session.OpenOptions{Resume: id})
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	prev := b.sess
	b.sess = next
	h := next.History()
	b.st.ContextUsed, b.st.TokensPerSecond, b.st.Drafted, b.st.DraftAccepted = agent.ContextUsed(h), 0, 0, 0
	b.mu.Unlock()
	if prev != next {
		prev.Close()
	}
	return h, nil
}

func humanBytes(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d KB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
