package residency

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/visorhq/visor/engine/conductor"
)

// recEngine is an Engine that records its life; the pool's loop needs no server to be checked.
type recEngine struct {
	name string
	log  *[]string
	mu   *sync.Mutex
}

func (e recEngine) EnsureReady(context.Context) (conductor.Ready, error) {
	return conductor.Ready{}, nil
}
func (e recEngine) Recover(context.Context) (conductor.Ready, error) { return conductor.Ready{}, nil }
func (e recEngine) Close(context.Context) error {
	e.mu.Lock()
	*e.log = append(*e.log, "close "+e.name)
	e.mu.Unlock()
	return nil
}

func testPool(t *testing.T, cfg Config, models ...Model) (*Pool, func() []string) {
	var log []string
	var mu sync.Mutex
	for i := range models {
		name := models[i].Name
		models[i].Open = func() Engine {
			mu.Lock()
			log = append(log, "open "+name)
			mu.Unlock()
			return recEngine{name: name, log: &log, mu: &mu}
		}
	}
	cfg.Models = models
	if cfg.QueueTimeout == 0 {
		cfg.QueueTimeout = time.Minute
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), log...)
	}
}

func acquire(ctx context.Context, p *Pool, name string) (func(), error) {
	l, err := p.Acquire(ctx, name, "", -1)
	if err != nil {
		return nil, err
	}
	return func() { l.Release("") }, nil
}

func TestPoolSwapWaitsForRequestsAndKeepsGroups(t *testing.T) {
	p, log := testPool(t, Config{MaxQueue: 8}, Model{Name: "a", Group: "g"}, Model{Name: "b", Group: "g"}, Model{Name: "c"},
		Model{Name: "r", Remote: true})
	ctx := context.Background()
	relA, err := acquire(ctx, p, "a")
	if err != nil {
		t.Fatal(err)
	}
	relB, err := acquire(ctx, p, "b") // same group: loads beside a
	if err != nil {
		t.Fatal(err)
	}
	relR, err := acquire(ctx, p, "r") // remote: swaps nothing out
	if err != nil {
		t.Fatal(err)
	}
	relR()
	if got := log(); !slices.Equal(got, []string{"open a", "open b", "open r"}) {
		t.Fatalf("log %v", got)
	}
	got := make(chan error, 1)
	go func() {
		rel, err := acquire(ctx, p, "c")
		if err == nil {
			rel()
		}
		got <- err
	}()
	// c must wait for a's and b's requests; meanwhile a new request for a waits too (c is first in line).
	for p.Stats().Waiting != 1 {
		time.Sleep(time.Millisecond)
	}
	actx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := acquire(actx, p, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a new request for a while c waits: %v, want it to wait", err)
	}
	relA()
	// The loop takes events in order: the release is decided before this query, so c is still waiting unless
	// the release admitted it (a 20 ms wait for c's answer could end before a slow loop had admitted it).
	if w := p.Stats().Waiting; w != 1 {
		t.Fatalf("%d requests waiting after a's release, want c still waiting while b has a request", w)
	}
	relB()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if got := log(); !slices.Equal(got, []string{"open a", "open b", "open r", "close a", "close b", "open c"}) {
		t.Fatalf("log %v: want a and b closed before c opens, the remote kept", got)
	}
	if s := p.Stats().Swaps; s != 1 {
		t.Fatalf("swaps %d", s)
	}
}

func TestPoolQueueIsBounded(t *testing.T) {
	p, _ := testPool(t, Config{MaxQueue: 1}, Model{Name: "a", Slots: 1})
	ctx := context.Background()
	rel, err := acquire(ctx, p, "a")
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		rel2, err := acquire(ctx, p, "a")
		if err == nil {
			rel2()
		}
		waited <- err
	}()
	for p.Stats().Waiting != 1 {
		time.Sleep(time.Millisecond)
	}
	if _, err := acquire(ctx, p, "a"); !errors.Is(err, ErrBusy) {
		t.Fatalf("third request with one slot and a queue of one: %v, want ErrBusy", err)
	}
	rel()
	if err := <-waited; err != nil {
		t.Fatalf("the queued request: %v", err)
	}
	p, _ = testPool(t, Config{MaxQueue: 1, QueueTimeout: 10 * time.Millisecond}, Model{Name: "a", Slots: 1})
	rel, _ = acquire(ctx, p, "a")
	defer rel()
	if _, err := acquire(ctx, p, "a"); !errors.Is(err, ErrQueueTimeout) {
		t.Fatalf("after the queue timeout: %v", err)
	}
}

func TestPoolUnloadsIdleModels(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	// The reaper's own ticker runs on the pool's clock too, which only the test moves.
	p, log := testPool(t, Config{MaxQueue: 8, IdleUnload: time.Minute, Now: clock}, Model{Name: "a"}, Model{Name: "r", Remote: true})
	ctx := context.Background()
	for _, n := range []string{"a", "r"} {
		rel, err := acquire(ctx, p, n)
		if err != nil {
			t.Fatal(err)
		}
		rel()
	}
	busy, _ := acquire(ctx, p, "a")
	advance(2 * time.Minute)
	if n := p.UnloadIdle(); n != 0 {
		t.Fatalf("unloaded %d models while a request runs", n)
	}
	busy()
	if n := p.UnloadIdle(); n != 0 {
		t.Fatalf("unloaded %d models right after a request", n)
	}
	advance(time.Minute)
	if n := p.UnloadIdle(); n != 1 || !slices.Equal(log(), []string{"open a", "open r", "close a"}) {
		t.Fatalf("unloaded %d, log %v: want a closed and the remote kept", n, log())
	}
	if l := p.Loaded(); l["a"] || !l["r"] {
		t.Fatalf("loaded %v", l)
	}
}

// The management unload answers once the model's request has ended and its engine is stopped; Close stops the
// rest (the remote model too) and refuses what comes after.
func TestPoolUnloadAndClose(t *testing.T) {
	p, log := testPool(t, Config{MaxQueue: 8}, Model{Name: "a"}, Model{Name: "r", Remote: true})
	ctx := context.Background()
	rel, err := acquire(ctx, p, "a")
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		ok  bool
		err error
	}
	done := make(chan result, 1)
	go func() {
		ok, err := p.Unload(ctx, "a")
		done <- result{ok, err}
	}()
	rel()
	if r := <-done; !r.ok || r.err != nil || !slices.Contains(log(), "close a") || p.State("a").State != "unloaded" {
		t.Fatalf("unload: %+v, log %v, state %v", r, log(), p.State("a"))
	}
	if ok, err := p.Unload(ctx, "a"); ok || err != nil {
		t.Fatalf("unloading a model not loaded: %v, %v; want false", ok, err)
	}
	relR, err := acquire(ctx, p, "r")
	if err != nil {
		t.Fatal(err)
	}
	relR()
	if err := p.Close(ctx); err != nil || !slices.Contains(log(), "close r") {
		t.Fatalf("close: %v, log %v", err, log())
	}
	if _, err := acquire(ctx, p, "a"); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
}
