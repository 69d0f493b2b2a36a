package memory

import (
	"bytes"
	"context"
	"errors"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testdata/main-modernc-v3.db was written by main at cd94c1b, the last visor on modernc.org/sqlite (schema
// version 3, an FTS5 index): a session with a tool run, a failed run and one image sent twice, a fork of it
// and a continuation (compaction) of it, an engine event and a cost model.
const fixtureDB = "testdata/main-modernc-v3.db"

// openFixture opens a copy of the fixture, so the test may write to it.
func openFixture(t *testing.T, opts Options) *Store {
	t.Helper()
	b, err := os.ReadFile(fixtureDB)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "visor.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := OpenWithOptions(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("open the database main wrote: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestFixtureFromModerncOpensAndResumes reads everything the old driver wrote and continues the session.
// Search works where FTS5 is compiled in (the index is FTS5); elsewhere it says how to get it.
func TestFixtureFromModerncOpensAndResumes(t *testing.T) {
	ctx := context.Background()
	s := openFixture(t, Options{})
	migs, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.schemaVersion(ctx); err != nil || v != migs[len(migs)-1].version {
		t.Errorf("schema version %d (%v), want %d", v, err, migs[len(migs)-1].version)
	}

	list, err := s.ListSessions(ctx, SessionFilter{})
	if err != nil || len(list) != 3 {
		t.Fatalf("sessions %+v %v", list, err)
	}
	var fork, link Session
	for _, sess := range list {
		switch sess.LinkKind {
		case LinkFork:
			fork = sess
		case LinkContinuation:
			link = sess
		}
	}
	if fork.ParentID != "fixture-root" || link.ParentID != "fixture-root" || fork.Title != "Marmot burrows (fork)" {
		t.Fatalf("fork %+v, continuation %+v", fork, link)
	}

	root, err := s.Messages(ctx, "fixture-root")
	if err != nil || len(root) != 6 {
		t.Fatalf("root messages %d %v", len(root), err)
	}
	if root[1].Reasoning != "the user wants hibernation facts" || root[1].Timings == nil || root[1].Timings.PromptPerSecond != 900 ||
		len(root[1].ToolCalls) != 1 || string(root[1].ToolCalls[0].Arguments) != `{"cmd":"grep -ri hibernat notes/"}` {
		t.Errorf("assistant step read back as %+v", root[1])
	}
	// The image sent twice is one blob, whole.
	if len(root[0].Images) != 1 || len(root[4].Images) != 1 || root[0].Images[0].SHA256 != root[4].Images[0].SHA256 {
		t.Fatalf("images %+v / %+v", root[0].Images, root[4].Images)
	}
	img, err := png.Decode(bytes.NewReader(root[0].Images[0].Data))
	if err != nil || img.Bounds().Dx() != 6 || img.Bounds().Dy() != 4 || sha256Hex(root[0].Images[0].Data) != root[0].Images[0].SHA256 {
		t.Errorf("image: %v %v", img, err)
	}
	runs, err := s.ToolRuns(ctx, "fixture-root")
	if err != nil || len(runs) != 2 || runs[1].Error != "quota exceeded while decoding thumbnail" {
		t.Errorf("tool runs %+v %v", runs, err)
	}

	// The fork sees the root up to its fork point, then its own two messages; the continuation its summary,
	// the kept tail of the root, then its own.
	fm, err := s.Messages(ctx, fork.ID)
	if err != nil || len(fm) != 6 || fm[3].ID != root[3].ID || fm[4].Content != "Instead, how do groundhogs predict spring?" {
		t.Fatalf("fork messages %+v %v", fm, err)
	}
	lm, err := s.Messages(ctx, link.ID)
	if err != nil || len(lm) != 5 || !strings.HasPrefix(lm[0].Content, "Summary:") || lm[1].ID != root[4].ID || lm[2].ID != root[5].ID {
		t.Fatalf("continuation messages %+v %v", lm, err)
	}

	costs, ok, err := s.LoadEngineCosts(ctx, "tiny.gguf|cpu")
	if err != nil || !ok || string(costs.Costs) != `{"prefill_per_token_us":310,"decode_per_token_us":2200}` {
		t.Errorf("cost model %+v %v %v", costs, ok, err)
	}
	if ev, err := s.EngineEvents(ctx, "fixture-root", 10); err != nil || len(ev) != 1 || ev[0].Kind != EngineStart || ev[0].Duration != 2*time.Second {
		t.Errorf("engine events %+v %v", ev, err)
	}

	resume := Step{Messages: []Message{{Role: "user", Content: "Do alpine choughs share the burrows?"}}}
	if s.index != moduleFTS5 {
		t.Fatalf("index %q: the file's FTS5 index was replaced", s.index)
	}
	best, err := compiledModule(ctx, s.db)
	if err != nil {
		t.Fatal(err)
	}
	if best != moduleFTS5 {
		// A build without FTS5: everything above reads, search and writes say how to get FTS5.
		_, err := s.Search(ctx, Query{Text: "marmot"})
		if !errors.Is(err, ErrNoFTS5) || !strings.Contains(err.Error(), "make build") || !strings.Contains(err.Error(), "sqlite_fts5") {
			t.Errorf("search without FTS5: %v", err)
		}
		err = s.AppendStep(ctx, "fixture-root", resume)
		if !errors.Is(err, ErrNoFTS5) || !strings.Contains(err.Error(), "sqlite_fts5") {
			t.Errorf("write without FTS5: %v", err)
		}
		return
	}

	// Stemmed: "marmot" finds "marmots", in all three sessions' own messages.
	hits, err := s.Search(ctx, Query{Text: "marmot"})
	if err != nil || len(hits) != 5 {
		t.Fatalf("search marmot: %+v %v", hits, err)
	}
	if hits, err := s.Search(ctx, Query{Text: "quota"}); err != nil || len(hits) != 1 || hits[0].ToolRunID != runs[1].ID {
		t.Errorf("search for the failed run: %+v %v", hits, err)
	}
	if _, err := s.BeginTurn(ctx, "fixture-root"); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendStep(ctx, "fixture-root", resume); err != nil {
		t.Fatal(err)
	}
	if err := s.EndTurn(ctx, "fixture-root"); err != nil {
		t.Fatal(err)
	}
	root, err = s.Messages(ctx, "fixture-root")
	if err != nil || len(root) != 7 || root[6].Content != resume.Messages[0].Content {
		t.Fatalf("after resuming: %d messages %v", len(root), err)
	}
	if hits, err := s.Search(ctx, Query{Text: "choughs burrow"}); err != nil || len(hits) != 1 || hits[0].MessageID != root[6].ID {
		t.Errorf("search for the new message: %+v %v", hits, err)
	}
}

// TestIndexRebuiltWhenTheModuleChanges moves the fixture's index to FTS4 and back: every row must survive
// both rebuilds, found by the same searches with the same ranks.
func TestIndexRebuiltWhenTheModuleChanges(t *testing.T) {
	needFTS5(t)
	ctx := context.Background()
	s := openFixture(t, Options{})
	want, err := s.Search(ctx, Query{Text: "marmots burrows"})
	if err != nil || len(want) == 0 {
		t.Fatalf("%+v %v", want, err)
	}
	path := s.Path()
	s.Close()
	for _, m := range []string{moduleFTS4, moduleFTS5} {
		s, err := OpenWithOptions(ctx, path, Options{module: m})
		if err != nil {
			t.Fatal(err)
		}
		if have, err := indexModule(ctx, s.db); err != nil || have != m || s.index != m {
			t.Fatalf("index in %q (%v), want %s", have, err, m)
		}
		var n int
		if err := s.db.QueryRow(`SELECT count(*) FROM search_fts`).Scan(&n); err != nil || n != 12 {
			t.Errorf("%s index: %d rows (%v), want 12", m, n, err)
		}
		got, err := s.Search(ctx, Query{Text: "marmots burrows"})
		if err != nil || len(got) != len(want) {
			t.Fatalf("%s: %+v %v", m, got, err)
		}
		for i := range got {
			if got[i].MessageID != want[i].MessageID || got[i].Rank-want[i].Rank > 1e-9 || want[i].Rank-got[i].Rank > 1e-9 {
				t.Errorf("%s hit %d: %+v, want %+v", m, i, got[i], want[i])
			}
		}
		// The delete triggers follow the index into the new module.
		if _, err := s.DeleteSession(ctx, "fixture-root", true); err != nil {
			t.Fatal(err)
		}
		if err := s.db.QueryRow(`SELECT count(*) FROM search_fts`).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s index after deleting every session: %d rows (%v)", m, n, err)
		}
		s.Close()
		// Put the rows back for the next module.
		b, _ := os.ReadFile(fixtureDB)
		os.Remove(path + "-wal")
		os.Remove(path + "-shm")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if m == moduleFTS4 {
			// Leave an FTS4 index for the FTS5 step to rebuild.
			s, err := OpenWithOptions(ctx, path, Options{module: moduleFTS4})
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
		}
	}
}
