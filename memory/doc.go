// Package memory stores conversations in one SQLite file: sessions, messages, tool runs, images as exact bytes,
// engine events, the engines' measured cost models; full-text search, resume and fork. It does not call the model.
//
// # SQLite
//
// The driver is modernc.org/sqlite, SQLite translated to Go: FTS5 is always compiled in, so a plain `go build`
// or `go install` gives a working store (mattn/go-sqlite3 compiles FTS5 only under a build tag, which `go
// install …@latest` never passes). Open still checks for FTS5 and fails with ErrNoFTS5 rather than on the first
// search.
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
// Search is FTS5 (porter stemming, bm25) over message content, reasoning and tool output; tool output is
// indexed up to MaxIndexedToolText bytes and stored whole.
package memory
