package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/internal/textcut"
	"github.com/visorhq/visor/memory"
)

// A new session gets its row in the store when the engine first answers in it (or refuses its message for its
// content, or the user stops the turn: the question is theirs to keep), not when it is opened: a turn whose
// engine could not be reached or broke before answering (an unreachable --endpoint) leaves no session behind,
// and a chat opened and left is not listed. Until then what the service would store about it (its prefills and
// decisions, the engine's events) waits in memory and is written with the row.

// TitleRunes is how long a session's title may be, in characters; longer first messages are cut.
const TitleRunes = 60

// maxHeldEvents bounds the engine events a session not yet stored keeps for its row; older ones go first.
const maxHeldEvents = 256

// Title is the title a session gets from its first message's text: one line of at most TitleRunes printable
// characters. The message is the user's to write, so what a title cannot hold (titleHazard) is dropped, not
// refused.
func Title(text string) string {
	return textcut.Line(strings.Map(func(r rune) rune {
		if titleHazard(r) {
			return -1
		}
		return r
	}, text), TitleRunes)
}

// titleHazard reports a character a title must not hold, since the web page's list and the terminal's picker
// show titles as they are: a control character (NUL, ESC: a terminal runs what follows it) or a bidi embedding,
// override or isolate (U+202A–U+202E, U+2066–U+2069), which shows the rest of the line in another order than
// it has ("invoice\u202Efdp.exe" reads "invoiceexe.pdf"). White space, newlines too, is folded to a space.
func titleHazard(r rune) bool {
	return unicode.IsControl(r) && !unicode.IsSpace(r) || r >= 0x202A && r <= 0x202E || r >= 0x2066 && r <= 0x2069
}

