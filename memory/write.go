package memory

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// MaxIndexedToolText caps how much of a tool result is put in the search index: tool output can be megabytes
// of logs, and the first part is what people search for. The stored text is never cut.
const MaxIndexedToolText = 32 << 10

// newID makes a session id: 16 hex digits, random, so that two processes never collide.
func newID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("memory: new session id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// CreateSession stores a new root session. ID is generated when empty; CreatedAt and UpdatedAt default to
// now. Parent links are made by Fork and CreateLinkedSession, not here.
func (s *Store) CreateSession(ctx context.Context, sess Session) (Session, error) {
	if sess.ParentID != "" {
		return Session{}, fmt.Errorf("memory: create session: ParentID is set; use Fork or CreateLinkedSession: %w", ErrInvalidInput)
	}
	err := s.withTx(ctx, "create session", func(tx *sql.Tx) error {
		var err error
		sess, err = insertSession(ctx, tx, sess)
		return err
	})
	return sess, err
}

func insertSession(ctx context.Context, tx *sql.Tx, sess Session) (Session, error) {
	if sess.ID == "" {
		id, err := newID()
		if err != nil {
			return Session{}, err
		}
		sess.ID = id
	}
	now := time.Now()
	if sess.CreatedAt.IsZero() {
		sess.CreatedAt = now
	}
	if sess.UpdatedAt.IsZero() {
		sess.UpdatedAt = sess.CreatedAt
	}
	sess.CreatedAt, sess.UpdatedAt = fromMillis(toMillis(sess.CreatedAt)), fromMillis(toMillis(sess.UpdatedAt))
	_, err := tx.ExecContext(ctx, `INSERT INTO sessions
		(id, title, agent, model, engine_profile, parent_id, link_kind, inherit_from, inherit_to,
		 created_at, updated_at, prompt_tokens, cached_tokens, generated_tokens)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		sess.ID, sess.Title, sess.Agent, sess.Model, sess.EngineProfile, nullString(sess.ParentID), sess.LinkKind,
		nullInt(sess.InheritFrom), nullInt(sess.InheritTo), toMillis(sess.CreatedAt), toMillis(sess.UpdatedAt),
		sess.PromptTokens, sess.CachedTokens, sess.GeneratedTokens)
	if isConstraint(err, sqlite3.ErrConstraintPrimaryKey) {
		return Session{}, fmt.Errorf("memory: create session %q: %w", sess.ID, ErrExists)
	}
	if err != nil {
		return Session{}, fmt.Errorf("memory: create session %q: %w", sess.ID, err)
	}
	return sess, nil
}

// UpdateSession changes a session's title, agent, model and engine profile (the model or profile can change
// mid-conversation; record the change as an EngineEvent too if it matters for timings).
func (s *Store) UpdateSession(ctx context.Context, sess Session) error {
	return s.withTx(ctx, "update session", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE sessions SET title = ?, agent = ?, model = ?, engine_profile = ?,
			updated_at = ? WHERE id = ?`, sess.Title, sess.Agent, sess.Model, sess.EngineProfile, toMillis(time.Now()), sess.ID)
		if err != nil {
			return fmt.Errorf("memory: update session %q: %w", sess.ID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("memory: update session %q: %w", sess.ID, ErrNotFound)
		}
		return nil
	})
}

// BeginTurn opens a turn (a user request and the steps that answer it) in the session; the messages of
// later AppendStep calls belong to it until EndTurn or MarkInterrupted. A turn still open at BeginTurn was
// left by a process that died mid-turn: it is closed as interrupted and its last message marked, so a
// resumed conversation shows where it broke off instead of silently missing the rest.
// It returns how many such turns it closed.
func (s *Store) BeginTurn(ctx context.Context, sessionID string) (recovered int, err error) {
	err = s.withTx(ctx, "begin turn", func(tx *sql.Tx) error {
		if err := sessionExists(ctx, tx, sessionID); err != nil {
			return err
		}
		n, err := closeOpenTurns(ctx, tx, sessionID, "interrupted")
		if err != nil {
			return err
		}
		recovered = n
		_, err = tx.ExecContext(ctx, `INSERT INTO turns (session_id, status, started_at) VALUES (?, 'open', ?)`,
			sessionID, toMillis(time.Now()))
		if err != nil {
			return fmt.Errorf("memory: begin turn in session %q: %w", sessionID, err)
		}
		return nil
	})
	if recovered > 0 {
		s.logger.Warn("memory: closed turns left open by a previous process", "session", sessionID, "turns", recovered)
	}
	return recovered, err
}

