package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/frontend/gateway"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testmodel"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/session"
)

// tinyModel is a gateway model whose engine is a real llama-server on visor's tiny test model, started by a
// conductor on the first request, as `visor gateway` starts one by the plan.
func tinyModel(t testing.TB, dir, name, group string, vision bool, slots int, f *fixture) gateway.Model {
	t.Helper()
	dir = filepath.Join(dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	chat, proj, err := testmodel.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := llamacpp.Config{Binary: enginetest.Binary(t), Model: chat, Ctx: 4096, Parallel: slots, Threads: 2,
		LogFile: filepath.Join(dir, "llama-server.log")}
	if vision {
		cfg.MMProj = proj
	}
	return gateway.Model{Name: name, Group: group, Slots: slots, Vision: vision, Ctx: 4096, Open: func() gateway.Engine {
		return conductor.New(conductor.Config{Launch: func(ctx context.Context, _ string) (conductor.Process, error) {
			f.mu.Lock()
			f.starts[name]++
			f.mu.Unlock()
			return llamacpp.Start(ctx, cfg)
		}})
	}}
}

type fixture struct {
	url    string
	gw     *gateway.Gateway
	store  *memory.Store
	mu     sync.Mutex
	starts map[string]int
	close  func()
}

var shared struct {
	once sync.Once
	f    *fixture
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.f != nil {
		shared.f.close()
	}
	os.Exit(code)
}

// sharedFixture is one gateway for the package's tests (servers start once), serving three names: "tiny" (with
// the vision projector, 2 slots) and "tiny-text" (tools rendered as text, so calls come back in content) share
// a group and stay loaded together; "second" is another server that swaps them out.
func sharedFixture(t *testing.T) *fixture {
	t.Helper()
	enginetest.Binary(t) // skips (or fails in CI) before anything starts
	shared.once.Do(func() {
		dir, err := os.MkdirTemp("", "visor-gateway-test")
		if err != nil {
			t.Fatal(err)
		}
		f := &fixture{starts: map[string]int{}}
		text := tinyModel(t, dir, "tiny-text", "a", false, 1, f)
		text.ToolsAsText = true
		text.ToolFormat = "hermes"
		store, err := memory.Open(context.Background(), filepath.Join(dir, "visor.db"))
		if err != nil {
			t.Fatal(err)
		}
		rec := session.NewClientRecorder(store, nil)
		tiny := tinyModel(t, dir, "tiny", "a", true, 2, f)
		tiny.Aliases = []string{"gpt-4o-mini"}
		gw, err := gateway.New(gateway.Config{Models: []gateway.Model{
			tiny, text, tinyModel(t, dir, "second", "", false, 1, f),
		}, MaxQueue: 16, QueueTimeout: time.Minute, Recorder: rec})
		if err != nil {
			t.Fatal(err)
		}
		f.store = store
		srv := httptest.NewServer(gw.Handler())
		f.url, f.gw = srv.URL, gw
		f.close = func() {
			srv.Close()
			_ = gw.Close(context.Background())
			rec.Close()
			_ = store.Close()
			_ = os.RemoveAll(dir)
		}
		shared.f = f
	})
	if shared.f == nil {
		t.Fatal("the shared gateway could not be set up (see the first test's failure)")
	}
	return shared.f
}

func (f *fixture) client() *openai.Client {
	cfg := openai.DefaultConfig("")
	cfg.BaseURL = f.url + "/v1"
	return openai.NewClientWithConfig(cfg)
}

func (f *fixture) started(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.starts[name]
}

var listDir = openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{Name: "list_dir",
	Description: "List a folder", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)}}

func user(s string) openai.ChatCompletionMessage {
	return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: s}
}

