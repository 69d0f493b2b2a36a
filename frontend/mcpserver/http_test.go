package mcpserver_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/visorhq/visor/frontend/mcpserver"
	"github.com/visorhq/visor/internal/testkit"
)

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// listen serves s on a free loopback port and returns the endpoint URL.
func listen(t *testing.T, s *mcpserver.Server) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	urls := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- s.ListenAndServe(ctx, "127.0.0.1:0", func(u string) { urls <- u }) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case u := <-urls:
		return u
	case err := <-done:
		t.Fatal(err)
	}
	return ""
}

func rawPost(t *testing.T, url string, hdr map[string]string, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestStreamableHTTPRefusesIDsItCannotAnswer: over HTTP as over stdio, a request whose id the SDK would answer
// under another id (1.5 as 1, 2^64 as -2^63) or not at all (null) gets a JSON-RPC error that names the id; a
// batch names its element; a good id is answered; an unknown session says how to get a new one.
func TestStreamableHTTPRefusesIDsItCannotAnswer(t *testing.T) {
	s, err := mcpserver.New(mcpserver.Config{Sessions: testkit.FakeService(t, echoRunner{}, nil)})
	if err != nil {
		t.Fatal(err)
	}
	url := listen(t, s)
	for _, c := range []struct {
		body   string
		status int
		want   string
	}{
		{`{"jsonrpc":"2.0","id":1.5,"method":"initialize","params":{}}`, 400, `\"id\" 1.5 is not an integer`},
		{`{"jsonrpc":"2.0","id":18446744073709551616,"method":"ping"}`, 400, "use a string or a smaller integer"},
		{`{"jsonrpc":"2.0","id":null,"method":"ping"}`, 400, `\"id\" is null`},
		{`[{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":2.5,"method":"ping"}]`, 400, "batch element 1"},
		{initialize, 200, `"id":1,"result"`},
	} {
		status, body := rawPost(t, url, nil, c.body)
		if status != c.status || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s, want %d with %q", c.body, status, body, c.status, c.want)
		}
	}
	// A session id the server does not hold (expired, deleted, from before a restart) says what to do.
	status, body := rawPost(t, url, map[string]string{"Mcp-Session-Id": "GONE42"}, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	if status != 404 || !strings.Contains(body, `MCP session \"GONE42\" is not one this server holds`) ||
		!strings.Contains(body, `send \"initialize\" again without an Mcp-Session-Id header`) {
		t.Errorf("unknown session: %d %s", status, body)
	}
}

// TestStreamableHTTPRefusesOtherSites: a web page must not reach the MCP server, by DNS rebinding (a foreign
// Host) or by a cross-site request (a foreign Origin, which the MCP spec says servers MUST check).
func TestStreamableHTTPRefusesOtherSites(t *testing.T) {
	s, err := mcpserver.New(mcpserver.Config{Sessions: testkit.FakeService(t, echoRunner{}, nil)})
	if err != nil {
		t.Fatal(err)
	}
	url := listen(t, s)
	host := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
	for _, c := range []struct {
		name   string
		hdr    map[string]string
		status int
		want   string
	}{
		{"DNS rebinding", map[string]string{"Host": "evil.example:" + strings.Split(host, ":")[1]}, 403, "DNS rebinding"},
		{"cross-site", map[string]string{"Origin": "https://evil.example"}, 403, `Origin \"https://evil.example\" may not call the MCP server`},
		{"another local port", map[string]string{"Origin": "http://127.0.0.1:1"}, 403, "may not"},
		{"text/plain", map[string]string{"Content-Type": "text/plain"}, 415, "send the body as application/json"},
		{"form", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, "application/json"},
	} {
		status, body := rawPost(t, url, c.hdr, initialize)
		if status != c.status || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s, want %d with %q", c.name, status, body, c.status, c.want)
		}
	}
	if status, body := rawPost(t, url, map[string]string{"Origin": "http://" + host}, initialize); status != 200 {
		t.Errorf("same-origin initialize: %d %s", status, body)
	}
	// A declared body over the bound is refused before it is read, saying what the bound is for.
	req := httptest.NewRequest("POST", "http://"+host+"/mcp", strings.NewReader(initialize))
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = mcpserver.MaxFrameBytes + 1
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, req)
	if w.Code != 413 || !strings.Contains(w.Body.String(), "more than the 33554432 (32 MiB)") ||
		!strings.Contains(w.Body.String(), "images of at most 20 MiB") {
		t.Errorf("oversized body: %d %s", w.Code, w.Body)
	}
}

