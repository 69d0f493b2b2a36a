package testkit

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// TwoCallProxy fronts a real llama-server and FAKES only the first chat turn's answer: it forwards that request
// (so the server caches its prompt as it would have) but answers with two parallel tool calls, which the tiny
// models cannot produce (they make one call per turn). Every other request, and every later turn, is the real
// server's.
type TwoCallProxy struct {
	real  *httputil.ReverseProxy
	base  string
	calls string // the scripted tool_calls delta
	mu    sync.Mutex
	turns int
}

// NewTwoCallProxy starts a TwoCallProxy in front of the server at base whose scripted first turn calls the
// tools slow and fast, in that order, in parallel.
func NewTwoCallProxy(t testing.TB, base string, fast, slow string) *httptest.Server {
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	calls := fmt.Sprintf(`{"tool_calls":[{"index":0,"id":"A","type":"function","function":{"name":%q,"arguments":"{}"}},`+
		`{"index":1,"id":"B","type":"function","function":{"name":%q,"arguments":"{}"}}]}`, slow, fast)
	p := &TwoCallProxy{real: httputil.NewSingleHostReverseProxy(u), base: base, calls: calls}
	hs := httptest.NewServer(p)
	t.Cleanup(hs.Close)
	return hs
}

// Reset makes the next chat turn the scripted one again.
func (p *TwoCallProxy) Reset() {
	p.mu.Lock()
	p.turns = 0
	p.mu.Unlock()
}

// ServeHTTP implements http.Handler.
func (p *TwoCallProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		p.real.ServeHTTP(w, r)
		return
	}
	p.mu.Lock()
	p.turns++
	turn := p.turns
	p.mu.Unlock()
	if turn > 1 {
		p.real.ServeHTTP(w, r)
		return
	}
	// The body goes on byte for byte but unstreamed and cut to one token: decoding and re-encoding it would
	// reorder the tools' schema keys, and so the rendered prompt.
	body, _ := io.ReadAll(r.Body)
	fwd := `{"max_tokens":1,` + strings.TrimPrefix(strings.Replace(string(body), `"stream":true`, `"stream":false`, 1), "{")
	resp, err := http.Post(p.base+"/v1/chat/completions", "application/json", strings.NewReader(fwd))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta, finish string) {
		fmt.Fprintf(w, `data: {"choices":[{"finish_reason":%s,"index":0,"delta":%s}],"created":1,"id":"c","model":"m","object":"chat.completion.chunk"}`+"\n\n", finish, delta)
	}
	chunk(`{"role":"assistant","content":null}`, "null")
	chunk(p.calls, "null")
	chunk(`{}`, `"tool_calls"`)
	fmt.Fprint(w, "data: [DONE]\n\n")
}
