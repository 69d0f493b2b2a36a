package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/frontend/mcpserver"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testkit"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/session"
	"github.com/visorhq/visor/tools"
)

// realService is the session service over a real agent on the tiny model (with its vision projector, so images
// are accepted); store may be nil.
func realService(t *testing.T, reg *tools.Registry, store *memory.Store, tune func(*session.Config)) *session.Service {
	t.Helper()
	srv := enginetest.Tiny(t, true, llamacpp.Config{})
	return testkit.Service(t, srv, store, func(c *session.Config) {
		if reg != nil {
			c.Agent.Tools = reg
		}
		c.Agent.MaxSteps, c.AgentName = 4, "mcp"
		if tune != nil {
			tune(c)
		}
	})
}

// client connects a real go-sdk client to s in-process; progress messages go to the returned channel.
func client(t *testing.T, s *mcpserver.Server) (*sdk.ClientSession, <-chan string) {
	t.Helper()
	ctx := context.Background()
	a, b := sdk.NewInMemoryTransports()
	ss, err := s.MCP().Connect(ctx, a, nil)
	if err != nil {
		t.Fatal(err)
	}
	progress := make(chan string, 100)
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
			progress <- r.Params.Message
		},
	})
	cs, err := c.Connect(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close(); _ = ss.Wait() })
	return cs, progress
}

func ask(t *testing.T, cs *sdk.ClientSession, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "ask", Arguments: args, Meta: sdk.Meta{"progressToken": "p1"}})
	if err != nil {
		t.Fatalf("tools/call ask: %v", err)
	}
	return res
}

func text(res *sdk.CallToolResult, i int) string {
	if i >= len(res.Content) {
		return ""
	}
	if tc, ok := res.Content[i].(*sdk.TextContent); ok {
		return tc.Text
	}
	return ""
}

func pngBytes(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 16, 16))
	for y := range 16 {
		for x := range 16 {
			img.Set(x, y, color.RGBA{R: uint8(x * 16), G: uint8(y * 16), B: 90, A: 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

type lookupIn struct {
	Key string `json:"key"`
}

func TestAskRunsTheAgentAndReportsToolCalls(t *testing.T) {
	reg := tools.NewRegistry()
	var mu sync.Mutex
	var ran []string
	if err := reg.Register(tools.New("lookup", "Look a key up", func(ctx context.Context, in lookupIn) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		ran = append(ran, in.Key)
		return "the value is 42", nil
	})); err != nil {
		t.Fatal(err)
	}
	s, err := mcpserver.New(mcpserver.Config{Sessions: realService(t, reg, nil, nil)})
	if err != nil {
		t.Fatal(err)
	}
	cs, progress := client(t, s)

	// The tool's schema is what the calling model sees.
	var listed *sdk.Tool
	for tl, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		listed = tl
	}
	if listed == nil || listed.Name != "ask" || !strings.Contains(mustJSON(t, listed.InputSchema), `"prompt"`) {
		t.Fatalf("listed tool: %+v", listed)
	}

	res := ask(t, cs, map[string]any{"prompt": "What is the value?", "images": []map[string]any{
		{"data": base64.StdEncoding.EncodeToString(pngBytes(t)), "mime": "image/png"}}})
	if res.IsError || text(res, 0) != "Hi!" {
		t.Fatalf("ask: error=%v content=%q", res.IsError, text(res, 0))
	}
	mu.Lock()
	if len(ran) != 1 {
		t.Fatalf("the agent's tool ran %d times, want once before the answer", len(ran))
	}
	mu.Unlock()
	out, _ := res.StructuredContent.(map[string]any)
	if out["answer"] != "Hi!" || out["tool_calls"] != float64(1) || out["steps"] != float64(2) {
		t.Fatalf("structured output: %+v", res.StructuredContent)
	}
	// Progress names the call and its result, in order.
	want := []string{"step 1", "calling lookup", "lookup returned: the value is 42", "step 2"}
	var got []string
	timeout := time.After(time.Minute) // a hang guard: the notifications were sent before the result
	for len(got) < len(want) {
		select {
		case m := <-progress:
			got = append(got, m)
		case <-timeout:
			t.Fatalf("progress so far %q, want %q", got, want)
		}
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Fatalf("progress %q, want prefixes %q", got, want)
		}
	}
}

func TestAskErrorsAreToolErrors(t *testing.T) {
	s, err := mcpserver.New(mcpserver.Config{Sessions: realService(t, nil, nil, nil)})
	if err != nil {
		t.Fatal(err)
	}
	cs, _ := client(t, s)
	var nineImages []map[string]any
	for range 9 {
		nineImages = append(nineImages, map[string]any{"data": base64.StdEncoding.EncodeToString(pngBytes(t))})
	}
	for _, tc := range []struct {
		name string
		args map[string]any
		want []string
	}{
		{"empty prompt", map[string]any{"prompt": "  "}, []string{`"prompt" is empty`}},
		{"no prompt", map[string]any{}, []string{"prompt"}},
		{"bad base64", map[string]any{"prompt": "look", "images": []map[string]any{{"data": "not base64!!"}}},
			[]string{"images[0].data is not valid base64", "standard base64"}},
		{"not an image", map[string]any{"prompt": "look", "images": []map[string]any{
			{"data": base64.StdEncoding.EncodeToString([]byte("plain text, not pixels"))}}},
			[]string{"images[0]: not an image", "text/plain", "PNG, JPEG, GIF or BMP"}},
		{"session without store", map[string]any{"prompt": "hi", "session": "abc"}, []string{"keeps no sessions"}},
		{"more images than a message may carry", map[string]any{"prompt": "look", "images": nineImages},
			[]string{"the call was refused before the agent ran", "the most one message may carry is 8", "send them over more messages"}},
		{"a session id 20,000 bytes long", map[string]any{"prompt": "hi", "session": strings.Repeat("s", 20000)},
			[]string{`"session" is 20000 bytes`, "short hex string", `leave "session" out`}},
		{"a session id with control characters", map[string]any{"prompt": "hi", "session": "ab\x00\x1b[2J"},
			[]string{`"session" "ab\x00\x1b[2J" holds control characters`}},
	} {
		res := ask(t, cs, tc.args)
		msg := text(res, 0)
		if !res.IsError {
			t.Fatalf("%s: not an error: %q", tc.name, msg)
		}
		if len(msg) > 1000 || strings.Contains(msg, "stopped ()") {
			t.Errorf("%s: %d bytes of message, %.200q: want a short one that says what was wrong", tc.name, len(msg), msg)
		}
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Fatalf("%s: message %q lacks %q", tc.name, msg, w)
			}
		}
	}
	// The server still works after bad calls.
	if res := ask(t, cs, map[string]any{"prompt": "hello"}); res.IsError || text(res, 0) != "Hi!" {
		t.Fatalf("after errors: %q", text(res, 0))
	}
	blind, err := mcpserver.New(mcpserver.Config{Sessions: realService(t, nil, nil, func(c *session.Config) { c.Vision = session.VisionNo })})
	if err != nil {
		t.Fatal(err)
	}
	bcs, _ := client(t, blind)
	res := ask(t, bcs, map[string]any{"prompt": "look", "images": []map[string]any{
		{"data": base64.StdEncoding.EncodeToString(pngBytes(t))}}})
	if !res.IsError || !strings.Contains(text(res, 0), "no vision projector") {
		t.Fatalf("image for a model without vision: %q", text(res, 0))
	}
	if _, err := mcpserver.New(mcpserver.Config{Sessions: realService(t, nil, nil, nil), ToolName: "bad name"}); err == nil {
		t.Fatal("a tool name with a space was accepted")
	}
}

