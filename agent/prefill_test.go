package agent_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testkit"
	"github.com/visorhq/visor/internal/testmodel"
	"github.com/visorhq/visor/tools"
)

// genPrompt is what the tiny models' template adds after the last message.
const genPrompt = "<|im_end|>\n<|im_start|>assistant\n"

// prefillSlack is how many tokens beyond the new text a request after a prefill may evaluate (the acceptance
// line of issue 11).
const prefillSlack = 8

type tinyKind struct {
	name  string
	start func(t *testing.T) *llamacpp.Server
	tools bool // the model calls tools (the sliding-window one only answers)
}

var tinyKinds = []tinyKind{
	{"llama", func(t *testing.T) *llamacpp.Server { return enginetest.Tiny(t, true, llamacpp.Config{Parallel: 1}) }, true},
	{"hybrid", func(t *testing.T) *llamacpp.Server {
		return enginetest.TinyHybrid(t, true, testmodel.ProjectorOptions{}, llamacpp.Config{Parallel: 1})
	}, true},
	{"swa", func(t *testing.T) *llamacpp.Server {
		dir := t.TempDir()
		_, proj, err := testmodel.Files(dir)
		if err != nil {
			t.Fatal(err)
		}
		chat := filepath.Join(dir, "tiny-swa.gguf")
		if err := testmodel.WriteSWAFile(chat); err != nil {
			t.Fatal(err)
		}
		return enginetest.Start(t, llamacpp.Config{Model: chat, MMProj: proj, Ctx: 4096, Parallel: 1})
	}, false},
}

// TestPrefillLeavesOnlyTheNewText attaches an image to the second turn of a conversation ahead of the question,
// then asks: the question's request must evaluate only its own text and the generation prompt, the image and
// everything before it coming from llama-server's cache. On the hybrid model (Gated DeltaNet layers, whose state
// the server cannot cut back) that holds only if the prefill ended exactly where the request continues; the
// sliding-window model (gemma3, window 4) is there because its cache cannot be cut back beyond the window either
// (b11669 keeps window + ubatch cells, so a short cut still works).
func TestPrefillLeavesOnlyTheNewText(t *testing.T) {
	for _, kind := range tinyKinds {
		t.Run(kind.name, func(t *testing.T) {
			srv := kind.start(t)
			ctx := context.Background()
			a := newAgent(t, srv, tools.NewRegistry(), agent.Native)
			first := agent.Message{Role: "user", Content: "hello"}
			f := a.Run(ctx, nil, first, nil)
			if f.Err != nil || f.Final.Content != testmodel.Answer {
				t.Fatalf("first turn: %+v", f)
			}
			history := []agent.Message{first, f.Final}
			im := []tools.Image{{MIME: "image/png", Data: testPNG(t, 7)}}
			pre, err := a.Prefill(ctx, history, agent.Message{Role: "user", Images: im})
			if err != nil || pre == nil || pre.PromptN == 0 {
				t.Fatalf("prefill: %+v %v", pre, err)
			}
			question := "What is on screen?"
			f = a.Run(ctx, history, agent.Message{Role: "user", Content: question, Images: im}, nil)
			if f.Err != nil || f.Final.Timings == nil || f.Final.Content != testmodel.Answer {
				t.Fatalf("question: %+v", f)
			}
			checkPrefillReused(t, "the question's request", pre, f.Final.Timings, question+genPrompt)
		})
	}
}

// checkPrefillReused checks that what, the request after the prefill pre, evaluated only its new text (within
// prefillSlack) and reused every token the prefill left in the cache, its image included.
func checkPrefillReused(t *testing.T, what string, pre, tm *engine.Timings, newText string) {
	t.Helper()
	n := testmodel.TokenCount(newText)
	t.Logf("prefill evaluated %d (cached %d); %s: prompt_n %d, cache_n %d, new text %d tokens",
		pre.PromptN, pre.CacheN, what, tm.PromptN, tm.CacheN, n)
	if tm.PromptN > n+prefillSlack {
		t.Errorf("%s evaluated %d tokens, want ≤ %d (its %d new text tokens + %d): the prefilled prefix was not reused",
			what, tm.PromptN, n+prefillSlack, n, prefillSlack)
	}
	if prefilled := pre.PromptN + pre.CacheN; tm.CacheN < prefilled {
		t.Errorf("%s reused %d cached tokens, want the %d the prefill left (image included)", what, tm.CacheN, prefilled)
	}
}

// toolStep is one agent run whose first step calls a slow tool and a fast one that returns a screenshot.
type toolStep struct {
	a        *agent.Agent
	proxy    *testkit.TwoCallProxy
	release  chan struct{} // closed to let the slow tool return
	prefills []*engine.Timings
	mu       sync.Mutex
}

