package session_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/internal/testkit"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/session"
)

// explainingAgent answers at once and explains its one request, as the service's watch does.
type explainingAgent struct{ answer string }

func (a explainingAgent) Run(_ context.Context, _ []agent.Message, user agent.Message, emit func(agent.Event)) agent.Finished {
	emit(agent.Explain{Step: 1, Text: "explained: " + user.Content})
	final := agent.Message{Role: "assistant", Content: a.answer}
	emit(agent.Token{Text: a.answer})
	emit(agent.StepFinished{Step: 1, Messages: []agent.Message{user, final}})
	return agent.Finished{Reason: "answer", Steps: 1, Final: final}
}

func (explainingAgent) Prefill(context.Context, []agent.Message, agent.Message) (*engine.Timings, error) {
	return nil, nil
}

// TestRenameDeleteSearchAndExplanations manages stored sessions with a real SQLite store: a title is one line
// of at most TitleRunes, a search finds a chat by its title or by a word of its messages, a delete takes the
// session out of the store, each turn's explanations come back numbered with their turn, and without a store
// each refuses, saying why.
func TestRenameDeleteSearchAndExplanations(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	svc := testkit.FakeService(t, explainingAgent{answer: "the disk is full"}, func(c *session.Config) { c.Store = st })
	sess, err := svc.Open(ctx, session.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	for _, q := range []string{"what does it say?", "and then?"} {
		if _, err := sess.Turn(ctx, q, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	id := sess.ID()

	got, err := svc.Rename(ctx, id, "  Disk\nfull "+strings.Repeat("x", 100))
	if err != nil || strings.Contains(got, "\n") || len([]rune(got)) > session.TitleRunes {
		t.Fatalf("rename: %q %v", got, err)
	}
	if row, _ := st.Session(ctx, id); row.Title != got {
		t.Fatalf("stored title %q, want %q", row.Title, got)
	}
	if _, err := svc.Rename(ctx, id, " \n "); !errors.Is(err, memory.ErrInvalidInput) {
		t.Errorf("a blank title: %v", err)
	}
	if _, err := svc.Rename(ctx, "0000000000000000", "x"); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("rename of no session: %v", err)
	}

	for q, want := range map[string]string{"disk full": "", "disk": "", "FULL": ""} {
		found, err := svc.Search(ctx, q, 0)
		if err != nil || len(found) != 1 || found[0].ID != id || found[0].Snippet != want {
			t.Errorf("search %q: %+v %v, want the chat by its title", q, found, err)
		}
	}
	if found, err := svc.Search(ctx, "then", 0); err != nil || len(found) != 1 || !strings.Contains(found[0].Snippet, "[then]") {
		t.Errorf("search by a word of a message: %+v %v", found, err)
	}
	if _, err := svc.Search(ctx, "  ", 0); !errors.Is(err, memory.ErrBadQuery) {
		t.Errorf("an empty search: %v", err)
	}

	ex, err := svc.Explained(ctx, id)
	if err != nil || len(ex) != 2 || ex[0] != (session.Explanation{Turn: 1, Step: 1, Text: "explained: what does it say?"}) ||
		ex[1].Turn != 2 {
		t.Fatalf("explanations %+v %v, want one per turn, numbered", ex, err)
	}

	if _, err := svc.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Session(ctx, id); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("after delete the store has the session: %v", err)
	}

	bare := testkit.FakeService(t, explainingAgent{}, nil)
	for name, err := range map[string]error{
		"rename": func() error { _, err := bare.Rename(ctx, id, "x"); return err }(),
		"delete": func() error { _, err := bare.Delete(ctx, id); return err }(),
		"search": func() error { _, err := bare.Search(ctx, "x", 0); return err }(),
	} {
		if err == nil || !strings.Contains(err.Error(), "not stored") {
			t.Errorf("%s without a store: %v", name, err)
		}
	}
}

// TestTitlesAreOnePrintableLine renames a stored session (real SQLite) to titles that would spoof how the web
// page's list and the terminal's picker show it — NUL, an escape sequence, bidi overrides and isolates — and
// gets each refused as bad input naming the character, the stored title left as it was; a session titled from
// its first message drops those characters instead, since the message is the user's to write.
func TestTitlesAreOnePrintableLine(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	svc := testkit.FakeService(t, explainingAgent{answer: "ok"}, func(c *session.Config) { c.Store = st })
	sess, err := svc.Open(ctx, session.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if _, err := sess.Turn(ctx, "\x1b[2J\x1b[31mwhat\x00 is\u202e fdp.exe\u2066 this?\x7f\u0085\u009b", nil, nil); err != nil {
		t.Fatal(err)
	}
	id := sess.ID()
	row, err := st.Session(ctx, id)
	if want := "[2J[31mwhat is fdp.exe this?"; err != nil || row.Title != want {
		t.Fatalf("titled from the first message: %q %v, want %q", row.Title, err, want)
	}
	for in, char := range map[string]string{
		"a\x00b":                  "U+0000 (a control or bidi-override character) at character 2",
		"\x1b[2Jcleared":          "U+001B",
		"bell\a":                  "U+0007",
		"csi \u009b2J":            "U+009B",
		"invoice\u202efdp.exe":    "U+202E",
		"\u202aembedded":          "U+202A",
		"isolate \u2066x\u2069 y": "U+2066",
		"pop \u2069":              "U+2069",
	} {
		_, err := svc.Rename(ctx, id, in)
		if !errors.Is(err, session.ErrBadInput) || !strings.Contains(err.Error(), char) || !strings.Contains(err.Error(), "one line of printable text") {
			t.Errorf("rename to %q: %v, want bad input naming %s and the fix", in, err, char)
		}
	}
	if after, _ := st.Session(ctx, id); after.Title != row.Title {
		t.Errorf("after the refused renames the stored title is %q, want %q", after.Title, row.Title)
	}
	// Right-to-left text itself, emoji joiners and white space stay: they show as they are.
	if got, err := svc.Rename(ctx, id, "שלום\tworld 👨‍👩‍👧\n"); err != nil || got != "שלום world 👨‍👩‍👧" {
		t.Errorf("rename to Hebrew, a tab and a family emoji: %q %v", got, err)
	}
}
