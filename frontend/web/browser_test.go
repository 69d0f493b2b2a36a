package web_test

import (
	"context"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/frontend/web"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testkit"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/session"
	"github.com/visorhq/visor/tools"
)

// TestPageInRealBrowser uses the page as a person would, in headless Chromium: pick a screenshot, type a
// question, press Enter, and read the streamed answer. It needs Debian's chromium, which scripts/test.sh installs;
// without it the test fails in CI (CI set) and skips, saying so, elsewhere.
func TestPageInRealBrowser(t *testing.T) {
	browser, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no chromium on PATH to drive the page: scripts/test.sh installs it (apt-get install chromium)")
		}
		t.Skip("no chromium on PATH (apt-get install chromium) to drive the page")
	}
	srv := enginetest.Tiny(t, true, llamacpp.Config{Parallel: 1})
	hs := serveChat(t, web.Config{Sessions: realService(t, srv, nil)})
	defer hs.Close()
	shot := filepath.Join(t.TempDir(), "shot.png")
	if err := os.WriteFile(shot, screenshot(t), 0o644); err != nil {
		t.Fatal(err)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-component-update", true), chromedp.UserDataDir(t.TempDir()))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	// The first action starts the browser, which lives as long as that call's context: no timeout on it.
	if err := chromedp.Do(ctx, chromedp.Navigate(hs.URL+"/")); err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	// Selectors name the element type: chromedp's default search also matches text, such as ".meta" in the
	// page's own style sheet.
	for i, step := range []chromedp.Action[chromedp.Void]{
		chromedp.SetUploadFiles("#file", []string{shot}),
		chromedp.WaitVisible(`#tray img[title^="shot.png 16×16 "]`), // the attach answer's name and size
		chromedp.SendKeys("#text", "What is on my screen?"),
		chromedp.Click("#send"),
		chromedp.WaitVisible("div.meta"),
	} {
		sctx, scancel := context.WithTimeout(tctx, 15*time.Second)
		err := chromedp.Do(sctx, step)
		scancel()
		if err != nil {
			body, _ := chromedp.Run(tctx, chromedp.Text("body"))
			t.Fatalf("step %d: %v\npage: %s", i, err, body)
		}
	}
	text := func(sel string) string {
		v, err := chromedp.Run(tctx, chromedp.Text(sel))
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		return v
	}
	user, answer, meta := text("div.msg.user"), text("div.msg.assistant"), text("div.meta")
	if !strings.Contains(user, "What is on my screen?") || !strings.HasPrefix(answer, "Hi!") || !strings.Contains(meta, "from cache") {
		t.Fatalf("page shows user %q, answer %q, meta %q", user, answer, meta)
	}
}

// browser starts headless Chromium for a test; Cleanup closes it.
func browser(t testing.TB) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no chromium on PATH to drive the page: scripts/test.sh installs it (apt-get install chromium)")
		}
		t.Skip("no chromium on PATH (apt-get install chromium) to drive the page")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-component-update", true), chromedp.UserDataDir(t.TempDir()))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelB(); cancelA() })
	return ctx
}

// steps runs actions in order, each within 20 s, failing with the page's text.
func steps(t testing.TB, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	for i, a := range actions {
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err := chromedp.Do(sctx, a)
		cancel()
		if err != nil {
			body, _ := chromedp.Run(ctx, chromedp.Text("body"))
			t.Fatalf("step %d: %v\npage: %s", i, err, body)
		}
	}
}

