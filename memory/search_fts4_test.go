package memory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// needFTS5 skips a test that holds FTS4 to FTS5 when this build has no FTS5 (a plain `go test`; the
// Makefile, scripts/test.sh and CI pass -tags sqlite_fts5, see scripts/cgo-flags.sh).
func needFTS5(t *testing.T) {
	t.Helper()
	db, err := sql.Open("sqlite3", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m, err := compiledModule(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	if m != moduleFTS5 {
		t.Skip("compares with FTS5, which this build lacks: run with -tags sqlite_fts5 (scripts/test.sh does)")
	}
}

// repoText is the repository's own prose and code: real words, identifiers and inflections for the
// comparisons below, the same on every machine.
func repoText(t *testing.T) []string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") && path != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !(strings.HasSuffix(path, ".md") || strings.HasSuffix(path, ".go")) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, l := range strings.Split(string(b), "\n") {
			if l = strings.TrimSpace(l); len(l) > 20 {
				lines = append(lines, l)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return lines
}

// Words whose stems exercise each rule of the algorithm and its edges (y, short and long words, non-ASCII).
var porterCases = strings.Fields(`caresses ponies ties caress cats feed agreed plastered bled motoring sing
	conflated troubled sized hopping tanned falling hissing fizzed failing filing happy sky skies relational
	conditional rational valenci hesitanci digitizer conformabli radicalli differentli vileli analogousli
	vietnamization predication operator feudalism decisiveness hopefulness callousness formaliti sensitiviti
	sensibiliti triplicate formative formalize electriciti electrical hopeful goodness revival allowance
	inference airliner gyroscopic adjustable defensible irritant replacement adjustment dependent adoption
	homologou communism activate angulariti homologous effective bowdlerize probate rate cease controll roll
	possibility capability happiness generalization agreement ayed yyy yyying aing eds yes ies sses ss
	naïve Ünïcödé café x86_64 sha256 a1b2c3 ééé ïng dereferences goroutines marmots hibernation`)

// TestPorterMatchesFTS5 holds porterStem to FTS5's porter tokenizer on every word of the repository's text
// and the cases above: FTS4 search finds what FTS5 finds only if the two stem alike.
func TestPorterMatchesFTS5(t *testing.T) {
	needFTS5(t)
	db, err := sql.Open("sqlite3", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, q := range []string{
		`CREATE VIRTUAL TABLE plain USING fts5 (x, tokenize = 'unicode61 remove_diacritics 2')`,
		`CREATE VIRTUAL TABLE stemmed USING fts5 (x, tokenize = 'porter unicode61 remove_diacritics 2')`,
		`CREATE VIRTUAL TABLE plain_v USING fts5vocab(plain, 'instance')`,
		`CREATE VIRTUAL TABLE stemmed_v USING fts5vocab(stemmed, 'instance')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	// Each distinct word of the text once, in its own row.
	distinct := map[string]bool{}
	for _, l := range append(repoText(t), porterCases...) {
		for _, w := range strings.Fields(l) {
			distinct[w] = true
		}
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for w := range distinct {
		i++
		for _, table := range []string{"plain", "stemmed"} {
			if _, err := tx.Exec(`INSERT INTO `+table+` (rowid, x) VALUES (?, ?)`, i, w); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// Token by token (row and position): the folded word, and FTS5's stem of it.
	tokens := func(table string) map[[2]int64]string {
		rows, err := db.Query(`SELECT doc, offset, term FROM ` + table)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[[2]int64]string{}
		for rows.Next() {
			var doc, off int64
			var term string
			if err := rows.Scan(&doc, &off, &term); err != nil {
				t.Fatal(err)
			}
			out[[2]int64{doc, off}] = term
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	plain, stemmed := tokens("plain_v"), tokens("stemmed_v")
	seen := map[string]bool{}
	bad := 0
	for at, word := range plain {
		want, ok := stemmed[at]
		if !ok {
			t.Fatalf("token %q at %v: no stemmed token", word, at)
		}
		if seen[word] {
			continue
		}
		seen[word] = true
		if got := porterStem(word); got != want {
			bad++
			if bad <= 20 {
				t.Errorf("porterStem(%q) = %q, FTS5 says %q", word, got, want)
			}
		}
	}
	if len(seen) < 2000 {
		t.Fatalf("only %d distinct words compared", len(seen))
	}
	if bad > 0 {
		t.Errorf("%d of %d words stem differently", bad, len(seen))
	}
	t.Logf("%d distinct words stem alike", len(seen))
}

// TestFTS4SearchMatchesFTS5 stores the same conversations in an FTS4 and an FTS5 index and asks both the same
// questions: the same rows must come back, with the same bm25 score.
func TestFTS4SearchMatchesFTS5(t *testing.T) {
	needFTS5(t)
	ctx := context.Background()
	var lines []string
	for i, l := range repoText(t) {
		if i%4 == 0 {
			lines = append(lines, l)
		}
	}
	stores := map[string]*Store{}
	for _, m := range []string{moduleFTS4, moduleFTS5} {
		s, err := OpenWithOptions(ctx, filepath.Join(t.TempDir(), m+".db"), Options{module: m})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if s.index != m {
			t.Fatalf("index module %q, want %q", s.index, m)
		}
		stores[m] = s
		// One session per 200 lines; every third message has reasoning too (weighed half), every fifth is a
		// tool message, and each session has a failed tool run indexed on its own.
		for i := 0; i < len(lines); i += 200 {
			sess, err := s.CreateSession(ctx, Session{ID: fmt.Sprintf("s%04d", i/200), Agent: []string{"coder", "writer"}[i/200%2]})
			if err != nil {
				t.Fatal(err)
			}
			var st Step
			for j := i; j < min(i+200, len(lines)); j++ {
				msg := Message{Role: "assistant", Content: lines[j]}
				if j%3 == 0 {
					msg.Reasoning = lines[(j*7)%len(lines)]
				}
				if j%5 == 0 {
					msg.Role, msg.ToolCallID = "tool", fmt.Sprintf("c%d", j)
				}
				st.Messages = append(st.Messages, msg)
			}
			st.ToolRuns = []ToolRun{{CallID: "none", Name: "shell", Error: lines[(i*13)%len(lines)]}}
			if err := s.AppendStep(ctx, sess.ID, st); err != nil {
				t.Fatal(err)
			}
		}
	}
	queries := []Query{
		{Text: "error"}, {Text: "errors"}, {Text: "the"}, {Text: "sqlite migration"}, {Text: "search index"},
		{Text: "runs"}, {Text: "running"}, {Text: "tested"}, {Text: "engine*"}, {Text: "eng*"}, {Text: "test*"},
		{Text: "foo-bar"}, {Text: "llama-server"}, {Text: "context.Context"}, {Text: "x86_64"},
		{Text: "happily"}, {Text: "possibility"}, {Text: "configuration"}, {Text: "Database"},
		{Text: "error", Role: "tool"}, {Text: "model", Agent: "coder"}, {Text: "session", SessionID: "s0003"},
		{Text: "nosuchwordanywhere"}, {Text: "prompt nosuchwordanywhere"},
	}
	// And one word of every 197 distinct ones in the text.
	words := map[string]bool{}
	for _, l := range lines {
		for _, w := range strings.Fields(l) {
			words[strings.Trim(w, `.,;:()[]{}"'*`+"`")] = true
		}
	}
	var sorted []string
	for w := range words {
		sorted = append(sorted, w)
	}
	sort.Strings(sorted)
	for i := 0; i < len(sorted); i += 197 {
		queries = append(queries, Query{Text: sorted[i]})
	}
	compared := 0
	for _, q := range queries {
		q.Limit = 100000
		got := map[string][]Hit{}
		bad := 0
		for m, s := range stores {
			h, err := s.Search(ctx, q)
			if errors.Is(err, ErrBadQuery) {
				bad++ // punctuation only: both must say so
			} else if err != nil {
				t.Fatalf("%s: search %q: %v", m, q.Text, err)
			}
			got[m] = h
		}
		if bad == 1 {
			t.Errorf("search %q: only one module calls it a bad query", q.Text)
		}
		a, b := got[moduleFTS4], got[moduleFTS5]
		if len(a) != len(b) {
			t.Errorf("search %+v: FTS4 %d hits, FTS5 %d", q, len(a), len(b))
			continue
		}
		for _, hs := range [][]Hit{a, b} {
			sort.SliceStable(hs, func(i, j int) bool {
				if math.Abs(hs[i].Rank-hs[j].Rank) > 1e-9*math.Abs(hs[j].Rank) {
					return hs[i].Rank < hs[j].Rank
				}
				return hs[i].MessageID-hs[i].ToolRunID < hs[j].MessageID-hs[j].ToolRunID
			})
		}
		for i := range a {
			if a[i].MessageID != b[i].MessageID || a[i].ToolRunID != b[i].ToolRunID || math.Abs(a[i].Rank-b[i].Rank) > 1e-9*math.Abs(b[i].Rank) {
				t.Errorf("search %q hit %d: FTS4 %d/%d rank %v, FTS5 %d/%d rank %v", q.Text, i,
					a[i].MessageID, a[i].ToolRunID, a[i].Rank, b[i].MessageID, b[i].ToolRunID, b[i].Rank)
				break
			}
			if !strings.Contains(a[i].Snippet, "[") {
				t.Errorf("search %q: FTS4 snippet %q marks no match", q.Text, a[i].Snippet)
				break
			}
		}
		compared += len(a)
	}
	t.Logf("%d queries, %d hits compared", len(queries), compared)
	if compared < 1000 {
		t.Errorf("only %d hits compared", compared)
	}
}
