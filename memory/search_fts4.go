package memory

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// FTS5's bm25 constants and the column weights Search gives FTS5 ('bm25(1.0, 0.5)': body, reasoning).
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

var bm25Weights = [2]float64{1.0, 0.5}

// searchFTS4 is Search over an FTS4 index, ranked by the score FTS5's bm25 would give: FTS4 has no bm25, so
// visor_bm25 computes it from matchinfo, with the two numbers matchinfo lacks (the exact average row length,
// the number of rows that match each term in any column) read beforehand in the same snapshot.
func (s *Store) searchFTS4(ctx context.Context, q Query) ([]Hit, error) {
	if q.Raw && strings.TrimSpace(q.Text) == "" || !q.Raw && len(quotedTerms(q.Text, moduleFTS4)) == 0 {
		return nil, fmt.Errorf("memory: search: empty query: %w", ErrBadQuery)
	}
	var hits []Hit
	err := s.readTx(ctx, func(db querier) error {
		var groups []termGroup
		match := q.Text
		if !q.Raw {
			var err error
			if groups, err = expandTerms(ctx, db, q.Text); err != nil {
				return err
			}
			match = fts4Match(groups)
		}
		nRow, avgdl, err := fts4Totals(ctx, db)
		if err != nil || nRow == 0 {
			return err
		}
		// Arguments of visor_bm25 after the matchinfo: avgdl, then the group of each phrase, then each
		// group's IDF. Raw queries give no groups: each phrase is its own, its IDF from matchinfo (see bm25FTS4).
		bmArgs := []any{avgdl}
		if groups != nil {
			for g, tg := range groups {
				for range tg.phrases {
					bmArgs = append(bmArgs, float64(g))
				}
			}
			for _, tg := range groups {
				var nHit int64
				if err := db.QueryRowContext(ctx, `SELECT count(*) FROM search_fts WHERE search_fts MATCH ?`, tg.match()).Scan(&nHit); err != nil {
					return err
				}
				bmArgs = append(bmArgs, bm25IDF(nRow, nHit))
			}
		} else {
			bmArgs = append(bmArgs, -float64(nRow))
		}
		placeholders := strings.TrimSuffix(strings.Repeat("?, ", len(bmArgs)), ", ")
		where, args := searchFilters(q, match)
		// The best rows first, without snippets: with ORDER BY, SQLite computes every column of every match
		// before sorting, and snippets are the dear part. They are made for the returned rows only, below.
		rows, err := db.QueryContext(ctx, `SELECT f.rowid, f.session_id, s.title, s.agent, f.role, f.created_at,
			visor_bm25(matchinfo(search_fts, 'pcxl'), `+placeholders+`) AS score
			FROM search_fts f JOIN sessions s ON s.id = f.session_id
			WHERE `+where+` ORDER BY score, f.rowid LIMIT ?`, append(append(bmArgs, args...), searchLimit(q))...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var h Hit
			var rowid, created int64
			if err := rows.Scan(&rowid, &h.SessionID, &h.SessionTitle, &h.Agent, &h.Role, &created, &h.Rank); err != nil {
				return err
			}
			hits = append(hits, hitAt(h, rowid, created))
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return fts4Snippets(ctx, db, match, hits)
	})
	if err != nil {
		return nil, searchError(q, err)
	}
	return hits, nil
}

// fts4Snippets fills the hits' snippets. FTS4 needs the full-text query to make one, and limits the docid
// range when given one, so a single pass over the matches in the hits' rowid range serves them all.
func fts4Snippets(ctx context.Context, db querier, match string, hits []Hit) error {
	if len(hits) == 0 {
		return nil
	}
	at := make(map[int64]int, len(hits))
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	ids := make([]string, 0, len(hits))
	for i, h := range hits {
		id := h.MessageID
		if h.ToolRunID != 0 {
			id = -h.ToolRunID
		}
		at[id] = i
		lo, hi = min(lo, id), max(hi, id)
		ids = append(ids, strconv.FormatInt(id, 10))
	}
	// The ids are integers formatted here, not input.
	rows, err := db.QueryContext(ctx, `SELECT rowid, snippet(search_fts, '[', ']', '…', -1, 16) FROM search_fts
		WHERE search_fts MATCH ? AND rowid >= ? AND rowid <= ? AND rowid IN (`+strings.Join(ids, ",")+`)`, match, lo, hi)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var snip string
		if err := rows.Scan(&id, &snip); err != nil {
			return err
		}
		if i, ok := at[id]; ok {
			hits[i].Snippet = snip
		}
	}
	return rows.Err()
}

