package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/visorhq/visor/frontend/gateway"
)

// noEngineGateway serves one model whose engine is never needed: every request here is refused before it.
func noEngineGateway(t *testing.T, cfg gateway.Config) string {
	t.Helper()
	cfg.Models = []gateway.Model{{Name: "m", Open: func() gateway.Engine { return nil }}}
	return serveGateway(t, cfg)
}

// serveGateway serves the gateway of cfg until the test ends and returns its address.
func serveGateway(t *testing.T, cfg gateway.Config) string {
	t.Helper()
	gw, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(func() {
		srv.Close()
		_ = gw.Close(context.Background())
	})
	return srv.URL
}

// openAIError decodes an error body and checks it has OpenAI's four fields, message and type set.
func openAIError(t *testing.T, what string, b []byte) (msg, typ string, code any) {
	t.Helper()
	var e struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(b, &e); err != nil || e.Error == nil {
		t.Errorf("%s: body %q is not {\"error\": {…}}", what, b)
		return "", "", nil
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := e.Error[k]; !ok {
			t.Errorf("%s: error %v lacks %q", what, e.Error, k)
		}
	}
	msg, _ = e.Error["message"].(string)
	typ, _ = e.Error["type"].(string)
	if msg == "" || typ == "" {
		t.Errorf("%s: error %v without message or type", what, e.Error)
	}
	return msg, typ, e.Error["code"]
}

// TestGatewayErrorsInOpenAIShape: every refusal of every route, the guard's included, is OpenAI's
// {"error": {"message", "type", "param", "code"}} with the right status.
func TestGatewayErrorsInOpenAIShape(t *testing.T) {
	open := noEngineGateway(t, gateway.Config{})
	keyed := noEngineGateway(t, gateway.Config{APIKey: "k3y"})
	for _, tc := range []struct {
		name, base, method, path, body string
		mod                            func(*http.Request)
		status                         int
		want                           string
	}{
		{"no key", keyed, "GET", "/v1/models", "", nil, 401, "API key"},
		{"wrong key", keyed, "POST", "/v1/chat/completions", `{}`, func(r *http.Request) { r.Header.Set("Authorization", "Bearer nope") }, 401, "API key"},
		{"foreign host", open, "POST", "/v1/chat/completions", `{}`, func(r *http.Request) { r.Host = "evil.example" }, 403, "evil.example"},
		{"foreign origin", open, "POST", "/v1/chat/completions", `{}`, func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") }, 403, "evil.example"},
		{"text/plain", open, "POST", "/v1/chat/completions", `{}`, func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }, 415, "text/plain"},
		{"unknown route", open, "GET", "/v1/nothing", "", nil, 404, "/v1/chat/completions"},
		{"unknown route, POST", open, "POST", "/api/chat", `{}`, nil, 404, "no route POST /api/chat"},
		{"wrong method", open, "GET", "/v1/chat/completions", "", nil, 405, "POST"},
		{"wrong method on models", open, "POST", "/v1/models", `{}`, nil, 405, "GET"},
		{"unknown model", open, "POST", "/v1/chat/completions", `{"model":"gpt-9","messages":[]}`, nil, 404, `"gpt-9"`},
		{"not JSON", open, "POST", "/v1/chat/completions", `{"model":`, nil, 400, "not a JSON object"},
		{"not JSON, responses", open, "POST", "/v1/responses", `["hi"]`, nil, 400, `not a JSON object: send {"model": NAME, "input": ...}`},
	} {
		req, _ := http.NewRequest(tc.method, tc.base+tc.path, strings.NewReader(tc.body))
		if tc.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if tc.mod != nil {
			tc.mod(req)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Errorf("%s: HTTP %d (%s) %s, want %d JSON", tc.name, resp.StatusCode, resp.Header.Get("Content-Type"), b, tc.status)
			continue
		}
		if msg, _, _ := openAIError(t, tc.name, b); !strings.Contains(msg, tc.want) {
			t.Errorf("%s: message %q does not say %q", tc.name, msg, tc.want)
		}
		if tc.status == 405 && resp.Header.Get("Allow") == "" {
			t.Errorf("%s: no Allow header", tc.name)
		}
	}
}