func TestSessionsAreStoredAndContinued(t *testing.T) {
	ctx := context.Background()
	store, err := memory.Open(ctx, filepath.Join(t.TempDir(), "visor.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	s, err := mcpserver.New(mcpserver.Config{Sessions: realService(t, nil, store, func(c *session.Config) { c.Model = "tiny" })})
	if err != nil {
		t.Fatal(err)
	}
	cs, _ := client(t, s)
	res := ask(t, cs, map[string]any{"prompt": "first question"})
	out, _ := res.StructuredContent.(map[string]any)
	id, _ := out["session"].(string)
	if res.IsError || text(res, 0) != "Hi!" || id == "" || !strings.Contains(text(res, 1), id) {
		t.Fatalf("first call: %q %q %+v", text(res, 0), text(res, 1), out)
	}
	res = ask(t, cs, map[string]any{"prompt": "second question", "session": id[:8]})
	out2, _ := res.StructuredContent.(map[string]any)
	if res.IsError || out2["session"] != id {
		t.Fatalf("continued call: %q %+v", text(res, 0), out2)
	}
	msgs, err := store.Messages(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m.Role+":"+m.Content)
	}
	if strings.Join(roles, "|") != "user:first question|assistant:Hi!|user:second question|assistant:Hi!" {
		t.Fatalf("stored session: %q", roles)
	}
	sess, err := store.Session(ctx, id)
	if err != nil || sess.Agent != "mcp" || sess.Model != "tiny" || sess.Title != "first question" {
		t.Fatalf("session %+v %v", sess, err)
	}
	if res := ask(t, cs, map[string]any{"prompt": "x", "session": "ffffffffffff"}); !res.IsError ||
		!strings.Contains(text(res, 0), "leave \"session\" out") {
		t.Fatalf("unknown session: %q", text(res, 0))
	}
}

func TestStreamableHTTPOnLoopbackOnly(t *testing.T) {
	s, err := mcpserver.New(mcpserver.Config{Sessions: realService(t, nil, nil, nil)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	urls := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- s.ListenAndServe(ctx, "127.0.0.1:0", func(u string) { urls <- u }) }()
	var url string
	select {
	case url = <-urls:
	case err := <-done:
		t.Fatal(err)
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res := ask(t, cs, map[string]any{"prompt": "hello over http"}); res.IsError || text(res, 0) != "Hi!" {
		t.Fatalf("ask over HTTP: %q", text(res, 0))
	}
	_ = cs.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	for _, addr := range []string{"0.0.0.0:0", "192.0.2.1:80", ":8080"} {
		if err := s.ListenAndServe(context.Background(), addr, nil); err == nil || !strings.Contains(err.Error(), "127.0.0.1") {
			t.Fatalf("%s: %v", addr, err)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
