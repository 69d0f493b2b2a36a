package memory

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Search finds messages and tool runs matching q, best first (bm25; body text weighs twice as much as
// reasoning). A fork's search hits are its own messages; inherited ones are found in the parent.
func (s *Store) Search(ctx context.Context, q Query) ([]Hit, error) {
	match := q.Text
	if !q.Raw {
		match = quoteTerms(q.Text)
	}
	if strings.TrimSpace(match) == "" {
		return nil, fmt.Errorf("memory: search: empty query: %w", ErrBadQuery)
	}
	where := []string{`search_fts MATCH ?`}
	args := []any{match}
	if q.SessionID != "" {
		where, args = append(where, `f.session_id = ?`), append(args, q.SessionID)
	}
	if q.Agent != "" {
		where, args = append(where, `s.agent = ?`), append(args, q.Agent)
	}
	if q.Role != "" {
		where, args = append(where, `f.role = ?`), append(args, q.Role)
	}
	if !q.Since.IsZero() {
		where, args = append(where, `f.created_at >= ?`), append(args, toMillis(q.Since))
	}
	if !q.Until.IsZero() {
		where, args = append(where, `f.created_at < ?`), append(args, toMillis(q.Until))
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 20
	}
	// ORDER BY rank (not ORDER BY bm25(...)) lets FTS5 sort the matches itself and hand rows over lazily, so
	// snippet() runs only for the rows returned rather than for every match; the rank function carries the
	// column weights. snippet column -1 picks whichever column matched best.
	rows, err := s.db.QueryContext(ctx, `SELECT f.rowid, f.session_id, s.title, s.agent, f.role, f.created_at,
		snippet(search_fts, -1, '[', ']', '…', 16), f.rank
		FROM search_fts f JOIN sessions s ON s.id = f.session_id
		WHERE `+strings.Join(where, ` AND `)+` AND f.rank MATCH 'bm25(1.0, 0.5)' ORDER BY f.rank LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, searchError(q, err)
	}
	defer rows.Close()
	var hits []Hit
	for rows.Next() {
		var h Hit
		var rowid, created int64
		if err := rows.Scan(&rowid, &h.SessionID, &h.SessionTitle, &h.Agent, &h.Role, &created, &h.Snippet, &h.Rank); err != nil {
			return nil, searchError(q, err)
		}
		// Negative rowids are tool runs (see migration 0001).
		if rowid < 0 {
			h.ToolRunID = -rowid
		} else {
			h.MessageID = rowid
		}
		h.CreatedAt = fromMillis(created)
		hits = append(hits, h)
	}
	if err := rows.Err(); err != nil {
		return nil, searchError(q, err)
	}
	return hits, nil
}

func searchError(q Query, err error) error {
	// FTS5 reports query syntax errors as generic SQLITE_ERROR; with quoted terms they cannot happen, so
	// in raw mode that code means the user's syntax.
	var se *sqlite.Error
	if q.Raw && errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_ERROR {
		return fmt.Errorf("memory: search %q: %v: %w (quote terms with \"…\", or search without raw syntax)", q.Text, err, ErrBadQuery)
	}
	return fmt.Errorf("memory: search %q: %w", q.Text, err)
}

// quoteTerms turns free text into an FTS5 query in which every whitespace-separated term must occur.
// Each term becomes a string ("…", with " doubled), so -, :, (, *, AND and the like are plain text; a term
// ending in * stays a prefix search. Terms with no letters or digits are dropped because the tokenizer
// would drop them anyway and an empty string is an FTS5 error.
func quoteTerms(text string) string {
	var parts []string
	for _, t := range strings.Fields(text) {
		prefix := strings.HasSuffix(t, "*")
		t = strings.TrimRight(t, "*")
		if !strings.ContainsFunc(t, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) {
			continue
		}
		q := `"` + strings.ReplaceAll(t, `"`, `""`) + `"`
		if prefix {
			q += "*"
		}
		parts = append(parts, q)
	}
	return strings.Join(parts, " ")
}
