package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/agent/toolcall"
	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testmodel"
	"github.com/visorhq/visor/tools"
)

// wireProxy sits between the agent and llama-server and keeps every chat request body exactly as the server
// received it, so the tests can check what raw mode puts on the wire (no tools, the tool prompt, replayed calls)
// rather than what the agent meant to send.
type wireProxy struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (p *wireProxy) start(t *testing.T, target string) *engine.Client {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1 // pass each SSE chunk on at once, as the agent would see it without the proxy
	// llama-server closes idle keep-alive connections, and a proxied POST (its body is not replayable) written onto
	// one that just closed fails with EOF; visor's own client retries that case, the proxy cannot, so it dials anew.
	rp.Transport = &http.Transport{DisableKeepAlives: true}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/chat/completions") {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			p.mu.Lock()
			p.bodies = append(p.bodies, b)
			p.mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return engine.NewClient(srv.URL, "")
}

// wireRequest is the part of a chat request the raw-mode tests look at. Tools and ToolChoice stay raw so that
// any value at all, even an empty list, counts as sent.
type wireRequest struct {
	Tools      json.RawMessage `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
	Messages   []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
}

func (p *wireProxy) requests(t *testing.T) []wireRequest {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]wireRequest, len(p.bodies))
	for i, b := range p.bodies {
		if err := json.Unmarshal(b, &out[i]); err != nil {
			t.Fatalf("request %d: %v: %s", i+1, err, b)
		}
	}
	return out
}

// rawCallText is what the tiny model writes for a call without a grammar: Hermes JSON in <tool_call> tags.
const rawCallText = "<tool_call>\n" + testmodel.CallBody + "</tool_call>"

func rawAgent(t *testing.T, client *engine.Client, reg *tools.Registry, f toolcall.Format) *agent.Agent {
	t.Helper()
	a, err := agent.New(agent.Config{Model: client, Tools: reg, Mode: agent.Raw, Format: f, MaxSteps: 4})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestRawModeLoop runs the whole loop in raw mode against the real llama-server and the tiny model: visor
// renders the tool prompt, the server gets no tools (so no grammar and no server-side call parsing), the call is
// parsed from the generated text, the real list_dir runs in a temp workspace, its result goes back as a
// <tool_response> user turn, and the model answers. Hermes and Qwen XML prompts both work: the model writes
// Hermes JSON either way, and the Qwen XML parser takes a JSON body inside <tool_call> too.
func TestRawModeLoop(t *testing.T) {
	enginetest.Binary(t)
	srv := enginetest.Tiny(t, false, llamacpp.Config{Parallel: 1})
	for _, tc := range []struct {
		name     string
		format   toolcall.Format
		prompt   string // a line of the system prompt that only this format's template writes
		response string // how the result opens in the user turn
	}{
		{"hermes", toolcall.Hermes, "return a json object with function name and arguments",
			"<tool_response>\n{\"name\": \"list_dir\", \"content\": "},
		{"qwen-xml", toolcall.QwenXML, "<function=example_function_name>", "<tool_response>\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := workspace(t)
			sel, err := tools.Select(tools.Builtins(tools.BuiltinConfig{Root: ws}), "list_dir")
			if err != nil {
				t.Fatal(err)
			}
			reg := tools.NewRegistry()
			register(t, reg, sel[0])
			var proxy wireProxy
			var rec recorder
			f := rawAgent(t, proxy.start(t, srv.URL()), reg, tc.format).Run(context.Background(), nil,
				agent.Message{Role: "user", Content: "What is in the folder?"}, rec.emit)
			if f.Err != nil || f.Reason != "answer" || f.Steps != 2 || f.Final.Content != testmodel.Answer {
				t.Fatalf("finished %+v, want the answer %q in step 2", f, testmodel.Answer)
			}
			for _, ev := range rec.events {
				if pe, ok := ev.(agent.ParseError); ok {
					t.Errorf("parse error: %s", pe.Text)
				}
			}

			reqs := proxy.requests(t)
			if len(reqs) != 2 {
				t.Fatalf("%d chat requests reached the server, want 2", len(reqs))
			}
			for i, r := range reqs {
				if r.Tools != nil || r.ToolChoice != nil {
					t.Errorf("request %d sent tools %s tool_choice %s: raw mode must send neither", i+1, r.Tools,
						r.ToolChoice)
				}
				if len(r.Messages) == 0 || r.Messages[0].Role != "system" ||
					!strings.Contains(r.Messages[0].Content, `"name": "list_dir"`) ||
					!strings.Contains(r.Messages[0].Content, tc.prompt) {
					t.Errorf("request %d does not open with the %s tool prompt: %+v", i+1, tc.name, r.Messages)
				}
			}
			// Step 2 replays the call as the model wrote it (so the server's cache still matches) and returns
			// the result in a user turn.
			m := reqs[1].Messages
			if len(m) != 4 || m[2].Role != "assistant" || m[2].Content != rawCallText || m[3].Role != "user" ||
				!strings.HasPrefix(m[3].Content, tc.response) || !strings.Contains(m[3].Content, "alpha.txt") ||
				!strings.HasSuffix(m[3].Content, "</tool_response>") {
				t.Fatalf("step 2 messages %+v", m)
			}
			// The call came from the text: step 1's assistant turn holds it verbatim and no content beside it.
			var steps []agent.StepFinished
			for _, ev := range rec.events {
				if s, ok := ev.(agent.StepFinished); ok {
					steps = append(steps, s)
				}
			}
			if len(steps) != 2 || len(steps[0].Messages) != 3 {
				t.Fatalf("steps %+v", steps)
			}
			asst := steps[0].Messages[1]
			if asst.Raw != rawCallText || asst.Content != "" || len(asst.ToolCalls) != 1 {
				t.Fatalf("step 1 assistant raw %q content %q calls %+v, want the call text alone", asst.Raw,
					asst.Content, asst.ToolCalls)
			}
			calls := rec.calls()
			if len(calls) != 1 || calls[0].Call.Name != "list_dir" || calls[0].Result.IsError {
				t.Fatalf("calls %+v", calls)
			}
			var args map[string]any
			if err := json.Unmarshal(calls[0].Call.Arguments, &args); err != nil || len(args) != 1 || args["path"] != "." {
				t.Errorf("arguments %s, want {\"path\":\".\"}", calls[0].Call.Arguments)
			}
			for _, want := range []string{"alpha.txt", "beta.md", "sub/"} {
				if !strings.Contains(calls[0].Result.Text, want) {
					t.Errorf("list_dir result %q lacks %s", calls[0].Result.Text, want)
				}
			}

			first, second := steps[0].Messages[1].Timings, steps[1].Messages[0].Timings
			t.Logf("step 1 wrote %q; step 2 answered %q; step 1 prompt %+v, step 2 %+v", asst.Raw, f.Final.Content,
				first, second)
			// The replayed call text tokenizes back to the 4 tokens the model generated (<tool_call>, "\n", the
			// body token, </tool_call>), so the whole of step 1 stays in the cache.
			if first == nil || second == nil || second.CacheN < first.PromptN+first.CacheN+4 {
				t.Errorf("step 2 reused %+v of step 1's prompt %+v plus the call's 4 tokens: the replayed call "+
					"broke the cached prefix", second, first)
			}
		})
	}
}

type depthIn struct {
	Path          string `json:"path"`
	DepthRequired int    `json:"depth_required"`
}

// TestRawModeInvalidArguments: without a grammar nothing makes the model fill a field it does not know about.
// The registry must refuse to run the tool, the model must see why in the <tool_response>, and the loop must end.
func TestRawModeInvalidArguments(t *testing.T) {
	enginetest.Binary(t)
	srv := enginetest.Tiny(t, false, llamacpp.Config{Parallel: 1})
	var ran atomic.Int32
	reg := tools.NewRegistry()
	register(t, reg, tools.New("list_dir", "List a folder", func(ctx context.Context, in depthIn) (string, error) {
		ran.Add(1)
		return "ok", nil
	}))
	var proxy wireProxy
	var rec recorder
	f := rawAgent(t, proxy.start(t, srv.URL()), reg, toolcall.Hermes).Run(context.Background(), nil,
		agent.Message{Role: "user", Content: "list"}, rec.emit)
	if ran.Load() != 0 {
		t.Fatal("the tool ran without its required depth_required")
	}
	calls := rec.calls()
	if len(calls) != 1 || !calls[0].Result.IsError || !strings.Contains(calls[0].Result.Text, "depth_required") {
		t.Fatalf("calls %+v, want one refused call whose message names depth_required", calls)
	}
	reqs := proxy.requests(t)
	if len(reqs) != 2 {
		t.Fatalf("%d chat requests, want 2", len(reqs))
	}
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	if last.Role != "user" || !strings.Contains(last.Content, "<tool_response>") ||
		!strings.Contains(last.Content, "depth_required") {
		t.Fatalf("the model did not get the validation message: %+v", last)
	}
	// The model cannot fix the call; after an error result it answers, which ends the loop.
	if f.Err != nil || f.Reason != "answer" || f.Steps != 2 || f.Final.Content != testmodel.Answer {
		t.Fatalf("finished %+v, want the answer in step 2", f)
	}
}

type echoIn struct {
	Text string `json:"text"`
}

// TestRawModeTypesArgumentsFromSchema: Qwen's XML writes strings bare, so `<parameter=text>42</parameter>` for a
// string field is the string "42". The loop must type it from the tool's schema the way `visor toolcalls parse
// --tools` does; it once dropped the parser's guess record and the registry refused the call as "got number".
// A grammar makes the real server write exactly that call.
func TestRawModeTypesArgumentsFromSchema(t *testing.T) {
	srv := tiny(t)
	var got []string
	reg := tools.NewRegistry()
	register(t, reg, tools.New("echo", "Echo text", func(ctx context.Context, in echoIn) (string, error) {
		got = append(got, in.Text)
		return in.Text, nil
	}))
	call := "<tool_call>\n<function=echo>\n<parameter=text>\n42\n</parameter>\n</function>\n</tool_call>"
	a, err := agent.New(agent.Config{Model: engine.NewClient(srv.URL(), ""), Tools: reg, Mode: agent.Raw,
		Format: toolcall.QwenXML, MaxSteps: 1,
		Extra: engine.Extra{Fields: map[string]any{"grammar": "root ::= " + strconv.Quote(call)}}})
	if err != nil {
		t.Fatal(err)
	}
	var rec recorder
	a.Run(context.Background(), nil, agent.Message{Role: "user", Content: "echo 42"}, rec.emit)
	calls := rec.calls()
	if len(calls) != 1 || calls[0].Result.IsError || len(got) != 1 || got[0] != "42" {
		t.Fatalf("calls %+v, tool got %q: want one successful call with the string \"42\"", calls, got)
	}
}
