package memory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// Full-text modules the search index can use (see the package doc, "Search").
const (
	moduleFTS5 = "fts5"
	moduleFTS4 = "fts4"
)

// How to get a visor whose SQLite has FTS5, for errors about an FTS5 index in a build without it.
const fts5Fix = "build visor with `make build` (or `go build -tags sqlite_fts5 ./cmd/visor`)"

// One index for messages (rowid = message id) and tool runs (rowid = -tool run id), so one bm25 ranking covers
// both. It keeps its own copy of the (capped) text: external content would need the text of two tables in
// one, and the copy is what makes snippets cheap, and what a rebuild into another module copies.
// Both definitions tokenize alike (unicode61, diacritics removed); FTS5 also stems (porter), which the FTS4
// index gets at query time instead (see expandStems).
var indexDDL = map[string]string{
	moduleFTS5: `CREATE VIRTUAL TABLE search_fts USING fts5 (
    body,
    reasoning,
    session_id UNINDEXED,
    role UNINDEXED,
    created_at UNINDEXED,
    tokenize = 'porter unicode61 remove_diacritics 2'
)`,
	moduleFTS4: `CREATE VIRTUAL TABLE search_fts USING fts4 (
    body,
    reasoning,
    session_id,
    role,
    created_at,
    notindexed=session_id,
    notindexed=role,
    notindexed=created_at,
    tokenize=unicode61 "remove_diacritics=2"
)`,
}

// The index keeps a copy of the text, so deleting a message or tool run must delete its row there too.
const indexTriggers = `
CREATE TRIGGER IF NOT EXISTS messages_search_delete AFTER DELETE ON messages BEGIN
    DELETE FROM search_fts WHERE rowid = old.id;
END;
CREATE TRIGGER IF NOT EXISTS tool_runs_search_delete AFTER DELETE ON tool_runs BEGIN
    DELETE FROM search_fts WHERE rowid = -old.id;
END;`

// compiledModule is the best full-text module this build's SQLite has: FTS5 under the sqlite_fts5 build tag,
// else FTS4 (mattn/go-sqlite3 always compiles FTS3/4).
func compiledModule(ctx context.Context, q querier) (string, error) {
	var fts5 bool
	if err := q.QueryRowContext(ctx, `SELECT sqlite_compileoption_used('ENABLE_FTS5')`).Scan(&fts5); err != nil {
		return "", err
	}
	if fts5 {
		return moduleFTS5, nil
	}
	return moduleFTS4, nil
}

// indexModule is the module of the file's search index, "" when it has none.
func indexModule(ctx context.Context, q querier) (string, error) {
	var ddl string
	err := q.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'search_fts'`).Scan(&ddl)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	_, after, ok := strings.Cut(strings.ToLower(ddl), " using ")
	if !ok {
		return "", fmt.Errorf("search_fts is not a virtual table: %s", ddl)
	}
	return strings.TrimSpace(strings.FieldsFunc(after, func(r rune) bool { return r == '(' || r == ' ' || r == '\n' })[0]), nil
}

// ensureIndex gives the file a search index in the best module compiled in. An FTS4 index meets a build with
// FTS5 by being rebuilt in FTS5 (its rows copied, in one transaction, so a crash leaves either index whole).
// An FTS5 index in a build without FTS5 cannot be read or dropped (SQLite needs the module for both), so it
// is left as it is: everything but search and writes works, and those say how to get FTS5 (ErrNoFTS5).
func (s *Store) ensureIndex(ctx context.Context) error {
	best, err := compiledModule(ctx, s.db)
	if err != nil {
		return fmt.Errorf("memory: open %s: %w", s.path, err)
	}
	want := best
	if s.module != "" {
		want = s.module
	}
	have, err := indexModule(ctx, s.db)
	if err != nil {
		return fmt.Errorf("memory: open %s: search index: %w", s.path, err)
	}
	if have == want {
		s.index = have
		return nil
	}
	if have != "" && have != moduleFTS4 && have != best {
		// Not rebuildable here; reads go on without it.
		s.index, s.indexMissing = have, true
		s.logger.Warn("memory: this build cannot search the database: its search index uses "+have, "file", s.path, "fix", fts5Fix)
		return nil
	}
	err = s.withTx(ctx, "build the search index", func(tx *sql.Tx) error {
		// Another process may have done it meanwhile.
		have, err := indexModule(ctx, tx)
		if err != nil || have == want {
			return err
		}
		if have != "" {
			if _, err := tx.ExecContext(ctx, `CREATE TEMP TABLE search_copy AS
				SELECT rowid AS id, body, reasoning, session_id, role, created_at FROM search_fts`); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `DROP TABLE search_fts`); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, indexDDL[want]); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, indexTriggers); err != nil {
			return err
		}
		if have != "" {
			res, err := tx.ExecContext(ctx, `INSERT INTO search_fts (rowid, body, reasoning, session_id, role, created_at)
				SELECT id, body, reasoning, session_id, role, created_at FROM temp.search_copy`)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `DROP TABLE temp.search_copy`); err != nil {
				return err
			}
			n, _ := res.RowsAffected()
			s.logger.Info("memory: rebuilt the search index", "file", s.path, "from", have, "to", want, "rows", n)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("memory: open %s: %w", s.path, err)
	}
	s.index = want
	return nil
}

// indexError explains a failure to reach an index whose module this build lacks.
func indexError(err error) error {
	if err != nil && strings.Contains(err.Error(), "no such module: fts5") && !errors.Is(err, ErrNoFTS5) {
		return fmt.Errorf("%w: %s: %w", ErrNoFTS5, fts5Fix, err)
	}
	return err
}
