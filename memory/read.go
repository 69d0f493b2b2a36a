package memory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// querier is what reads need; *sql.DB and *sql.Tx both have it, so reads also run inside write transactions.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// maxLinkDepth bounds the chain of parents followed when reading a history; a longer chain means a
// corrupted parent link (a cycle), reported rather than followed forever.
const maxLinkDepth = 10000

const sessionColumns = `s.id, s.title, s.agent, s.model, s.engine_profile, coalesce(s.parent_id, ''), s.link_kind,
	coalesce(s.inherit_from, 0), coalesce(s.inherit_to, 0), s.created_at, s.updated_at, s.prompt_tokens,
	s.cached_tokens, s.generated_tokens,
	(SELECT count(*) FROM messages m WHERE m.session_id = s.id),
	EXISTS (SELECT 1 FROM turns t WHERE t.session_id = s.id AND t.status = 'open')`

func scanSession(sc interface{ Scan(...any) error }) (Session, error) {
	var s Session
	var created, updated int64
	err := sc.Scan(&s.ID, &s.Title, &s.Agent, &s.Model, &s.EngineProfile, &s.ParentID, &s.LinkKind,
		&s.InheritFrom, &s.InheritTo, &created, &updated, &s.PromptTokens, &s.CachedTokens, &s.GeneratedTokens,
		&s.MessageCount, &s.OpenTurn)
	s.CreatedAt, s.UpdatedAt = fromMillis(created), fromMillis(updated)
	return s, err
}

// Session returns one session.
func (s *Store) Session(ctx context.Context, id string) (Session, error) {
	return getSession(ctx, s.db, id)
}

func getSession(ctx context.Context, q querier, id string) (Session, error) {
	sess, err := scanSession(q.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM sessions s WHERE s.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, fmt.Errorf("memory: session %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return Session{}, fmt.Errorf("memory: session %q: %w", id, err)
	}
	return sess, nil
}

// ResolveSessionID finds the session whose id is, or starts with, prefix, so people can type a few
// characters of an id. More than one match is an error listing them.
func (s *Store) ResolveSessionID(ctx context.Context, prefix string) (string, error) {
	if prefix == "" {
		return "", fmt.Errorf("memory: empty session id: %w", ErrInvalidInput)
	}
	if err := sessionExists(ctx, s.db, prefix); err == nil {
		return prefix, nil
	}
	// Ids are hex; escaping LIKE wildcards keeps a stray % or _ literal.
	esc := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(prefix)
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM sessions WHERE id LIKE ? ESCAPE '\' ORDER BY id LIMIT 6`, esc+"%")
	if err != nil {
		return "", fmt.Errorf("memory: resolve session %q: %w", prefix, err)
	}
	ids, err := scanStrings(rows)
	if err != nil {
		return "", fmt.Errorf("memory: resolve session %q: %w", prefix, err)
	}
	switch len(ids) {
	case 0:
		// Said to the user as it is (visor: session "x": not found …): no package prefix.
		return "", fmt.Errorf("session %q: %w (visor sessions list shows the ids)", prefix, ErrNotFound)
	case 1:
		return ids[0], nil
	}
	return "", inputError(fmt.Sprintf("session id %q is ambiguous (%s…): type more of it", prefix, strings.Join(ids, ", ")))
}

// HasSessions says whether any session is stored.
func (s *Store) HasSessions(ctx context.Context) (bool, error) {
	var has bool
	if err := s.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sessions)`).Scan(&has); err != nil {
		return false, fmt.Errorf("memory: count sessions: %w", err)
	}
	return has, nil
}

// ListSessions returns sessions, most recently updated first.
func (s *Store) ListSessions(ctx context.Context, f SessionFilter) ([]Session, error) {
	var where []string
	var args []any
	if f.Agent != "" {
		where, args = append(where, `s.agent = ?`), append(args, f.Agent)
	}
	if f.ParentID != "" {
		where, args = append(where, `s.parent_id = ?`), append(args, f.ParentID)
	}
	if !f.Since.IsZero() {
		where, args = append(where, `s.updated_at >= ?`), append(args, toMillis(f.Since))
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	q := `SELECT ` + sessionColumns + ` FROM sessions s`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	q += ` ORDER BY s.updated_at DESC, s.id LIMIT ?`
	rows, err := s.db.QueryContext(ctx, q, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("memory: list sessions: %w", err)
	}
	defer rows.Close()
	var out []Session
	for rows.Next() {
		sess, err := scanSession(rows)
		if err != nil {
			return nil, fmt.Errorf("memory: list sessions: %w", err)
		}
		out = append(out, sess)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("memory: list sessions: %w", err)
	}
	return out, nil
}

// Messages returns the session's whole history in order, as the model should see it on resume: for a fork,
// the parent's history up to the fork point and then its own messages; for a continuation, its summary, the
// kept part of the parent's history, then its own messages. Images carry their bytes.
func (s *Store) Messages(ctx context.Context, sessionID string) ([]Message, error) {
	var msgs []Message
	err := s.readTx(ctx, func(q querier) error {
		var err error
		msgs, err = history(ctx, q, sessionID, 0)
		return err
	})
	return msgs, err
}

// readTx runs fn in a deferred (read) transaction on one connection, so its queries see one snapshot of
// the file. database/sql's BeginTx would issue BEGIN IMMEDIATE (see Open) and make every read wait for,
// and block, writers in other processes.
func (s *Store) readTx(ctx context.Context, fn func(querier) error) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("memory: read %s: %w", s.path, err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN DEFERRED`); err != nil {
		return fmt.Errorf("memory: read %s: %w", s.path, err)
	}
	// Not ctx: the connection must leave the transaction even when ctx is done, before it is pooled again.
	defer conn.ExecContext(context.Background(), `ROLLBACK`)
	return fn(conn)
}

