package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/visorhq/visor/frontend/gateway"
)

// TestGatewayCORSInRealBrowser: in headless Chromium, a page of an allowed origin calls a keyed gateway on
// another port (the preflight its Authorization header causes included) and reads its answers and its errors;
// a page of any other origin cannot.
func TestGatewayCORSInRealBrowser(t *testing.T) {
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no chromium on PATH: scripts/test.sh installs it (apt-get install chromium)")
		}
		t.Skip("no chromium on PATH (apt-get install chromium)")
	}
	page := func() *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<!doctype html><title>app</title>"))
		}))
		t.Cleanup(s.Close)
		return s
	}
	allowed, other := page(), page()
	gw := noEngineGateway(t, gateway.Config{APIKey: "k3y", AllowedOrigins: []string{allowed.URL}})

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.UserDataDir(t.TempDir()))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()
	call := func(origin string) (models, errCode string) {
		t.Helper()
		// The first action on ctx starts the browser, and the context it runs under bounds the browser's life.
		if err := chromedp.Do(ctx, chromedp.Navigate(origin+"/")); err != nil {
			t.Fatal(err)
		}
		tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		models, err := chromedp.Run(tctx, chromedp.Evaluate[string](`fetch(`+"`"+gw+"/v1/models`"+`, {headers: {Authorization: "Bearer k3y"}})
			.then(r => r.json()).then(j => j.data[0].id).catch(e => "refused: " + e)`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		errCode, err = chromedp.Run(tctx, chromedp.Evaluate[string](`fetch(`+"`"+gw+"/v1/chat/completions`"+`, {method: "POST",
			headers: {Authorization: "Bearer k3y", "Content-Type": "application/json"}, body: JSON.stringify({model: "nope", messages: []})})
			.then(r => r.json()).then(j => j.error.code).catch(e => "refused: " + e)`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		return models, errCode
	}
	if m, code := call(allowed.URL); m != "m" || code != "model_not_found" {
		t.Errorf("allowed origin: models %q, error code %q; want m and model_not_found", m, code)
	}
	if m, code := call(other.URL); !strings.HasPrefix(m, "refused") || !strings.HasPrefix(code, "refused") {
		t.Errorf("other origin: models %q, error code %q; want both refused by the browser", m, code)
	}
}
