package memory

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// Search finds messages and tool runs matching q, best first (bm25; body text weighs twice as much as
// reasoning). A fork's search hits are its own messages; inherited ones are found in the parent.
func (s *Store) Search(ctx context.Context, q Query) ([]Hit, error) {
	switch {
	case s.indexMissing:
		return nil, fmt.Errorf("memory: search %q in %s: %w: %s", q.Text, s.path, ErrNoFTS5, fts5Fix)
	case s.index == moduleFTS4:
		return s.searchFTS4(ctx, q)
	}
	match := q.Text
	if !q.Raw {
		match = quoteTerms(q.Text, moduleFTS5)
	}
	if strings.TrimSpace(match) == "" {
		return nil, fmt.Errorf("memory: search: empty query: %w", ErrBadQuery)
	}
	where, args := searchFilters(q, match)
	// ORDER BY rank (not ORDER BY bm25(...)) lets FTS5 sort the matches itself and hand rows over lazily, so
	// snippet() runs only for the rows returned rather than for every match; the rank function carries the
	// column weights. snippet column -1 picks whichever column matched best.
	rows, err := s.db.QueryContext(ctx, `SELECT f.rowid, f.session_id, s.title, s.agent, f.role, f.created_at,
		snippet(search_fts, -1, '[', ']', '…', 16), f.rank
		FROM search_fts f JOIN sessions s ON s.id = f.session_id
		WHERE `+where+` AND f.rank MATCH 'bm25(1.0, 0.5)' ORDER BY f.rank LIMIT ?`, append(args, searchLimit(q))...)
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
		hits = append(hits, hitAt(h, rowid, created))
	}
	if err := rows.Err(); err != nil {
		return nil, searchError(q, err)
	}
	return hits, nil
}

// searchFilters is the WHERE clause of a search (the match first) and its arguments.
func searchFilters(q Query, match string) (string, []any) {
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
	return strings.Join(where, ` AND `), args
}

func searchLimit(q Query) int {
	if q.Limit <= 0 {
		return 20
	}
	return q.Limit
}

// hitAt fills the ids and time of a hit from its index row.
func hitAt(h Hit, rowid, created int64) Hit {
	// Negative rowids are tool runs (see indexDDL).
	if rowid < 0 {
		h.ToolRunID = -rowid
	} else {
		h.MessageID = rowid
	}
	h.CreatedAt = fromMillis(created)
	return h
}

func searchError(q Query, err error) error {
	// FTS5 reports query syntax errors as generic SQLITE_ERROR; with quoted terms they cannot happen, so
	// in raw mode that code means the user's syntax.
	var se sqlite3.Error
	if q.Raw && errors.As(err, &se) && se.Code == sqlite3.ErrError {
		return fmt.Errorf("memory: search %q: %v: %w (quote terms with \"…\", or search without raw syntax)", q.Text, err, ErrBadQuery)
	}
	return fmt.Errorf("memory: search %q: %w", q.Text, err)
}

// quoteTerms turns free text into a query of module in which every whitespace-separated term must occur.
// Each term becomes a string ("…"), so -, :, (, *, AND and the like are plain text; a term ending in * stays
// a prefix search. FTS5 escapes " by doubling it; FTS4 has no escape, so there it becomes a space, which the
// tokenizer treats alike. Terms with no letters or digits are dropped because the tokenizer would drop them
// anyway and an empty string is an FTS5 error.
func quoteTerms(text, module string) string {
	return strings.Join(quotedTerms(text, module), " ")
}

func quotedTerms(text, module string) []string {
	var parts []string
	for _, t := range strings.Fields(text) {
		prefix := strings.HasSuffix(t, "*")
		t = strings.TrimRight(t, "*")
		if !strings.ContainsFunc(t, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) {
			continue
		}
		var q string
		switch {
		case module == moduleFTS4 && prefix:
			q = `"` + strings.ReplaceAll(t, `"`, ` `) + `*"`
		case module == moduleFTS4:
			q = `"` + strings.ReplaceAll(t, `"`, ` `) + `"`
		case prefix:
			q = `"` + strings.ReplaceAll(t, `"`, `""`) + `"*`
		default:
			q = `"` + strings.ReplaceAll(t, `"`, `""`) + `"`
		}
		parts = append(parts, q)
	}
	return parts
}