// TestPagePasteStopReloadResume uses the page as a person would, in headless Chromium against a real agent on
// the real llama-server and a real SQLite store: paste a screenshot, send, stop the answer with the stop button
// (the agent's one tool waits until canceled, and the tiny model calls a tool whenever it has one), reload and
// find the conversation, start a new chat and resume the first from the session list. The status line names the
// model and what is resident.
func TestPagePasteStopReloadResume(t *testing.T) {
	ctx := browser(t)
	srv := enginetest.Tiny(t, true, llamacpp.Config{Parallel: 1})
	reg := tools.NewRegistry()
	type noArgs struct{}
	if err := reg.Register(tools.New("wait", "Wait for the user's go-ahead", func(ctx context.Context, _ noArgs) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	})); err != nil {
		t.Fatal(err)
	}
	store, err := memory.Open(context.Background(), filepath.Join(t.TempDir(), "v.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	svc := testkit.Service(t, srv, store, func(c *session.Config) {
		c.AgentName, c.Model, c.Agent.Tools = "web", "tiny-bigram.gguf", reg
	})
	// As `visor web` does: the engine is up before the page asks for the status line, which the session service
	// reads from its /props.
	if err := svc.EnsureReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	hs := serveChat(t, web.Config{Sessions: svc})
	defer hs.Close()
	if err := chromedp.Do(ctx, chromedp.Navigate(hs.URL+"/")); err != nil { // starts the browser: no timeout
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	paste := `(() => {
		const b = Uint8Array.from(atob("` + base64.StdEncoding.EncodeToString(screenshot(t)) + `"), c => c.charCodeAt(0));
		const dt = new DataTransfer();
		dt.items.add(new File([b], "shot.png", {type: "image/png"}));
		return document.dispatchEvent(new ClipboardEvent("paste", {clipboardData: dt, bubbles: true, cancelable: true}));
	})()`
	if _, err := chromedp.Run(tctx, chromedp.Evaluate[bool](paste)); err != nil {
		t.Fatalf("paste: %v", err)
	}
	steps(t, tctx,
		chromedp.WaitVisible(`#tray img[title^="shot.png 16×16 "]`), // the attach answer's name and size
		chromedp.SendKeys("#text", "What is on my screen?"),
		chromedp.Click("#send"),
		chromedp.WaitVisible(`div.msg.tool`), // → wait {}: the turn is running
		chromedp.WaitVisible(`button#stop`),
		chromedp.Click("button#stop"),
		chromedp.WaitVisible(`div.meta`),
		chromedp.WaitNotVisible(`button#stop`),
	)
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(tctx, chromedp.Text(sel))
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		return v
	}
	if m := text("div.meta"); m != "(stopped)" {
		t.Fatalf("after stop the turn says %q", m)
	}
	if st := text("div#status"); !strings.Contains(st, "tiny-bigram.gguf") || !strings.Contains(st, "ctx ") || !strings.Contains(st, "resident: projector") {
		t.Fatalf("status line %q", st)
	}
	ss, err := store.ListSessions(context.Background(), memory.SessionFilter{})
	if err != nil || len(ss) != 1 || ss[0].Title != "What is on my screen?" {
		t.Fatalf("stored sessions %+v %v", ss, err)
	}
	id := ss[0].ID

	// Reload: the same conversation comes back from the store, screenshot included.
	steps(t, tctx,
		chromedp.Reload(),
		chromedp.WaitVisible(`div.msg.user img`),
		chromedp.WaitVisible(`nav div.item.current[data-session="`+id+`"]`),
	)
	if u := text("div.msg.user"); !strings.Contains(u, "What is on my screen?") {
		t.Fatalf("after reload the page shows %q", u)
	}
	if loc, err := chromedp.Run(tctx, chromedp.Location()); err != nil || !strings.HasSuffix(loc, "#s="+id) {
		t.Fatalf("address %q %v", loc, err)
	}

	// A new chat clears the page; picking the session from the list resumes it.
	steps(t, tctx,
		chromedp.Click("button#new"),
		chromedp.WaitNotPresent(`div.msg.user`),
		chromedp.Click(`nav div.item[data-session="`+id+`"] a`),
		chromedp.WaitVisible(`div.msg.user img`),
	)
	if u := text("div.msg.user"); !strings.Contains(u, "What is on my screen?") {
		t.Fatalf("resumed from the list, the page shows %q", u)
	}
}
