package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/visorhq/visor/memory"
)

var sessionID = regexp.MustCompile(`session [0-9a-f]{8}`)

// closedPort is an address nothing listens on: a port the system handed out and that is closed again, as a
// mistyped --endpoint is.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// TestAFailedTurnIsNoSession (issue 22): with an --endpoint nobody answers, ask, run and chat report the error
// and nothing else: no turn numbers, no session to continue, and no session stored, so `visor sessions list`
// stays empty.
func TestAFailedTurnIsNoSession(t *testing.T) {
	t.Setenv("VISOR_MODEL", "")
	t.Setenv("VISOR_MMPROJ", "")
	t.Setenv("VISOR_ENDPOINT", "")
	endpoint := closedPort(t)
	db := filepath.Join(t.TempDir(), "v.db")
	yml := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(yml, []byte("name: t\nprompt: hello\nmodel:\n  endpoint: "+endpoint+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		args  []string
		stdin string
	}{
		{"ask", []string{"ask", "hello there", "--endpoint", endpoint, "--db", db}, ""},
		{"run", []string{"run", yml, "--db", db}, ""},
		{"chat", []string{"chat", "--endpoint", endpoint, "--db", db}, "hello there\n/quit\n"},
	} {
		_, errOut, err := runSafely(t, c.args, strings.NewReader(c.stdin))
		reported := errOut
		if err != nil {
			reported += err.Error()
		}
		if !strings.Contains(reported, "connect") {
			t.Errorf("%s: the unreachable engine is not reported: %v\n%s", c.name, err, errOut)
		}
		for _, bad := range []string{"steps,", "tokens generated", "continue with"} {
			if strings.Contains(errOut, bad) {
				t.Errorf("%s: a turn that never reached the model reads like a session (%q):\n%s", c.name, bad, errOut)
			}
		}
		if id := sessionID.FindString(errOut); id != "" {
			t.Errorf("%s: names a session (%s) that was never stored:\n%s", c.name, id, errOut)
		}
	}
	st, err := memory.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := st.ListSessions(context.Background(), memory.SessionFilter{})
	st.Close()
	if err != nil || len(rows) != 0 {
		t.Fatalf("the store holds %d sessions (%v): %+v", len(rows), err, rows)
	}
	if out, _, err := visor(t, "sessions", "list", "--db", db); err != nil || !strings.Contains(out, "no sessions") {
		t.Fatalf("sessions list: %q %v", out, err)
	}
}

// TestEmptySessionsAreNotListed: rows an older visor left empty (it made the row on open) are not listed by
// `visor sessions list`, and `visor stats` without an argument reads the newest session that has messages.
func TestEmptySessionsAreNotListed(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "v.db")
	st, err := memory.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	used, err := st.CreateSession(ctx, memory.Session{Title: "a real chat", Agent: "chat", CreatedAt: old, UpdatedAt: old})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.BeginTurn(ctx, used.ID); err != nil {
		t.Fatal(err)
	}
	if err := st.AppendStep(ctx, used.ID, memory.Step{Messages: []memory.Message{{Role: "user", Content: "hi"},
		{Role: "assistant", Content: "Hi!"}}}); err != nil {
		t.Fatal(err)
	}
	if err := st.EndTurn(ctx, used.ID); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := st.CreateSession(ctx, memory.Session{Title: "", Agent: "chat"}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	out, _, err := visor(t, "sessions", "list", "--db", db)
	if err != nil || !strings.Contains(out, used.ID) || strings.Count(strings.TrimSpace(out), "\n") != 1 {
		t.Fatalf("sessions list shows more than the chat with messages: %v\n%s", err, out)
	}
	out, _, err = visor(t, "stats", "--db", db)
	if err != nil || !strings.HasPrefix(out, "session "+used.ID) {
		t.Fatalf("stats picked another session than the newest with messages (%s): %v\n%s", used.ID, err, out)
	}
}
