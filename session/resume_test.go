package session

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/visorhq/visor/memory"
)

// TestResumeProfileBringsTheStoredModel: resuming by a prefix brings the profile the session was stored with,
// unless the command names its own model or resumes nothing; an unknown session is an error, a session stored
// without a profile brings none.
func TestResumeProfileBringsTheStoredModel(t *testing.T) {
	ctx := context.Background()
	st, err := memory.Open(ctx, filepath.Join(t.TempDir(), "v.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	with, err := st.CreateSession(ctx, memory.Session{Title: "a", EngineProfile: `{"name":"qwen","path":"q.gguf"}`})
	if err != nil {
		t.Fatal(err)
	}
	without, err := st.CreateSession(ctx, memory.Session{Title: "b"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ref   string
		named bool
		want  string
	}{
		{with.ID[:8], false, `{"name":"qwen","path":"q.gguf"}`},
		{with.ID[:8], true, ""},
		{"", false, ""},
		{without.ID, false, ""},
	} {
		got, err := ResumeProfile(ctx, st, c.ref, c.named)
		if err != nil || got != c.want {
			t.Errorf("ResumeProfile(%q, named %v) = %q, %v; want %q", c.ref, c.named, got, err, c.want)
		}
	}
	if _, err := ResumeProfile(ctx, st, "ffffffffffff", false); err == nil {
		t.Error("an unknown session resumed")
	}
}