// history resolves a session's messages through its parent chain. It reads one consistent snapshot when
// q is a transaction.
func history(ctx context.Context, q querier, sessionID string, depth int) ([]Message, error) {
	if depth > maxLinkDepth {
		return nil, fmt.Errorf("memory: session %q: parent chain longer than %d (a cycle?)", sessionID, maxLinkDepth)
	}
	sess, err := getSession(ctx, q, sessionID)
	if err != nil {
		return nil, err
	}
	own, err := ownMessages(ctx, q, sessionID)
	if err != nil {
		return nil, err
	}
	if sess.ParentID == "" || sess.InheritTo == 0 {
		return own, nil
	}
	parent, err := history(ctx, q, sess.ParentID, depth+1)
	if err != nil {
		return nil, err
	}
	from := 0
	if sess.InheritFrom != 0 {
		if from = indexOf(parent, sess.InheritFrom); from < 0 {
			return nil, fmt.Errorf("memory: session %q inherits from message %d, which is gone from parent %q", sessionID, sess.InheritFrom, sess.ParentID)
		}
	}
	to := indexOf(parent, sess.InheritTo)
	if to < from {
		return nil, fmt.Errorf("memory: session %q inherits up to message %d, which is not in parent %q", sessionID, sess.InheritTo, sess.ParentID)
	}
	out := make([]Message, 0, len(own)+to+1-from)
	n := 0
	for n < len(own) && own[n].prelude {
		n++
	}
	out = append(out, own[:n]...)
	out = append(out, parent[from:to+1]...)
	return append(out, own[n:]...), nil
}

func indexOf(msgs []Message, id int64) int {
	for i := range msgs {
		if msgs[i].ID == id {
			return i
		}
	}
	return -1
}