// fts4Totals reads the row count and the average row length (tokens of body and reasoning) from the index's
// statistics row, which FTS4 keeps as varints: rows, then the tokens of each column.
func fts4Totals(ctx context.Context, db querier) (nRow int64, avgdl float64, err error) {
	var blob []byte
	err = db.QueryRowContext(ctx, `SELECT value FROM search_fts_stat WHERE id = 0`).Scan(&blob)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	var v [3]uint64
	for i := range v {
		n, k := binary.Uvarint(blob)
		if k <= 0 {
			return 0, 0, fmt.Errorf("search index statistics: malformed (%d bytes)", len(blob))
		}
		v[i], blob = n, blob[k:]
	}
	if v[0] == 0 {
		return 0, 0, nil
	}
	return int64(v[0]), float64(v[1]+v[2]) / float64(v[0]), nil
}

// bm25IDF is FTS5's IDF, floored at 1e-6 as FTS5 does so that a term in most rows still counts a little.
func bm25IDF(nRow, nHit int64) float64 {
	idf := math.Log((float64(nRow) - float64(nHit) + 0.5) / (float64(nHit) + 0.5))
	if idf <= 0 {
		return 1e-6
	}
	return idf
}

// bm25FTS4 is the SQL function visor_bm25(matchinfo(t, 'pcxl'), avgdl, group..., idf...): FTS5's bm25 of
// the current row, where the phrases of one group (the forms of one stemmed term) count as one phrase.
// args holds one group index per phrase, then one IDF per group. With args of one value, -N (a raw query),
// every phrase is its own group and its IDF comes from the rows matchinfo says contain it, in the column
// where most do: exact unless a phrase occurs in both columns of some rows.
func bm25FTS4(mi []byte, avgdl float64, args ...float64) (float64, error) {
	if len(mi) < 8 || len(mi)%4 != 0 {
		return 0, fmt.Errorf("visor_bm25: matchinfo of %d bytes", len(mi))
	}
	u := func(i int) float64 { return float64(binary.NativeEndian.Uint32(mi[4*i:])) }
	nPhrase, nCol := int(u(0)), int(u(1))
	if nCol < 2 || len(mi) != 4*(2+3*nPhrase*nCol+nCol) {
		return 0, fmt.Errorf("visor_bm25: matchinfo of %d bytes for %d phrases, %d columns", len(mi), nPhrase, nCol)
	}
	x := func(p, c, k int) float64 { return u(2 + 3*(p*nCol+c) + k) }
	l := 2 + 3*nPhrase*nCol
	d := u(l) + u(l+1)
	norm := bm25K1 * (1 - bm25B + bm25B*d/avgdl)
	score := 0.0
	if len(args) == 1 && args[0] < 0 {
		nRow := int64(-args[0])
		for p := 0; p < nPhrase; p++ {
			f := bm25Weights[0]*x(p, 0, 0) + bm25Weights[1]*x(p, 1, 0)
			nHit := max(x(p, 0, 2), x(p, 1, 2))
			score += bm25IDF(nRow, int64(nHit)) * f * (bm25K1 + 1) / (f + norm)
		}
		return -score, nil
	}
	if len(args) < nPhrase {
		return 0, fmt.Errorf("visor_bm25: %d phrases, %d arguments", nPhrase, len(args))
	}
	idf := args[nPhrase:]
	var buf [16]float64
	freq := buf[:]
	if len(idf) > len(buf) {
		freq = make([]float64, len(idf))
	}
	for p := 0; p < nPhrase; p++ {
		g := int(args[p])
		if g < 0 || g >= len(idf) {
			return 0, fmt.Errorf("visor_bm25: phrase %d in group %d of %d", p, g, len(idf))
		}
		freq[g] += bm25Weights[0]*x(p, 0, 0) + bm25Weights[1]*x(p, 1, 0)
	}
	for g, w := range idf {
		f := freq[g]
		score += w * f * (bm25K1 + 1) / (f + norm)
	}
	return -score, nil
}

// termGroup is one term of a query as FTS4 phrases: the forms of the term that FTS5 would stem alike, any
// of which matches.
type termGroup struct {
	phrases []string
}

func (g termGroup) match() string {
	if len(g.phrases) == 1 {
		return g.phrases[0]
	}
	return "(" + strings.Join(g.phrases, " OR ") + ")"
}

