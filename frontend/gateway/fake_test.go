package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/frontend/gateway"
)

// fakeLlamaServer is a FAKE llama-server that replays answers the real one gives in failures the tiny model on a
// CPU cannot produce: the server's own tool-call parser failing ("Failed to parse input at pos N", llama.cpp's
// PEG parser on a model that drifted from its template), and a call written inside reasoning_content
// (llama.cpp#22684, a thinking model whose template never closed its thinking). Each reply is keyed by what
// the request asks; bodies are what llama-server b11669 sends, with the text changed.
type fakeLlamaServer struct {
	mu     sync.Mutex
	bodies []map[string]any
	reply  func(req map[string]any, w http.ResponseWriter, r *http.Request)
}

func (f *fakeLlamaServer) start(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req map[string]any
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &req)
		f.mu.Lock()
		f.bodies = append(f.bodies, req)
		f.mu.Unlock()
		f.reply(req, w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func fakeGateway(t *testing.T, upstream string) (*openai.Client, string) {
	base := serveGateway(t, gateway.Config{Models: []gateway.Model{{Name: "fake", ToolFormat: "qwen-xml", Open: func() gateway.Engine {
		return conductor.New(conductor.Config{Launch: func(context.Context, string) (conductor.Process, error) {
			return conductor.Remote{Addr: upstream}, nil
		}})
	}}}})
	cfg := openai.DefaultConfig("")
	cfg.BaseURL = base + "/v1"
	return openai.NewClientWithConfig(cfg), base
}

const qwenCall = "<tool_call>\n<function=read_file>\n<parameter=path>\nREADME.md\n</parameter>\n<parameter=limit>\n42\n</parameter>\n</function>\n</tool_call>"

var readFile = openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{Name: "read_file",
	Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"integer"}},"required":["path"]}`)}}

func message(content, reasoning string) string {
	m := map[string]any{"role": "assistant", "content": content}
	if reasoning != "" {
		m["reasoning_content"] = reasoning
	}
	b, _ := json.Marshal(map[string]any{"id": "chatcmpl-fake", "object": "chat.completion", "created": 1, "model": "fake",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": m}}})
	return string(b)
}

func TestRepairAfterServerParseFailure(t *testing.T) {
	fake := &fakeLlamaServer{reply: func(req map[string]any, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if req["tool_choice"] != "none" {
			w.WriteHeader(500)
			io.WriteString(w, `{"error":{"code":500,"message":"Failed to parse input at pos 31: <tool_call>\n<function=read_file>","type":"server_error"}}`)
			return
		}
		io.WriteString(w, message("Reading it.\n"+qwenCall, ""))
	}}
	c, base := fakeGateway(t, fake.start(t))
	req := openai.ChatCompletionRequest{Model: "fake", Tools: []openai.Tool{readFile}, Messages: []openai.ChatCompletionMessage{user("read the readme")}}
	r, err := c.CreateChatCompletion(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	m := r.Choices[0].Message
	// Typed by the schema: limit is an integer, path a string.
	if len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Name != "read_file" || m.ToolCalls[0].Function.Arguments != `{"path":"README.md","limit":42}` ||
		m.Content != "Reading it." || r.Choices[0].FinishReason != openai.FinishReasonToolCalls {
		t.Fatalf("message %+v finish %s", m, r.Choices[0].FinishReason)
	}
	if len(fake.bodies) != 2 || fake.bodies[1]["tool_choice"] != "none" {
		t.Fatalf("upstream saw %v: want the request, then the same with tool_choice none", fake.bodies)
	}
	// A streaming client gets the repaired answer as a stream.
	s, err := c.CreateChatCompletionStream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	content, calls, finish, _ := streamAll(t, s)
	if content != "Reading it." || len(calls) != 1 || calls[0].Function.Arguments != `{"path":"README.md","limit":42}` || finish != "tool_calls" {
		t.Fatalf("streamed %q %+v %q", content, calls, finish)
	}
	if n := metric(t, base, `visor_gateway_tool_call_repairs_total{model="fake",where="parse_error"}`); n != 2 {
		t.Fatalf("parse_error repairs counted %v, want 2", n)
	}
}

func TestRepairCallInReasoning(t *testing.T) {
	fake := &fakeLlamaServer{reply: func(req map[string]any, w http.ResponseWriter, r *http.Request) {
		if req["stream"] == true {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, d := range []string{`{"role":"assistant","content":null}`, `{"reasoning_content":"I should read it.\n"}`,
				`{"reasoning_content":` + jsonString(qwenCall[:40]) + `}`, `{"reasoning_content":` + jsonString(qwenCall[40:]) + `}`} {
				io.WriteString(w, `data: {"id":"chatcmpl-fake","object":"chat.completion.chunk","created":1,"model":"fake","choices":[{"index":0,"finish_reason":null,"delta":`+d+"}]}\n\n")
			}
			io.WriteString(w, `data: {"id":"chatcmpl-fake","object":"chat.completion.chunk","created":1,"model":"fake","choices":[{"index":0,"finish_reason":"stop","delta":{}}]}`+"\n\ndata: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, message("", "I should read it.\n"+qwenCall))
	}}
	c, base := fakeGateway(t, fake.start(t))
	req := openai.ChatCompletionRequest{Model: "fake", Tools: []openai.Tool{readFile}, Messages: []openai.ChatCompletionMessage{user("read the readme")}}
	r, err := c.CreateChatCompletion(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if m := r.Choices[0].Message; len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Arguments != `{"path":"README.md","limit":42}` || m.ReasoningContent == "" {
		t.Fatalf("message %+v", m)
	}
	s, err := c.CreateChatCompletionStream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	_, calls, finish, _ := streamAll(t, s)
	if len(calls) != 1 || calls[0].Function.Name != "read_file" || finish != "tool_calls" {
		t.Fatalf("streamed calls %+v finish %q", calls, finish)
	}
	if n := metric(t, base, `visor_gateway_tool_call_repairs_total{model="fake",where="reasoning"}`); n != 2 {
		t.Fatalf("reasoning repairs counted %v, want 2", n)
	}
	// Without tools offered nothing is touched: the server's bytes come back.
	req.Tools = nil
	r, err = c.CreateChatCompletion(context.Background(), req)
	if err != nil || len(r.Choices[0].Message.ToolCalls) != 0 || !strings.Contains(r.Choices[0].Message.ReasoningContent, "<tool_call>") {
		t.Fatalf("without tools: %+v %v", r.Choices[0].Message, err)
	}
}

// TestStreamHoldsBackOnlyWhatTheParserHolds streams prose, a call split mid-tag, and prose after it: the prose
// before the call arrives before the call is complete, and the call arrives as one tool_calls delta.
func TestStreamHoldsBackOnlyWhatTheParserHolds(t *testing.T) {
	release := make(chan struct{})
	fake := &fakeLlamaServer{reply: func(req map[string]any, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(content string) {
			io.WriteString(w, `data: {"id":"chatcmpl-fake","object":"chat.completion.chunk","created":1,"model":"fake","choices":[{"index":0,"finish_reason":null,"delta":{"content":`+jsonString(content)+"}}]}\n\n")
			w.(http.Flusher).Flush()
		}
		send("Let me look. ")
		send("<tool_")
		select { // the client must have "Let me look. " by now, and nothing of the tag
		case <-release:
		case <-r.Context().Done():
			return
		}
		send(qwenCall[len("<tool_"):])
		io.WriteString(w, `data: {"id":"chatcmpl-fake","object":"chat.completion.chunk","created":1,"model":"fake","choices":[{"index":0,"finish_reason":"stop","delta":{}}]}`+"\n\ndata: [DONE]\n\n")
	}}
	c, _ := fakeGateway(t, fake.start(t))
	s, err := c.CreateChatCompletionStream(context.Background(), openai.ChatCompletionRequest{Model: "fake",
		Tools: []openai.Tool{readFile}, Messages: []openai.ChatCompletionMessage{user("read the readme")}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var early strings.Builder
	for early.Len() < len("Let me look. ") {
		r, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Choices) > 0 {
			if len(r.Choices[0].Delta.ToolCalls) > 0 || strings.Contains(r.Choices[0].Delta.Content, "<") {
				t.Fatalf("got %+v before the call was complete", r.Choices[0].Delta)
			}
			early.WriteString(r.Choices[0].Delta.Content)
		}
	}
	close(release)
	content, calls, finish, _ := streamAll(t, s)
	if early.String() != "Let me look. " || strings.TrimSpace(content) != "" || len(calls) != 1 || finish != "tool_calls" {
		t.Fatalf("early %q, rest %q, calls %+v, finish %q", early.String(), content, calls, finish)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestStreamPassesEachChunkAtOnce: without tools the stream is passed through, and each chunk reaches the
// client before the server sends the next (the fake waits for the client to have it).
func TestStreamPassesEachChunkAtOnce(t *testing.T) {
	got := make(chan struct{})
	var raw []string
	for _, c := range []string{"Once", " upon", " a time"} {
		raw = append(raw, `data: {"id":"chatcmpl-fake","object":"chat.completion.chunk","created":1,"model":"fake","choices":[{"index":0,"finish_reason":null,"delta":{"content":`+jsonString(c)+"}}]}\n\n")
	}
	fake := &fakeLlamaServer{reply: func(req map[string]any, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, line := range raw {
			io.WriteString(w, line)
			w.(http.Flusher).Flush()
			select {
			case <-got:
			case <-r.Context().Done(): // the gateway gave up on the stream
				return
			}
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}}
	_, base := fakeGateway(t, fake.start(t))
	hc := &http.Client{Timeout: 10 * time.Second} // a chunk held back shows as this timeout, not a hang
	resp, err := hc.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"fake","stream":true,"messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 4096)
	for i := range 3 {
		var b strings.Builder
		for !strings.HasSuffix(b.String(), "\n\n") {
			n, err := resp.Body.Read(buf)
			if err != nil {
				t.Fatalf("chunk %d: %v after %q", i, err, b.String())
			}
			b.Write(buf[:n])
		}
		if b.String() != raw[i] {
			t.Fatalf("chunk %d: %q, want the server's bytes %q", i, b.String(), raw[i])
		}
		got <- struct{}{}
	}
}

// TestRemoteModel: a name that maps to another server gets the server's own model name and API key, and the
// client's body otherwise as it came; held-back text is released when the server sends its own tool_calls.
func TestRemoteModel(t *testing.T) {
	var auth []string
	var mu sync.Mutex
	fake := &fakeLlamaServer{reply: func(req map[string]any, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		for _, d := range []string{`{"role":"assistant","content":"Sure <"}`,
			`{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a\"}"}}]}`} {
			io.WriteString(w, `data: {"id":"chatcmpl-fake","object":"chat.completion.chunk","created":1,"model":"fake","choices":[{"index":0,"finish_reason":null,"delta":`+d+"}]}\n\n")
		}
		io.WriteString(w, `data: {"id":"chatcmpl-fake","object":"chat.completion.chunk","created":1,"model":"fake","choices":[{"index":0,"finish_reason":"tool_calls","delta":{}}]}`+"\n\ndata: [DONE]\n\n")
	}}
	up := fake.start(t)
	gw, err := gateway.New(gateway.Config{Models: []gateway.Model{{Name: "big", Remote: true, UpstreamModel: "Org/Big-235B",
		APIKey: "sekrit", Slots: 4, Open: func() gateway.Engine {
			return conductor.New(conductor.Config{APIKey: "sekrit", Launch: func(context.Context, string) (conductor.Process, error) {
				return conductor.Remote{Addr: up + "/v1"}, nil
			}})
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close(context.Background())
	srv := httptest.NewServer(gw.Handler())
	defer srv.Close()
	cfg := openai.DefaultConfig("")
	cfg.BaseURL = srv.URL + "/v1"
	s, err := openai.NewClientWithConfig(cfg).CreateChatCompletionStream(context.Background(), openai.ChatCompletionRequest{Model: "big",
		Tools: []openai.Tool{readFile}, Messages: []openai.ChatCompletionMessage{user("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	content, calls, finish, _ := streamAll(t, s)
	if content != "Sure <" || len(calls) != 1 || calls[0].ID != "c1" || finish != "tool_calls" {
		t.Fatalf("content %q calls %+v finish %q: want the server's call and the text held back as a possible tag", content, calls, finish)
	}
	if len(fake.bodies) != 1 || fake.bodies[0]["model"] != "Org/Big-235B" || fake.bodies[0]["tools"] == nil || auth[0] != "Bearer sekrit" {
		t.Fatalf("upstream got %v with Authorization %q", fake.bodies, auth)
	}
}
