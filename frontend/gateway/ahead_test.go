package gateway_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/frontend/gateway"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testkit"
	"github.com/visorhq/visor/internal/testmodel"
)

// heldEngine is a real llama-server whose next EnsureReady calls (as many as hold says) wait for release: a
// request held there keeps its slot in the gateway for as long as the test wants, as a long generation would,
// without a sleep. Each held call is announced on entered.
type heldEngine struct {
	r       conductor.Ready
	entered chan struct{}
	mu      sync.Mutex
	holds   int
	release chan struct{}
}

func (e *heldEngine) hold(n int) chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.holds, e.release = n, make(chan struct{})
	return e.release
}

func (e *heldEngine) EnsureReady(ctx context.Context) (conductor.Ready, error) {
	e.mu.Lock()
	held, release := e.holds > 0, e.release
	if held {
		e.holds--
	}
	e.mu.Unlock()
	if held {
		e.entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return conductor.Ready{}, ctx.Err()
		}
	}
	return e.r, nil
}

func (e *heldEngine) Recover(ctx context.Context) (conductor.Ready, error) { return e.EnsureReady(ctx) }
func (e *heldEngine) Close(context.Context) error                          { return nil }

// TestQueuedRequestIsPrefilled: a gateway model runs one request at a time on a two-slot llama-server (the
// tiny hybrid model). While a first request holds the model, a request with a corrupt image is refused at once
// with the reason, and a request with a good image waits: its image is evaluated in the spare slot meanwhile, and
// once served its prompt_n is only its new text. /metrics counts the prefill and its hidden time.
func TestQueuedRequestIsPrefilled(t *testing.T) {
	srv := enginetest.TinyHybrid(t, true, testmodel.ProjectorOptions{}, llamacpp.Config{Parallel: 2})
	eng := &heldEngine{r: testkit.ReadyOf(srv), entered: make(chan struct{}, 8)}
	gw, err := gateway.New(gateway.Config{Models: []gateway.Model{{Name: "tiny", Slots: 1, ServerSlots: 2, Vision: true,
		Open: func() gateway.Engine { return eng }}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(gw.Handler())
	defer hs.Close()
	defer gw.Close(context.Background())
	type answer struct {
		status int
		body   []byte
	}
	postCtx := func(ctx context.Context, body string) <-chan answer {
		out := make(chan answer, 1)
		go func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("POST: %v", err)
				}
				out <- answer{}
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			out <- answer{resp.StatusCode, b}
		}()
		return out
	}
	post := func(body string) <-chan answer { return postCtx(context.Background(), body) }
	withImage := func(text string, data []byte) string {
		b, _ := json.Marshal(map[string]any{"model": "tiny", "messages": []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64," + base64.StdEncoding.EncodeToString(data)}},
			map[string]any{"type": "text", "text": text},
		}}}})
		return string(b)
	}
	hello := `{"model":"tiny","messages":[{"role":"user","content":"hello"}]}`
	release := eng.hold(1)
	first := post(hello)
	<-eng.entered

	bad := <-post(withImage("look", []byte("not an image")))
	if bad.status != http.StatusBadRequest || !bytes.Contains(bad.body, []byte("messages[0].content[0]")) {
		t.Errorf("a corrupt image while the model is busy: %d %s, want 400 naming messages[0].content[0]", bad.status, bad.body)
	}
	question := "What is on screen?"
	second := post(withImage(question, testkit.PNG(t, 24, 24)))
	prefills := regexp.MustCompile(`visor_gateway_queued_prefills_total\{model="tiny"\} (\d+)`)
	hidden := regexp.MustCompile(`visor_gateway_encode_hidden_seconds_total\{model="tiny"\} ([0-9.e-]+)`)
	metrics := func() string {
		resp, err := http.Get(hs.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if m := prefills.FindStringSubmatch(metrics()); m != nil && m[1] == "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiting request's image was not prefilled:\n%s", metrics())
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	if a := <-first; a.status != http.StatusOK {
		t.Fatalf("first request: %d %s", a.status, a.body)
	}
	a := <-second
	if a.status != http.StatusOK {
		t.Fatalf("queued request: %d %s", a.status, a.body)
	}
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Timings struct {
			PromptN int `json:"prompt_n"`
			CacheN  int `json:"cache_n"`
		} `json:"timings"`
	}
	if err := json.Unmarshal(a.body, &out); err != nil || len(out.Choices) == 0 || out.Choices[0].Message.Content != testmodel.Answer {
		t.Fatalf("queued request's answer: %s (%v)", a.body, err)
	}
	newText := testmodel.TokenCount(question + "<|im_end|>\n<|im_start|>assistant\n")
	t.Logf("the queued request: prompt_n %d, cache_n %d, new text %d tokens", out.Timings.PromptN, out.Timings.CacheN, newText)
	if out.Timings.PromptN > newText+8 {
		t.Errorf("the queued request evaluated %d tokens, want ≤ %d (its %d new text tokens + 8): its image was not prefilled",
			out.Timings.PromptN, newText+8, newText)
	}
	if m := hidden.FindStringSubmatch(metrics()); m == nil {
		t.Error("no hidden encode time in /metrics")
	} else if v, _ := strconv.ParseFloat(m[1], 64); v <= 0 {
		t.Errorf("hidden encode time %v in /metrics, want > 0", m[1])
	}

	// A client that goes away while its request waits takes the prefill with it: held here before it reaches
	// the server, it is canceled, not carried out, and the request is counted as the client's (499).
	release = eng.hold(2)
	again := post(hello)
	<-eng.entered
	ctx, cancel := context.WithCancel(context.Background())
	gone := postCtx(ctx, withImage(question, testkit.PNG(t, 20, 28)))
	<-eng.entered // the waiting request's prefill asks for the engine
	cancel()
	<-gone
	left := regexp.MustCompile(`visor_gateway_requests_total\{model="tiny",code="499"\} 1`)
	for deadline := time.Now().Add(time.Minute); !left.MatchString(metrics()); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the request whose client left is not counted as 499:\n%s", metrics())
		}
	}
	close(release)
	if a := <-again; a.status != http.StatusOK {
		t.Fatalf("the request after the one that left: %d %s", a.status, a.body)
	}
	if m := prefills.FindStringSubmatch(metrics()); m == nil || m[1] != "1" {
		t.Errorf("queued prefills %v after a client left, want still 1: its prefill was carried out", m)
	}
}
