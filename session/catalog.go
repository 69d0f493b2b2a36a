package session

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/memory"
)

// What the service does with stored sessions as a list a person manages (rename, delete, search), and the
// explanations (--explain) kept with each turn so a front end can show them again after a reload.

// catalog is what renaming, deleting and searching stored sessions, and reading back a turn's explanations,
// need of the store; *memory.Store is one.
type catalog interface {
	UpdateSession(ctx context.Context, sess memory.Session) error
	DeleteSession(ctx context.Context, sessionID string, cascade bool) ([]string, error)
	Search(ctx context.Context, q memory.Query) ([]memory.Hit, error)
	EngineEvents(ctx context.Context, sessionID string, limit int) ([]memory.EngineEvent, error)
	ListSessions(ctx context.Context, f memory.SessionFilter) ([]memory.Session, error)
}

// Rename sets a stored session's title: one line, at most TitleRunes characters (longer is cut, with "…"). A
// title with a control or bidi-override character is refused (ErrBadInput), naming it: a person typing a title
// types none, and one that holds them would show in the lists as other text than it is.
func (s *Service) Rename(ctx context.Context, id, title string) (string, error) {
	st := s.cfg.Store
	if st == nil {
		return "", fmt.Errorf("rename session %s: %w", id, ErrNoStore)
	}
	for i, r := range []rune(title) {
		if titleHazard(r) {
			return "", storeErr(fmt.Errorf("rename session %s: %w: the title has %U (a control or bidi-override character) at character %d: "+
				"give one line of printable text", id, memory.ErrInvalidInput, r, i+1))
		}
	}
	title = Title(title)
	if title == "" {
		return "", storeErr(fmt.Errorf("rename session %s: %w: give a title with at least one visible character", id, memory.ErrInvalidInput))
	}
	row, err := st.Session(ctx, id)
	if err != nil {
		return "", fmt.Errorf("rename session %s: %w", id, storeErr(err))
	}
	row.Title = title
	if err := st.UpdateSession(ctx, row); err != nil {
		return "", fmt.Errorf("rename session %s: %w", id, storeErr(err))
	}
	s.mu.Lock()
	open := s.open[id]
	s.mu.Unlock()
	if open != nil {
		open.mu.Lock()
		open.title = title
		open.publishLocked()
		open.mu.Unlock()
	}
	return title, nil
}

// Delete removes a stored session with its images and the sessions that continue it (forks, compactions):
// what deleting a chat from a list means. A session running a turn is not deleted (ErrBusy).
func (s *Service) Delete(ctx context.Context, id string) ([]string, error) {
	st := s.cfg.Store
	if st == nil {
		return nil, fmt.Errorf("delete session %s: %w", id, ErrNoStore)
	}
	s.mu.Lock()
	open := s.open[id]
	s.mu.Unlock()
	if open != nil {
		open.mu.Lock()
		busy := open.ahead.Busy
		open.mu.Unlock()
		if busy {
			return nil, fmt.Errorf("delete session %s: %w: stop its turn first", id, ErrBusy)
		}
	}
	deleted, err := st.DeleteSession(ctx, id, true)
	if err != nil {
		return nil, fmt.Errorf("delete session %s: %w", id, storeErr(err))
	}
	return deleted, nil
}

// Found is a stored session a search matched, with where.
type Found struct {
	ID, Title string
	// Snippet is the best match in its messages, matched terms in [brackets]; empty when only the title matched.
	Snippet string
}

