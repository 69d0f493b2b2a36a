package gateway

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/visorhq/visor/engine/conductor"
)

// recEngine is an Engine that records its life; the pool's decisions need no server to be checked.
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

func testPool(t *testing.T, maxQueue int, idle time.Duration, models ...Model) (*pool, func() []string) {
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
	p, err := newPool(models, maxQueue, time.Minute, idle, newMetrics())
	if err != nil {
		t.Fatal(err)
	}
	return p, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), log...)
	}
}

func eq(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestPoolSwapWaitsForRequestsAndKeepsGroups(t *testing.T) {
	p, log := testPool(t, 8, 0, Model{Name: "a", Group: "g"}, Model{Name: "b", Group: "g"}, Model{Name: "c"},
		Model{Name: "r", Remote: true})
	ctx := context.Background()
	_, relA, _, err := p.acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	_, relB, _, err := p.acquire(ctx, "b") // same group: loads beside a
	if err != nil {
		t.Fatal(err)
	}
	_, relR, _, err := p.acquire(ctx, "r") // remote: swaps nothing out
	if err != nil {
		t.Fatal(err)
	}
	relR()
	if got := log(); !eq(got, []string{"open a", "open b", "open r"}) {
		t.Fatalf("log %v", got)
	}
	got := make(chan error, 1)
	go func() {
		_, rel, _, err := p.acquire(ctx, "c")
		if err == nil {
			rel()
		}
		got <- err
	}()
	// c must wait for a's and b's requests; meanwhile a new request for a waits too (c is first in line).
	for {
		p.mu.Lock()
		w := p.entries["c"].wanted
		p.mu.Unlock()
		if w == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	actx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, _, _, err := p.acquire(actx, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a new request for a while c waits: %v, want it to wait", err)
	}
	relA()
	select {
	case err := <-got:
		t.Fatalf("c admitted (%v) while b still had a request", err)
	case <-time.After(20 * time.Millisecond):
	}
	relB()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if got := log(); !eq(got, []string{"open a", "open b", "open r", "close a", "close b", "open c"}) {
		t.Fatalf("log %v: want a and b closed before c opens, the remote kept", got)
	}
	if p.m.swaps.Load() != 1 {
		t.Fatalf("swaps %d", p.m.swaps.Load())
	}
}

func TestPoolQueueIsBounded(t *testing.T) {
	p, _ := testPool(t, 1, 0, Model{Name: "a", Slots: 1})
	ctx := context.Background()
	_, rel, _, err := p.acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		_, rel2, _, err := p.acquire(ctx, "a")
		if err == nil {
			rel2()
		}
		waited <- err
	}()
	for p.m.queueDepth.Load() != 1 {
		time.Sleep(time.Millisecond)
	}
	if _, _, _, err := p.acquire(ctx, "a"); !errors.Is(err, errBusy) {
		t.Fatalf("third request with one slot and a queue of one: %v, want errBusy", err)
	}
	rel()
	if err := <-waited; err != nil {
		t.Fatalf("the queued request: %v", err)
	}
	p.queueTimeout = 10 * time.Millisecond
	_, rel, _, _ = p.acquire(ctx, "a")
	defer rel()
	if _, _, _, err := p.acquire(ctx, "a"); !errors.Is(err, errQueueTimeout) {
		t.Fatalf("after the queue timeout: %v", err)
	}
}

func TestPoolUnloadsIdleModels(t *testing.T) {
	p, log := testPool(t, 8, time.Minute, Model{Name: "a"}, Model{Name: "r", Remote: true})
	now := time.Unix(1000, 0)
	p.now = func() time.Time { return now }
	ctx := context.Background()
	for _, n := range []string{"a", "r"} {
		_, rel, _, err := p.acquire(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		rel()
	}
	_, busy, _, _ := p.acquire(ctx, "a")
	now = now.Add(2 * time.Minute)
	if n := p.unloadIdle(); n != 0 {
		t.Fatalf("unloaded %d models while a request runs", n)
	}
	busy()
	if n := p.unloadIdle(); n != 0 {
		t.Fatalf("unloaded %d models right after a request", n)
	}
	now = now.Add(time.Minute)
	if n := p.unloadIdle(); n != 1 || !eq(log(), []string{"open a", "open r", "close a"}) {
		t.Fatalf("unloaded %d, log %v: want a closed and the remote kept", n, log())
	}
	if l := p.loaded(); l["a"] || !l["r"] {
		t.Fatalf("loaded %v", l)
	}
}
