package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/visorhq/visor/internal/syncbuf"
	"github.com/visorhq/visor/tools"
	"github.com/visorhq/visor/tools/mcp"
)

// inMemory serves srv in-process; each (re)connect gets a fresh transport pair, as a restarted process would.
func inMemory(t *testing.T, srv *sdk.Server) func() sdk.Transport {
	t.Helper()
	return func() sdk.Transport {
		a, b := sdk.NewInMemoryTransports()
		if _, err := srv.Connect(context.Background(), a, nil); err != nil {
			t.Errorf("server connect: %v", err)
		}
		return b
	}
}

func connect(t *testing.T, cfg mcp.ServerConfig) *mcp.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mcp.Connect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func registry(t *testing.T, c *mcp.Client) *tools.Registry {
	t.Helper()
	reg := tools.NewRegistry()
	if err := c.Register(reg); err != nil {
		t.Fatal(err)
	}
	return reg
}

var validName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func TestInMemoryServerToolsThroughRegistry(t *testing.T) {
	c := connect(t, mcp.ServerConfig{Name: "t", Transport: inMemory(t, testServer()), ReturnsImages: true})
	var names []string
	for _, tl := range c.Tools() {
		names = append(names, tl.Spec().Name)
	}
	// Eight tools over pages of two: every page must have been read.
	want := []string{"t__crash", "t__echo", "t__fail", "t__files_read_v2", "t__full_screenshot", "t__pid", "t__screenshot", "t__slow"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("tools %v, want %v", names, want)
	}
	reg := registry(t, c)
	echo, _ := reg.Get("t__echo")
	var schema map[string]any
	if err := json.Unmarshal(echo.Spec().Parameters, &schema); err != nil {
		t.Fatal(err)
	}
	shot, _ := reg.Get("t__screenshot")
	if !echo.Spec().ReturnsImages || echo.Spec().Parallel || !shot.Spec().Parallel {
		t.Fatalf("spec flags: %+v", echo.Spec())
	}
	if req, _ := schema["required"].([]any); len(req) != 1 || req[0] != "text" || echo.Spec().Description != "Echo the text back" {
		t.Fatalf("echo spec lost the server's schema or description: %s %q", echo.Spec().Parameters, echo.Spec().Description)
	}
	ctx := context.Background()

	if r := reg.Call(ctx, "t__echo", json.RawMessage(`{"text":"hello"}`)); r.IsError || r.Text != "echo: hello" {
		t.Fatalf("echo: %+v", r)
	}
	// The Registry validates against the server's schema before the server sees the call.
	if r := reg.Call(ctx, "t__echo", json.RawMessage(`{}`)); !r.IsError || !strings.Contains(r.Text, "text") {
		t.Fatalf("echo without text: %+v", r)
	}
	r := reg.Call(ctx, "t__screenshot", nil)
	if r.IsError || r.Text != "an 8x8 gradient" || len(r.Images) != 1 {
		t.Fatalf("screenshot: %+v", r)
	}
	if !bytes.Equal(r.Images[0].Data, testPNG()) || r.Images[0].MIME != "image/png" {
		t.Fatalf("image changed on the way: mime %q, %d bytes", r.Images[0].MIME, len(r.Images[0].Data))
	}
	if r := reg.Call(ctx, "t__fail", nil); !r.IsError || !strings.Contains(r.Text, "disk full") {
		t.Fatalf("fail: %+v", r)
	}
	// A remote name with '.' and '/' is offered under a valid local name and called by its remote name.
	if r := reg.Call(ctx, "t__files_read_v2", json.RawMessage(`{"text":"a.txt"}`)); r.IsError || r.Text != "read a.txt" {
		t.Fatalf("files.read/v2: %+v", r)
	}
}

