package memory

import (
	"context"
	"path/filepath"
	"testing"
)

// A term of several tokens, each with many indexed forms, has more phrase forms than FTS4 searches (maxForms);
// the phrase as written must still be one of them. The cut kept the alphabetically first forms, so here, where
// each written form sorts last among its stem's, FTS4 found nothing where FTS5 found the message.
func TestFTS4FindsALongTermAsWritten(t *testing.T) {
	ctx := context.Background()
	s, err := OpenWithOptions(ctx, filepath.Join(t.TempDir(), "fts4.db"), Options{module: moduleFTS4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sess, err := s.CreateSession(ctx, Session{})
	if err != nil {
		t.Fatal(err)
	}
	msgs := []Message{{Role: "user", Content: "the log said models-creating-indexing-chatting and stopped"}}
	for _, other := range []string{"model modeled modeling", "create created creates", "index indexed indexes", "chat chats chatted"} {
		msgs = append(msgs, Message{Role: "assistant", Content: other})
	}
	if err := s.AppendStep(ctx, sess.ID, Step{Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	hits, err := s.Search(ctx, Query{Text: "models-creating-indexing-chatting"})
	if err != nil || len(hits) != 1 {
		t.Fatalf("%d hits (%v), want the one message holding the term", len(hits), err)
	}
}