// ownMessages reads the messages written to this session itself, with tool calls and images.
func ownMessages(ctx context.Context, q querier, sessionID string) ([]Message, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, prelude, role, content, reasoning, tool_call_id, tool_name, finish_reason,
		interrupted, has_timings, prompt_tokens, cached_tokens, generated_tokens, prompt_per_second, tokens_per_second,
		draft_tokens, draft_accepted, ttft_us, duration_us, created_at,
		coalesce((SELECT status = 'rejected' FROM turns WHERE turns.id = messages.turn_id), 0)
		FROM messages WHERE session_id = ? ORDER BY prelude DESC, id`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("memory: messages of %q: %w", sessionID, err)
	}
	var msgs []Message
	byID := map[int64]int{}
	func() {
		defer rows.Close()
		for rows.Next() {
			var m Message
			var t Timings
			var hasT bool
			var ttft, dur, created int64
			err = rows.Scan(&m.ID, &m.prelude, &m.Role, &m.Content, &m.Reasoning, &m.ToolCallID, &m.ToolName, &m.FinishReason,
				&m.Interrupted, &hasT, &t.PromptTokens, &t.CachedTokens, &t.GeneratedTokens, &t.PromptPerSecond,
				&t.TokensPerSecond, &t.DraftTokens, &t.DraftAccepted, &ttft, &dur, &created, &m.Rejected)
			if err != nil {
				return
			}
			if hasT {
				t.TimeToFirstToken, t.Duration = time.Duration(ttft)*time.Microsecond, time.Duration(dur)*time.Microsecond
				m.Timings = &t
			}
			m.SessionID, m.CreatedAt = sessionID, fromMillis(created)
			byID[m.ID] = len(msgs)
			msgs = append(msgs, m)
		}
		err = rows.Err()
	}()
	if err != nil {
		return nil, fmt.Errorf("memory: messages of %q: %w", sessionID, err)
	}
	if len(msgs) == 0 {
		return nil, nil
	}

	rows, err = q.QueryContext(ctx, `SELECT c.message_id, c.call_id, c.name, c.arguments FROM tool_calls c
		JOIN messages m ON m.id = c.message_id WHERE m.session_id = ? ORDER BY c.message_id, c.position`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("memory: tool calls of %q: %w", sessionID, err)
	}
	func() {
		defer rows.Close()
		for rows.Next() {
			var id int64
			var c ToolCall
			var args string
			if err = rows.Scan(&id, &c.ID, &c.Name, &args); err != nil {
				return
			}
			if args != "" {
				c.Arguments = []byte(args)
			}
			i, ok := byID[id]
			if !ok {
				continue // cannot happen inside one snapshot; never attach to the wrong message
			}
			msgs[i].ToolCalls = append(msgs[i].ToolCalls, c)
		}
		err = rows.Err()
	}()
	if err != nil {
		return nil, fmt.Errorf("memory: tool calls of %q: %w", sessionID, err)
	}

	rows, err = q.QueryContext(ctx, `SELECT i.message_id, b.sha256, b.mime, b.width, b.height, b.data
		FROM message_images i JOIN messages m ON m.id = i.message_id JOIN blobs b ON b.sha256 = i.sha256
		WHERE m.session_id = ? ORDER BY i.message_id, i.position`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("memory: images of %q: %w", sessionID, err)
	}
	func() {
		defer rows.Close()
		for rows.Next() {
			var id int64
			var img Image
			if err = rows.Scan(&id, &img.SHA256, &img.MIME, &img.Width, &img.Height, &img.Data); err != nil {
				return
			}
			i, ok := byID[id]
			if !ok {
				continue
			}
			msgs[i].Images = append(msgs[i].Images, img)
		}
		err = rows.Err()
	}()
	if err != nil {
		return nil, fmt.Errorf("memory: images of %q: %w", sessionID, err)
	}
	return msgs, nil
}

// ToolRuns returns the tool runs of the session's history (see Messages): for a fork, the parent's runs up
// to the fork point, then its own.
func (s *Store) ToolRuns(ctx context.Context, sessionID string) ([]ToolRun, error) {
	var out []ToolRun
	err := s.readTx(ctx, func(q querier) error {
		var err error
		out, err = toolRuns(ctx, q, sessionID)
		return err
	})
	return out, err
}

func toolRuns(ctx context.Context, tx querier, sessionID string) ([]ToolRun, error) {
	hist, err := history(ctx, tx, sessionID, 0)
	if err != nil {
		return nil, err
	}
	// The sessions whose runs can appear, and which of their messages are in this history.
	inHistory := map[int64]bool{}
	sessions := []string{}
	seen := map[string]bool{}
	for _, m := range hist {
		inHistory[m.ID] = true
		if !seen[m.SessionID] {
			seen[m.SessionID] = true
			sessions = append(sessions, m.SessionID)
		}
	}
	if !seen[sessionID] {
		sessions = append(sessions, sessionID)
	}
	var out []ToolRun
	for _, sid := range sessions {
		rows, err := tx.QueryContext(ctx, `SELECT id, session_id, coalesce(message_id, 0), call_id, name, arguments, result,
			error, duration_us, started_at FROM tool_runs WHERE session_id = ? ORDER BY id`, sid)
		if err != nil {
			return nil, fmt.Errorf("memory: tool runs of %q: %w", sid, err)
		}
		err = func() error {
			defer rows.Close()
			for rows.Next() {
				var r ToolRun
				var args string
				var dur, started int64
				if err := rows.Scan(&r.ID, &r.SessionID, &r.MessageID, &r.CallID, &r.Name, &args, &r.Result, &r.Error, &dur, &started); err != nil {
					return err
				}
				if args != "" {
					r.Arguments = []byte(args)
				}
				r.Duration, r.StartedAt = time.Duration(dur)*time.Microsecond, fromMillis(started)
				// Own runs always count (even those of a step without messages); inherited ones only when
				// their step's message is inherited.
				if sid == sessionID || inHistory[r.MessageID] {
					out = append(out, r)
				}
			}
			return rows.Err()
		}()
		if err != nil {
			return nil, fmt.Errorf("memory: tool runs of %q: %w", sid, err)
		}
	}
	// Order by position in the history: the run's message, then id.
	pos := map[int64]int{}
	for i, m := range hist {
		pos[m.ID] = i
	}
	sortToolRuns(out, pos)
	return out, nil
}

// EngineEvents returns engine events, oldest first: those of one session when sessionID is set, else all,
// limited to the last limit (0 means 1000).
func (s *Store) EngineEvents(ctx context.Context, sessionID string, limit int) ([]EngineEvent, error) {
	return engineEvents(ctx, s.db, sessionID, limit)
}

func engineEvents(ctx context.Context, db querier, sessionID string, limit int) ([]EngineEvent, error) {
	if limit <= 0 {
		limit = 1000
	}
	q := `SELECT id, coalesce(session_id, ''), kind, at, duration_us, detail FROM engine_events`
	args := []any{}
	if sessionID != "" {
		q += ` WHERE session_id = ?`
		args = append(args, sessionID)
	}
	q = `SELECT * FROM (` + q + ` ORDER BY at DESC, id DESC LIMIT ?) ORDER BY at, id`
	rows, err := db.QueryContext(ctx, q, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("memory: engine events: %w", err)
	}
	defer rows.Close()
	var out []EngineEvent
	for rows.Next() {
		var ev EngineEvent
		var kind, detail string
		var at, dur int64
		if err := rows.Scan(&ev.ID, &ev.SessionID, &kind, &at, &dur, &detail); err != nil {
			return nil, fmt.Errorf("memory: engine events: %w", err)
		}
		ev.Kind, ev.At, ev.Duration = EngineEventKind(kind), fromMillis(at), time.Duration(dur)*time.Microsecond
		if detail != "" {
			ev.Detail = []byte(detail)
		}
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("memory: engine events: %w", err)
	}
	return out, nil
}

func sortToolRuns(runs []ToolRun, pos map[int64]int) {
	key := func(r ToolRun) int {
		if p, ok := pos[r.MessageID]; ok {
			return p
		}
		return len(pos)
	}
	sort.SliceStable(runs, func(i, j int) bool {
		ki, kj := key(runs[i]), key(runs[j])
		if ki != kj {
			return ki < kj
		}
		return runs[i].ID < runs[j].ID
	})
}
