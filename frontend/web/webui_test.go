package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/frontend/web"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testkit"
	"github.com/visorhq/visor/memory"
)

func screenshot(t *testing.T) []byte {
	return testkit.PNG(t, 16, 16)
}

// pageToken loads the chat page at base as a browser would and returns the token its script sends back.
func pageToken(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`<meta name="visor-token" content="([^"]+)">`).FindSubmatch(b)
	if resp.StatusCode != 200 || m == nil {
		t.Fatalf("page: %d, no token in %.200q", resp.StatusCode, b)
	}
	return string(m[1])
}

// post sends what the page's script sends: the body with its type and the page's token.
func post(t *testing.T, url, token, ctype string, body []byte) *http.Response {
	t.Helper()
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if token != "" {
		req.Header.Set("X-Visor-Token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestChatWithScreenshot drives the web chat's API against a real agent on the real llama-server with the tiny
// vision model: the attached screenshot is prefilled, so the answer's request finds its 16 tokens in the cache;
// the turn streams as events and is stored.
func TestChatWithScreenshot(t *testing.T) {
	srv := enginetest.Tiny(t, true, llamacpp.Config{Parallel: 1})
	store, err := memory.Open(context.Background(), filepath.Join(t.TempDir(), "v.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	hs := serveChat(t, web.Config{Sessions: realService(t, srv, store)})
	defer hs.Close()

	page, err := http.Get(hs.URL + "/")
	if err != nil || page.StatusCode != 200 {
		t.Fatalf("index: %v %v", page, err)
	}
	body, _ := io.ReadAll(page.Body)
	page.Body.Close()
	if !strings.Contains(string(body), "/api/sessions") || !strings.Contains(string(body), "paste") {
		t.Fatal("index page does not talk to the API")
	}

	tok := pageToken(t, hs.URL)
	id := newChat(t, hs.URL, tok)
	base := hs.URL + "/api/sessions/" + id

	shot := screenshot(t)
	resp := post(t, base+"/attach", tok, "image/png", shot)
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("attach: %d %s", resp.StatusCode, b)
	}
	resp.Body.Close()

	resp = post(t, base+"/send", tok, "application/json", []byte(`{"text":"What is on screen?"}`))
	evs, err := testkit.ReadEvents(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var answer strings.Builder
	var done map[string]any
	images := 0
	var explained []string
	for _, e := range evs {
		switch e.Kind {
		case "token":
			answer.WriteString(e.Data["text"].(string))
		case "images":
			images = int(e.Data["count"].(float64))
		case "explain":
			explained = append(explained, e.Data["text"].(string))
		case "done":
			done = e.Data
		}
	}
	if answer.String() != "Hi!" || images != 1 || done == nil || done["reason"] != "answer" {
		t.Fatalf("answer %q images %d done %v", answer.String(), images, done)
	}
	// The stream says why the screenshot was evaluated ahead, and that the question found it in the cache.
	if len(explained) != 2 || !strings.HasPrefix(explained[0], "prefill 1 image(s) ahead (attached ") ||
		!strings.Contains(explained[0], " — done in ") || !strings.Contains(explained[1], "found its 1 image(s) in the cache") {
		t.Fatalf("explain events %q", explained)
	}
	if cached, _ := done["cached_tokens"].(float64); cached < 16 {
		t.Fatalf("the prefilled screenshot was not in the cache: %v cached tokens", done["cached_tokens"])
	}
	msgs, err := store.Messages(context.Background(), id)
	if err != nil || len(msgs) != 2 || !bytes.Equal(msgs[0].Images[0].Data, shot) || msgs[1].Content != "Hi!" {
		t.Fatalf("stored %+v %v", msgs, err)
	}
}

func TestBadRequestsSayWhatToDo(t *testing.T) {
	ui, err := web.New(web.Config{Sessions: fakeService(t, &recordingAgent{}, nil)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(ui)
	defer hs.Close()
	tok := pageToken(t, hs.URL)
	base := hs.URL + "/api/sessions/" + newChat(t, hs.URL, tok)
	cases := []struct {
		url, ctype, body string
		status           int
		want             string
	}{
		{base + "/attach", "image/png", "just text", http.StatusUnsupportedMediaType, "PNG, JPEG, GIF or BMP"},
		{base + "/attach", "image/png", "", http.StatusBadRequest, "empty attachment"},
		{base + "/send", "application/json", `{"text": "  "}`, http.StatusBadRequest, "as JSON"},
		{hs.URL + "/api/sessions/nope/send", "application/json", `{"text":"hi"}`, http.StatusNotFound, "POST /api/sessions"},
	}
	for _, c := range cases {
		resp := post(t, c.url, tok, c.ctype, []byte(c.body))
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(b), c.want) {
			t.Errorf("%s %q: %d %s", c.url, c.body, resp.StatusCode, b)
		}
	}
	if err := ui.ListenAndServe(context.Background(), "0.0.0.0:0", nil); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("non-loopback address accepted: %v", err)
	}
}

// TestSessionsStopAndStatusWithoutAStore: without a store the list holds this server's chats; resume and stop
// answer for this page's chats; unknown ones get 404 with what to do.
func TestSessionsStopAndStatusWithoutAStore(t *testing.T) {
	hs := serveChat(t, web.Config{Sessions: fakeService(t, nil, nil), Status: func() web.Status { return web.Status{Model: "m.gguf", ContextSize: 512} }})
	defer hs.Close()
	tok := pageToken(t, hs.URL)
	do := func(method, url string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, url, nil)
		req.Header.Set("X-Visor-Token", tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&v)
		return resp.StatusCode, v
	}
	code, created := do("POST", hs.URL+"/api/sessions")
	id, _ := created["session"].(string)
	if code != 200 || id == "" {
		t.Fatalf("create: %d %v", code, created)
	}
	// A chat without a message is not listed: "New chat" pressed and left must not pile up in the sidebar.
	if code, v := do("GET", hs.URL+"/api/sessions"); code != 200 || len(v["sessions"].([]any)) != 0 {
		t.Errorf("list: %d %v, want no chat before its first message", code, v)
	}
	if code, v := do("POST", hs.URL+"/api/sessions/"+id+"/resume"); code != 200 || v["session"] != id {
		t.Errorf("resume: %d %v", code, v)
	}
	if code, v := do("POST", hs.URL+"/api/sessions/nope/resume"); code != 404 || !strings.Contains(v["error"].(string), "GET /api/sessions") {
		t.Errorf("resume an unknown session: %d %v", code, v)
	}
	if code, v := do("POST", hs.URL+"/api/sessions/"+id+"/stop"); code != 200 || v["stopped"] != false {
		t.Errorf("stop with no turn running: %d %v", code, v)
	}
	if code, v := do("GET", hs.URL+"/api/status"); code != 200 || v["model"] != "m.gguf" || v["context_size"] != float64(512) {
		t.Errorf("status: %d %v", code, v)
	}
}
