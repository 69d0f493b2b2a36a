package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/frontend/tui"
	"github.com/visorhq/visor/internal/userpath"
	"github.com/visorhq/visor/session"
)

// chatBackend gives the terminal chat (frontend/tui) a session of the session service. The TUI never calls
// Send, Attach or Resume at the same time; Status comes from the UI goroutine, so the current session is guarded
// by mu. The status line's numbers, the title and the session list are the service's.
type chatBackend struct {
	app *app

	mu   sync.Mutex
	sess *session.Session
}

func newChatBackend(a *app, sess *session.Session) *chatBackend {
	return &chatBackend{app: a, sess: sess}
}

func (b *chatBackend) session() *session.Session {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sess
}

// close releases the session the chat ends on.
func (b *chatBackend) close() { b.session().Close() }

// Status reads the service's snapshots, which no turn's work holds.
func (b *chatBackend) Status() tui.Status {
	st, eng := b.session().Status(), b.app.svc.Status()
	return tui.Status{Session: st.ID, Model: eng.Model, ContextUsed: st.Stats.ContextUsed, ContextSize: eng.ContextSize,
		TokensPerSecond: st.Stats.TokensPerSecond, DraftAccepted: st.Stats.DraftAccepted, Drafted: st.Stats.Drafted,
		Resident: eng.Resident, Ahead: st.Ahead}
}

func (b *chatBackend) Send(ctx context.Context, text string, emit func(agent.Event)) agent.Finished {
	res, err := b.session().Turn(ctx, text, nil, func(ev agent.Event) {
		if _, ok := ev.(agent.Explain); ok && !b.app.turn.explain {
			return
		}
		emit(ev)
	})
	f := res.Finished
	if err != nil && f.Err == nil {
		f.Err = err
		if f.Reason == "" {
			f.Reason = "error"
		}
	}
	return f
}

func (b *chatBackend) Attach(ctx context.Context, path string) (string, error) {
	data, err := b.app.limits.Read(userpath.Expand(path))
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
	if !b.app.svc.Stored() {
		return nil, errors.New("conversations are not stored (--no-store): there are no sessions to pick")
	}
	ss, err := b.app.svc.Sessions(ctx, session.ListOptions{Limit: 100})
	if err != nil {
		return nil, err
	}
	out := make([]tui.SessionInfo, 0, len(ss))
	for _, s := range ss {
		out = append(out, tui.SessionInfo{ID: s.ID, Title: s.Title, Model: s.Model, Updated: s.Updated, Messages: s.Messages})
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
	b.mu.Unlock()
	if prev != next {
		prev.Close()
	}
	return next.History(), nil
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