// EndTurn closes the session's open turn as complete. Without an open turn it does nothing.
func (s *Store) EndTurn(ctx context.Context, sessionID string) error {
	return s.withTx(ctx, "end turn", func(tx *sql.Tx) error {
		_, err := closeOpenTurns(ctx, tx, sessionID, "done")
		return err
	})
}

// MarkInterrupted closes the session's open turn as interrupted and marks the last message written in it.
// Use it when the user stops a turn; the partial answer itself should be appended first (with Interrupted
// set) if it is worth keeping.
func (s *Store) MarkInterrupted(ctx context.Context, sessionID string) error {
	return s.withTx(ctx, "mark interrupted", func(tx *sql.Tx) error {
		if err := sessionExists(ctx, tx, sessionID); err != nil {
			return err
		}
		_, err := closeOpenTurns(ctx, tx, sessionID, "interrupted")
		return err
	})
}

// MarkRejected marks the session's most recent turn as rejected by the engine for its content (an image it
// could not decode, a prompt over the context): its messages stay stored for the record, with Rejected set on
// read, and are never replayed into later requests, so one bad turn cannot break the rest of the session.
func (s *Store) MarkRejected(ctx context.Context, sessionID string) error {
	return s.withTx(ctx, "mark rejected", func(tx *sql.Tx) error {
		if err := sessionExists(ctx, tx, sessionID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE turns SET status = 'rejected', ended_at = coalesce(ended_at, ?)
			WHERE id = (SELECT max(id) FROM turns WHERE session_id = ?)`, toMillis(time.Now()), sessionID)
		if err != nil {
			return fmt.Errorf("memory: mark the last turn of session %q rejected: %w", sessionID, err)
		}
		return nil
	})
}

func closeOpenTurns(ctx context.Context, tx *sql.Tx, sessionID, status string) (int, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id FROM turns WHERE session_id = ? AND status = 'open'`, sessionID)
	if err != nil {
		return 0, fmt.Errorf("memory: close turns of session %q: %w", sessionID, err)
	}
	ids, err := scanInts(rows)
	if err != nil {
		return 0, fmt.Errorf("memory: close turns of session %q: %w", sessionID, err)
	}
	now := toMillis(time.Now())
	for _, id := range ids {
		if _, err := tx.ExecContext(ctx, `UPDATE turns SET status = ?, ended_at = ? WHERE id = ?`, status, now, id); err != nil {
			return 0, fmt.Errorf("memory: close turn %d: %w", id, err)
		}
		if status == "interrupted" {
			_, err := tx.ExecContext(ctx, `UPDATE messages SET interrupted = 1
				WHERE id = (SELECT max(id) FROM messages WHERE turn_id = ?)`, id)
			if err != nil {
				return 0, fmt.Errorf("memory: mark turn %d interrupted: %w", id, err)
			}
		}
	}
	return len(ids), nil
}

// AppendStep writes a step (messages, with their tool calls and images, and tool runs) in one transaction:
// after a crash the step is either all there or not at all.
func (s *Store) AppendStep(ctx context.Context, sessionID string, step Step) error {
	return s.withTx(ctx, "append step", func(tx *sql.Tx) error {
		return appendStepTx(ctx, tx, sessionID, step)
	})
}

func appendStepTx(ctx context.Context, tx *sql.Tx, sessionID string, step Step) error {
	if err := sessionExists(ctx, tx, sessionID); err != nil {
		return err
	}
	var turnID sql.NullInt64
	err := tx.QueryRowContext(ctx, `SELECT max(id) FROM turns WHERE session_id = ? AND status = 'open'`, sessionID).Scan(&turnID)
	if err != nil {
		return fmt.Errorf("memory: append step to session %q: find turn: %w", sessionID, err)
	}
	now := time.Now()
	var lastMsg int64
	var prompt, cached, generated int64
	for i := range step.Messages {
		id, err := insertMessage(ctx, tx, sessionID, turnID, false, step.Messages[i], now)
		if err != nil {
			return fmt.Errorf("memory: append step to session %q: message %d: %w", sessionID, i, err)
		}
		lastMsg = id
		if t := step.Messages[i].Timings; t != nil {
			prompt += int64(t.PromptTokens)
			cached += int64(t.CachedTokens)
			generated += int64(t.GeneratedTokens)
		}
	}
	for i, run := range step.ToolRuns {
		if err := insertToolRun(ctx, tx, sessionID, turnID, lastMsg, run, step.Messages, now); err != nil {
			return fmt.Errorf("memory: append step to session %q: tool run %d (%s): %w", sessionID, i, run.Name, err)
		}
	}
	_, err = tx.ExecContext(ctx, `UPDATE sessions SET updated_at = ?, prompt_tokens = prompt_tokens + ?,
		cached_tokens = cached_tokens + ?, generated_tokens = generated_tokens + ? WHERE id = ?`,
		toMillis(now), prompt, cached, generated, sessionID)
	if err != nil {
		return fmt.Errorf("memory: append step to session %q: update totals: %w", sessionID, err)
	}
	return nil
}

func insertMessage(ctx context.Context, tx *sql.Tx, sessionID string, turnID sql.NullInt64, prelude bool, m Message, now time.Time) (int64, error) {
	if m.Role == "" {
		return 0, fmt.Errorf("empty role: %w", ErrInvalidInput)
	}
	created := m.CreatedAt
	if created.IsZero() {
		created = now
	}
	t := m.Timings
	if t == nil {
		t = &Timings{}
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO messages
		(session_id, turn_id, prelude, role, content, reasoning, tool_call_id, tool_name, finish_reason, interrupted,
		 has_timings, prompt_tokens, cached_tokens, generated_tokens, prompt_per_second, tokens_per_second,
		 draft_tokens, draft_accepted, ttft_us, duration_us, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		sessionID, turnID, prelude, m.Role, m.Content, m.Reasoning, m.ToolCallID, m.ToolName, m.FinishReason,
		m.Interrupted, m.Timings != nil, t.PromptTokens, t.CachedTokens, t.GeneratedTokens, t.PromptPerSecond,
		t.TokensPerSecond, t.DraftTokens, t.DraftAccepted, t.TimeToFirstToken.Microseconds(), t.Duration.Microseconds(),
		toMillis(created))
	if err != nil {
		return 0, err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, err
	}
	for i, c := range m.ToolCalls {
		_, err := tx.ExecContext(ctx, `INSERT INTO tool_calls (message_id, position, call_id, name, arguments)
			VALUES (?, ?, ?, ?, ?)`, id, i, c.ID, c.Name, string(c.Arguments))
		if err != nil {
			return 0, fmt.Errorf("tool call %d (%s): %w", i, c.Name, err)
		}
	}
	for i, img := range m.Images {
		sum, err := putBlob(ctx, tx, img)
		if err != nil {
			return 0, fmt.Errorf("image %d: %w", i, err)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO message_images (message_id, position, sha256) VALUES (?, ?, ?)`, id, i, sum)
		if err != nil {
			return 0, fmt.Errorf("image %d: %w", i, err)
		}
	}
	body := m.Content
	if m.Role == "tool" {
		body = capText(body, MaxIndexedToolText)
	}
	if body != "" || m.Reasoning != "" {
		_, err = tx.ExecContext(ctx, `INSERT INTO search_fts (rowid, body, reasoning, session_id, role, created_at)
			VALUES (?, ?, ?, ?, ?, ?)`, id, body, m.Reasoning, sessionID, m.Role, toMillis(created))
		if err != nil {
			return 0, fmt.Errorf("index: %w", err)
		}
	}
	return id, nil
}

// putBlob stores an image's bytes once and returns their sha256. An image given only by SHA256 must already
// be stored (a caller re-sending a known image need not carry the bytes again).
func putBlob(ctx context.Context, tx *sql.Tx, img Image) (string, error) {
	if len(img.Data) == 0 {
		if img.SHA256 == "" {
			return "", fmt.Errorf("no data and no sha256: %w", ErrInvalidInput)
		}
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM blobs WHERE sha256 = ?`, strings.ToLower(img.SHA256)).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return "", fmt.Errorf("image sha256 %s is not stored; pass its Data: %w", img.SHA256, ErrNotFound)
		}
		if err != nil {
			return "", err
		}
		return strings.ToLower(img.SHA256), nil
	}
	sum := sha256Hex(img.Data)
	if img.SHA256 != "" && !strings.EqualFold(img.SHA256, sum) {
		return "", fmt.Errorf("sha256 %s does not match the data (%s): %w", img.SHA256, sum, ErrInvalidInput)
	}
	img = imageInfo(img)
	_, err := tx.ExecContext(ctx, `INSERT INTO blobs (sha256, mime, width, height, size, data) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (sha256) DO NOTHING`, sum, img.MIME, img.Width, img.Height, len(img.Data), img.Data)
	if err != nil {
		return "", err
	}
	return sum, nil
}

func insertToolRun(ctx context.Context, tx *sql.Tx, sessionID string, turnID sql.NullInt64, msgID int64, run ToolRun, msgs []Message, now time.Time) error {
	if run.Name == "" {
		return fmt.Errorf("empty tool name: %w", ErrInvalidInput)
	}
	started := run.StartedAt
	if started.IsZero() {
		started = now
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO tool_runs
		(session_id, turn_id, message_id, call_id, name, arguments, result, error, duration_us, started_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, sessionID, turnID, nullInt(msgID), run.CallID, run.Name,
		string(run.Arguments), run.Result, run.Error, run.Duration.Microseconds(), toMillis(started))
	if err != nil {
		return err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return err
	}
	// The usual tool result (or error) is also the tool message of the same step; indexing it twice would
	// show every hit twice. Index only what the messages do not already say.
	var said string
	for _, m := range msgs {
		if m.Role == "tool" && m.ToolCallID == run.CallID {
			said = m.Content
			break
		}
	}
	var parts []string
	if run.Result != "" && run.Result != said {
		parts = append(parts, run.Result)
	}
	if run.Error != "" && run.Error != said && run.Error != run.Result {
		parts = append(parts, run.Error)
	}
	text := strings.Join(parts, "\n")
	if text == "" {
		return nil
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO search_fts (rowid, body, reasoning, session_id, role, created_at)
		VALUES (?, ?, '', ?, 'tool', ?)`, -id, capText(text, MaxIndexedToolText), sessionID, toMillis(started))
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	return nil
}

// capText cuts s to at most n bytes without splitting a UTF-8 sequence.
func capText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n]
}

// RecordEngineEvent stores something the engine did. At defaults to now; SessionID may be empty.
func (s *Store) RecordEngineEvent(ctx context.Context, ev EngineEvent) (int64, error) {
	if ev.Kind == "" {
		return 0, fmt.Errorf("memory: record engine event: empty kind: %w", ErrInvalidInput)
	}
	if ev.At.IsZero() {
		ev.At = time.Now()
	}
	var id int64
	err := s.withTx(ctx, "record engine event", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO engine_events (session_id, kind, at, duration_us, detail)
			VALUES (?, ?, ?, ?, ?)`, nullString(ev.SessionID), string(ev.Kind), toMillis(ev.At),
			ev.Duration.Microseconds(), string(ev.Detail))
		if isConstraint(err, sqlite3.ErrConstraintForeignKey) {
			return fmt.Errorf("memory: record engine event: session %q: %w", ev.SessionID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("memory: record engine event %s: %w", ev.Kind, err)
		}
		id, err = res.LastInsertId()
		return err
	})
	return id, err
}

// Fork starts a new session that sees the session's history up to and including atMessageID (which may be
// a message the session itself inherited), then its own messages. Nothing is copied.
func (s *Store) Fork(ctx context.Context, sessionID string, atMessageID int64) (Session, error) {
	var child Session
	err := s.withTx(ctx, "fork", func(tx *sql.Tx) error {
		parent, err := getSession(ctx, tx, sessionID)
		if err != nil {
			return err
		}
		hist, err := history(ctx, tx, sessionID, 0)
		if err != nil {
			return err
		}
		if indexOf(hist, atMessageID) < 0 {
			return fmt.Errorf("memory: fork session %q at message %d: the message is not in its history: %w", sessionID, atMessageID, ErrNotFound)
		}
		child, err = insertSession(ctx, tx, Session{
			Title: parent.Title, Agent: parent.Agent, Model: parent.Model, EngineProfile: parent.EngineProfile,
			ParentID: sessionID, LinkKind: LinkFork, InheritTo: atMessageID,
		})
		return err
	})
	if err != nil {
		return Session{}, err
	}
	return child, nil
}

// CreateLinkedSession is the storage half of context compaction: a new session that continues parentID
// with summary first, then the parent's history from keepFrom (a message id in it) to its current end,
// then its own messages. keepFrom 0 keeps none of the parent's messages. The parent is left untouched, so
// the full conversation stays searchable and exportable. Making the summary is the caller's job.
func (s *Store) CreateLinkedSession(ctx context.Context, parentID string, summary Message, keepFrom int64) (Session, error) {
	var child Session
	err := s.withTx(ctx, "create linked session", func(tx *sql.Tx) error {
		parent, err := getSession(ctx, tx, parentID)
		if err != nil {
			return err
		}
		hist, err := history(ctx, tx, parentID, 0)
		if err != nil {
			return err
		}
		link := Session{Title: parent.Title, Agent: parent.Agent, Model: parent.Model, EngineProfile: parent.EngineProfile,
			ParentID: parentID, LinkKind: LinkContinuation}
		if keepFrom != 0 {
			if indexOf(hist, keepFrom) < 0 {
				return fmt.Errorf("memory: link session to %q from message %d: the message is not in its history: %w", parentID, keepFrom, ErrNotFound)
			}
			link.InheritFrom, link.InheritTo = keepFrom, hist[len(hist)-1].ID
		}
		child, err = insertSession(ctx, tx, link)
		if err != nil {
			return err
		}
		if summary.Role == "" {
			return nil
		}
		if _, err := insertMessage(ctx, tx, child.ID, sql.NullInt64{}, true, summary, time.Now()); err != nil {
			return fmt.Errorf("memory: link session to %q: summary: %w", parentID, err)
		}
		return nil
	})
	if err != nil {
		return Session{}, err
	}
	return child, nil
}

// DeleteSession removes a session with its messages, tool runs and engine events, and the images no other
// message uses. A session that forks or continuations read from is refused with ErrHasForks unless cascade
// is set, in which case those descendants are deleted too: they cannot exist without the messages they
// inherit, and silently copying them would turn a delete into a write of unknown size.
func (s *Store) DeleteSession(ctx context.Context, sessionID string, cascade bool) (deleted []string, err error) {
	err = s.withTx(ctx, "delete session", func(tx *sql.Tx) error {
		if err := sessionExists(ctx, tx, sessionID); err != nil {
			return err
		}
		// Descendants, parents before children.
		order := []string{sessionID}
		for i := 0; i < len(order); i++ {
			rows, err := tx.QueryContext(ctx, `SELECT id FROM sessions WHERE parent_id = ? ORDER BY created_at`, order[i])
			if err != nil {
				return fmt.Errorf("memory: delete session %q: %w", sessionID, err)
			}
			kids, err := scanStrings(rows)
			if err != nil {
				return fmt.Errorf("memory: delete session %q: %w", sessionID, err)
			}
			if len(kids) > 0 && !cascade {
				return fmt.Errorf("memory: delete session %q: sessions %s depend on it; delete them first or cascade (visor sessions rm --cascade): %w",
					sessionID, strings.Join(kids, ", "), ErrHasForks)
			}
			order = append(order, kids...)
		}
		var shas []string
		for i := len(order) - 1; i >= 0; i-- {
			rows, err := tx.QueryContext(ctx, `SELECT DISTINCT mi.sha256 FROM message_images mi
				JOIN messages m ON m.id = mi.message_id WHERE m.session_id = ?`, order[i])
			if err != nil {
				return fmt.Errorf("memory: delete session %q: %w", order[i], err)
			}
			ss, err := scanStrings(rows)
			if err != nil {
				return fmt.Errorf("memory: delete session %q: %w", order[i], err)
			}
			shas = append(shas, ss...)
			if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE id = ?`, order[i]); err != nil {
				return fmt.Errorf("memory: delete session %q: %w", order[i], err)
			}
		}
		for _, sha := range shas {
			_, err := tx.ExecContext(ctx, `DELETE FROM blobs WHERE sha256 = ?
				AND NOT EXISTS (SELECT 1 FROM message_images WHERE sha256 = ?)`, sha, sha)
			if err != nil {
				return fmt.Errorf("memory: delete session %q: collect image %s: %w", sessionID, sha, err)
			}
		}
		deleted = order
		return nil
	})
	if err != nil {
		return nil, err
	}
	return deleted, nil
}

func sessionExists(ctx context.Context, q querier, id string) error {
	var one int
	err := q.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE id = ?`, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("memory: session %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("memory: session %q: %w", id, err)
	}
	return nil
}

// isConstraint reports whether err is SQLite's extended result code code.
func isConstraint(err error, code sqlite3.ErrNoExtended) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && se.ExtendedCode == code
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullInt(n int64) any {
	if n == 0 {
		return nil
	}
	return n
}

func scanInts(rows *sql.Rows) ([]int64, error) {
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func scanStrings(rows *sql.Rows) ([]string, error) {
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