func TestToolNamesStayValidAndDistinct(t *testing.T) {
	s := sdk.NewServer(&sdk.Implementation{Name: "names", Version: "1"}, nil)
	long := strings.Repeat("very_long_tool_name_", 5)
	for _, n := range []string{"a.b", "a_b", long + "1", long + "2"} {
		sdk.AddTool(s, &sdk.Tool{Name: n, Description: n},
			func(ctx context.Context, req *sdk.CallToolRequest, _ empty) (*sdk.CallToolResult, any, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: req.Params.Name}}}, nil, nil
			})
	}
	for _, tc := range []struct {
		cfg    mcp.ServerConfig
		prefix string
	}{
		{mcp.ServerConfig{Name: "my.server"}, "my_server__"},
		{mcp.ServerConfig{Name: "x", Prefix: "fs_"}, "fs_"},
		{mcp.ServerConfig{Name: "x", NoPrefix: true}, ""},
	} {
		tc.cfg.Transport = inMemory(t, s)
		c := connect(t, tc.cfg)
		reg := registry(t, c) // refuses invalid or duplicate names
		if len(reg.Specs()) != 4 {
			t.Fatalf("%+v: registered %d tools, want 4", tc.cfg, len(reg.Specs()))
		}
		// Each local name reaches its own remote tool: the handler echoes the name it was called by.
		for _, tl := range c.Tools() {
			name := tl.Spec().Name
			if !validName.MatchString(name) || !strings.HasPrefix(name, tc.prefix) {
				t.Fatalf("name %q: invalid or without prefix %q", name, tc.prefix)
			}
			if r := reg.Call(context.Background(), name, nil); r.IsError || r.Text != tl.Spec().Description {
				t.Fatalf("%s called %+v, want remote %s", name, r, tl.Spec().Description)
			}
		}
	}
}

func TestTimeoutIsAnErrorResult(t *testing.T) {
	c := connect(t, mcp.ServerConfig{Name: "t", Transport: inMemory(t, testServer()), Timeout: 300 * time.Millisecond})
	reg := registry(t, c)
	start := time.Now()
	r := reg.Call(context.Background(), "t__slow", nil)
	if !r.IsError || !strings.Contains(r.Text, "timed out") || time.Since(start) > 10*time.Second {
		t.Fatalf("slow call: %+v after %s", r, time.Since(start))
	}
	// The session survives a timed-out call.
	if r := reg.Call(context.Background(), "t__echo", json.RawMessage(`{"text":"still here"}`)); r.Text != "echo: still here" {
		t.Fatalf("after timeout: %+v", r)
	}
}

func stdioConfig() mcp.ServerConfig {
	return mcp.ServerConfig{Name: "sub", Command: os.Args[0], Args: []string{"-test.run=^$"}, Env: []string{serverEnv + "=1"}}
}

func pidOf(t *testing.T, reg *tools.Registry) int {
	t.Helper()
	r := reg.Call(context.Background(), "sub__pid", nil)
	pid, err := strconv.Atoi(r.Text)
	if r.IsError || err != nil {
		t.Fatalf("pid: %+v", r)
	}
	return pid
}

// gone reports whether pid no longer exists; a zombie (exited but not waited for) still exists.
func gone(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

func TestStdioSubprocessRestartsAndCloses(t *testing.T) {
	c := connect(t, stdioConfig())
	reg := registry(t, c)
	ctx := context.Background()
	first := pidOf(t, reg)
	if first == os.Getpid() {
		t.Fatal("the server runs in the test process, not a subprocess")
	}
	if r := reg.Call(ctx, "sub__screenshot", nil); r.IsError || len(r.Images) != 1 || !bytes.Equal(r.Images[0].Data, testPNG()) {
		t.Fatalf("image over stdio: %+v", r)
	}

	// Killed between calls: the next call restarts the server and succeeds.
	down := mcp.Down(c)
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-down // the client has read EOF from the dead process
	second := pidOf(t, reg)
	if second == first {
		t.Fatal("no new process after the server was killed")
	}
	if !gone(first) {
		t.Fatalf("killed server %d was not reaped", first)
	}

	// Dying during a call: an error naming the server, which is restarted but the call is not repeated.
	r := reg.Call(ctx, "sub__crash", nil)
	if !r.IsError || !strings.Contains(r.Text, `"sub"`) || !strings.Contains(r.Text, "restarted") {
		t.Fatalf("crash: %+v", r)
	}
	third := pidOf(t, reg)
	if third == second {
		t.Fatal("no new process after the crash")
	}

	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if !gone(third) || !gone(second) {
		t.Fatalf("server processes left behind after Close: %d gone=%v, %d gone=%v", third, gone(third), second, gone(second))
	}
	if r := reg.Call(ctx, "sub__echo", json.RawMessage(`{"text":"x"}`)); !r.IsError || !strings.Contains(r.Text, "closed") {
		t.Fatalf("call after Close: %+v", r)
	}
}

func TestConnectErrorsNameTheServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := mcp.Connect(ctx, mcp.ServerConfig{Name: "nosuch", Command: "/nonexistent/mcp-server"})
	if err == nil || !strings.Contains(err.Error(), "nosuch") || !strings.Contains(err.Error(), "/nonexistent/mcp-server") {
		t.Fatalf("missing command: %v", err)
	}
	// A process that is not an MCP server: the error says what it printed.
	_, err = mcp.Connect(ctx, mcp.ServerConfig{Name: "broken", Command: "sh", Args: []string{"-c", "echo boom >&2; exit 1"}})
	if err == nil || !strings.Contains(err.Error(), "broken") {
		t.Fatalf("broken server: %v", err)
	}
	t.Logf("broken server: %v", err)
	for _, cfg := range []mcp.ServerConfig{{Command: "x"}, {Name: "two", Command: "x", URL: "http://h"}, {Name: "u", URL: "ftp://h"}} {
		if _, err := mcp.Connect(ctx, cfg); err == nil {
			t.Fatalf("config %+v accepted", cfg)
		}
	}
}

