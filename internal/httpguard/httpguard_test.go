package httpguard_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/visorhq/visor/images"
	"github.com/visorhq/visor/internal/httpguard"
)

// echo is the guarded handler: it reads the whole body, so a body limit shows as a read error.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		httpguard.Error(w, http.StatusRequestEntityTooLarge, "read: %v", err)
		return
	}
	_, _ = io.WriteString(w, "ok")
})

type req struct {
	name, method, host, origin, ctype, body, token, auth string
	chunked                                              bool
}

func do(t *testing.T, g *httpguard.Guard, c req) (int, string) {
	t.Helper()
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	r := httptest.NewRequest(c.method, "http://127.0.0.1:8765/api", body)
	if c.chunked {
		r.ContentLength = -1
	}
	if c.host != "" {
		r.Host = c.host
	}
	for k, v := range map[string]string{"Origin": c.origin, "Content-Type": c.ctype, httpguard.TokenHeader: c.token,
		"Authorization": c.auth} {
		if v != "" {
			r.Header.Set(k, v)
		}
	}
	w := httptest.NewRecorder()
	g.Handler(echo).ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

func TestLoopbackGuard(t *testing.T) {
	g, err := httpguard.New(httpguard.Config{Name: "web chat", PageToken: true, BodyTypes: []string{"image/png"},
		AllowedOrigins: []string{"https://app.example"}, AllowedHosts: []string{"visor.lan:8765"}})
	if err != nil {
		t.Fatal(err)
	}
	tok := g.IssueToken()
	other, _ := httpguard.New(httpguard.Config{PageToken: true})
	json := `{"text":"hi"}`
	for _, c := range []struct {
		req
		status int
		want   string
	}{
		{req{name: "page", method: "GET"}, 200, "ok"},
		{req{name: "post", method: "POST", ctype: "application/json", body: json, token: tok}, 200, "ok"},
		{req{name: "json with charset", method: "POST", ctype: "application/json; charset=utf-8", body: json, token: tok}, 200, "ok"},
		{req{name: "empty post", method: "POST", token: tok}, 200, "ok"},
		{req{name: "localhost", method: "POST", host: "localhost:8765", ctype: "application/json", body: json, token: tok}, 200, "ok"},
		{req{name: "ipv6", method: "POST", host: "[::1]:8765", ctype: "application/json", body: json, token: tok}, 200, "ok"},
		{req{name: "allowed host", method: "GET", host: "visor.lan:8765"}, 200, "ok"},
		{req{name: "raw image type", method: "POST", ctype: "image/png", body: "\x89PNG", token: tok}, 200, "ok"},
		{req{name: "same origin", method: "POST", origin: "http://127.0.0.1:8765", ctype: "application/json", body: json, token: tok}, 200, "ok"},
		{req{name: "allowed origin", method: "POST", origin: "https://app.example", ctype: "application/json", body: json, token: tok}, 200, "ok"},

		{req{name: "DNS rebinding", method: "GET", host: "evil.example:8765"}, 403, `Host \"evil.example:8765\" is not allowed`},
		{req{name: "rebinding POST", method: "POST", host: "evil.example", ctype: "application/json", body: json, token: tok}, 403, "DNS rebinding"},
		{req{name: "allowed host, other port", method: "GET", host: "visor.lan:9999"}, 403, "not allowed"},
		{req{name: "cross-site origin", method: "POST", origin: "https://evil.example", ctype: "application/json", body: json, token: tok}, 403, `Origin \"https://evil.example\" may not`},
		{req{name: "other local port", method: "POST", origin: "http://127.0.0.1:3000", ctype: "application/json", body: json, token: tok}, 403, "may not call the web chat"},
		{req{name: "null origin", method: "POST", origin: "null", ctype: "application/json", body: json, token: tok}, 403, "may not"},
		{req{name: "cross-site GET", method: "GET", origin: "https://evil.example"}, 403, "may not"},
		{req{name: "text/plain", method: "POST", ctype: "text/plain", body: json, token: tok}, 415, `Content-Type \"text/plain\" is not accepted`},
		{req{name: "form", method: "POST", ctype: "application/x-www-form-urlencoded", body: "text=hi", token: tok}, 415, "form"},
		{req{name: "multipart", method: "POST", ctype: "multipart/form-data; boundary=x", body: "--x--", token: tok}, 415, "application/json or image/png"},
		{req{name: "body without type", method: "POST", body: json, token: tok}, 415, "application/json"},
		{req{name: "chunked without type", method: "POST", body: json, token: tok, chunked: true}, 415, "application/json"},
		{req{name: "no token", method: "POST", ctype: "application/json", body: json}, 403, "missing or invalid page token: reload the page"},
		{req{name: "wrong token", method: "POST", ctype: "application/json", body: json, token: tok[:len(tok)-2] + "AA"}, 403, "page token"},
		{req{name: "another server's token", method: "POST", ctype: "application/json", body: json, token: other.IssueToken()}, 403, "page token"},
		{req{name: "garbage token", method: "POST", ctype: "application/json", body: json, token: "x.y"}, 403, "page token"},
	} {
		status, body := do(t, g, c.req)
		if status != c.status || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s, want %d with %q", c.name, status, body, c.status, c.want)
		}
	}
}