// Query helpers on the connection of a search: SQLite's own unicode61 tokenizer, so that query terms fold
// exactly as the indexed text did, and the index's vocabulary.
const fts4Helpers = `CREATE VIRTUAL TABLE IF NOT EXISTS temp.search_tok USING fts3tokenize(unicode61, "remove_diacritics=2");
CREATE VIRTUAL TABLE IF NOT EXISTS temp.search_terms USING fts4aux(main, search_fts)`

// maxForms bounds the phrases one query term becomes (the product of the forms of its tokens, for a term of
// several tokens such as foo-bar); forms past it are not searched.
const maxForms = 64

// expandTerms turns free text into term groups as quoteTerms splits it: the FTS4 index holds words as
// written (folded), FTS5's holds their porter stems, so each token becomes every indexed word with the same
// stem, and a prefix token matches the words that begin with its stem.
func expandTerms(ctx context.Context, db querier, text string) ([]termGroup, error) {
	for _, ddl := range strings.Split(fts4Helpers, ";\n") {
		rows, err := db.QueryContext(ctx, ddl)
		if err != nil {
			return nil, err
		}
		rows.Close()
	}
	var groups []termGroup
	for _, term := range strings.Fields(text) {
		prefix := strings.HasSuffix(term, "*")
		term = strings.TrimRight(term, "*")
		if !strings.ContainsFunc(term, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) {
			continue
		}
		rows, err := db.QueryContext(ctx, `SELECT token FROM temp.search_tok WHERE input = ? ORDER BY position`, term)
		if err != nil {
			return nil, err
		}
		tokens, err := scanStrings(rows)
		if err != nil {
			return nil, err
		}
		if len(tokens) == 0 {
			continue
		}
		forms := [][]string{nil}
		for i, tok := range tokens {
			var alts []string
			if prefix && i == len(tokens)-1 {
				alts = []string{porterStem(tok) + "*"}
			} else if alts, err = sameStem(ctx, db, tok); err != nil {
				return nil, err
			} else {
				alts = literalFirst(alts, tok)
			}
			var next [][]string
			for _, f := range forms {
				for _, a := range alts {
					if len(next) < maxForms {
						next = append(next, append(append([]string(nil), f...), a))
					}
				}
			}
			forms = next
		}
		var g termGroup
		for _, f := range forms {
			g.phrases = append(g.phrases, `"`+strings.Join(f, " ")+`"`)
		}
		groups = append(groups, g)
	}
	return groups, nil
}

// literalFirst puts the token as typed first among its forms, so that when a long term's forms pass maxForms the
// phrase as written is still among those searched: the cut kept the alphabetically first forms, and a line of
// JSON pasted as the query found nothing in FTS4 while FTS5 found it.
func literalFirst(alts []string, tok string) []string {
	for i, a := range alts {
		if a == tok {
			out := append([]string{tok}, alts[:i]...)
			return append(out, alts[i+1:]...)
		}
	}
	return alts
}

// sameStem lists the indexed words whose porter stem is tok's. A word shares all of its stem but the
// stem's last letter when porter put that letter there (an e added, y made i, -bility made -bl), so those
// stems are looked up by one letter fewer. A stem no indexed word has is returned as is: it matches nothing.
func sameStem(ctx context.Context, db querier, tok string) ([]string, error) {
	stem := porterStem(tok)
	prefixes := []string{stem}
	if n := len(stem); n > 1 && strings.ContainsRune("eil", rune(stem[n-1])) {
		prefixes = []string{stem[:n-1]}
	}
	var out []string
	for _, p := range prefixes {
		hi := []byte(p)
		for len(hi) > 0 && hi[len(hi)-1] == 0xff {
			hi = hi[:len(hi)-1]
		}
		q, args := `SELECT term FROM temp.search_terms WHERE col = '*' AND term >= ?`, []any{p}
		if len(hi) > 0 {
			hi[len(hi)-1]++
			q, args = q+` AND term < ?`, append(args, string(hi))
		}
		rows, err := db.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		terms, err := scanStrings(rows)
		if err != nil {
			return nil, err
		}
		for _, t := range terms {
			if porterStem(t) == stem {
				out = append(out, t)
			}
		}
	}
	if len(out) == 0 {
		out = []string{stem}
	}
	return out, nil
}

// fts4Match is the FTS4 query of groups: all must match.
func fts4Match(groups []termGroup) string {
	parts := make([]string, len(groups))
	for i, g := range groups {
		parts[i] = g.match()
	}
	return strings.Join(parts, " ")
}
