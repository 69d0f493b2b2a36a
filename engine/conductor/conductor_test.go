package conductor

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testmodel"
)

func TestMachineTransitions(t *testing.T) {
	kinds := func(effs []effect) []effectKind {
		var out []effectKind
		for _, e := range effs {
			if e.kind != effReport {
				out = append(out, e.kind)
			}
		}
		return out
	}
	m := &machine{budget: 1, window: time.Minute}
	now := time.Unix(1000, 0)
	steps := []struct {
		ev    event
		state State
		effs  []effectKind
	}{
		{event{kind: evEnsure}, StateStarting, []effectKind{effLaunch}},
		{event{kind: evEnsure}, StateStarting, nil}, // a second caller waits for the same launch
		{event{kind: evLaunched, gen: 1}, StateReady, []effectKind{effAnswer, effWarmup}},
		{event{kind: evEnsure}, StateReady, []effectKind{effAnswer}},
		{event{kind: evExited, gen: 0, at: now}, StateReady, nil}, // stale: an older process
		{event{kind: evExited, gen: 1, at: now}, StateRestarting, []effectKind{effLaunch}},
		{event{kind: evLaunched, gen: 2}, StateReady, []effectKind{effAnswer, effWarmup}},
		{event{kind: evSuspect}, StateReady, []effectKind{effProbe}},
		{event{kind: evExited, gen: 2, at: now.Add(time.Second)}, StateFailed, []effectKind{effFail}}, // budget spent
		{event{kind: evEnsure}, StateFailed, []effectKind{effFail}},
		{event{kind: evClose}, StateStopped, []effectKind{effFail}},
	}
	for i, s := range steps {
		got := kinds(m.step(s.ev))
		if m.state != s.state || len(got) != len(s.effs) {
			t.Fatalf("step %d (%v): state %s effects %v, want %s %v", i, s.ev.kind, m.state, got, s.state, s.effs)
		}
		for j := range got {
			if got[j] != s.effs[j] {
				t.Fatalf("step %d: effects %v, want %v", i, got, s.effs)
			}
		}
	}
	if !errors.Is(m.failure(), ErrClosed) {
		t.Fatalf("after close: %v", m.failure())
	}
}

func TestMachineCrashesOutsideTheWindowAreForgiven(t *testing.T) {
	m := &machine{budget: 1, window: time.Minute, state: StateReady, gen: 1}
	at := time.Unix(0, 0)
	for i := 0; i < 5; i++ {
		m.step(event{kind: evExited, gen: m.gen, at: at})
		if m.state != StateRestarting {
			t.Fatalf("crash %d an hour apart: state %s", i, m.state)
		}
		m.step(event{kind: evLaunched, gen: m.gen})
		at = at.Add(time.Hour)
	}
}

func TestMachineRelaunchAndFailedFirstStart(t *testing.T) {
	m := &machine{budget: 3, window: time.Minute}
	m.step(event{kind: evEnsure})
	effs := m.step(event{kind: evLaunched, gen: 1, err: errors.New("bad model")})
	if m.state != StateFailed || effs[0].kind != effFail || effs[0].err.Error() != "bad model" {
		t.Fatalf("first start failure: %s %+v", m.state, effs)
	}
	m = &machine{budget: 3, window: time.Minute, state: StateReady, gen: 1}
	m.step(event{kind: evRelaunch, mode: "text-only"})
	if m.state != StateRelaunching || m.mode != "text-only" {
		t.Fatalf("relaunch: %s %q", m.state, m.mode)
	}
	effs = m.step(event{kind: evExited, gen: 1})
	if effs[0].kind != effLaunch || effs[0].mode != "text-only" || m.gen != 2 {
		t.Fatalf("relaunch launches the new mode: %+v", effs)
	}
	if len(m.crashes) != 0 {
		t.Fatal("a relaunch counted as a crash")
	}
}

// fakeProc is named for what it is: a stand-in process whose exit the test chooses. The real server is tested
// below.
type fakeProc struct {
	url  string
	done chan struct{}
	once sync.Once
}

func (p *fakeProc) URL() string                { return p.url }
func (p *fakeProc) Done() <-chan struct{}      { return p.done }
func (p *fakeProc) Err() error                 { return errors.New("killed") }
func (p *fakeProc) Stop(context.Context) error { p.once.Do(func() { close(p.done) }); return nil }