// TestStreamableHTTPCarriesAFullSizeImage: an image at the documented 20 MiB limit (27 MiB of base64) gets
// through HTTP, whose SDK default refused anything over 4 MiB.
func TestStreamableHTTPCarriesAFullSizeImage(t *testing.T) {
	t.Parallel()
	s, err := mcpserver.New(mcpserver.Config{Sessions: testkit.FakeService(t, echoRunner{}, nil)})
	if err != nil {
		t.Fatal(err)
	}
	url := listen(t, s)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(),
		&sdk.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	data := bigImage()
	res := ask(t, cs, map[string]any{"prompt": "look", "images": []map[string]any{
		{"data": base64.StdEncoding.EncodeToString(data), "mime": "image/png"}}})
	if res.IsError || text(res, 0) != fmt.Sprintf("1 images, %d bytes", len(data)) {
		t.Fatalf("a %d-byte image over HTTP: %q", len(data), text(res, 0))
	}
}

func TestStreamableHTTPNeedsAKeyOffLoopback(t *testing.T) {
	open, err := mcpserver.New(mcpserver.Config{Sessions: testkit.FakeService(t, echoRunner{}, nil), KeyHint: "export VISOR_SERVE_KEY=KEY"})
	if err != nil {
		t.Fatal(err)
	}
	if err := open.ListenAndServe(context.Background(), "0.0.0.0:0", nil); err == nil ||
		!strings.Contains(err.Error(), "VISOR_SERVE_KEY") {
		t.Fatalf("non-loopback without a key: %v", err)
	}
	keyed, err := mcpserver.New(mcpserver.Config{Sessions: testkit.FakeService(t, echoRunner{}, nil), APIKey: "k3y"})
	if err != nil {
		t.Fatal(err)
	}
	url := listen(t, keyed)
	if status, body := rawPost(t, url, nil, initialize); status != 401 || !strings.Contains(body, "Authorization: Bearer KEY") {
		t.Fatalf("no key: %d %s", status, body)
	}
	hc := &http.Client{Transport: bearer{"k3y"}}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(),
		&sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatalf("with the key: %v", err)
	}
	defer cs.Close()
	if res := ask(t, cs, map[string]any{"prompt": "hi"}); res.IsError || text(res, 0) != "0 images, 0 bytes" {
		t.Fatalf("ask with the key: %q", text(res, 0))
	}
}

type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// TestAskSchemaImagesIsAPlainArray: clients that pick an argument's type from the schema (the MCP Inspector CLI)
// cannot use {"type": ["null", "array"]}, and sent the images as a string.
func TestAskSchemaImagesIsAPlainArray(t *testing.T) {
	s, err := mcpserver.New(mcpserver.Config{Sessions: testkit.FakeService(t, echoRunner{}, nil)})
	if err != nil {
		t.Fatal(err)
	}
	cs, _ := client(t, s)
	for tl, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		var schema struct {
			Properties map[string]struct {
				Type any `json:"type"`
			} `json:"properties"`
			Required []string `json:"required"`
		}
		raw := mustJSON(t, tl.InputSchema)
		if err := json.Unmarshal([]byte(raw), &schema); err != nil || schema.Properties["images"].Type != "array" ||
			fmt.Sprint(schema.Required) != "[prompt]" {
			t.Fatalf("ask's input schema: %s", raw)
		}
	}
}

// TestStreamableHTTPDropsIdleSessions: a client that initializes and goes away without DELETE must not keep
// its session (and what it holds) for the server's whole life.
func TestStreamableHTTPDropsIdleSessions(t *testing.T) {
	s, err := mcpserver.New(mcpserver.Config{Sessions: testkit.FakeService(t, echoRunner{}, nil), HTTPSessionIdle: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	url := listen(t, s)
	req, _ := http.NewRequest("POST", url, strings.NewReader(initialize))
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || id == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, id)
	}
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	deadline := time.Now().Add(time.Minute) // a hang guard for a busy machine's reaper
	for {
		// Each request restarts the idle clock, so ask less often than the limit; a slow machine just loops.
		time.Sleep(300 * time.Millisecond)
		status, body := rawPost(t, url, map[string]string{"Mcp-Session-Id": id, "Mcp-Protocol-Version": "2025-06-18"}, ping)
		if status == http.StatusNotFound {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s still answers (%d %s) long after its 100ms idle limit", id, status, body)
		}
	}
}
