package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/visorhq/visor/internal/testkit"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/session/report"
)

func runCLI(t *testing.T, s *memory.Store, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := report.RunSessions(context.Background(), s, args, &out, parseFlagsUsage)
	return out.String(), err
}

func TestSessionsCommand(t *testing.T) {
	ctx := context.Background()
	s := openCLIStore(t)
	img := testkit.PNG(t, 6, 4)
	a := cliSession(t, s, memory.Session{Title: "debug the parser", Agent: "coder", Model: "qwen3"})
	err := s.AppendStep(ctx, a.ID, memory.Step{Messages: []memory.Message{
		{Role: "user", Content: "why does the parser crash?", Images: []memory.Image{{Data: img}}},
		{Role: "assistant", Content: "Checking.", ToolCalls: []memory.ToolCall{{ID: "c1", Name: "shell", Arguments: []byte(`{"cmd": "go test"`)}},
			Timings: &memory.Timings{PromptTokens: 10, GeneratedTokens: 5, TokensPerSecond: 50}},
		{Role: "tool", ToolCallID: "c1", ToolName: "shell", Content: "panic: nil map ```"},
	}, ToolRuns: []memory.ToolRun{{CallID: "c1", Name: "shell", Result: "panic: nil map ```"}}})
	if err != nil {
		t.Fatal(err)
	}
	b := cliSession(t, s, memory.Session{Title: "poem", Agent: "writer"})
	cliAppend(t, s, b.ID, memory.Message{Role: "user", Content: "a poem about a parser"})

	out, err := runCLI(t, s, "list")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, a.ID) || !strings.Contains(out, "debug the parser") || !strings.Contains(out, b.ID) {
		t.Errorf("list:\n%s", out)
	}
	out, _ = runCLI(t, s, "list", "--agent", "writer")
	if strings.Contains(out, a.ID) || !strings.Contains(out, b.ID) {
		t.Errorf("list --agent writer:\n%s", out)
	}

	out, err = runCLI(t, s, "show", a.ID[:6])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# debug the parser", "why does the parser crash?", "**call** `shell`", `{"cmd": "go test"`, "````\npanic: nil map ```\n````", "not exported"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}

	out, err = runCLI(t, s, "search", "parser", "--role", "user")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(out, "[parser]") != 2 {
		t.Errorf("search parser --role user:\n%s", out)
	}
	out, _ = runCLI(t, s, "search", "--agent", "coder", "parser")
	if strings.Contains(out, b.ID) || !strings.Contains(out, a.ID) {
		t.Errorf("search --agent coder:\n%s", out)
	}
	out, _ = runCLI(t, s, "search", "--since", "1h", "nil-map")
	if !strings.Contains(out, "tool") {
		t.Errorf("search nil-map:\n%s", out)
	}
	if _, err := runCLI(t, s, "search", "--since", "yesterday-ish", "x"); !errors.Is(err, memory.ErrInvalidInput) {
		t.Errorf("bad date: %v", err)
	}

	// Markdown export: the file and its image side by side, the link pointing at the image.
	dir := t.TempDir()
	out, err = runCLI(t, s, "export", a.ID, "--format", "md", "--out", dir)
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, a.ID+".md"))
	if err != nil {
		t.Fatalf("%v (output %q)", err, out)
	}
	link := regexp.MustCompile(`!\[[^]]*\]\(([^)]+)\)`).FindSubmatch(md)
	if link == nil {
		t.Fatalf("no image link in:\n%s", md)
	}
	got, err := os.ReadFile(filepath.Join(dir, string(link[1])))
	if err != nil || !bytes.Equal(got, img) {
		t.Errorf("linked image %s: %v, identical=%v", link[1], err, bytes.Equal(got, img))
	}

	// JSON export: images embedded, broken tool arguments kept as a string.
	out, err = runCLI(t, s, "export", a.ID[:5], "--format=json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Format   string
		Messages []struct {
			Role      string
			ToolCalls []struct{ Arguments json.RawMessage } `json:"tool_calls"`
			Images    []struct{ Data []byte }
		}
		ToolRuns []struct{ Name string } `json:"tool_runs"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("json export does not parse: %v\n%s", err, out)
	}
	if doc.Format != memory.ExportVersion || len(doc.Messages) != 3 || !bytes.Equal(doc.Messages[0].Images[0].Data, img) ||
		string(doc.Messages[1].ToolCalls[0].Arguments) != `"{\"cmd\": \"go test\""` || len(doc.ToolRuns) != 1 {
		t.Errorf("json export = %+v", doc)
	}

	// rm: forks protect their parent unless --cascade.
	fork, err := s.Fork(ctx, a.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, s, "rm", a.ID); !errors.Is(err, memory.ErrHasForks) || !strings.Contains(err.Error(), fork.ID) {
		t.Errorf("rm with a fork: %v", err)
	}
	out, err = runCLI(t, s, "rm", a.ID, "--cascade")
	if err != nil || !strings.Contains(out, fork.ID) || !strings.Contains(out, a.ID) {
		t.Errorf("rm --cascade: %q %v", out, err)
	}
	if _, err := runCLI(t, s, "show", a.ID); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("show after rm: %v", err)
	}

	for _, args := range [][]string{{}, {"frobnicate"}, {"show"}, {"show", "a", "b"}, {"export", b.ID, "--format", "pdf"}, {"list", "--nope"}} {
		if _, err := runCLI(t, s, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

func TestSessionsForkCommand(t *testing.T) {
	ctx := context.Background()
	s := openCLIStore(t)
	a := cliSession(t, s, memory.Session{Title: "plan a trip", Agent: "ask"})
	for _, c := range []string{"Paris or Rome?", "Rome.", "Which month?", "May."} {
		role := "user"
		if strings.HasSuffix(c, ".") {
			role = "assistant"
		}
		cliAppend(t, s, a.ID, memory.Message{Role: role, Content: c})
	}
	msgs, err := s.Messages(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, s, "fork", a.ID[:6], "--at", strconv.FormatInt(msgs[1].ID, 10))
	if err != nil {
		t.Fatal(err)
	}
	forked, err := s.Messages(ctx, strings.TrimSpace(out))
	if err != nil || len(forked) != 2 || forked[1].Content != "Rome." {
		t.Fatalf("fork at message 2: %+v %v", forked, err)
	}
	out, err = runCLI(t, s, "fork", a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if whole, _ := s.Messages(ctx, strings.TrimSpace(out)); len(whole) != 4 {
		t.Fatalf("fork at the end has %d messages", len(whole))
	}
	empty := cliSession(t, s, memory.Session{Title: "empty"})
	if _, err := runCLI(t, s, "fork", empty.ID); !errors.Is(err, memory.ErrInvalidInput) {
		t.Fatalf("fork of an empty session: %v", err)
	}
}

func openCLIStore(t *testing.T) *memory.Store {
	t.Helper()
	s, err := memory.Open(context.Background(), filepath.Join(t.TempDir(), "visor.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func cliSession(t *testing.T, s *memory.Store, sess memory.Session) memory.Session {
	t.Helper()
	sess, err := s.CreateSession(context.Background(), sess)
	if err != nil {
		t.Fatal(err)
	}
	return sess
}

func cliAppend(t *testing.T, s *memory.Store, sessionID string, msgs ...memory.Message) {
	t.Helper()
	if err := s.AppendStep(context.Background(), sessionID, memory.Step{Messages: msgs}); err != nil {
		t.Fatal(err)
	}
}
