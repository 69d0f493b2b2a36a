package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/tools"
)

// replayServer is a FAKE model server, named so: it replays llama-server's streaming wire format for a turn with
// two tool calls, which the tiny generated model cannot produce (it makes one call per turn). Everything else
// about the loop is tested against the real llama-server.
type replayServer struct {
	mu       sync.Mutex
	requests []map[string]json.RawMessage
	// script, when set, replaces the two-call turn: one list of content deltas per request.
	script [][]string
}

func (r *replayServer) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	var m map[string]json.RawMessage
	_ = json.Unmarshal(body, &m)
	r.mu.Lock()
	r.requests = append(r.requests, m)
	n := len(r.requests)
	r.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta, finish string) {
		fmt.Fprintf(w, `data: {"choices":[{"finish_reason":%s,"index":0,"delta":%s}],"created":1,"id":"c","model":"m","object":"chat.completion.chunk"}`+"\n\n", finish, delta)
	}
	if r.script != nil {
		for _, c := range r.script[min(n, len(r.script))-1] {
			d, _ := json.Marshal(map[string]string{"content": c})
			chunk(string(d), "null")
		}
		chunk(`{}`, `"stop"`)
	} else if n == 1 {
		chunk(`{"role":"assistant","content":null}`, "null")
		// Two calls, arguments split across chunks as llama-server streams them.
		chunk(`{"tool_calls":[{"index":0,"id":"A","type":"function","function":{"name":"slow_a","arguments":"{\"pa"}}]}`, "null")
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"th\":\"x\"}"}}]}`, "null")
		chunk(`{"tool_calls":[{"index":1,"id":"B","type":"function","function":{"name":"slow_b","arguments":"{\"path\":\"y\"}"}}]}`, "null")
		chunk(`{}`, `"tool_calls"`)
	} else {
		chunk(`{"content":"Both done."}`, "null")
		chunk(`{}`, `"stop"`)
	}
	fmt.Fprint(w, `data: {"choices":[],"timings":{"prompt_n":5,"cache_n":0,"predicted_n":3,"predicted_per_second":100}}`+"\n\ndata: [DONE]\n\n")
}

func TestLoopRunsParallelCallsConcurrently(t *testing.T) {
	for _, parallel := range []bool{true, false} {
		t.Run(fmt.Sprintf("parallel=%v", parallel), func(t *testing.T) {
			fake := &replayServer{}
			hs := httptest.NewServer(fake)
			defer hs.Close()
			var mu sync.Mutex
			running, maxRunning := 0, 0
			var order []string
			// Run at once, slow_b finishes first by construction, not by its shorter sleep: it returns once
			// slow_a is running, and slow_a once the loop has reported slow_b finished. One after another, each
			// sleeps, long enough that a loop running them at once would be seen doing it.
			aRunning, bFinished := make(chan struct{}), make(chan struct{})
			mk := func(name string, d time.Duration, wait <-chan struct{}, started chan struct{}) tools.Tool {
				opts := []tools.Option{}
				if parallel {
					opts = append(opts, tools.Parallel())
				}
				return tools.New(name, "slow", func(ctx context.Context, in shotIn) (string, error) {
					mu.Lock()
					running++
					maxRunning = max(maxRunning, running)
					mu.Unlock()
					if !parallel {
						time.Sleep(d)
					} else {
						if started != nil {
							close(started)
						}
						select {
						case <-wait:
						case <-ctx.Done():
							return "", ctx.Err()
						case <-time.After(time.Minute): // only a loop that ran the calls one after another waits this long
							return "", fmt.Errorf("%s waited a minute for the other call: they did not run at once", name)
						}
					}
					mu.Lock()
					running--
					order = append(order, name)
					mu.Unlock()
					return name + " saw " + in.Path, nil
				}, opts...)
			}
			reg := tools.NewRegistry()
			register(t, reg, mk("slow_a", 250*time.Millisecond, bFinished, aRunning))
			register(t, reg, mk("slow_b", 50*time.Millisecond, aRunning, nil))
			a, err := agent.New(agent.Config{Model: engine.NewClient(hs.URL, ""), Tools: reg, ParallelToolCalls: true})
			if err != nil {
				t.Fatal(err)
			}
			var rec recorder
			// The consumer takes no lock of its own: the loop must hand it one event at a time even while the
			// calls run in parallel.
			var inside, overlaps atomic.Int32
			f := a.Run(context.Background(), nil, agent.Message{Role: "user", Content: "go"}, func(ev agent.Event) {
				if inside.Add(1) > 1 {
					overlaps.Add(1)
				}
				time.Sleep(time.Millisecond) // widen the window an unserialised emit would be caught in
				rec.emit(ev)
				if f, ok := ev.(agent.ToolCallFinished); ok && f.Call.Name == "slow_b" && parallel {
					close(bFinished)
				}
				inside.Add(-1)
			})
			if overlaps.Load() != 0 {
				t.Fatalf("%d events were emitted while another was being consumed", overlaps.Load())
			}
			if f.Err != nil || f.Final.Content != "Both done." {
				t.Fatalf("finished %+v", f)
			}
			want := 1
			if parallel {
				want = 2
			}
			if maxRunning != want {
				t.Fatalf("at most %d calls ran at once, want %d", maxRunning, want)
			}
			if !parallel && strings.Join(order, ",") != "slow_a,slow_b" {
				t.Fatalf("sequential order %v", order)
			}
			// The second request answers both calls, each with its id: in call order when they ran one after
			// another, in the order they finished when they ran in parallel.
			var msgs []struct {
				Role       string `json:"role"`
				ToolCallID string `json:"tool_call_id"`
				Content    string `json:"content"`
			}
			if err := json.Unmarshal(fake.requests[1]["messages"], &msgs); err != nil {
				t.Fatal(err)
			}
			first, second := 2, 3
			if parallel {
				first, second = 3, 2
			}
			if len(msgs) != 4 || msgs[first].ToolCallID != "A" || msgs[second].ToolCallID != "B" ||
				msgs[first].Content != "slow_a saw x" || msgs[second].Content != "slow_b saw y" {
				t.Fatalf("second request messages %+v", msgs)
			}
			if string(fake.requests[0]["parallel_tool_calls"]) != "true" {
				t.Fatalf("parallel_tool_calls not sent: %s", fake.requests[0]["parallel_tool_calls"])
			}
		})
	}
}

// BenchmarkLoopOverhead measures what the loop itself costs per step (request building, streaming decode, parsing,
// dispatch, events), against a baseline that sends the same two requests raw over HTTP, reads the replies and
// calls the tool function directly, in the same run. The model is the replay server, so neither side waits on
// generation.
func BenchmarkLoopOverhead(b *testing.B) {
	fake := &replayServer{}
	hs := httptest.NewServer(fake)
	defer hs.Close()
	fn := func(ctx context.Context, in shotIn) (string, error) { return "ok " + in.Path, nil }
	reg := tools.NewRegistry()
	for _, n := range []string{"slow_a", "slow_b"} {
		if err := reg.Register(tools.New(n, "t", fn, tools.Parallel())); err != nil {
			b.Fatal(err)
		}
	}
	a, _ := agent.New(agent.Config{Model: engine.NewClient(hs.URL, ""), Tools: reg})
	body := `{"messages":[{"role":"user","content":"go"}],"stream":true}`
	raw := func() {
		for i := 0; i < 2; i++ {
			resp, err := http.Post(hs.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		_, _ = fn(context.Background(), shotIn{Path: "x"})
		_, _ = fn(context.Background(), shotIn{Path: "y"})
	}
	var loopNS, rawNS time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		fake.mu.Lock()
		fake.requests = nil
		fake.mu.Unlock()
		t0 := time.Now()
		f := a.Run(context.Background(), nil, agent.Message{Role: "user", Content: "go"}, func(agent.Event) {})
		t1 := time.Now()
		if f.Err != nil {
			b.Fatal(f.Err)
		}
		fake.mu.Lock()
		fake.requests = nil
		fake.mu.Unlock()
		raw()
		loopNS += t1.Sub(t0)
		rawNS += time.Since(t1)
	}
	b.ReportMetric(float64((loopNS-rawNS).Microseconds())/float64(2*b.N), "overhead-us/step")
	b.ReportMetric(float64(loopNS.Microseconds())/float64(2*b.N), "loop-us/step")
	b.ReportMetric(float64(rawNS.Microseconds())/float64(2*b.N), "raw-us/step")
}

// TestLoopNeverRunsCallsWrittenWhileThinking: a template that opens <think> in the prompt makes the model's
// thinking arrive as content until a bare </think>; a call written before it is thinking and must not run.
func TestLoopNeverRunsCallsWrittenWhileThinking(t *testing.T) {
	fake := &replayServer{script: [][]string{{"I could call ", "<tool_call>\n{\"name\": \"slow_a\", \"arguments\": {\"path\": \"x\"}}\n</tool_call>",
		" but no.</think>", "The answer is 4."}}}
	hs := httptest.NewServer(fake)
	defer hs.Close()
	ran := false
	reg := tools.NewRegistry()
	register(t, reg, tools.New("slow_a", "t", func(ctx context.Context, in shotIn) (string, error) { ran = true; return "", nil }))
	a, _ := agent.New(agent.Config{Model: engine.NewClient(hs.URL, ""), Tools: reg})
	f := a.Run(context.Background(), nil, agent.Message{Role: "user", Content: "2+2?"}, nil)
	if ran || len(f.Final.ToolCalls) != 0 {
		t.Fatalf("a call written while thinking ran: %+v", f.Final)
	}
	if f.Reason != "answer" || f.Final.Content != "The answer is 4." || !strings.Contains(f.Final.Reasoning, "I could call") {
		t.Fatalf("content %q reasoning %q (%s)", f.Final.Content, f.Final.Reasoning, f.Reason)
	}
}

// TestLoopJoinsCallDeltasWithoutIndex: the index of a streamed tool-call delta is optional; a server that leaves
// it out starts each call with an id and continues its arguments without one.
func TestLoopJoinsCallDeltasWithoutIndex(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(delta, finish string) {
			fmt.Fprintf(w, `data: {"choices":[{"finish_reason":%s,"index":0,"delta":%s}]}`+"\n\n", finish, delta)
		}
		if strings.Contains(string(body), `"role":"tool"`) {
			chunk(`{"content":"done"}`, `"stop"`)
		} else {
			chunk(`{"tool_calls":[{"id":"A","type":"function","function":{"name":"slow_a","arguments":"{\"pa"}}]}`, "null")
			chunk(`{"tool_calls":[{"function":{"arguments":"th\":\"x\"}"}}]}`, "null")
			chunk(`{"tool_calls":[{"id":"B","type":"function","function":{"name":"slow_b","arguments":"{\"path\":\"y\"}"}}]}`, "null")
			chunk(`{}`, `"tool_calls"`)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer hs.Close()
	reg := tools.NewRegistry()
	var got []string
	for _, n := range []string{"slow_a", "slow_b"} {
		register(t, reg, tools.New(n, "t", func(ctx context.Context, in shotIn) (string, error) {
			got = append(got, n+":"+in.Path)
			return "ok", nil
		}))
	}
	a, _ := agent.New(agent.Config{Model: engine.NewClient(hs.URL, ""), Tools: reg})
	f := a.Run(context.Background(), nil, agent.Message{Role: "user", Content: "go"}, nil)
	if f.Err != nil || strings.Join(got, ",") != "slow_a:x,slow_b:y" {
		t.Fatalf("calls %v, finished %+v", got, f)
	}
}
