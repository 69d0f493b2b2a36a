package tui

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/images"
	"github.com/visorhq/visor/session"
)

// SessionBackend is the Backend over a session of the session service. The TUI never calls Send, Attach or
// Resume at the same time; Status comes from the UI goroutine, so the current session is guarded by mu. The
// status line's numbers, the title and the session list are the service's.
type SessionBackend struct {
	svc     *session.Service
	explain bool

	mu   sync.Mutex
	sess *session.Session
}

// NewSessionBackend chats in sess of svc; explain shows the ahead-of-time actions (agent.Explain), which are
// otherwise dropped.
func NewSessionBackend(svc *session.Service, sess *session.Session, explain bool) *SessionBackend {
	return &SessionBackend{svc: svc, explain: explain, sess: sess}
}

// Session is the session the chat is on now (/sessions may have switched it).
func (b *SessionBackend) Session() *session.Session {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sess
}

// Close releases the session the chat ends on.
func (b *SessionBackend) Close() { b.Session().Close() }

// Status reads the service's snapshots, which no turn's work holds.
func (b *SessionBackend) Status() Status {
	st, eng := b.Session().Status(), b.svc.Status()
	return Status{Session: st.ID, Model: eng.Model, ContextUsed: st.Stats.ContextUsed, ContextSize: eng.ContextSize,
		TokensPerSecond: st.Stats.TokensPerSecond, DraftAccepted: st.Stats.DraftAccepted, Drafted: st.Stats.Drafted,
		Resident: eng.Resident, Ahead: st.Ahead}
}

func (b *SessionBackend) Send(ctx context.Context, text string, emit func(agent.Event)) agent.Finished {
	res, err := b.Session().Turn(ctx, text, nil, func(ev agent.Event) {
		if _, ok := ev.(agent.Explain); ok && !b.explain {
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

func (b *SessionBackend) Attach(ctx context.Context, path string) (string, error) {
	data, err := b.svc.ReadImageFile(path)
	if err != nil {
		return "", fmt.Errorf("/image %s: %w", path, err)
	}
	im, err := b.Session().Attach(ctx, data)
	if err != nil {
		return "", fmt.Errorf("/image %s: %w", path, err)
	}
	return images.Describe(filepath.Base(path), data, im.Data), nil
}

func (b *SessionBackend) Detach() { b.Session().ClearAttachments() }

func (b *SessionBackend) Sessions(ctx context.Context) ([]SessionInfo, error) {
	if !b.svc.Stored() {
		return nil, errors.New("conversations are not stored (--no-store): there are no sessions to pick")
	}
	ss, err := b.svc.Sessions(ctx, session.ListOptions{Limit: 100})
	if err != nil {
		return nil, err
	}
	out := make([]SessionInfo, 0, len(ss))
	for _, s := range ss {
		out = append(out, SessionInfo{ID: s.ID, Title: s.Title, Model: s.Model, Updated: s.Updated, Messages: s.Messages})
	}
	return out, nil
}

func (b *SessionBackend) Resume(ctx context.Context, id string) ([]agent.Message, error) {
	next, err := b.svc.Open(ctx, session.OpenOptions{Resume: id})
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
