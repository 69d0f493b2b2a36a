package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/visorhq/visor/frontend/web"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/session"
)

// TestHostileRequestsGetClearAnswers sends what a clumsy or hostile client sends to each of the chat's handlers
// (malformed and trailing JSON, fields of the wrong type, oversized bodies, ids with path traversal, control
// characters or 10,000 bytes, full-text syntax and 100 KB searches) on a real SQLite store. Each gets its status
// and a short JSON error that names the problem; none reaches the agent as a turn, and the chat still answers.
func TestHostileRequestsGetClearAnswers(t *testing.T) {
	store, err := memory.Open(context.Background(), filepath.Join(t.TempDir(), "v.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	a := &streamingAgent{}
	a.set("fine")
	hs := serveChat(t, web.Config{Sessions: fakeService(t, a, func(c *session.Config) { c.Store = store })})
	defer hs.Close()
	tok := pageToken(t, hs.URL)
	base := hs.URL + "/api/sessions/" + newChat(t, hs.URL, tok)
	send := func(method, url, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Visor-Token", tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %.80s: %v", method, url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, body := send("POST", base+"/send", `{"text":"hello"}`); st != 200 || !strings.Contains(body, "event: done") {
		t.Fatalf("first turn: %d %s", st, body)
	}
	long := strings.Repeat("x", 10000)
	for _, c := range []struct {
		method, url, body string
		status            int
		want              string
	}{
		{"POST", base + "/send", `{"text":"hi"} and more`, 400, "more follows the JSON value"},
		{"POST", base + "/send", `{"text": 5}`, 400, `cannot unmarshal number into Go struct field .text of type string`},
		{"POST", base + "/send", `{"text": ["a"]}`, 400, "cannot unmarshal array"},
		{"POST", base + "/send", `[]`, 400, `send {"text": "your message"} as JSON, at most 1024 KiB (json: cannot unmarshal array`},
		{"POST", base + "/send", `{`, 400, "unexpected EOF"},
		{"POST", base + "/send", strings.Repeat("[", 100000), 400, "exceeded max depth"},
		{"POST", base + "/send", `{"text":"` + strings.Repeat("A", 2<<20) + `"}`, 413, "over 1024 KiB"},
		{"POST", base + "/send", `{"text":"  "}`, 400, `"text" is empty`},
		{"POST", hs.URL + "/api/sessions/..%2f..%2fetc%2fpasswd/send", `{"text":"hi"}`, 404, `no chat "../../etc/passwd"`},
		{"POST", hs.URL + "/api/sessions/" + long + "/send", `{"text":"hi"}`, 404, "no chat with a 10000-byte id"},
		{"POST", hs.URL + "/api/sessions/%00%1b%5b2J/send", `{"text":"hi"}`, 404, `no chat "\x00\x1b[2J": an id has no control characters`},
		{"POST", hs.URL + "/api/sessions/" + long + "/resume", "", 404, "no chat with a 10000-byte id"},
		{"POST", hs.URL + "/api/sessions/..%2f..%2fetc/resume", "", 404, `no session "../../etc"`},
		{"POST", hs.URL + "/api/sessions/' OR 1=1--/resume", "", 404, `no session "' OR 1=1--"`},
		{"POST", hs.URL + "/api/sessions/" + long + "/stop", "", 404, "10000-byte id"},
		{"POST", hs.URL + "/api/sessions/" + long + "/attach", "", 404, "10000-byte id"},
		{"PATCH", base, `{"title": 5}`, 400, "cannot unmarshal number"},
		{"PATCH", base, `{"title": "a"} {"title": "b"}`, 400, "more follows"},
		{"PATCH", base, `{"title": "` + strings.Repeat("t", 5000) + `"}`, 413, "over 4 KiB"},
		{"PATCH", base, `{"title": " "}`, 400, "at least one visible character"},
		{"PATCH", base, `{"title": "\u001b[2Jcleared"}`, 400, "the title has U+001B (a control or bidi-override character) at character 1"},
		{"PATCH", base, `{"title": "invoice\u202efdp.exe"}`, 400, "U+202E"},
		{"PATCH", hs.URL + "/api/sessions/" + long, `{"title": "x"}`, 404, "10000-byte id"},
		{"PATCH", hs.URL + "/api/sessions/..%2f..", `{"title": "x"}`, 404, `no such session`},
		{"DELETE", hs.URL + "/api/sessions/..%2f..%2fv.db", "", 404, "no such session"},
		{"DELETE", hs.URL + "/api/sessions/%00", "", 404, "control characters"},
		{"GET", hs.URL + "/api/sessions?q=" + strings.Repeat("a%20", 24000), "", 400, "the search is 48000 bytes: search for at most 512"},
		{"GET", hs.URL + "/api/sessions?q=%22%22%22", "", 400, `search "\"\"\"": search sessions: bad input`},
		{"GET", hs.URL + "/api/sessions?q=(((", "", 400, "type a word (letters or digits)"},
		{"GET", hs.URL + "/api/sessions?q=%00", "", 400, "type a word"},
		{"GET", hs.URL + "/api/sessions?q=NEAR(", "", 200, `"sessions":[]`},
		{"GET", hs.URL + "/api/sessions?q=hello*", "", 200, `"title":"hello"`},
	} {
		st, body := send(c.method, c.url, c.body)
		short := c.url
		if len(short) > 100 {
			short = short[:100] + "…"
		}
		text := body
		if st >= 400 {
			var e struct{ Error string }
			if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == "" || len(e.Error) > 400 {
				t.Errorf("%s %s: error body %.300q (%d bytes): want a short JSON error", c.method, short, body, len(body))
			}
			text = e.Error
		}
		if st != c.status || !strings.Contains(text, c.want) {
			t.Errorf("%s %s %.60q: %d %.300s, want %d with %q", c.method, short, c.body, st, text, c.status, c.want)
		}
	}
	// Nothing refused reached the agent as a turn: the chat holds the first turn only, and still answers.
	st, body := send("POST", base+"/resume", "")
	var got struct{ Messages []json.RawMessage }
	if err := json.Unmarshal([]byte(body), &got); st != 200 || err != nil || len(got.Messages) != 2 {
		t.Fatalf("resume: %d, %d messages (%v): %.300s", st, len(got.Messages), err, body)
	}
	if st, body := send("POST", base+"/send", `{"text":"still there?"}`); st != 200 || !bytes.Contains([]byte(body), []byte("event: done")) {
		t.Fatalf("after the hostile requests: %d %s", st, body)
	}
}
