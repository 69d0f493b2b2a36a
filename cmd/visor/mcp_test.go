package main

import (
	"context"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/syncbuf"
	"github.com/visorhq/visor/internal/testmodel"
)

// TestMCPServeOverHTTP starts `visor mcp serve --http` on the tiny model with a built-in tool and calls it with
// a real MCP client: the agent runs the tool, the client sees the call as progress and gets the answer.
func TestMCPServeOverHTTP(t *testing.T) {
	enginetest.Binary(t)
	t.Setenv("VISOR_ENGINE_DIR", t.TempDir()) // no reuse of another test's `visor serve`
	t.Setenv("VISOR_LLAMA_SERVER", enginetest.Binary(t))
	dir, chat, ws := tinyWorkspace(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"mcp", "serve", "--http", "127.0.0.1:0", "--model", chat, "--db",
			filepath.Join(dir, "visor.db"), "--tools", "list_dir", "--workspace", ws}, strings.NewReader(""), &stdout, &stderr)
	}()
	urlRE := regexp.MustCompile(`visor MCP server at (http://\S+)`)
	var url string
	deadline := time.Now().Add(90 * time.Second)
	for url == "" {
		if m := urlRE.FindStringSubmatch(stderr.String()); m != nil {
			url = m[1]
			break
		}
		select {
		case err := <-done:
			t.Fatalf("mcp serve exited: %v\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("mcp serve never listened: %s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	var progress []string
	var mu sync.Mutex
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, r.Params.Message)
			mu.Unlock()
		},
	})
	cctx, ccancel := context.WithTimeout(ctx, 2*time.Minute)
	defer ccancel()
	cs, err := c.Connect(cctx, &sdk.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(cctx, &sdk.CallToolParams{Name: "ask", Arguments: map[string]any{"prompt": "What is here?"},
		Meta: sdk.Meta{"progressToken": 1}})
	if err != nil {
		t.Fatal(err)
	}
	answer := ""
	if tc, ok := res.Content[0].(*sdk.TextContent); ok {
		answer = tc.Text
	}
	if res.IsError || answer != "Hi!" {
		t.Fatalf("ask: error=%v %q\n%s", res.IsError, answer, stderr.String())
	}
	out, _ := res.StructuredContent.(map[string]any)
	if out["tool_calls"] != float64(1) || out["session"] == "" {
		t.Fatalf("structured output %+v", out)
	}
	// Progress is sent before the response on the same stream, but the client's handler runs on its own
	// goroutine: wait for it (a fixed 2 s of polling was scheduling luck on a busy machine).
	waitFor(t, "the progress of the tool call", func() bool {
		mu.Lock()
		defer mu.Unlock()
		joined := strings.Join(progress, "\n")
		return strings.Contains(joined, "list_dir returned") && strings.Contains(joined, "hello.txt")
	})
	_ = cs.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("mcp serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("mcp serve did not stop after its context ended")
	}
	if stdout.String() != "" {
		t.Fatalf("HTTP mode wrote to stdout: %q", stdout.String())
	}
	if _, _, err := visor(t, "mcp", "serve", "--http", "0.0.0.0:0", "--model", chat, "--no-store"); err == nil ||
		!strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("non-loopback address: %v", err)
	}
}

// TestMCPServeOverStdio speaks MCP to `visor mcp serve` through its stdin and stdout, as an MCP client that
// launches visor as a command would.
func TestMCPServeOverStdio(t *testing.T) {
	enginetest.Binary(t)
	t.Setenv("VISOR_ENGINE_DIR", t.TempDir())
	t.Setenv("VISOR_LLAMA_SERVER", enginetest.Binary(t))
	chat, _, err := testmodel.Files(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		err := run(context.Background(), []string{"mcp", "serve", "--model", chat, "--no-store"}, inR, outW, &stderr)
		_ = outW.Close()
		done <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "ask", Arguments: map[string]any{"prompt": "hello"}})
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if tc, ok := res.Content[0].(*sdk.TextContent); !ok || res.IsError || tc.Text != "Hi!" {
		t.Fatalf("ask over stdio: %+v", res.Content)
	}
	// The client closing stdin ends the server cleanly, engine included.
	_ = cs.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("mcp serve: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("mcp serve did not stop when stdin closed")
	}
}