func TestBodyLimit(t *testing.T) {
	g, err := httpguard.New(httpguard.Config{Name: "MCP server", MaxBodyBytes: 10})
	if err != nil {
		t.Fatal(err)
	}
	status, body := do(t, g, req{method: "POST", ctype: "application/json", body: `{"a":"0123456789"}`})
	if status != 413 || !strings.Contains(body, "more than the 10") || !strings.Contains(body, "20 MiB") {
		t.Errorf("declared oversized body: %d %s", status, body)
	}
	// A chunked body declares no length: the limit holds while the handler reads.
	status, body = do(t, g, req{method: "POST", ctype: "application/json", body: `{"a":"0123456789"}`, chunked: true})
	if status != 413 || !strings.Contains(body, "too large") {
		t.Errorf("chunked oversized body: %d %s", status, body)
	}
	if httpguard.MaxBodyBytes < (images.DefaultMaxBytes+2)/3*4+64<<10 {
		t.Errorf("MaxBodyBytes %d cannot carry a %d-byte image in base64", httpguard.MaxBodyBytes, images.DefaultMaxBytes)
	}
}

func TestAPIKey(t *testing.T) {
	g, err := httpguard.New(httpguard.Config{Name: "MCP server", APIKey: "s3cret", KeyHint: "export VISOR_SERVE_KEY=…"})
	if err != nil {
		t.Fatal(err)
	}
	// With a key, a LAN name is fine: the key, not the Host, authenticates.
	for _, auth := range []string{"Bearer s3cret", "bearer s3cret", "Bearer  s3cret "} {
		if status, body := do(t, g, req{method: "POST", host: "10.1.2.3:8765", ctype: "application/json", body: "{}",
			auth: auth}); status != 200 {
			t.Errorf("with the key as %q: %d %s", auth, status, body)
		}
	}
	for _, auth := range []string{"", "Bearer", "Bearer ", "Bearer wrong", "Bearer S3CRET", "s3cret", "Basic czNjcmV0"} {
		status, body := do(t, g, req{method: "POST", ctype: "application/json", body: "{}", auth: auth})
		if status != 401 || !strings.Contains(body, "Authorization: Bearer KEY") {
			t.Errorf("auth %q: %d %s", auth, status, body)
		}
	}
	if err := g.CheckAddr("0.0.0.0:8765"); err != nil {
		t.Errorf("non-loopback with a key: %v", err)
	}
	open, _ := httpguard.New(httpguard.Config{Name: "web chat", KeyHint: "export VISOR_SERVE_KEY=KEY"})
	for _, addr := range []string{"0.0.0.0:8765", ":8765", "192.0.2.1:80", "[::]:1", "example.com:80"} {
		err := open.CheckAddr(addr)
		if !errors.Is(err, httpguard.ErrNoKey) || !strings.Contains(err.Error(), "VISOR_SERVE_KEY") ||
			!strings.Contains(err.Error(), "127.0.0.1:PORT") || !strings.Contains(err.Error(), addr) {
			t.Errorf("%s without a key: %v", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:8765", "[::1]:80", "127.0.0.2:1"} {
		if err := open.CheckAddr(addr); err != nil {
			t.Errorf("%s: %v", addr, err)
		}
	}
	if err := open.CheckAddr("8765"); err == nil || !strings.Contains(err.Error(), "HOST:PORT") {
		t.Errorf("bad address: %v", err)
	}
	if _, err := httpguard.New(httpguard.Config{AllowedOrigins: []string{"app.example"}}); err == nil {
		t.Error("an origin without a scheme was accepted")
	}
}

// TestListenOnAPortInUse: a port another program listens on is refused naming the address, the likely cause
// and the fix, not only the kernel's "bind: address already in use".
func TestListenOnAPortInUse(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	g, err := httpguard.New(httpguard.Config{Name: "web chat"})
	if err != nil {
		t.Fatal(err)
	}
	addr := busy.Addr().String()
	err = g.ListenAndServe(context.Background(), addr, http.NotFoundHandler(), nil)
	want := "web chat address " + addr + ": in use (another visor, or another program, listens there): stop it, or give another port (127.0.0.1:0 picks a free one)"
	if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("ListenAndServe on a busy port: %v\nwant %q", err, want)
	}
}