// TestGatewayLargeBodyIs413: a body over the 32 MiB bound, declared or chunked, is read to its end and answered
// 413 in OpenAI's shape; the client finishes sending and reads the answer instead of a reset connection. 80 MiB
// is past twice the bound, where the gateway used to stop reading and the client saw a reset.
func TestGatewayLargeBodyIs413(t *testing.T) {
	base := noEngineGateway(t, gateway.Config{})
	addr := strings.TrimPrefix(base, "http://")
	for _, tc := range []struct {
		mib     int
		chunked bool
	}{{33, false}, {33, true}, {80, false}, {80, true}} {
		body := bytes.Repeat([]byte("a"), tc.mib<<20)
		chunked := tc.chunked
		t.Run(fmt.Sprintf("%dMiB/chunked=%v", tc.mib, chunked), func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			sent := make(chan error, 1)
			go func() {
				head := "POST /v1/chat/completions HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\n"
				if chunked {
					_, err := io.WriteString(conn, head+"Transfer-Encoding: chunked\r\n\r\n")
					for off := 0; err == nil && off < len(body); off += 1 << 20 {
						_, err = fmt.Fprintf(conn, "%x\r\n%s\r\n", 1<<20, body[off:off+1<<20])
					}
					if err == nil {
						_, err = io.WriteString(conn, "0\r\n\r\n")
					}
					sent <- err
					return
				}
				_, err := io.WriteString(conn, head+fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)))
				if err == nil {
					_, err = conn.Write(body)
				}
				sent <- err
			}()
			if err := <-sent; err != nil {
				t.Fatalf("sending the body: %v (the gateway closed the connection before reading it)", err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("reading the answer: %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 413 {
				t.Fatalf("HTTP %d %s, want 413", resp.StatusCode, b)
			}
			if msg, _, code := openAIError(t, "413", b); !strings.Contains(msg, "MiB") || code != "request_too_large" {
				t.Errorf("413 says %q (code %v): want the limit in MiB and code request_too_large", msg, code)
			}
		})
	}
}

// TestGatewayCORS: with no allowed origin no CORS header is ever sent and a preflight is refused; an allowed
// origin's preflight is answered without the key (a browser sends none on it), its requests carry
// Access-Control-Allow-Origin for it alone, and other origins stay refused.
func TestGatewayCORS(t *testing.T) {
	const app = "http://app.example:3000"
	// answer sends req and returns the answer with its body read: the checks here read only its status and headers.
	answer := func(req *http.Request) *http.Response {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	preflight := func(base, origin string) *http.Response {
		req, _ := http.NewRequest("OPTIONS", base+"/v1/chat/completions", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization, content-type, x-stainless-os")
		return answer(req)
	}
	models := func(base, origin, key string) *http.Response {
		req, _ := http.NewRequest("GET", base+"/v1/models", nil)
		req.Header.Set("Origin", origin)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		return answer(req)
	}
	plain := noEngineGateway(t, gateway.Config{})
	if r := preflight(plain, app); r.StatusCode != 403 || r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("default gateway: preflight %d with ACAO %q, want 403 and none", r.StatusCode, r.Header.Get("Access-Control-Allow-Origin"))
	}
	if r := models(plain, app, ""); r.StatusCode != 403 || r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("default gateway: cross-origin GET %d with ACAO %q", r.StatusCode, r.Header.Get("Access-Control-Allow-Origin"))
	}
	keyed := noEngineGateway(t, gateway.Config{APIKey: "k3y", AllowedOrigins: []string{app}})
	r := preflight(keyed, app)
	if r.StatusCode != 204 || r.Header.Get("Access-Control-Allow-Origin") != app ||
		!strings.Contains(r.Header.Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(r.Header.Get("Access-Control-Allow-Headers"), "authorization") {
		t.Errorf("allowed origin's preflight: %d %v", r.StatusCode, r.Header)
	}
	if r := models(keyed, app, "k3y"); r.StatusCode != 200 || r.Header.Get("Access-Control-Allow-Origin") != app {
		t.Errorf("allowed origin's GET: %d ACAO %q", r.StatusCode, r.Header.Get("Access-Control-Allow-Origin"))
	}
	if r := models(keyed, app, ""); r.StatusCode != 401 || r.Header.Get("Access-Control-Allow-Origin") != app {
		t.Errorf("allowed origin without the key: %d ACAO %q (the page must be able to read the 401)", r.StatusCode, r.Header.Get("Access-Control-Allow-Origin"))
	}
	if r := preflight(keyed, "https://evil.example"); r.StatusCode != 403 || r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("other origin's preflight: %d ACAO %q", r.StatusCode, r.Header.Get("Access-Control-Allow-Origin"))
	}
	if r := models(keyed, "https://evil.example", "k3y"); r.StatusCode != 403 || r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("other origin's GET: %d ACAO %q", r.StatusCode, r.Header.Get("Access-Control-Allow-Origin"))
	}
}
