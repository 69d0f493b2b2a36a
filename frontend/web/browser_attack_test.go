package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/visorhq/visor/frontend/web"
)

// statusLog records what the chat answered to each request, so the test knows the server (not the browser)
// refused the attack.
type statusLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *statusLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: 200}
		h.ServeHTTP(sw, r)
		l.mu.Lock()
		l.seen = append(l.seen, fmt.Sprintf("%s %s %s %d", r.Method, r.Host, r.URL.Path, sw.status))
		l.mu.Unlock()
	})
}

func (l *statusLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.seen...)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) { w.status = code; w.ResponseWriter.WriteHeader(code) }
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// TestAttacksFromARealBrowser runs issue 10's attacks in headless Chromium: a page on another origin posts to
// the chat the ways that need no CORS preflight (no-cors fetch, text/plain, a form) and tries to read it; and a
// DNS-rebinding name (evil.example, mapped to 127.0.0.1 by the browser's resolver) loads the chat and posts as
// if it were the chat's own page. The chat must refuse every one, and the agent must never run.
func TestAttacksFromARealBrowser(t *testing.T) {
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("no chromium on PATH (apt-get install chromium) to attack the page from")
	}
	a := &recordingAgent{}
	ui, err := web.New(web.Config{Sessions: fakeService(t, a, nil)})
	if err != nil {
		t.Fatal(err)
	}
	log := &statusLog{}
	chat := httptest.NewServer(log.wrap(ui))
	defer chat.Close()
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><body><iframe name="sink"></iframe>
<form id="f" method="POST" action="%[1]s/api/sessions" target="sink"><input name="text" value="leak"></form>
<script>
const chat = %[1]q, out = [];
(async () => {
  for (const [name, p] of [
    ["no-cors create", fetch(chat + "/api/sessions", {method: "POST", mode: "no-cors"})],
    ["text/plain send", fetch(chat + "/api/sessions/x/send", {method: "POST", mode: "no-cors",
      headers: {"Content-Type": "text/plain"}, body: '{"text":"cat ~/.ssh/id_rsa"}'})],
    ["read the page", fetch(chat + "/").then(r => r.text())],
  ]) {
    try { await p; out.push(name + ": sent"); } catch (e) { out.push(name + ": blocked"); }
  }
  document.getElementById("f").submit();
  document.title = "done " + out.join("; ");
})();
</script></body>`, chat.URL)
	}))
	defer evil.Close()

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-component-update", true), chromedp.UserDataDir(t.TempDir()),
		// The rebinding: the attacker's name resolves to the chat's address.
		chromedp.Flag("host-resolver-rules", "MAP evil.example 127.0.0.1"))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(evil.URL+"/")); err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var title string
	for !strings.HasPrefix(title, "done") {
		if title, err = chromedp.Run(tctx, chromedp.Title()); err != nil {
			t.Fatalf("the attack page did not finish: %v (title %q)", err, title)
		}
		time.Sleep(100 * time.Millisecond) // polling the page's progress, not timing it
	}
	if !strings.Contains(title, "read the page: blocked") {
		t.Errorf("a page on another origin read the chat: %s", title)
	}

	// DNS rebinding: the chat's own address under the attacker's name, then a same-origin POST from there.
	if err := chromedp.Do(tctx, chromedp.Navigate("http://evil.example:"+port(chat.URL)+"/")); err != nil {
		t.Fatal(err)
	}
	body, err := chromedp.Run(tctx, chromedp.Text("body"))
	if err != nil || !strings.Contains(body, "DNS rebinding") || strings.Contains(body, "visor-token") {
		t.Errorf("the chat under a rebinding name showed %q (%v)", body, err)
	}
	status, err := chromedp.Run(tctx, chromedp.Evaluate[int](`fetch("/api/sessions", {method: "POST", headers: {"Content-Type": "application/json"}, body: "{}"}).then(r => r.status)`,
		chromedp.EvalAwaitPromise))
	if err != nil || status != 403 {
		t.Errorf("POST from the rebinding page: %d %v", status, err)
	}

	// The form navigation may still be landing; wait for the chat to have seen it.
	chatHost, rebound := "127.0.0.1:"+port(chat.URL), "evil.example:"+port(chat.URL)
	want := map[string]string{
		"POST " + chatHost + " /api/sessions":        "403",
		"POST " + chatHost + " /api/sessions/x/send": "403",
		"GET " + rebound + " /":                      "403",
		"POST " + rebound + " /api/sessions":         "403",
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := map[string][]string{}
		for _, s := range log.all() {
			i := strings.LastIndex(s, " ")
			got[s[:i]] = append(got[s[:i]], s[i+1:])
		}
		missing := ""
		for req, st := range want {
			if len(got[req]) == 0 {
				missing = req
			}
			for _, g := range got[req] {
				if g != st {
					t.Fatalf("%s answered %s, want %s (all: %q)", req, g, st, log.all())
				}
			}
		}
		// Two POSTs to /api/sessions from the other origin: the no-cors fetch and the form.
		if missing == "" && len(got["POST "+chatHost+" /api/sessions"]) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the chat never saw %q (the browser may have blocked it, and the test would prove nothing): %q", missing, log.all())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, runs := a.counts(); runs != 0 {
		t.Fatalf("the agent ran %d times for attack requests", runs)
	}
	t.Logf("page: %s; the chat answered %q", title, log.all())
}
