package memory_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/tools"
)

func TestSessionSearchOverRealStore(t *testing.T) {
	ctx := context.Background()
	store, err := memory.Open(ctx, filepath.Join(t.TempDir(), "m.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for _, s := range []struct{ agent, title, text string }{
		{"coder", "deploy", "the staging password rotates every Tuesday"},
		{"coder", "lunch", "we ordered dumplings"},
		{"other", "secret", "the staging server is in Oslo"},
	} {
		sess, err := store.CreateSession(ctx, memory.Session{Title: s.title, Agent: s.agent})
		if err != nil {
			t.Fatal(err)
		}
		if err := store.AppendStep(ctx, sess.ID, memory.Step{Messages: []memory.Message{{Role: "user", Content: s.text}}}); err != nil {
			t.Fatal(err)
		}
	}
	reg := tools.NewRegistry()
	if err := reg.Register(memory.SearchTool(store, "coder")); err != nil {
		t.Fatal(err)
	}
	call := func(args any) tools.Result {
		b, _ := json.Marshal(args)
		return reg.Call(ctx, memory.SearchToolName, b)
	}
	res := call(map[string]any{"query": "staging"})
	if res.IsError || !strings.Contains(res.Text, "deploy") || strings.Contains(res.Text, "Oslo") {
		t.Fatalf("search limited to agent coder: %+v", res)
	}
	if res := call(map[string]any{"query": "pizza"}); res.IsError || !strings.Contains(res.Text, "No stored messages") {
		t.Fatalf("no hits: %+v", res)
	}
	if res := call(map[string]any{"query": "staging", "role": "robot"}); !res.IsError || !strings.Contains(res.Text, "role") {
		t.Fatalf("bad enum not reported: %+v", res)
	}
}
