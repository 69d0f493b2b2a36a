package session_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/enginetest"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/engine/testmodel"
	"github.com/visorhq/visor/internal/testkit"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/session"
	"github.com/visorhq/visor/tools"
)

// slowTool blocks its first call until release is closed and tells started when it begins: the running turn's
// tools execute for as long as the test wants, without a sleep.
func slowTool(t *testing.T, started chan<- struct{}, release <-chan struct{}) *tools.Registry {
	t.Helper()
	var calls atomic.Int32
	reg := tools.NewRegistry()
	if err := reg.Register(tools.New("slow_scan", "Scan slowly", func(ctx context.Context, in struct{}) (string, error) {
		if calls.Add(1) == 1 {
			close(started)
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return "scan complete", nil
	})); err != nil {
		t.Fatal(err)
	}
	return reg
}

// firstTimings are the timings of a turn's first request.
func firstTimings(t *testing.T, res session.Result) *engine.Timings {
	t.Helper()
	for _, m := range res.Added {
		if m.Role == "assistant" && m.Timings != nil {
			return m.Timings
		}
	}
	t.Fatalf("the turn has no timed answer: %+v", res.Added)
	return nil
}

// TestQueuedTurnIsPrefilledInTheToolGap: on one engine slot, a turn with an image arrives while another
// session's turn runs a slow tool. It waits in the engine queue; its image is evaluated in the gap, and when its
// turn comes its request evaluates only its own text (real llama-server, the tiny hybrid model, whose recurrent
// state is reused only when the request extends the prefilled sequence exactly). The running turn is not set
// back: its next request still finds its own conversation in the server's cache.
func TestQueuedTurnIsPrefilledInTheToolGap(t *testing.T) {
	srv := enginetest.TinyHybrid(t, true, testmodel.ProjectorOptions{}, llamacpp.Config{Parallel: 2})
	started, release := make(chan struct{}), make(chan struct{})
	st := openStore(t)
	svc := testkit.Service(t, srv, st, func(c *session.Config) {
		c.Agent.Tools = slowTool(t, started, release)
		c.Slots, c.ServerSlots = 1, 2
	})
	ctx := context.Background()
	a, err := svc.Open(ctx, session.OpenOptions{Title: "running"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	type done struct {
		res session.Result
		err error
	}
	aDone := make(chan done, 1)
	go func() {
		res, err := a.Turn(ctx, "scan", nil, nil)
		aDone <- done{res, err}
	}()
	<-started

	b, err := svc.Open(ctx, session.OpenOptions{Title: "queued"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	prefilled := make(chan string, 1)
	bDone := make(chan done, 1)
	question := "What is on screen?"
	img := tools.Image{MIME: "image/png", Data: testkit.PNG(t, 24, 24)}
	go func() {
		res, err := b.Turn(ctx, question, []tools.Image{img}, func(ev agent.Event) {
			if n, ok := ev.(agent.Notice); ok && strings.Contains(n.Text, "evaluated ahead") {
				prefilled <- n.Text
			}
		})
		bDone <- done{res, err}
	}()
	select {
	case n := <-prefilled:
		t.Log(n)
	case r := <-bDone:
		t.Fatalf("the queued turn ran before the running one's tool returned: %+v %v", r.res.Final, r.err)
	case <-time.After(time.Minute):
		t.Fatal("the queued turn's image was not prefilled while the running turn's tool ran")
	}
	if la := svc.Lookahead(); la.Running != 1 || la.Waiting != 1 {
		t.Fatalf("lookahead %+v: want one turn running and one waiting", la)
	}
	close(release)
	ra := <-aDone
	if ra.err != nil || ra.res.Final.Content != testmodel.Answer || ra.res.Final.Timings == nil {
		t.Fatalf("running turn: %+v %v", ra.res.Final, ra.err)
	}
	rb := <-bDone
	if rb.err != nil || rb.res.Final.Content != testmodel.Answer {
		t.Fatalf("queued turn: %+v %v", rb.res.Final, rb.err)
	}

	// The running turn's second request continues its own conversation: its first prompt is still in its slot,
	// all but the few tokens where the generation prompt meets the re-rendered call (a prefill in its slot would
	// have left only the shared system prompt).
	a1, at := firstTimings(t, ra.res), ra.res.Final.Timings
	t.Logf("running turn: first request prompt_n %d, cache_n %d; after its tool prompt_n %d, cache_n %d",
		a1.PromptN, a1.CacheN, at.PromptN, at.CacheN)
	if at.CacheN+prefillSlack < a1.PromptN+a1.CacheN {
		t.Errorf("the running turn's request after the gap reused %d cached tokens, want its first prompt's %d (less %d): the queued prefill cost it its cache",
			at.CacheN, a1.PromptN+a1.CacheN, prefillSlack)
	}
	defer func() {
		if t.Failed() {
			t.Log(strings.Join(srv.LogTail(3000), "\n"))
		}
	}()
	pre := prefillEvent(t, st, b.ID())
	bt := firstTimings(t, rb.res)
	newText := tinyTokens(question + "<|im_end|>\n<|im_start|>assistant\n")
	t.Logf("queued prefill evaluated %d (cached %d); the queued turn's request: prompt_n %d, cache_n %d, new text %d tokens",
		pre.PromptN, pre.CacheN, bt.PromptN, bt.CacheN, newText)
	if bt.PromptN > newText+prefillSlack {
		t.Errorf("the queued turn's request evaluated %d tokens, want ≤ %d (its %d new text tokens + %d): the prefill was not reused",
			bt.PromptN, newText+prefillSlack, newText, prefillSlack)
	}
	if bt.CacheN < pre.PromptN+pre.CacheN {
		t.Errorf("the queued turn's request reused %d cached tokens, want the %d its prefill left (image included)",
			bt.CacheN, pre.PromptN+pre.CacheN)
	}
}

// prefillEvent is the stored queued prefill of a session.
func prefillEvent(t *testing.T, st *memory.Store, id string) engine.Timings {
	t.Helper()
	evs, err := st.EngineEvents(context.Background(), id, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		var d struct {
			Source   string `json:"source"`
			PromptN  int    `json:"prompt_n"`
			CacheN   int    `json:"cache_n"`
			PromptMS float64
		}
		if e.Kind == memory.EnginePrefill && json.Unmarshal(e.Detail, &d) == nil && d.Source == "queued" {
			return engine.Timings{PromptN: d.PromptN, CacheN: d.CacheN}
		}
	}
	t.Fatalf("no queued prefill stored for %s: %+v", id, evs)
	return engine.Timings{}
}
