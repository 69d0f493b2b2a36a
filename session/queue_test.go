package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/engine/swap"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testkit"
	"github.com/visorhq/visor/internal/testmodel"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/session"
	"github.com/visorhq/visor/tools"
)

// gate holds the next call of the slow tool until release is closed, and closes started when it begins: the
// running turn's tools execute for as long as the test wants, without a sleep. Calls while it is not armed
// return at once.
type gate struct {
	armed            atomic.Bool
	started, release chan struct{}
}

func (g *gate) arm() {
	g.started, g.release = make(chan struct{}), make(chan struct{})
	g.armed.Store(true)
}

func (g *gate) registry(t *testing.T) *tools.Registry {
	t.Helper()
	reg := tools.NewRegistry()
	if err := reg.Register(tools.New("slow_scan", "Scan slowly", func(ctx context.Context, in struct{}) (string, error) {
		if g.armed.CompareAndSwap(true, false) {
			close(g.started)
			select {
			case <-g.release:
			case <-ctx.Done():
			}
		}
		return "scan complete", nil
	})); err != nil {
		t.Fatal(err)
	}
	return reg
}

// logHook is a log handler that hands each record the service logs to the hook set last: a test acts at the
// moment the code names, synchronously, instead of polling for it.
type logHook struct {
	hook *atomic.Pointer[func(slog.Record)]
}