// newSessionID makes a session id in the store's form (16 hex digits, random), chosen before the row exists
// so the session has its id from the start.
func newSessionID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("session: new session id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// isStored reports whether the session's row exists.
func (s *Session) isStored() bool { return s.rowMade.Load() }

// record stores ev for the session, or keeps it for the row when the session is not stored yet.
func (s *Session) record(ev memory.EngineEvent) error {
	st := s.svc.cfg.Store
	if st == nil {
		return nil
	}
	s.evMu.Lock()
	if !s.rowMade.Load() {
		if ev.At.IsZero() {
			ev.At = time.Now()
		}
		if len(s.held) >= maxHeldEvents {
			s.held = s.held[1:]
		}
		s.held = append(s.held, ev)
		s.evMu.Unlock()
		return nil
	}
	s.evMu.Unlock()
	_, err := st.RecordEngineEvent(context.Background(), ev)
	return err
}

// makeRow creates the session's row, titled after text unless it has a title, and writes the events held for
// it. It does nothing for a stored session.
func (s *Session) makeRow(ctx context.Context, text string) error {
	st := s.svc.cfg.Store
	s.evMu.Lock()
	defer s.evMu.Unlock()
	if st == nil || s.rowMade.Load() {
		return nil
	}
	s.mu.Lock()
	id, title := s.id, s.title
	if title == "" {
		title = Title(text)
	}
	s.mu.Unlock()
	cfg := s.svc.cfg
	if _, err := st.CreateSession(context.WithoutCancel(ctx), memory.Session{ID: id, Title: title, Agent: cfg.AgentName,
		Model: cfg.Model, EngineProfile: cfg.EngineProfile}); err != nil {
		return fmt.Errorf("create session %s: %w", id, err)
	}
	s.rowMade.Store(true)
	for _, ev := range s.held {
		if _, err := st.RecordEngineEvent(context.WithoutCancel(ctx), ev); err != nil {
			cfg.Logger.Warn("record engine event", "session", id, "err", err)
		}
	}
	s.held = nil
	s.mu.Lock()
	s.title = title
	s.publishLocked()
	s.mu.Unlock()
	return nil
}

// titleFrom names a stored session without a title (one stored before titles were given) after text.
func (s *Session) titleFrom(ctx context.Context, id, text string) {
	s.mu.Lock()
	untitled := s.title == ""
	s.mu.Unlock()
	st := s.svc.cfg.Store
	if st == nil || !untitled || Title(text) == "" {
		return
	}
	ctx = context.WithoutCancel(ctx)
	row, err := st.Session(ctx, id)
	if err != nil || row.Title != "" {
		return
	}
	row.Title = Title(text)
	if err := st.UpdateSession(ctx, row); err != nil {
		s.svc.cfg.Logger.Warn("title the session", "session", id, "err", err)
		return
	}
	s.mu.Lock()
	s.title = row.Title
	s.publishLocked()
	s.mu.Unlock()
}

// turnStore is a turn's view of the store: for a session not stored yet, the turn is opened, and the row made,
// when the engine first answers; a step that holds no answer because the request failed is then not stored.
type turnStore struct {
	s       *Session
	st      Store
	ctx     context.Context // the turn's: ended when the user stopped it
	text    string          // the user's message, for the title
	begun   bool
	err     error        // making the row failed: the turn goes on unstored
	skipped *memory.Step // the step left out because it held no answer
}

func (t *turnStore) BeginTurn(ctx context.Context, sessionID string) (int, error) {
	if !t.s.isStored() {
		return 0, nil
	}
	t.begun = true
	return t.st.BeginTurn(ctx, sessionID)
}

// answered is called when the engine's first output of the turn arrives: a new session is stored from here.
func (t *turnStore) answered(ctx context.Context, sessionID string) error {
	if t.begun || t.err != nil {
		return t.err
	}
	if err := t.s.makeRow(ctx, t.text); err != nil {
		t.err = err
		return err
	}
	t.begun = true
	_, err := t.st.BeginTurn(context.WithoutCancel(ctx), sessionID)
	t.err = err
	return err
}

func (t *turnStore) AppendStep(ctx context.Context, sessionID string, step memory.Step) error {
	if !t.begun {
		if !hasAnswer(step.Messages) && t.ctx.Err() == nil {
			t.skipped = &step // the engine failed before answering: a question alone does not make a session
			return nil
		}
		if err := t.answered(ctx, sessionID); err != nil {
			return err
		}
	}
	return t.st.AppendStep(ctx, sessionID, step)
}

// refused stores the step left out when the engine refused it for its content: the engine did answer, with a
// refusal, and the turn is kept for the record (then marked rejected).
func (t *turnStore) refused(ctx context.Context, sessionID string) error {
	if t.begun || t.skipped == nil {
		return nil
	}
	if err := t.answered(ctx, sessionID); err != nil {
		return err
	}
	return t.st.AppendStep(context.WithoutCancel(ctx), sessionID, *t.skipped)
}

func (t *turnStore) EndTurn(ctx context.Context, sessionID string) error {
	if !t.begun {
		return nil
	}
	return t.st.EndTurn(ctx, sessionID)
}

func (t *turnStore) MarkInterrupted(ctx context.Context, sessionID string) error {
	if !t.begun {
		return nil
	}
	return t.st.MarkInterrupted(ctx, sessionID)
}

func hasAnswer(msgs []memory.Message) bool {
	for _, m := range msgs {
		if m.Role == "assistant" {
			return true
		}
	}
	return false
}

// engineOutput reports whether ev is output of the engine: the first one makes a new session stored.
func engineOutput(ev agent.Event) bool {
	switch e := ev.(type) {
	case agent.Token, agent.ReasoningToken, agent.ToolCallStarted, agent.ParseError:
		return true
	case agent.StepFinished:
		for _, m := range e.Messages {
			if m.Role == "assistant" {
				return true
			}
		}
	}
	return false
}

// SessionInfo is one row of a session list.
type SessionInfo struct {
	ID, Title, Agent, Model string
	// ParentID and LinkKind say what a fork or a continuation (a compaction) came from.
	ParentID, LinkKind string
	Updated            time.Time
	Messages           int
	// OpenTurn: a turn was left open (its process died in it); resuming closes it as interrupted.
	OpenTurn bool
}

// ListOptions select sessions for Sessions.
type ListOptions struct {
	Agent string
	Limit int // 0: 100
}

// Lister reads the store's sessions; *memory.Store is one.
type Lister interface {
	ListSessions(ctx context.Context, f memory.SessionFilter) ([]memory.Session, error)
}

// Sessions lists the conversations a person can pick, newest first: the stored ones, or without a store this
// process's open ones that have a message. A stored row with nothing in it (left by an older visor, which made
// the row on open) is not one.
func (s *Service) Sessions(ctx context.Context, o ListOptions) ([]SessionInfo, error) {
	if s.cfg.Store != nil {
		return List(ctx, s.cfg.Store, o)
	}
	s.mu.Lock()
	list := make([]*Session, 0, len(s.open))
	for _, sess := range s.open {
		list = append(list, sess)
	}
	s.mu.Unlock()
	var out []SessionInfo
	for _, sess := range list {
		sess.mu.Lock()
		info := SessionInfo{ID: sess.id, Title: sess.title, Agent: s.cfg.AgentName, Model: s.cfg.Model, Updated: sess.used,
			Messages: len(sess.history)}
		sess.mu.Unlock()
		if info.Messages > 0 {
			out = append(out, info)
		}
	}
	sortSessions(out)
	if o.Limit > 0 && len(out) > o.Limit {
		out = out[:o.Limit]
	}
	return out, nil
}

// List is Sessions over a store, for commands that open no service (`visor sessions list`, `visor stats`).
func List(ctx context.Context, st Lister, o ListOptions) ([]SessionInfo, error) {
	limit := o.Limit
	if limit <= 0 {
		limit = 100
	}
	var out []SessionInfo
	// Empty rows are skipped after the query: ask for more until the limit is met or the store runs out.
	for ask := limit; ; ask *= 4 {
		rows, err := st.ListSessions(ctx, memory.SessionFilter{Agent: o.Agent, Limit: ask})
		if err != nil {
			return nil, err
		}
		out = out[:0]
		for _, r := range rows {
			if r.MessageCount == 0 && r.ParentID == "" {
				continue // empty: a fork or continuation with no messages of its own still has its parent's
			}
			out = append(out, SessionInfo{ID: r.ID, Title: r.Title, Agent: r.Agent, Model: r.Model, ParentID: r.ParentID,
				LinkKind: r.LinkKind, Updated: r.UpdatedAt, Messages: r.MessageCount, OpenTurn: r.OpenTurn})
			if len(out) == limit {
				return out, nil
			}
		}
		if len(rows) < ask {
			return out, nil
		}
	}
}

func sortSessions(list []SessionInfo) {
	sort.SliceStable(list, func(i, j int) bool { return list[i].Updated.After(list[j].Updated) })
}