// Search finds stored sessions whose title or messages hold every term of query, best first, at most limit
// (default 50).
func (s *Service) Search(ctx context.Context, query string, limit int) ([]Found, error) {
	st := s.cfg.Store
	if st == nil {
		return nil, fmt.Errorf("search sessions: %w", ErrNoStore)
	}
	if limit <= 0 {
		limit = 50
	}
	query = strings.TrimSpace(query)
	if query == "" {
		return nil, storeErr(fmt.Errorf("search sessions: %w: give a word to look for", memory.ErrBadQuery))
	}
	var out []Found
	seen := map[string]bool{}
	// Titles first: a person searching a chat list mostly remembers what the chat was called.
	rows, err := st.ListSessions(ctx, memory.SessionFilter{Limit: 1000})
	if err != nil {
		return nil, fmt.Errorf("search sessions: %w", storeErr(err))
	}
	terms := strings.Fields(strings.ToLower(query))
	for _, r := range rows {
		title := strings.ToLower(r.Title)
		all := true
		for _, t := range terms {
			all = all && strings.Contains(title, strings.TrimSuffix(t, "*"))
		}
		if all && len(out) < limit {
			out, seen[r.ID] = append(out, Found{ID: r.ID, Title: r.Title}), true
		}
	}
	hits, err := st.Search(ctx, memory.Query{Text: query, Limit: 4 * limit})
	if err != nil {
		return nil, fmt.Errorf("search sessions: %w", storeErr(err))
	}
	for _, h := range hits {
		if seen[h.SessionID] || len(out) >= limit {
			continue
		}
		seen[h.SessionID] = true
		out = append(out, Found{ID: h.SessionID, Title: h.SessionTitle, Snippet: h.Snippet})
	}
	return out, nil
}

// engineExplain is the engine-event kind an explanation is kept under, with its turn, step and text.
const engineExplain memory.EngineEventKind = "explain"

// Explanation is one explanation of a stored turn (agent.Explain): Turn counts the conversation's user messages
// up to the turn's own, from 1; Step is the request it is about (0: before the first).
type Explanation struct {
	Turn, Step int
	Text       string
}

type explainDetail struct {
	Turn int    `json:"turn"`
	Step int    `json:"step"`
	Text string `json:"text"`
}

// explains collects a turn's explanations as its events pass, to keep them with the session once the turn's
// messages are stored (a session's row may be made only then).
type explains struct {
	emit  func(agent.Event)
	mu    sync.Mutex
	lines []explainDetail
}

func (x *explains) event(ev agent.Event) {
	x.emit(ev)
	if e, ok := ev.(agent.Explain); ok {
		x.mu.Lock()
		x.lines = append(x.lines, explainDetail{Step: e.Step, Text: e.Text})
		x.mu.Unlock()
	}
}

// keep stores the explanations of the turn res ran in s, numbered with the turn's place in the conversation. A
// turn that added nothing (refused before it ran) has nothing to explain again.
func (x *explains) keep(s *Session, res Result) {
	st := s.svc.cfg.Store
	if st == nil || res.SessionID == "" || len(res.Added) == 0 || len(x.lines) == 0 {
		return
	}
	turn := UserTurns(s.History())
	for _, d := range x.lines {
		d.Turn = turn
		b, _ := json.Marshal(d)
		// An explanation lost costs a line after a reload, not the turn.
		if err := s.record(memory.EngineEvent{SessionID: res.SessionID, Kind: engineExplain, Detail: b}); err != nil {
			s.svc.cfg.Logger.Warn("store an explanation", "session", res.SessionID, "err", err)
		}
	}
}

// UserTurns counts the user messages of history that a person sent (not the loop's notes to the model).
func UserTurns(history []agent.Message) int {
	n := 0
	for _, m := range history {
		if m.Role == "user" && !m.IsError {
			n++
		}
	}
	return n
}

// Explained returns the explanations kept with a stored session's turns, oldest first.
func (s *Service) Explained(ctx context.Context, id string) ([]Explanation, error) {
	st := s.cfg.Store
	if st == nil {
		return nil, nil
	}
	evs, err := st.EngineEvents(ctx, id, 1000)
	if err != nil {
		return nil, fmt.Errorf("explanations of session %s: %w", id, storeErr(err))
	}
	var out []Explanation
	for _, ev := range evs {
		var d explainDetail
		if ev.Kind != engineExplain || json.Unmarshal(ev.Detail, &d) != nil {
			continue
		}
		out = append(out, Explanation{Turn: d.Turn, Step: d.Step, Text: d.Text})
	}
	return out, nil
}