func TestConcurrentCallersShareOneLaunch(t *testing.T) {
	var launches atomic.Int32
	var mu sync.Mutex
	var procs []*fakeProc
	c := New(Config{Launch: func(ctx context.Context, mode string) (Process, error) {
		launches.Add(1)
		time.Sleep(20 * time.Millisecond)
		p := &fakeProc{url: "http://127.0.0.1:1", done: make(chan struct{})}
		mu.Lock()
		procs = append(procs, p)
		mu.Unlock()
		return p, nil
	}})
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.EnsureReady(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := launches.Load(); n != 1 {
		t.Fatalf("%d launches for 20 concurrent callers", n)
	}
	// A crash restarts it once; the restart's callers wait for it.
	mu.Lock()
	_ = procs[0].Stop(ctx)
	mu.Unlock()
	r, err := c.EnsureReady(ctx)
	for err == nil && r.Generation == 1 {
		time.Sleep(5 * time.Millisecond)
		r, err = c.EnsureReady(ctx)
	}
	if err != nil || r.Generation != 2 || launches.Load() != 2 {
		t.Fatalf("after a crash: gen %d err %v launches %d", r.Generation, err, launches.Load())
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EnsureReady(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

func TestCloseWhileLaunchingStopsTheNewProcess(t *testing.T) {
	release := make(chan struct{})
	p := &fakeProc{url: "http://127.0.0.1:1", done: make(chan struct{})}
	c := New(Config{Launch: func(ctx context.Context, mode string) (Process, error) {
		<-release
		return p, nil
	}})
	go func() { _, _ = c.EnsureReady(context.Background()) }()
	for c.State() != StateStarting {
		time.Sleep(time.Millisecond)
	}
	closed := make(chan error)
	go func() { closed <- c.Close(context.Background()) }()
	for c.State() != StateStopping {
		time.Sleep(time.Millisecond)
	}
	close(release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the process launched during Close was left running")
	}
}

// TestRealServerCrashIsRecovered kills a real llama-server the conductor started; Recover brings it back at the
// same address and the next request is answered.
func TestRealServerCrashIsRecovered(t *testing.T) {
	bin := enginetest.Binary(t)
	dir := t.TempDir()
	model, _, err := testmodel.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	var servers []*llamacpp.Server
	var mu sync.Mutex
	var events []EventKind
	launch := func(ctx context.Context, mode string) (Process, error) {
		mu.Lock()
		defer mu.Unlock()
		if len(servers) > 0 {
			s, err := servers[len(servers)-1].Restart(ctx)
			if err != nil {
				return nil, err
			}
			servers = append(servers, s)
			return s, nil
		}
		s, err := llamacpp.Start(ctx, llamacpp.Config{Binary: bin, Model: model, Threads: 1,
			LogFile: filepath.Join(dir, "server.log")})
		if err != nil {
			return nil, err
		}
		servers = append(servers, s)
		return s, nil
	}
	c := New(Config{Launch: launch, OnEvent: func(e Event) { mu.Lock(); events = append(events, e.Kind); mu.Unlock() }})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	defer c.Close(context.Background())
	r1, err := c.EnsureReady(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	servers[0].Kill()
	mu.Unlock()
	r2, err := c.Recover(ctx)
	for err == nil && r2.Generation == r1.Generation {
		time.Sleep(10 * time.Millisecond)
		r2, err = c.Recover(ctx)
	}
	if err != nil {
		t.Fatalf("recover: %v", err)
	}
	if r2.URL != r1.URL {
		t.Fatalf("restarted at %s, not the same address %s", r2.URL, r1.URL)
	}
	var h struct {
		Status string `json:"status"`
	}
	if err := r2.Client.Get(ctx, "/health", &h); err != nil || h.Status != "ok" {
		t.Fatalf("health after restart: %v %q", err, h.Status)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []EventKind{EventStarting, EventReady, EventCrashed, EventRestarting, EventReady}
	if len(events) < len(want) {
		t.Fatalf("events %v, want %v", events, want)
	}
	for i := range want {
		if events[i] != want[i] {
			t.Fatalf("events %v, want %v", events, want)
		}
	}
}
