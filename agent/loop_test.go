package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/agent/toolcall"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/tools"
)

// tiny is shared by the tests of this file: one real llama-server on the generated model, since starting one per
// test costs more than the tests themselves.
var (
	tinyOnce sync.Once
	tinySrv  *llamacpp.Server
)

func tiny(t *testing.T) *llamacpp.Server {
	t.Helper()
	enginetest.Binary(t)
	tinyOnce.Do(func() { tinySrv = enginetest.Tiny(&keepAlive{T: t}, true, llamacpp.Config{Parallel: 2}) })
	if tinySrv == nil || tinySrv.Err() != nil {
		t.Fatal("shared tiny server is not running")
	}
	return tinySrv
}

// keepAlive lets the shared server outlive the test that started it; TestMain stops it.
type keepAlive struct{ *testing.T }

func (k *keepAlive) Cleanup(func())  {}
func (k *keepAlive) TempDir() string { d, _ := os.MkdirTemp("", "visor-agent-test-"); return d }

func TestMain(m *testing.M) {
	code := m.Run()
	if tinySrv != nil {
		_ = tinySrv.Stop(context.Background())
	}
	os.Exit(code)
}

type recorder struct {
	mu     sync.Mutex
	events []agent.Event
}

func (r *recorder) emit(ev agent.Event) { r.mu.Lock(); r.events = append(r.events, ev); r.mu.Unlock() }

func (r *recorder) calls() []agent.ToolCallFinished {
	var out []agent.ToolCallFinished
	for _, ev := range r.events {
		if c, ok := ev.(agent.ToolCallFinished); ok {
			out = append(out, c)
		}
	}
	return out
}

