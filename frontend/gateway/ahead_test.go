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
	"sync/atomic"
	"testing"
	"time"

	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/enginetest"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/engine/testmodel"
	"github.com/visorhq/visor/frontend/gateway"
	"github.com/visorhq/visor/internal/testkit"
)

// heldEngine is a real llama-server whose first EnsureReady waits for release: the request that made it holds
// its slot in the gateway for as long as the test wants, as a long generation would, without a sleep.
type heldEngine struct {
	r                conductor.Ready
	first            atomic.Bool
	entered, release chan struct{}
}

func (e *heldEngine) EnsureReady(ctx context.Context) (conductor.Ready, error) {
	if e.first.CompareAndSwap(false, true) {
		close(e.entered)
		select {
		case <-e.release:
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
	eng := &heldEngine{r: testkit.ReadyOf(srv), entered: make(chan struct{}), release: make(chan struct{})}
	gw, err := gateway.New(gateway.Config{Models: []gateway.Model{{Name: "tiny", Slots: 1, ServerSlots: 2,
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
	post := func(body string) <-chan answer {
		out := make(chan answer, 1)
		go func() {
			resp, err := http.Post(hs.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Errorf("POST: %v", err)
				out <- answer{}
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			out <- answer{resp.StatusCode, b}
		}()
		return out
	}
	withImage := func(text string, data []byte) string {
		b, _ := json.Marshal(map[string]any{"model": "tiny", "messages": []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64," + base64.StdEncoding.EncodeToString(data)}},
			map[string]any{"type": "text", "text": text},
		}}}})
		return string(b)
	}
	first := post(`{"model":"tiny","messages":[{"role":"user","content":"hello"}]}`)
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
	close(eng.release)
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
	// The tiny models' tokens: one per byte, one per special token (<|im_end|>, <|im_start|>).
	newText := len(question+"\nassistant\n") + 2
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
}