func pngBytes(t *testing.T) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 16, 16))
	for i := range 16 {
		img.Set(i, i, color.RGBA{R: 255, A: 255})
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// streamAll reads a go-openai stream to its end and returns the content, the calls (merged by index) and the
// finish reason.
func streamAll(t *testing.T, s *openai.ChatCompletionStream) (content string, calls []openai.ToolCall, finish string, ids map[string]bool) {
	t.Helper()
	defer s.Close()
	ids = map[string]bool{}
	for {
		r, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		ids[r.ID] = true
		for _, c := range r.Choices {
			content += c.Delta.Content
			for _, tc := range c.Delta.ToolCalls {
				i := 0
				if tc.Index != nil {
					i = *tc.Index
				}
				for len(calls) <= i {
					calls = append(calls, openai.ToolCall{})
				}
				if tc.ID != "" {
					calls[i].ID = tc.ID
				}
				calls[i].Function.Name += tc.Function.Name
				calls[i].Function.Arguments += tc.Function.Arguments
			}
			if c.FinishReason != "" {
				finish = string(c.FinishReason)
			}
		}
	}
}

func TestGatewayWithGoOpenAI(t *testing.T) {
	f := sharedFixture(t)
	c := f.client()
	ctx := context.Background()

	t.Run("chat", func(t *testing.T) {
		r, err := c.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "tiny", Messages: []openai.ChatCompletionMessage{user("hello")}})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Choices[0].Message.Content; got != "Hi!" || r.Choices[0].FinishReason != openai.FinishReasonStop {
			t.Fatalf("answer %q (%s), want Hi! (stop)", got, r.Choices[0].FinishReason)
		}
	})
	t.Run("stream", func(t *testing.T) {
		s, err := c.CreateChatCompletionStream(ctx, openai.ChatCompletionRequest{Model: "tiny", Messages: []openai.ChatCompletionMessage{user("hello")}})
		if err != nil {
			t.Fatal(err)
		}
		content, calls, finish, ids := streamAll(t, s)
		if content != "Hi!" || len(calls) != 0 || finish != "stop" || len(ids) != 1 {
			t.Fatalf("streamed %q, calls %v, finish %q, ids %v", content, calls, finish, ids)
		}
	})
	t.Run("tool round trip", func(t *testing.T) {
		req := openai.ChatCompletionRequest{Model: "tiny", Tools: []openai.Tool{listDir}, Messages: []openai.ChatCompletionMessage{user("what is here?")}}
		r, err := c.CreateChatCompletion(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		m := r.Choices[0].Message
		if len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Name != "list_dir" || m.ToolCalls[0].Function.Arguments != `{"path":"."}` {
			t.Fatalf("calls %+v, want list_dir {\"path\":\".\"}", m.ToolCalls)
		}
		req.Messages = append(req.Messages, m, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool,
			ToolCallID: m.ToolCalls[0].ID, Content: `["a.txt"]`})
		r, err = c.CreateChatCompletion(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Choices[0].Message.Content; got != "Hi!" || len(r.Choices[0].Message.ToolCalls) != 0 {
			t.Fatalf("after the result: %q %+v, want Hi!", got, r.Choices[0].Message.ToolCalls)
		}
	})
	t.Run("image", func(t *testing.T) {
		msg := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, MultiContent: []openai.ChatMessagePart{
			{Type: openai.ChatMessagePartTypeText, Text: "what is this?"}, engine.ImagePart("image/png", pngBytes(t))}}
		r, err := c.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "tiny", Messages: []openai.ChatCompletionMessage{msg}})
		if err != nil {
			t.Fatal(err)
		}
		// The projector adds 16 image tokens to the prompt; the answer is the model's usual one.
		plain, err := c.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "tiny", Messages: []openai.ChatCompletionMessage{user("what is this?")}})
		if err != nil {
			t.Fatal(err)
		}
		if r.Choices[0].Message.Content != "Hi!" || r.Usage.PromptTokens != plain.Usage.PromptTokens+16 {
			t.Fatalf("image answer %q with %d prompt tokens (without the image %d), want Hi! and 16 more",
				r.Choices[0].Message.Content, r.Usage.PromptTokens, plain.Usage.PromptTokens)
		}
	})
	t.Run("tool conversation with an image", func(t *testing.T) {
		msg := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, MultiContent: []openai.ChatMessagePart{
			{Type: openai.ChatMessagePartTypeText, Text: "what is here?"}, engine.ImagePart("image/png", pngBytes(t))}}
		req := openai.ChatCompletionRequest{Model: "tiny", Tools: []openai.Tool{listDir}, Messages: []openai.ChatCompletionMessage{msg}}
		r, err := c.CreateChatCompletion(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		m := r.Choices[0].Message
		if len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Name != "list_dir" {
			t.Fatalf("calls %+v, want list_dir", m.ToolCalls)
		}
		req.Messages = append(req.Messages, m, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool,
			ToolCallID: m.ToolCalls[0].ID, Content: `["a.txt"]`})
		req.Stream = true
		s, err := c.CreateChatCompletionStream(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if content, calls, _, _ := streamAll(t, s); content != "Hi!" || len(calls) != 0 {
			t.Fatalf("after the result: %q %+v, want Hi!", content, calls)
		}
	})
	t.Run("call left in content arrives as tool_calls", func(t *testing.T) {
		tinyStarts := f.started("tiny")
		before := metric(t, f.url, `visor_gateway_tool_call_repairs_total{model="tiny-text",where="content"}`)
		req := openai.ChatCompletionRequest{Model: "tiny-text", Tools: []openai.Tool{listDir}, Messages: []openai.ChatCompletionMessage{user("what is here?")}}
		r, err := c.CreateChatCompletion(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		m := r.Choices[0].Message
		if len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Name != "list_dir" || m.ToolCalls[0].Function.Arguments != `{"path":"."}` ||
			m.Content != "" || r.Choices[0].FinishReason != openai.FinishReasonToolCalls || m.ToolCalls[0].ID == "" {
			t.Fatalf("message %+v finish %s: want the call as tool_calls and no content", m, r.Choices[0].FinishReason)
		}
		s, err := c.CreateChatCompletionStream(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		content, calls, finish, _ := streamAll(t, s)
		if content != "" || len(calls) != 1 || calls[0].Function.Name != "list_dir" || calls[0].Function.Arguments != `{"path":"."}` || finish != "tool_calls" {
			t.Fatalf("streamed content %q calls %+v finish %q: want only the call", content, calls, finish)
		}
		// The result goes back as text too, and the model answers.
		req.Messages = append(req.Messages, m, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool,
			ToolCallID: m.ToolCalls[0].ID, Content: `["a.txt"]`})
		r, err = c.CreateChatCompletion(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Choices[0].Message.Content; got != "Hi!" {
			t.Fatalf("after the result: %q, want Hi!", got)
		}
		if after := metric(t, f.url, `visor_gateway_tool_call_repairs_total{model="tiny-text",where="content"}`); after != before+2 {
			t.Fatalf("repairs counted %v → %v, want 2 more", before, after)
		}
		if n := f.started("tiny"); n != tinyStarts {
			t.Fatalf("tiny started again (%d → %d): a model of the same group must stay loaded", tinyStarts, n)
		}
	})
	t.Run("unknown model", func(t *testing.T) {
		_, err := c.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "gpt-9", Messages: []openai.ChatCompletionMessage{user("hi")}})
		var ae *openai.APIError
		if !errors.As(err, &ae) || ae.HTTPStatusCode != 404 || !strings.Contains(ae.Message, `"gpt-9"`) ||
			!strings.Contains(ae.Message, "tiny, tiny-text, second") {
			t.Fatalf("error %v, want a 404 naming gpt-9 and listing tiny, tiny-text, second", err)
		}
		l, err := c.ListModels(ctx)
		if err != nil || len(l.Models) != 3 || l.Models[2].ID != "second" {
			t.Fatalf("models %+v %v", l.Models, err)
		}
	})
	t.Run("second model swaps", func(t *testing.T) {
		tinyStarts := f.started("tiny")
		// Hold a stream open on tiny: the swap must wait for it rather than cut it off.
		s, err := c.CreateChatCompletionStream(ctx, openai.ChatCompletionRequest{Model: "tiny", Messages: []openai.ChatCompletionMessage{user("hello")}})
		if err != nil {
			t.Fatal(err)
		}
		type res struct {
			r   openai.ChatCompletionResponse
			err error
		}
		done := make(chan res, 1)
		go func() {
			r, err := c.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "second", Messages: []openai.ChatCompletionMessage{user("hello")}})
			done <- res{r, err}
		}()
		content, _, _, _ := streamAll(t, s)
		if content != "Hi!" {
			t.Fatalf("the stream open during the swap got %q", content)
		}
		got := <-done
		if got.err != nil || got.r.Choices[0].Message.Content != "Hi!" {
			t.Fatalf("second: %+v %v", got.r, got.err)
		}
		loaded := metric(t, f.url, `visor_gateway_model_loaded{model="tiny"}`)
		if loaded != 0 || metric(t, f.url, `visor_gateway_model_loaded{model="second"}`) != 1 || metric(t, f.url, "visor_gateway_swaps_total") < 1 {
			t.Fatal("after the swap tiny should be unloaded and second loaded")
		}
		// And back: tiny starts again.
		r, err := c.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "tiny", Messages: []openai.ChatCompletionMessage{user("hello")}})
		if err != nil || r.Choices[0].Message.Content != "Hi!" || f.started("tiny") != tinyStarts+1 {
			t.Fatalf("back to tiny: %v, started %d times (before the swap %d)", err, f.started("tiny"), tinyStarts)
		}
	})
	t.Run("stored as sessions", func(t *testing.T) {
		// A conversation over two requests (the second resends the first with the answer and a tool result) is
		// one session, searchable like any other.
		req := openai.ChatCompletionRequest{Model: "tiny", Tools: []openai.Tool{listDir}, Messages: []openai.ChatCompletionMessage{user("where is the zebra file?")}}
		r, err := c.CreateChatCompletion(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		req.Messages = append(req.Messages, r.Choices[0].Message, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool,
			ToolCallID: r.Choices[0].Message.ToolCalls[0].ID, Content: `["zebra.txt"]`})
		req.Stream = true
		s, err := c.CreateChatCompletionStream(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		streamAll(t, s)
		var hits []memory.Hit
		var msgs []memory.Message
		// The recorder writes off the response path: wait for it, with a minute's hang guard (a busy 2-core machine
		// can hold a SQLite write back for seconds).
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
			hits, err = f.store.Search(ctx, memory.Query{Text: "zebra"})
			if err != nil {
				t.Fatal(err)
			}
			if len(hits) > 0 {
				if msgs, err = f.store.Messages(ctx, hits[0].SessionID); err != nil {
					t.Fatal(err)
				}
				if len(msgs) == 4 {
					break
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		var roles []string
		for _, m := range msgs {
			roles = append(roles, m.Role)
		}
		if len(msgs) != 4 || strings.Join(roles, ",") != "user,assistant,tool,assistant" || msgs[1].ToolCalls[0].Name != "list_dir" ||
			msgs[3].Content != "Hi!" || hits[0].Agent != "gateway" {
			t.Fatalf("stored %d hits, messages %v: %+v", len(hits), roles, msgs)
		}
	})
	t.Run("metrics", func(t *testing.T) {
		if metric(t, f.url, `visor_gateway_tokens_predicted_total{model="tiny"}`) <= 0 ||
			metric(t, f.url, `visor_gateway_requests_total{model="unknown",code="404"}`) < 1 {
			t.Fatal("metrics do not count tokens or refused requests")
		}
	})
}

// metric reads one sample from /metrics.
func metric(t *testing.T, base, series string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return 0
}

func TestGatewayGuards(t *testing.T) {
	gw, err := gateway.New(gateway.Config{Models: []gateway.Model{{Name: "m", Open: func() gateway.Engine { return nil }}}})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close(context.Background())
	if err := gw.ListenAndServe(context.Background(), "0.0.0.0:0", nil); err == nil || !strings.Contains(err.Error(), "API key") {
		t.Fatalf("listening off loopback without a key: %v", err)
	}
	srv := httptest.NewServer(gw.Handler())
	defer srv.Close()
	for _, tc := range []struct {
		name   string
		mod    func(*http.Request)
		status int
	}{
		{"foreign host", func(r *http.Request) { r.Host = "evil.example" }, 403},
		{"foreign origin", func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") }, 403},
		{"text/plain body", func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }, 415},
	} {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[]}`))
		req.Header.Set("Content-Type", "application/json")
		tc.mod(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s: %d, want %d", tc.name, resp.StatusCode, tc.status)
		}
	}
	keyed, err := gateway.New(gateway.Config{APIKey: "k3y", Models: []gateway.Model{{Name: "m", Open: func() gateway.Engine { return nil }}}})
	if err != nil {
		t.Fatal(err)
	}
	defer keyed.Close(context.Background())
	ks := httptest.NewServer(keyed.Handler())
	defer ks.Close()
	resp, err := http.Get(ks.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("no key: %d, want 401", resp.StatusCode)
	}
	req, _ := http.NewRequest("GET", ks.URL+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer k3y")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("with the key: %d", resp.StatusCode)
	}
}

// TestGatewayConcurrentStreams sends 50 streaming clients at once at a model with 2 slots and a queue of 16:
// each is answered in full or refused cleanly (429 or 503 with Retry-After), no stream carries another's
// chunks, a client that hangs up mid-stream ends only its own, and afterwards no goroutine or file descriptor
// is left over.
func TestGatewayConcurrentStreams(t *testing.T) {
	f := sharedFixture(t)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	post := func(body string) (*http.Response, error) {
		return hc.Post(f.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	}
	// Warm up: load the model and open the connections the steady state keeps.
	for range 2 {
		resp, err := post(`{"model":"tiny","messages":[{"role":"user","content":"hi"}]}`)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	settle := func() (int, int) {
		hc.CloseIdleConnections()
		f.gw.CloseIdleConnections()
		var g, fd int
		// Wait for exiting goroutines to finish; a leak keeps the count up and fails after the minute's guard.
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
			runtime.GC()
			g, fd = runtime.NumGoroutine(), fds(t)
			if g <= baseG && fd <= baseFD {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		return g, fd
	}
	baseG, baseFD = 1<<30, 1<<30
	baseG, baseFD = settle()

	const n = 50
	type result struct {
		status  int
		retry   string
		content string
		ids     map[string]bool
		err     error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// max_tokens 1, 2 or 3 makes the answers differ ("H", "Hi", "Hi!"), so a stream that got another's
			// chunks shows.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			body := fmt.Sprintf(`{"model":"tiny","stream":true,"max_tokens":%d,"messages":[{"role":"user","content":"client %d"}]}`, i%3+1, i)
			req, _ := http.NewRequestWithContext(ctx, "POST", f.url+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := hc.Do(req)
			if err != nil {
				results[i].err = err
				return
			}
			defer resp.Body.Close()
			r := result{status: resp.StatusCode, retry: resp.Header.Get("Retry-After"), ids: map[string]bool{}}
			if i%10 == 9 && resp.StatusCode == 200 {
				// Every tenth client hangs up after the first bytes: its stream must end there, not leak.
				buf := make([]byte, 16)
				_, err := io.ReadFull(resp.Body, buf)
				cancel()
				results[i] = result{status: -1, err: err}
				return
			}
			b, err := io.ReadAll(resp.Body)
			r.err = err
			if resp.StatusCode == 200 {
				for _, line := range strings.Split(string(b), "\n") {
					data, ok := strings.CutPrefix(line, "data: ")
					if !ok || data == "[DONE]" {
						continue
					}
					var c openai.ChatCompletionStreamResponse
					if err := json.Unmarshal([]byte(data), &c); err != nil {
						r.err = fmt.Errorf("chunk %q: %w", data, err)
						break
					}
					r.ids[c.ID] = true
					for _, ch := range c.Choices {
						r.content += ch.Delta.Content
					}
				}
				if !strings.HasSuffix(strings.TrimSpace(string(b)), "data: [DONE]") {
					r.err = fmt.Errorf("stream did not end with [DONE]: %q", b)
				}
			}
			results[i] = r
		}()
	}
	wg.Wait()
	answered, refused, hungUp := 0, 0, 0
	seen := map[string]int{}
	for i, r := range results {
		switch {
		case r.err != nil:
			t.Errorf("client %d: %v", i, r.err)
		case r.status == -1:
			hungUp++
		case r.status == 200:
			answered++
			want := "Hi!"[:i%3+1]
			if r.content != want || len(r.ids) != 1 {
				t.Errorf("client %d: got %q in %d streams, want %q in one", i, r.content, len(r.ids), want)
			}
			for id := range r.ids {
				if j, dup := seen[id]; dup {
					t.Errorf("clients %d and %d got the same stream %s", j, i, id)
				}
				seen[id] = i
			}
		case (r.status == 429 || r.status == 503) && r.retry != "":
			refused++
		default:
			t.Errorf("client %d: status %d (Retry-After %q)", i, r.status, r.retry)
		}
	}
	t.Logf("%d answered, %d refused with Retry-After, %d hung up", answered, refused, hungUp)
	if answered+hungUp < 18 {
		t.Errorf("only %d of %d admitted: 2 slots and a queue of 16 admit at least 18", answered+hungUp, n)
	}
	if g, fd := settle(); g > baseG || fd > baseFD {
		t.Errorf("after the clients: %d goroutines (before %d), %d fds (before %d)", g, baseG, fd, baseFD)
	}
}

var baseG, baseFD int

func fds(t *testing.T) int {
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(es)
}