func TestStreamableHTTP(t *testing.T) {
	srv := testServer()
	var auth atomic.Value
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close) // after the client's Close (cleanups run last-in first-out), which ends its SSE stream
	c := connect(t, mcp.ServerConfig{Name: "web", URL: ts.URL, Headers: map[string]string{"Authorization": "Bearer k"}})
	reg := registry(t, c)
	if r := reg.Call(context.Background(), "web__echo", json.RawMessage(`{"text":"over http"}`)); r.Text != "echo: over http" {
		t.Fatalf("echo over HTTP: %+v", r)
	}
	r := reg.Call(context.Background(), "web__screenshot", nil)
	if len(r.Images) != 1 || !bytes.Equal(r.Images[0].Data, testPNG()) {
		t.Fatalf("image over HTTP: %+v", r)
	}
	if auth.Load() != "Bearer k" {
		t.Fatalf("header not sent: %v", auth.Load())
	}
}

// TestHTTPServerRestartIsTransparent: a streamable HTTP server that restarts forgets its sessions and answers
// 404; the refused call never ran, so the client reconnects and makes it again.
func TestHTTPServerRestartIsTransparent(t *testing.T) {
	var current atomic.Pointer[sdk.StreamableHTTPHandler]
	fresh := func() {
		current.Store(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return testServer() }, nil))
	}
	fresh()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { current.Load().ServeHTTP(w, r) }))
	t.Cleanup(ts.Close)
	var logs syncbuf.Buffer
	c := connect(t, mcp.ServerConfig{Name: "web", URL: ts.URL, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	reg := registry(t, c)
	if r := reg.Call(context.Background(), "web__echo", json.RawMessage(`{"text":"one"}`)); r.Text != "echo: one" {
		t.Fatalf("before restart: %+v", r)
	}
	fresh() // the "restarted" server knows no sessions
	if r := reg.Call(context.Background(), "web__echo", json.RawMessage(`{"text":"two"}`)); r.IsError || r.Text != "echo: two" {
		t.Fatalf("after restart: %+v", r)
	}
	if !strings.Contains(logs.String(), "lost the session") {
		t.Fatalf("the call did not go through a reconnect: %s", logs.String())
	}
}

// TestRegistryFollowsToolListChanges: a server that adds and withdraws tools at runtime announces it, and the
// registries the client registered into follow.
func TestRegistryFollowsToolListChanges(t *testing.T) {
	srv := testServer()
	c := connect(t, mcp.ServerConfig{Name: "t", Transport: inMemory(t, srv)})
	reg := registry(t, c)
	has := func(name string) bool { _, ok := reg.Get(name); return ok }
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); !cond(); { // a hang guard, not a speed claim
			if time.Now().After(deadline) {
				t.Fatalf("registry never saw %s; has %d tools", what, len(reg.Specs()))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	sdk.AddTool(srv, &sdk.Tool{Name: "late", Description: "Added after connect"},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ empty) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "late tool"}}}, nil, nil
		})
	waitFor("t__late added", func() bool { return has("t__late") })
	if r := reg.Call(context.Background(), "t__late", nil); r.IsError || r.Text != "late tool" {
		t.Fatalf("late tool: %+v", r)
	}
	srv.RemoveTools("echo")
	waitFor("t__echo removed", func() bool { return !has("t__echo") })
	if !has("t__pid") {
		t.Fatal("an unchanged tool was dropped")
	}
	for _, tl := range c.Tools() {
		if tl.Spec().Name == "t__echo" {
			t.Fatal("Tools still lists the withdrawn tool")
		}
	}
}

