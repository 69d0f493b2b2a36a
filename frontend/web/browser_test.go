package web_test

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/visorhq/visor/engine/enginetest"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/frontend/web"
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
	ui, err := web.New(web.Config{Sessions: realService(t, srv, nil)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(ui)
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
		chromedp.WaitVisible(`#tray img[title^="image/png"]`),
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