func workspace(t *testing.T) string {
	dir := t.TempDir()
	for _, f := range []string{"alpha.txt", "beta.md"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func newAgent(t *testing.T, srv *llamacpp.Server, reg *tools.Registry, mode agent.ToolMode) *agent.Agent {
	t.Helper()
	a, err := agent.New(agent.Config{Model: srv.Client(), Tools: reg, Mode: mode, MaxSteps: 4})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestLoopCallsRealToolAndAnswers(t *testing.T) {
	srv := tiny(t)
	ws := workspace(t)
	reg := tools.NewRegistry()
	sel, err := tools.Select(tools.Builtins(tools.BuiltinConfig{Root: ws}), "list_dir")
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(sel[0]); err != nil {
		t.Fatal(err)
	}
	var rec recorder
	f := newAgent(t, srv, reg, agent.Native).Run(context.Background(), nil,
		agent.Message{Role: "user", Content: "What is in the folder?"}, rec.emit)
	if f.Err != nil || f.Reason != "answer" {
		t.Fatalf("finished %+v", f)
	}
	calls := rec.calls()
	if len(calls) != 1 || calls[0].Call.Name != "list_dir" || calls[0].Result.IsError {
		t.Fatalf("calls %+v", calls)
	}
	for _, want := range []string{"alpha.txt", "beta.md", "sub/"} {
		if !strings.Contains(calls[0].Result.Text, want) {
			t.Errorf("list_dir result %q lacks %s", calls[0].Result.Text, want)
		}
	}
	if f.Steps != 2 || f.Final.Content != "Hi!" {
		t.Fatalf("want the answer after the tool result in step 2, got step %d %q", f.Steps, f.Final.Content)
	}
	var steps []agent.StepFinished
	for _, ev := range rec.events {
		if s, ok := ev.(agent.StepFinished); ok {
			steps = append(steps, s)
		}
	}
	// Step 1 stores the user turn, the call and its result; step 2 the answer.
	if len(steps) != 2 || len(steps[0].Messages) != 3 || steps[0].Messages[0].Role != "user" ||
		steps[0].Messages[2].Role != "tool" || len(steps[1].Messages) != 1 {
		t.Fatalf("steps %+v", steps)
	}
	if steps[1].Messages[0].Timings == nil || steps[1].Messages[0].Timings.CacheN == 0 {
		t.Fatalf("second request did not reuse the cached prefix: %+v", steps[1].Messages[0].Timings)
	}
}

type sleepIn struct {
	Path string `json:"path" jsonschema:"description=any path"`
}

func register(t *testing.T, reg *tools.Registry, tl tools.Tool) {
	t.Helper()
	if err := reg.Register(tl); err != nil {
		t.Fatal(err)
	}
}

func TestLoopToolTimeoutAndPanicBecomeResults(t *testing.T) {
	srv := tiny(t)
	cases := []struct {
		name string
		tool tools.Tool
		want string
	}{
		{"timeout", tools.New("list_dir", "List a folder", func(ctx context.Context, in sleepIn) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		}, tools.WithTimeout(200*time.Millisecond)), "timed out"},
		{"panic", tools.New("list_dir", "List a folder", func(ctx context.Context, in sleepIn) (string, error) {
			var m map[string]int
			m["boom"]++ // a real nil-map panic, not a staged one
			return "", nil
		}), "crashed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg := tools.NewRegistry()
			register(t, reg, tc.tool)
			var rec recorder
			f := newAgent(t, srv, reg, agent.Native).Run(context.Background(), nil,
				agent.Message{Role: "user", Content: "list"}, rec.emit)
			calls := rec.calls()
			if len(calls) != 1 || !calls[0].Result.IsError || !strings.Contains(strings.ToLower(calls[0].Result.Text), tc.want) {
				t.Fatalf("calls %+v", calls)
			}
			if f.Err != nil || f.Reason != "answer" || f.Final.Content != "Hi!" {
				t.Fatalf("the model should answer after the failed tool: %+v", f)
			}
		})
	}
}

type strictIn struct {
	Path  string `json:"path"`
	Count int    `json:"count" jsonschema:"minimum=1,multipleOf=7"`
}

// TestLoopInvalidArgumentsGetValidationMessage: llama-server's grammar does not enforce multipleOf, so the model
// writes a count the schema rejects; the registry must refuse to run the tool and tell the model why.
func TestLoopInvalidArgumentsGetValidationMessage(t *testing.T) {
	srv := tiny(t)
	var ran atomic.Int32
	reg := tools.NewRegistry()
	register(t, reg, tools.New("list_dir", "List a folder", func(ctx context.Context, in strictIn) (string, error) {
		ran.Add(1)
		return "ok", nil
	}))
	var rec recorder
	f := newAgent(t, srv, reg, agent.Native).Run(context.Background(), nil,
		agent.Message{Role: "user", Content: "list"}, rec.emit)
	calls := rec.calls()
	if len(calls) == 0 {
		t.Fatalf("no call made: %+v", f)
	}
	var args strictIn
	_ = json.Unmarshal(calls[0].Call.Arguments, &args)
	if args.Count%7 == 0 {
		// The tiny model is deterministic and writes the smallest count the grammar allows (1); a valid count
		// means the model or the grammar changed and this test no longer checks anything.
		t.Fatalf("the model wrote a valid count %d: the premise of this test no longer holds", args.Count)
	}
	if ran.Load() != 0 {
		t.Fatalf("tool ran with invalid arguments %s", calls[0].Call.Arguments)
	}
	if !calls[0].Result.IsError || !strings.Contains(calls[0].Result.Text, "count") {
		t.Fatalf("validation message does not name the field: %q", calls[0].Result.Text)
	}
}

func TestLoopRepeatedFailureStops(t *testing.T) {
	srv := tiny(t)
	reg := tools.NewRegistry()
	register(t, reg, tools.New("list_dir", "List a folder", func(ctx context.Context, in sleepIn) (string, error) {
		return "", errors.New("disk on fire")
	}))
	a, err := agent.New(agent.Config{Model: srv.Client(), Tools: reg, MaxSteps: 10, ToolChoice: "required",
		MaxRepeatedFailures: 3})
	if err != nil {
		t.Fatal(err)
	}
	var rec recorder
	f := a.Run(context.Background(), nil, agent.Message{Role: "user", Content: "list"}, rec.emit)
	if f.Reason != "repeated_failure" || f.Steps != 3 || !strings.Contains(f.Err.Error(), "list_dir") {
		t.Fatalf("finished %+v", f)
	}
}

func TestLoopMaxSteps(t *testing.T) {
	srv := tiny(t)
	reg := tools.NewRegistry()
	n := 0
	register(t, reg, tools.New("list_dir", "List a folder", func(ctx context.Context, in sleepIn) (string, error) {
		n++
		return strings.Repeat("x", n), nil // different every time: not a repeated failure
	}))
	a, _ := agent.New(agent.Config{Model: srv.Client(), Tools: reg, MaxSteps: 2, ToolChoice: "required"})
	f := a.Run(context.Background(), nil, agent.Message{Role: "user", Content: "list"}, nil)
	if f.Reason != "max_steps" || f.Err == nil || n != 2 {
		t.Fatalf("finished %+v after %d calls", f, n)
	}
}

func TestLoopCancelMidTool(t *testing.T) {
	srv := tiny(t)
	reg := tools.NewRegistry()
	started := make(chan struct{})
	register(t, reg, tools.New("list_dir", "List a folder", func(ctx context.Context, in sleepIn) (string, error) {
		close(started)
		<-ctx.Done()
		return "", ctx.Err()
	}, tools.WithTimeout(time.Minute)))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	done := make(chan agent.Finished, 1)
	go func() {
		done <- newAgent(t, srv, reg, agent.Native).Run(ctx, nil, agent.Message{Role: "user", Content: "list"}, nil)
	}()
	select {
	case f := <-done:
		if f.Reason != "canceled" {
			t.Fatalf("finished %+v", f)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("loop did not stop after cancel")
	}
}

// TestParseFormatFlag keeps the CLI spelling of formats in step with the parser.
func TestParseFormatFlag(t *testing.T) {
	for _, s := range []string{"auto", "hermes", "qwen-xml"} {
		if _, err := toolcall.ParseFormat(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
}

// TestServerCrashMidAnswerKeepsTheTurn kills the real server while it streams an answer: the run ends with a
// clear error, and the user's question plus the partial answer (marked interrupted) still reach the recorder.
func TestServerCrashMidAnswerKeepsTheTurn(t *testing.T) {
	srv := enginetest.Start(t, llamacpp.Config{Model: enginetest.SharedModel(t, "stories260K.gguf"), Ctx: 2048, Parallel: 1})
	a, err := agent.New(agent.Config{Model: srv.Client(), MaxTokens: 1900})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	var steps []agent.StepFinished
	f := a.Run(context.Background(), nil, agent.Message{Role: "user", Content: "Once upon a time"}, func(ev agent.Event) {
		switch e := ev.(type) {
		case agent.Token:
			once.Do(srv.Kill)
		case agent.StepFinished:
			steps = append(steps, e)
		}
	})
	if f.Reason != "error" || f.Err == nil || !strings.Contains(f.Err.Error(), "stream ended before the server finished") {
		t.Fatalf("finished %+v", f)
	}
	if len(steps) != 1 || len(steps[0].Messages) != 2 || steps[0].Messages[0].Content != "Once upon a time" ||
		!steps[0].Messages[1].Interrupted || steps[0].Messages[1].Content == "" {
		t.Fatalf("stored step %+v", steps)
	}
}