// newToolStep builds the agent. With lookahead the loop's OnImagesReady prefills the screenshot and then lets
// the slow tool finish (so the test does not depend on timing); without, the slow tool waits for slow.
func newToolStep(t testing.TB, srv *llamacpp.Server, shot func() []byte, lookahead bool, slow time.Duration) *toolStep {
	s := &toolStep{}
	hs := testkit.NewTwoCallProxy(t, srv.URL(), "screenshot", "slow_scan")
	s.proxy = hs.Config.Handler.(*testkit.TwoCallProxy)
	reg := tools.NewRegistry()
	for _, tl := range []tools.Tool{
		tools.New("screenshot", "Take a screenshot", func(ctx context.Context, in struct{}) (tools.Result, error) {
			return tools.Result{Text: "screenshot taken", Images: []tools.Image{{MIME: "image/png", Data: shot()}}}, nil
		}, tools.ReturnsImages(), tools.Parallel()),
		tools.New("slow_scan", "Scan slowly", func(ctx context.Context, in struct{}) (string, error) {
			var timeout <-chan time.Time
			if slow > 0 {
				timeout = time.After(slow)
			}
			select {
			case <-s.release:
			case <-timeout:
			case <-ctx.Done():
			}
			return "scan complete", nil
		}, tools.Parallel()),
	} {
		if err := reg.Register(tl); err != nil {
			t.Fatal(err)
		}
	}
	cfg := agent.Config{Model: engine.NewClient(hs.URL, ""), Tools: reg, ParallelToolCalls: true, MaxSteps: 4}
	if lookahead {
		cfg.OnImagesReady = func(ctx context.Context, history []agent.Message, _ int) {
			tm, err := s.a.PrefillHistory(ctx, history)
			if err != nil {
				t.Errorf("prefill tool image: %v", err)
			}
			s.mu.Lock()
			s.prefills = append(s.prefills, tm)
			s.mu.Unlock()
			if slow == 0 {
				close(s.release)
			}
		}
	}
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.a = a
	return s
}

func (s *toolStep) run(t testing.TB, ctx context.Context, emit func(agent.Event)) agent.Finished {
	s.proxy.Reset()
	s.release = make(chan struct{})
	s.prefills = nil
	f := s.a.Run(ctx, nil, agent.Message{Role: "user", Content: "go"}, emit)
	if f.Err != nil || f.Final.Content != testmodel.Answer || f.Final.Timings == nil || f.Steps != 2 {
		t.Fatalf("run: %+v", f)
	}
	return f
}

// TestPrefillToolImageWhileSlowerToolRuns: a step calls a slow tool and a screenshot tool in parallel; the
// screenshot returns first and the loop prefills it while the slow tool still runs. The next request must then
// evaluate only the slow tool's result and the generation prompt.
func TestPrefillToolImageWhileSlowerToolRuns(t *testing.T) {
	for _, kind := range tinyKinds {
		if !kind.tools {
			continue
		}
		t.Run(kind.name, func(t *testing.T) {
			srv := kind.start(t)
			s := newToolStep(t, srv, func() []byte { return testPNG(t, 33) }, true, 0)
			f := s.run(t, context.Background(), nil)
			if len(s.prefills) != 1 || s.prefills[0] == nil {
				t.Fatalf("prefills %+v, want one", s.prefills)
			}
			checkPrefillReused(t, "the request after the tools", s.prefills[0], f.Final.Timings,
				"<|im_start|>user\n<tool_response>\nscan complete\n</tool_response>"+genPrompt)
		})
	}
}

// TestPrefillFallsBackToChatWithoutApplyTemplate: against a server that is not llama-server (no
// /apply-template; a FAKE one here, since what matters is only which endpoints exist) Prefill still sends the
// images, as a chat request with n_predict 0, and the tool-image lookahead reports ErrNoPrefill.
func TestPrefillFallsBackToChatWithoutApplyTemplate(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	var nPredict string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		paths = append(paths, r.URL.Path)
		if r.URL.Path == "/v1/chat/completions" {
			if i := strings.Index(string(body), `"n_predict":`); i >= 0 {
				nPredict = string(body[i : i+13])
			}
		}
		mu.Unlock()
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"length"}],`+
			`"timings":{"prompt_n":40,"cache_n":0}}`)
	}))
	defer hs.Close()
	a, err := agent.New(agent.Config{Model: engine.NewClient(hs.URL, "")})
	if err != nil {
		t.Fatal(err)
	}
	im := []tools.Image{{MIME: "image/png", Data: testPNG(t, 3)}}
	tm, err := a.Prefill(context.Background(), nil, agent.Message{Role: "user", Images: im})
	if err != nil || tm == nil || tm.PromptN != 40 {
		t.Fatalf("prefill: %+v %v", tm, err)
	}
	mu.Lock()
	got, np := strings.Join(paths, " "), nPredict
	mu.Unlock()
	if got != "/apply-template /v1/chat/completions" || np != `"n_predict":0` {
		t.Errorf("requests %q (%s), want /apply-template then a chat request with n_predict 0", got, np)
	}
	if _, err := a.PrefillHistory(context.Background(), []agent.Message{{Role: "user", Images: im}}); !errors.Is(err, agent.ErrNoPrefill) {
		t.Errorf("PrefillHistory: %v, want ErrNoPrefill", err)
	}
}