func (h logHook) Enabled(context.Context, slog.Level) bool { return true }
func (h logHook) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h logHook) WithGroup(string) slog.Handler            { return h }
func (h logHook) Handle(_ context.Context, r slog.Record) error {
	if f := h.hook.Load(); f != nil {
		(*f)(r)
	}
	return nil
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
	g := &gate{}
	st := openStore(t)
	// The image's tokens as the tiny projector makes them (16), not as a real model's patches would (1 for 24×24
	// px): the queued prefill's encode sample is per image token, and 1 token carrying a loaded machine's whole
	// 465-token prefill (2 s with two CPU hogs) is over the 1 s a token's encode may plausibly take, so the
	// sample was dropped.
	tiny, err := testmodel.ProjectorOptions{}.ImageTokens()
	if err != nil {
		t.Fatal(err)
	}
	var hook atomic.Pointer[func(slog.Record)]
	svc := testkit.Service(t, srv, st, func(c *session.Config) {
		c.Logger = slog.New(logHook{&hook})
		c.ImageTokens = func(int, int) int { return tiny }
		c.Agent.Tools = g.registry(t)
		c.Slots, c.ServerSlots = 1, 2
		c.Scheduler = &swap.Scheduler{Costs: swap.SeedCosts()}
		// Measured costs on: the queued prefill's encode is a sample of the engine's cost model too.
		c.EngineCosts = func(conductor.Ready) (session.EngineCosts, bool) {
			return session.EngineCosts{Key: swap.Key{Model: "tiny-hybrid"}, EncodesOnCPU: true, Defaults: swap.SeedCosts()}, true
		}
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
	g.arm()
	go func() {
		res, err := a.Turn(ctx, "scan", nil, nil)
		aDone <- done{res, err}
	}()
	<-g.started

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
	// The running turn evaluated no image, so the one encode sample is the queued prefill's.
	if c, ok := svc.Costs(); !ok || c.Samples["encode_cpu_per_token"] != 1 {
		t.Errorf("cost model after the queued prefill: known %v, %d CPU encode samples, want 1", ok, c.Samples["encode_cpu_per_token"])
	}
	if la := svc.Lookahead(); la.Running != 1 || la.Waiting != 1 {
		t.Fatalf("lookahead %+v: want one turn running and one waiting", la)
	}
	close(g.release)
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
	newText := testmodel.TokenCount(question + "<|im_end|>\n<|im_start|>assistant\n")
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

	// A client that goes away while its turn is queued takes its prefill with it: the turn returns at once,
	// nothing is evaluated ahead for it, and the running turn goes on. (A new session runs: the tiny model calls
	// no tool once a tool result is in its context.)
	a2, err := svc.Open(ctx, session.OpenOptions{Title: "running again"})
	if err != nil {
		t.Fatal(err)
	}
	defer a2.Close()
	g.arm()
	go func() {
		res, err := a2.Turn(ctx, "scan", nil, nil)
		aDone <- done{res, err}
	}()
	<-g.started
	c, err := svc.Open(ctx, session.OpenOptions{Title: "gone"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cctx, cancel := context.WithCancel(ctx)
	// The client leaves the moment the queue starts its prefill (logged before the prefill's goroutine runs):
	// canceled any later, a prefill that finished first on a busy machine would be carried out and its notice
	// reach the request, whichever way the code handled a client that left.
	prefilling := make(chan struct{})
	started := sync.OnceFunc(func() { cancel(); close(prefilling) })
	leave := func(r slog.Record) {
		if r.Message != "prefilling a queued turn" {
			return
		}
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "session" && a.Value.String() == c.ID() {
				started()
				return false
			}
			return true
		})
	}
	hook.Store(&leave)
	cDone := make(chan error, 1)
	go func() {
		_, err := c.Turn(cctx, question, []tools.Image{{MIME: "image/png", Data: testkit.PNG(t, 20, 28)}}, func(ev agent.Event) {
			if n, ok := ev.(agent.Notice); ok {
				t.Errorf("a notice reached the request after it ended: %s", n.Text)
			}
		})
		cDone <- err
	}()
	err = <-cDone
	select {
	case <-prefilling: // the queue started its prefill when it queued it: a running turn's tool is executing
	default:
		t.Fatalf("the third turn returned %v without its prefill starting", err)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("the canceled queued turn returned %v, want context.Canceled", err)
	}
	if la := svc.Lookahead(); la.Waiting != 0 || la.Running != 1 {
		t.Fatalf("after the cancel: %+v, want only the running turn", la)
	}
	close(g.release)
	if ra := <-aDone; ra.err != nil || ra.res.Final.Content != testmodel.Answer {
		t.Fatalf("the running turn after a queued one left: %+v %v", ra.res.Final, ra.err)
	}
	evs, err := st.EngineEvents(ctx, c.ID(), 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Kind == memory.EnginePrefill {
			t.Errorf("a prefill was carried out for a request that had gone: %s", e.Detail)
		}
	}
}

// TestNextPrefill: a queued turn is prefilled only in a slot no running turn holds nor the next admitted turn
// needs, and only while no running turn generates.
func TestNextPrefill(t *testing.T) {
	wanted := []session.AheadState{session.AheadNone, session.AheadWanted}
	for _, c := range []struct {
		name string
		s    session.Slots
		want int
		why  string
	}{
		{"spare slot, running turn in its tools", session.Slots{Server: 2, Admit: 1, Running: 1}, 1, "spare"},
		{"spare slot, running turn generating", session.Slots{Server: 2, Admit: 1, Running: 1, Generating: 1}, -1, "stall"},
		{"one slot: it holds the running turn", session.Slots{Server: 1, Admit: 1, Running: 1}, -1, "one more --parallel"},
		{"as many turns as slots", session.Slots{Server: 2, Admit: 2, Running: 2}, -1, "no spare"},
		{"the spare slot already prefilled", session.Slots{Server: 2, Admit: 1, Running: 1, Reserved: 1}, -1, "no spare"},
		{"a slot kept for the next admitted turn", session.Slots{Server: 3, Admit: 2, Running: 1}, 1, "spare"},
		{"the slot kept is the only free one", session.Slots{Server: 2, Admit: 2, Running: 1}, -1, "kept for requests"},
		{"gaps not seen (the gateway): at once", session.Slots{Server: 2, Admit: 1, Running: 1, Generating: 1, Unseen: true}, 1, "not seen"},
		{"gaps not seen, no spare slot", session.Slots{Server: 1, Admit: 1, Running: 1, Unseen: true}, -1, "no spare"},
	} {
		got, why := session.NextPrefill(c.s, wanted)
		if got != c.want || !strings.Contains(why, c.why) {
			t.Errorf("%s: %d %q, want %d and a reason with %q", c.name, got, why, c.want, c.why)
		}
	}
	if got, why := session.NextPrefill(session.Slots{Server: 4, Admit: 1}, []session.AheadState{session.AheadDone}); got != -1 {
		t.Errorf("nothing wanted: %d %q", got, why)
	}
}

// prefillEvent is the stored queued prefill of a session; the scheduler's decision to make it must be stored
// too, saying the request waited in the engine's queue.
func prefillEvent(t *testing.T, st *memory.Store, id string) engine.Timings {
	t.Helper()
	evs, err := st.EngineEvents(context.Background(), id, 100)
	if err != nil {
		t.Fatal(err)
	}
	decided := false
	for _, e := range evs {
		decided = decided || e.Kind == memory.EngineDecision && strings.Contains(string(e.Detail), "number 1 in the engine's queue")
	}
	if !decided {
		t.Errorf("no stored scheduler decision for the queued turn: %+v", evs)
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