// TestInitializeTimeout: a server that starts but never answers initialize (a process reading stdin and
// saying nothing, an HTTP endpoint that never responds) makes Connect fail after InitTimeout with a message
// naming the server and what to check, instead of hanging visor.
func TestInitializeTimeout(t *testing.T) {
	stop := make(chan struct{})
	// It never answers a POST (initialize); the DELETE the SDK sends when it gives up is refused at once, or
	// the SDK's close would wait 5 more seconds on it.
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	defer silent.Close()
	defer close(stop)
	for _, tc := range []struct {
		cfg  mcp.ServerConfig
		want []string
	}{
		{mcp.ServerConfig{Name: "mute", Command: "sh", Args: []string{"-c", "cat >/dev/null"}},
			[]string{"MCP server mute (sh -c cat >/dev/null) did not answer initialize within 300ms", "MCP server on stdio"}},
		{mcp.ServerConfig{Name: "web", URL: silent.URL + "/mcp"},
			[]string{"MCP server web (" + silent.URL + "/mcp) did not answer initialize within 300ms", "streamable HTTP endpoint"}},
	} {
		tc.cfg.InitTimeout = 300 * time.Millisecond
		start := time.Now()
		done := make(chan error, 1)
		go func() {
			c, err := mcp.Connect(context.Background(), tc.cfg)
			if c != nil {
				_ = c.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			t.Logf("%s gave up after %s", tc.cfg.Name, time.Since(start))
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("%s: %v, want %q", tc.cfg.Name, err, w)
				}
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: Connect still waiting after 20s with a 300ms InitTimeout", tc.cfg.Name)
		}
	}
}

// TestStdioCarriesAFullSizeImage: a stdio server's 20 MiB screenshot (a 27 MiB line) arrives whole; the SDK's
// own command transport stopped at 16 MiB, dropped the connection, and the call read as a crash.
func TestStdioCarriesAFullSizeImage(t *testing.T) {
	c := connect(t, stdioConfig())
	reg := registry(t, c)
	before := pidOf(t, reg)
	r := reg.Call(context.Background(), "sub__full_screenshot", nil)
	if r.IsError || len(r.Images) != 1 || !bytes.Equal(r.Images[0].Data, fullSizeImage()) {
		t.Fatalf("full-size image over stdio: error=%v %q, %d images", r.IsError, r.Text, len(r.Images))
	}
	if after := pidOf(t, reg); after != before {
		t.Fatalf("the server was restarted (%d, then %d) by a full-size image", before, after)
	}
}

// TestToolsPicksTheServersTools: a Tools list keeps only those tools, by the server's own names, and a name the
// server does not list fails the connect with the names it does.
func TestToolsPicksTheServersTools(t *testing.T) {
	c := connect(t, mcp.ServerConfig{Name: "t", Transport: inMemory(t, testServer()), Tools: []string{"pid", "echo"}})
	var names []string
	for _, tl := range c.Tools() {
		names = append(names, tl.Spec().Name)
	}
	if strings.Join(names, ",") != "t__echo,t__pid" {
		t.Fatalf("tools %v, want t__echo,t__pid in the server's order", names)
	}
	_, err := mcp.Connect(context.Background(), mcp.ServerConfig{Name: "t", Transport: inMemory(t, testServer()), Tools: []string{"ech"}})
	if err == nil || !strings.Contains(err.Error(), `MCP server t has no tool ech: it has crash, echo,`) {
		t.Fatalf("a tool the server lacks: %v", err)
	}
}
