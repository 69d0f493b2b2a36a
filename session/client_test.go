package session_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/session"
)

// Client turns on a real SQLite store: a stateless client's second request (its first again, the answer and a
// new message) continues the session the first made, with only the new messages; the title is the first user
// message cut as every session's is (valid UTF-8, however long and however multi-byte the text).
func TestClientRecorderContinuesAndTitles(t *testing.T) {
	ctx := context.Background()
	store, err := memory.Open(ctx, filepath.Join(t.TempDir(), "visor.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rec := session.NewClientRecorder(store, nil)
	first := "a" + strings.Repeat("é", 79) + " where is the zebra file?" // 80 bytes end inside an é
	body := func(msgs ...map[string]any) []byte {
		b, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs})
		return b
	}
	user := map[string]any{"role": "user", "content": first}
	rec.Record(ctx, session.ClientExchange{Model: "m", Request: body(user), Content: "Let me look.",
		ToolCalls: []session.ClientCall{{ID: "c1", Name: "list_dir", Arguments: `{"path":"."}`}}, Finish: "tool_calls"})
	answer := map[string]any{"role": "assistant", "content": "Let me look.", "tool_calls": []any{map[string]any{"id": "c1",
		"type": "function", "function": map[string]any{"name": "list_dir", "arguments": `{"path":"."}`}}}}
	result := map[string]any{"role": "tool", "tool_call_id": "c1", "content": `["zebra.txt"]`}
	rec.Record(ctx, session.ClientExchange{Model: "m", Request: body(user, answer, result), Content: "It is zebra.txt.", Finish: "stop"})
	rec.Close() // writes the backlog
	list, err := store.ListSessions(ctx, memory.SessionFilter{})
	if err != nil || len(list) != 1 {
		t.Fatalf("sessions %+v, %v: want the two requests in one", list, err)
	}
	s := list[0]
	if !utf8.ValidString(s.Title) || s.Title != session.Title(first) || s.Agent != "gateway" || s.Model != "m" {
		t.Fatalf("session %+v: want the title session.Title gives, agent gateway", s)
	}
	msgs, err := store.Messages(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m.Role)
	}
	if strings.Join(roles, ",") != "user,assistant,tool,assistant" || msgs[1].ToolCalls[0].Name != "list_dir" ||
		msgs[3].Content != "It is zebra.txt." || msgs[2].ToolCallID != "c1" {
		t.Fatalf("stored %v: %+v", roles, msgs)
	}
}
