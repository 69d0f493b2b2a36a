// Package memory stores conversations in one SQLite file: sessions, messages, tool runs, images as exact bytes,
// engine events, the engines' measured cost models; full-text search, resume and fork. It does not call the model.
//
// # SQLite
//
// The driver is mattn/go-sqlite3 (cgo; visor needs gcc for go-nvml anyway). It compiles FTS3/4 always and
// FTS5 only under the sqlite_fts5 build tag, which the Makefile, scripts and CI pass (scripts/cgo-flags.sh);
// a plain `go build` or `go install` has no FTS5. So the search index (search_fts) uses FTS5 where it is
// compiled in and FTS4 otherwise, with the same results and ranking:
//
//   - Tokens: both use SQLite's unicode61 tokenizer with diacritics removed. FTS5 adds porter stemming;
//     FTS4 cannot combine porter with unicode61 (its porter tokenizer is ASCII-only, joins words at "_" and
//     cuts long words and words with digits, so x86_64 or sha256 sums would not be found as typed), so the
//     FTS4 index holds the words as written and a query term becomes every indexed word with the same stem
//     (porterStem, FTS5's algorithm, checked against FTS5 on every word of this repository's text). A
//     prefix term matches the words that begin with its stem.
//   - Ranking: FTS4 has no bm25, so visor_bm25 (a Go SQL function registered on each connection) computes
//     FTS5's bm25 from matchinfo, with the per-term row counts and average row length FTS5 uses. Results
//     and scores are compared with FTS5's on the same data (TestFTS4SearchMatchesFTS5).
//   - Raw queries (Query.Raw) go to each module's own syntax; FTS4's is close to FTS5's but not stemmed.
//
// FTS5 stays where it is compiled in because one FTS4 index everywhere would search slower in every build:
// over BenchmarkSearch's 100k messages (p50, one loaded two-core run, mattn both) FTS4 took 3–11 times as long: common term 700 ms against 102, prefix 432 against 93, rare 1.0 against 0.35, two terms 12
// against 1.2. Every match is scored through a cgo callback, and each term costs vocabulary and count
// queries. (Appending a step is no dearer with FTS4.)
//
// The index is made by the store, not by a migration, since its module depends on the build. Open rebuilds
// an FTS4 index as FTS5 when FTS5 is compiled in (copying its rows, in one transaction). SQLite can neither
// read nor drop an FTS5 table without FTS5, so a build without it leaves an FTS5 index alone: everything
// reads, while search and writes fail with ErrNoFTS5, whose message says to build with `make build`.
//
// # Design
//
// Open sets WAL, foreign keys, a busy timeout, synchronous=FULL, and BEGIN IMMEDIATE for every
// transaction, so several visor processes can write the same file: writers queue on the busy timeout
// instead of failing. The schema lives in migrations/NNNN_*.sql, applied in order; PRAGMA user_version is
// the version. A file with a newer version is refused unchanged (ErrNewerSchema).
//
// AppendStep writes one step (what one model call produced, plus its tool runs) in one transaction, so a
// killed process loses at most the step in flight. Turns (BeginTurn, EndTurn, MarkInterrupted) group steps;
// a turn a dead process left open is closed as interrupted, and its last message marked, at the next
// BeginTurn of that session.
//
// Turn recovery assumes one writer per session at a time (the normal case: one agent loop owns a
// conversation); two processes may still write different sessions, or even the same one, without loss.
//
// Forks and continuations (context compaction) read their parent's messages in place; nothing is copied.
// Compaction is split: the caller asks the model for a summary, then CreateLinkedSession stores a session
// that shows the summary, then the kept tail of the parent, then its own messages; the parent stays whole.
// Images are content-addressed blobs shared by every message that carries them, and deleted with the last
// one. DeleteSession refuses to delete a session others inherit from unless asked to cascade.
//
// Reads (Messages, ToolRuns, Export) see one snapshot and never take the write lock, so `visor sessions`
// does not stall a running agent.
//
// Search (porter stemming, bm25; see "SQLite") covers message content, reasoning and tool output; tool output
// is indexed up to MaxIndexedToolText bytes and stored whole.
package memory
