package mcpserver_test

import (
	"context"
	"encoding/base64"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/frontend/mcpserver"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testkit"
	"github.com/visorhq/visor/internal/testmodel"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/session"
	"github.com/visorhq/visor/tools"
)

// TestQueuedCallIsPrefilled: two MCP clients (the Go SDK's) on one visor whose engine runs one turn at a time
// on a two-slot llama-server (the tiny hybrid model). The first call's agent runs a slow tool; a second call
// with an image arrives meanwhile and waits for the engine. A third call, with a corrupt image, is refused at
// once, while the first still holds the engine. The waiting call's image is evaluated ahead (the client sees
// it in a progress message), and when its turn comes its request evaluates only its own text.
func TestQueuedCallIsPrefilled(t *testing.T) {
	srv := enginetest.TinyHybrid(t, true, testmodel.ProjectorOptions{}, llamacpp.Config{Parallel: 2})
	st, err := memory.Open(context.Background(), filepath.Join(t.TempDir(), "v.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var held atomic.Bool
	held.Store(true)
	started, release := make(chan struct{}), make(chan struct{})
	reg := tools.NewRegistry()
	if err := reg.Register(tools.New("slow_scan", "Scan slowly", func(ctx context.Context, in struct{}) (string, error) {
		if held.CompareAndSwap(true, false) {
			close(started)
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return "scan complete", nil
	})); err != nil {
		t.Fatal(err)
	}
	svc := testkit.Service(t, srv, st, func(c *session.Config) {
		c.Agent.Tools, c.Agent.MaxSteps = reg, 4
		c.Slots, c.ServerSlots = 1, 2
	})
	s, err := mcpserver.New(mcpserver.Config{Sessions: svc})
	if err != nil {
		t.Fatal(err)
	}
	first, _ := client(t, s)
	second, progress := client(t, s)
	third, _ := client(t, s)
	call := func(cs *sdk.ClientSession, args map[string]any) <-chan *sdk.CallToolResult {
		out := make(chan *sdk.CallToolResult, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "ask", Arguments: args, Meta: sdk.Meta{"progressToken": "p"}})
			if err != nil {
				t.Errorf("tools/call: %v", err)
				res = &sdk.CallToolResult{IsError: true}
			}
			out <- res
		}()
		return out
	}
	firstDone := call(first, map[string]any{"prompt": "scan"})
	<-started

	question := "What is on screen?"
	img := base64.StdEncoding.EncodeToString(testkit.PNG(t, 24, 24))
	secondDone := call(second, map[string]any{"prompt": question, "images": []map[string]any{{"data": img}}})
	bad := <-call(third, map[string]any{"prompt": question, "images": []map[string]any{{"data": base64.StdEncoding.EncodeToString([]byte("not an image"))}}})
	if !bad.IsError || !strings.Contains(text(bad, 0), "images[0]") {
		t.Errorf("a corrupt image while the engine is busy: %+v, want a tool error naming images[0]", bad)
	}
	deadline := time.After(time.Minute)
	for prefilled := false; !prefilled; {
		select {
		case m := <-progress:
			prefilled = strings.Contains(m, "evaluated ahead")
		case <-deadline:
			t.Fatal("the waiting call's image was not evaluated while the first call's tool ran")
		}
	}
	close(release)
	if res := <-firstDone; res.IsError || text(res, 0) != testmodel.Answer {
		t.Fatalf("first call: %+v", res)
	}
	res := <-secondDone
	if res.IsError || text(res, 0) != testmodel.Answer {
		t.Fatalf("second call: %+v", res)
	}
	id := res.StructuredContent.(map[string]any)["session"].(string)
	msgs, err := st.Messages(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var tm *memory.Timings
	for _, m := range msgs {
		if m.Role == "assistant" && m.Timings != nil {
			tm = m.Timings
			break
		}
	}
	if tm == nil {
		t.Fatalf("the second call's session has no timed answer: %+v", msgs)
	}
	newText := testmodel.TokenCount(question + "<|im_end|>\n<|im_start|>assistant\n")
	t.Logf("the queued call's request: prompt_n %d, cache_n %d, new text %d tokens", tm.PromptTokens, tm.CachedTokens, newText)
	if tm.PromptTokens > newText+8 {
		t.Errorf("the queued call's request evaluated %d tokens, want ≤ %d (its %d new text tokens + 8): its image was not prefilled",
			tm.PromptTokens, newText+8, newText)
	}
}
