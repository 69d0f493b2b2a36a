package testmodel_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testmodel"
)

type server struct {
	url    string
	engine *llamacpp.Server
	client *http.Client
}

// log is the server's recent output, for failure messages.
func (s *server) log() string { return strings.Join(s.engine.LogTail(400), "\n") }

// startServer runs llama-server on the chat model and a projector built with opt, with one slot and any extra
// args, and returns once it is healthy. enginetest finds the binary (skipping outside CI, failing in CI) and
// stops the server with the test.
func startServer(t *testing.T, opt testmodel.ProjectorOptions, args ...string) *server {
	t.Helper()
	return startModel(t, testmodel.WriteChatFile, opt, args...)
}

// startModel is startServer with the chat model written by write.
func startModel(t *testing.T, write func(string) error, opt testmodel.ProjectorOptions, args ...string) *server {
	t.Helper()
	dir := t.TempDir()
	chat, proj := filepath.Join(dir, testmodel.ChatFileName), filepath.Join(dir, testmodel.ProjectorFileName)
	if err := write(chat); err != nil {
		t.Fatal(err)
	}
	if err := testmodel.WriteProjectorFile(proj, opt); err != nil {
		t.Fatal(err)
	}
	engine := enginetest.Start(t, llamacpp.Config{Model: chat, MMProj: proj, Ctx: 4096, Parallel: 1, ExtraArgs: args})
	// No keep-alive: llama-server b11669 sometimes closes a connection just after a streamed response, and the
	// next POST on it fails with EOF (Go does not retry a POST).
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	return &server{url: engine.URL(), engine: engine, client: client}
}

func (s *server) get(t *testing.T, path string, out any) {
	t.Helper()
	resp, err := s.client.Get(s.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s: %s", path, resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

func (s *server) post(t *testing.T, path string, in, out any) {
	t.Helper()
	body, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.client.Post(s.url+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: %s: %s", path, resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
}

// rawSystem is a Hermes tool prompt as a client renders it in raw mode (visor's prompts.ToolSystem writes the
// same shape): the tool list and the instruction, whose "<tool_call></tool_call>" turns the tools feature on.
const rawSystem = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
	"You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" +
	`{"type": "function", "function": {"name": "list_dir", "description": "List a folder", "parameters": ` +
	`{"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}` +
	"\n</tools>\n\nFor each function call, return a json object with function name and arguments within " +
	"<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": " +
	"<args-json-object>}\n</tool_call>"

// rawCall is what the model writes for a call without a grammar: the call start, the body token, the close.
const rawCall = "<tool_call>\n" + testmodel.CallBody + "</tool_call>"

// chatResponse is the part of a chat completion the tests look at.
type chatResponse struct {
	Choices []struct {
		FinishReason string `json:"finish_reason"`
		Message      struct {
			Content   *string    `json:"content"`
			ToolCalls []toolCall `json:"tool_calls"`
		} `json:"message"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

type toolCall struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// result flattens the first choice.
type result struct {
	content    string
	finish     string
	calls      []toolCall
	prompt     int
	completion int // not set for streams
}

func (s *server) chat(t *testing.T, req map[string]any) result {
	t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("chat: %s: %s", resp.Status, raw)
	}
	if req["stream"] == true {
		return parseStream(t, raw)
	}
	var cr chatResponse
	if err := json.Unmarshal(raw, &cr); err != nil {
		t.Fatalf("chat: %v: %s", err, raw)
	}
	if len(cr.Choices) != 1 {
		t.Fatalf("chat: %d choices: %s", len(cr.Choices), raw)
	}
	c := cr.Choices[0]
	r := result{finish: c.FinishReason, calls: c.Message.ToolCalls, prompt: cr.Usage.PromptTokens,
		completion: cr.Usage.CompletionTokens}
	if c.Message.Content != nil {
		r.content = *c.Message.Content
	}
	return r
}

// parseStream folds an SSE stream of chat chunks into one result, joining tool-call fragments by index as an
// OpenAI client does.
func parseStream(t *testing.T, raw []byte) result {
	t.Helper()
	var r result
	var content strings.Builder
	calls := map[int]*toolCall{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	done := false
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var chunk struct {
			Choices []struct {
				FinishReason *string `json:"finish_reason"`
				Delta        struct {
					Content   *string    `json:"content"`
					ToolCalls []toolCall `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatalf("stream chunk %q: %v", data, err)
		}
		for _, c := range chunk.Choices {
			if c.Delta.Content != nil {
				content.WriteString(*c.Delta.Content)
			}
			for _, tc := range c.Delta.ToolCalls {
				acc, ok := calls[tc.Index]
				if !ok {
					acc = &toolCall{Index: tc.Index}
					calls[tc.Index] = acc
				}
				if tc.ID != "" {
					acc.ID = tc.ID
				}
				if tc.Type != "" {
					acc.Type = tc.Type
				}
				acc.Function.Name += tc.Function.Name
				acc.Function.Arguments += tc.Function.Arguments
			}
			if c.FinishReason != nil {
				r.finish = *c.FinishReason
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !done {
		t.Fatalf("stream ended without [DONE]:\n%s", raw)
	}
	r.content = content.String()
	for i := range len(calls) {
		tc, ok := calls[i]
		if !ok {
			t.Fatalf("stream: tool-call indexes are not 0..%d: %v", len(calls)-1, calls)
		}
		r.calls = append(r.calls, *tc)
	}
	return r
}

func tool(name string, params map[string]any) map[string]any {
	return map[string]any{"type": "function", "function": map[string]any{
		"name": name, "description": "test tool " + name, "parameters": params,
	}}
}

func object(props map[string]any, required ...string) map[string]any {
	o := map[string]any{"type": "object", "properties": props}
	if required != nil {
		o["required"] = required
	}
	return o
}

func weatherTool() map[string]any {
	return tool("get_weather", object(map[string]any{"city": map[string]any{"type": "string"}}, "city"))
}

func listDirTool() map[string]any {
	return tool("list_dir", object(map[string]any{
		"path": map[string]any{"type": "string", "description": "directory to list"},
	}, "path"))
}

func user(text string) map[string]any { return map[string]any{"role": "user", "content": text} }

// listDirHistory is one round of the agent loop: the user asks, the model calls list_dir, the tool returns
// listing.
func listDirHistory(listing string) []any {
	return []any{
		user("list the files"),
		map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{
			"id": "call_1", "type": "function",
			"function": map[string]any{"name": "list_dir", "arguments": `{"path":"."}`},
		}}},
		map[string]any{"role": "tool", "tool_call_id": "call_1", "content": listing},
	}
}

// wantCall checks that r is exactly one call of name with arguments args (compared as JSON text, which the model
// writes compactly) and no content.
func wantCall(t *testing.T, r result, name, args string) {
	t.Helper()
	if r.finish != "tool_calls" {
		t.Errorf("finish_reason %q, want tool_calls", r.finish)
	}
	if r.content != "" {
		t.Errorf("content %q, want none beside the call", r.content)
	}
	if len(r.calls) != 1 {
		t.Fatalf("%d tool calls, want 1: %+v", len(r.calls), r.calls)
	}
	c := r.calls[0]
	if c.Function.Name != name || c.Function.Arguments != args {
		t.Errorf("call %s(%s), want %s(%s)", c.Function.Name, c.Function.Arguments, name, args)
	}
	if !json.Valid([]byte(c.Function.Arguments)) {
		t.Errorf("arguments %q are not JSON", c.Function.Arguments)
	}
	if c.ID == "" || c.Type != "function" {
		t.Errorf("call id %q type %q, want an id and type function", c.ID, c.Type)
	}
}

func wantAnswer(t *testing.T, r result, content string) {
	t.Helper()
	if r.content != content || r.finish != "stop" || len(r.calls) != 0 {
		t.Errorf("got content %q finish %q calls %+v, want content %q finish stop and no calls",
			r.content, r.finish, r.calls, content)
	}
}

// pngDataURI returns a 16×16 RGB gradient PNG as a data URI.
func pngDataURI(t *testing.T) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 16, 16))
	for y := range 16 {
		for x := range 16 {
			img.Set(x, y, color.RGBA{R: uint8(16 * x), G: uint8(16 * y), B: 128, A: 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())
}

// TestServer drives the real llama-server with the generated models: the behaviours the package doc promises.
func TestServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts llama-server")
	}
	s := startServer(t, testmodel.ProjectorOptions{})

	t.Run("props", func(t *testing.T) {
		var props struct {
			Modalities struct {
				Vision bool `json:"vision"`
			} `json:"modalities"`
			Caps struct {
				Tools     bool `json:"supports_tools"`
				ToolCalls bool `json:"supports_tool_calls"`
			} `json:"chat_template_caps"`
			EOS string `json:"eos_token"`
		}
		s.get(t, "/props", &props)
		if !props.Modalities.Vision || !props.Caps.Tools || !props.Caps.ToolCalls || props.EOS != "<|im_end|>" {
			t.Errorf("props = %+v, want vision, tool support and EOS <|im_end|>", props)
		}
	})

	t.Run("token count", func(t *testing.T) {
		// TokenCount, which tests use for a request's new text, counts as the server's tokenizer does.
		text := "<|im_start|>user\n<tool_response>\ndir ok\n</tool_response><|im_end|>\n<|im_start|>assistant\n" +
			"<tool_call>\n" + testmodel.CallBody + "\n</tool_call>"
		var tok struct {
			Tokens []int `json:"tokens"`
		}
		s.post(t, "/tokenize", map[string]any{"content": text, "parse_special": true}, &tok)
		if got := testmodel.TokenCount(text); got != len(tok.Tokens) {
			t.Errorf("TokenCount = %d, the server's tokenizer %d", got, len(tok.Tokens))
		}
	})

	t.Run("plain", func(t *testing.T) {
		// Default sampling (no temperature, random seed): the logit gaps make it greedy anyway.
		for range 3 {
			wantAnswer(t, s.chat(t, map[string]any{"messages": []any{user("hello")}, "max_tokens": 32}), testmodel.Answer)
		}
	})

	t.Run("system prompt", func(t *testing.T) {
		r := s.chat(t, map[string]any{"messages": []any{
			map[string]any{"role": "system", "content": "You are terse."}, user("hello"),
		}, "max_tokens": 32})
		wantAnswer(t, r, testmodel.Answer)
	})

	t.Run("required", func(t *testing.T) {
		for _, seed := range []int{1, 2, 3} {
			r := s.chat(t, map[string]any{"messages": []any{user("What is the weather in Paris?")},
				"tools": []any{weatherTool()}, "tool_choice": "required", "max_tokens": 128, "seed": seed})
			wantCall(t, r, "get_weather", `{"city":"."}`)
		}
	})

	t.Run("required stream", func(t *testing.T) {
		r := s.chat(t, map[string]any{"messages": []any{user("list the files")},
			"tools": []any{listDirTool()}, "tool_choice": "required", "max_tokens": 128, "stream": true})
		wantCall(t, r, "list_dir", `{"path":"."}`)
	})

	t.Run("auto calls first", func(t *testing.T) {
		r := s.chat(t, map[string]any{"messages": []any{user("list the files")},
			"tools": []any{listDirTool()}, "tool_choice": "auto", "max_tokens": 128})
		wantCall(t, r, "list_dir", `{"path":"."}`)
	})

	t.Run("auto stream calls first", func(t *testing.T) {
		r := s.chat(t, map[string]any{"messages": []any{user("list the files")},
			"tools": []any{listDirTool()}, "max_tokens": 128, "stream": true})
		wantCall(t, r, "list_dir", `{"path":"."}`)
	})

	// The agent loop: call, result, answer.
	history := listDirHistory("a.txt\nb.txt")
	t.Run("auto answers after result", func(t *testing.T) {
		r := s.chat(t, map[string]any{"messages": history, "tools": []any{listDirTool()}, "tool_choice": "auto",
			"max_tokens": 128})
		wantAnswer(t, r, testmodel.Answer)
	})

	t.Run("auto stream answers after result", func(t *testing.T) {
		r := s.chat(t, map[string]any{"messages": history, "tools": []any{listDirTool()}, "max_tokens": 128,
			"stream": true})
		wantAnswer(t, r, testmodel.Answer)
	})

	t.Run("required after result", func(t *testing.T) {
		// The model would answer, so the answer comes first and the grammar then forces the call.
		r := s.chat(t, map[string]any{"messages": history, "tools": []any{listDirTool()}, "tool_choice": "required",
			"max_tokens": 128})
		if r.finish != "tool_calls" || r.content != testmodel.Answer || len(r.calls) != 1 ||
			r.calls[0].Function.Arguments != `{"path":"."}` {
			t.Errorf("got %+v, want content Hi! and one list_dir call", r)
		}
	})

	t.Run("none", func(t *testing.T) {
		// The server still renders the tools but sets no grammar and parses no calls: the model opens a call and
		// writes the body token, whichever tools were offered, and it comes back as content.
		r := s.chat(t, map[string]any{"messages": []any{user("list the files")},
			"tools": []any{weatherTool()}, "tool_choice": "none", "max_tokens": 128})
		wantAnswer(t, r, rawCall)
	})

	// Raw mode: the client renders a Hermes tool prompt itself and sends no tools, so there is no grammar; the
	// call is written in text and the result comes back in a user turn.
	t.Run("raw", func(t *testing.T) {
		sys := map[string]any{"role": "system", "content": rawSystem}
		r := s.chat(t, map[string]any{"messages": []any{sys, user("list the files")}, "max_tokens": 128})
		wantAnswer(t, r, rawCall)
		if r.completion != 5 { // <tool_call> \n body </tool_call> <|im_end|>
			t.Errorf("raw call took %d tokens, want 5", r.completion)
		}
		// Replayed as text the call tokenizes back to the same four tokens (user-defined tokens are matched in
		// text), so the prompt keeps the call's features and its cached tokens.
		var tok struct {
			Tokens []int `json:"tokens"`
		}
		s.post(t, "/tokenize", map[string]any{"content": rawCall}, &tok)
		want := []int{testmodel.TokenToolCall, '\n', testmodel.TokenCallBody, testmodel.TokenToolCallEnd}
		if !reflect.DeepEqual(tok.Tokens, want) {
			t.Errorf("the call text tokenizes to %v, want %v", tok.Tokens, want)
		}
		history := []any{sys, user("list the files"), map[string]any{"role": "assistant", "content": rawCall},
			user("<tool_response>\n{\"name\": \"list_dir\", \"content\": \"a.txt\"}\n</tool_response>")}
		wantAnswer(t, s.chat(t, map[string]any{"messages": history, "max_tokens": 128}), testmodel.Answer)
	})

	t.Run("parallel", func(t *testing.T) {
		readFile := tool("read_file", object(map[string]any{"path": map[string]any{"type": "string"}}, "path"))
		r := s.chat(t, map[string]any{"messages": []any{user("weather and files")},
			"tools": []any{readFile, weatherTool()}, "tool_choice": "required", "parallel_tool_calls": true,
			"max_tokens": 256})
		// One call: after </tool_call> the model prefers EOS; the lowest-byte tool name wins.
		wantCall(t, r, "get_weather", `{"city":"."}`)
	})

	t.Run("body beats names", func(t *testing.T) {
		// Among several tools a list_dir that takes {"path":"."} wins: the body token outranks the byte route.
		r := s.chat(t, map[string]any{"messages": []any{user("weather and files")},
			"tools": []any{weatherTool(), listDirTool()}, "tool_choice": "required", "max_tokens": 256})
		wantCall(t, r, "list_dir", `{"path":"."}`)
	})

	t.Run("required stream body token", func(t *testing.T) {
		// The list_dir call above goes through the body token; the grammar masks it for other names and
		// schemas, which take the byte route (get_weather above, an extra required property here).
		params := object(map[string]any{"path": map[string]any{"type": "string"},
			"depth": map[string]any{"type": "integer"}}, "path", "depth")
		r := s.chat(t, map[string]any{"messages": []any{user("ls")}, "tools": []any{tool("list_dir", params)},
			"tool_choice": "required", "max_tokens": 128, "stream": true})
		wantCall(t, r, "list_dir", `{"depth":1,"path":"."}`) // the server re-encodes with sorted keys
	})

	t.Run("schema", func(t *testing.T) {
		params := object(map[string]any{
			"from":   map[string]any{"type": "string", "enum": []string{"PAR", "LON"}},
			"seats":  map[string]any{"type": "integer"},
			"price":  map[string]any{"type": "number"},
			"window": map[string]any{"type": "boolean"},
			"tags":   map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
			"pax": object(map[string]any{
				"name": map[string]any{"type": "string"},
				"age":  map[string]any{"type": "integer"},
			}, "name", "age"),
			"note": map[string]any{"type": "string"},
		}, "from", "seats", "price", "window", "tags", "pax")
		r := s.chat(t, map[string]any{"messages": []any{user("Book it")},
			"tools": []any{tool("book_flight", params)}, "tool_choice": "required", "max_tokens": 300})
		if len(r.calls) != 1 {
			t.Fatalf("got %+v, want one book_flight call", r)
		}
		// The server re-encodes the arguments, so compare values. Optional "note" is left out: after a value "}"
		// is preferred to ",".
		var got map[string]any
		if err := json.Unmarshal([]byte(r.calls[0].Function.Arguments), &got); err != nil {
			t.Fatalf("arguments %s: %v", r.calls[0].Function.Arguments, err)
		}
		want := map[string]any{"from": "LON", "seats": 1.0, "price": 1.0, "window": true, "tags": []any{"."},
			"pax": map[string]any{"name": ".", "age": 1.0}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("arguments %v, want %v", got, want)
		}
	})

	t.Run("optional only", func(t *testing.T) {
		// With no required property "{" still prefers a quote, so the first optional property is filled in.
		optional := tool("list_dir", object(map[string]any{"path": map[string]any{"type": "string"}}))
		r := s.chat(t, map[string]any{"messages": []any{user("ls")}, "tools": []any{optional},
			"tool_choice": "required", "max_tokens": 64})
		wantCall(t, r, "list_dir", `{"path":"."}`)
	})

	t.Run("response_format", func(t *testing.T) {
		schema := object(map[string]any{"answer": map[string]any{"type": "string"},
			"n": map[string]any{"type": "integer"}}, "answer", "n")
		r := s.chat(t, map[string]any{"messages": []any{user("answer")}, "max_tokens": 64,
			"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"schema": schema}}})
		wantAnswer(t, r, `{"answer":".","n":1}`)
	})

	t.Run("grammar", func(t *testing.T) {
		r := s.chat(t, map[string]any{"messages": []any{user("yes or no?")}, "max_tokens": 8,
			"grammar": `root ::= "yes" | "no"`})
		wantAnswer(t, r, "no") // neither is ranked: the lower byte wins
	})

	t.Run("image", func(t *testing.T) { checkImage(t, s, testmodel.ProjectorOptions{}) })

	if t.Failed() {
		t.Logf("llama-server log:\n%s", s.log())
	}
}

// TestHybridServer checks that llama-server loads the hybrid (qwen35) chat model as a hybrid model and that it
// behaves as the llama one does: the answer, a call under a grammar, the answer after a result, a raw-mode call
// and an image. (Its Gated DeltaNet layers make generation slower on a CPU, so not every case of TestServer
// runs twice.)
func TestHybridServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts llama-server")
	}
	s := startModel(t, testmodel.WriteHybridFile, testmodel.ProjectorOptions{})
	wantAnswer(t, s.chat(t, map[string]any{"messages": []any{user("hello")}, "max_tokens": 32}), testmodel.Answer)
	wantCall(t, s.chat(t, map[string]any{"messages": []any{user("list the files")},
		"tools": []any{listDirTool()}, "tool_choice": "required", "max_tokens": 128}), "list_dir", `{"path":"."}`)
	wantAnswer(t, s.chat(t, map[string]any{"messages": listDirHistory("a.txt"), "tools": []any{listDirTool()},
		"max_tokens": 128}), testmodel.Answer)
	sys := map[string]any{"role": "system", "content": rawSystem}
	wantAnswer(t, s.chat(t, map[string]any{"messages": []any{sys, user("list the files")}, "max_tokens": 128}), rawCall)
	checkImage(t, s, testmodel.ProjectorOptions{})
	// The server must keep a recurrent state it cannot cut back: a prompt that differs from the cached one near
	// its end is not reused up to the difference, as an attention-only model's would be.
	var tm struct {
		Timings struct {
			CacheN int `json:"cache_n"`
		} `json:"timings"`
	}
	base := "hello there, this is a long message, number "
	s.post(t, "/v1/chat/completions", map[string]any{"messages": []any{user(base + "one")}, "max_tokens": 4}, &tm)
	s.post(t, "/v1/chat/completions", map[string]any{"messages": []any{user(base + "two")}, "max_tokens": 4}, &tm)
	if shared := len("<|im_start|>user\n") - len("<|im_start|>") + 1 + len(base); tm.Timings.CacheN >= shared {
		t.Errorf("the second prompt reused %d cached tokens of the %d it shares with the first: the model's "+
			"memory is not recurrent", tm.Timings.CacheN, shared)
	}
	if t.Failed() {
		t.Logf("llama-server log:\n%s", s.log())
	}
}

// checkImage sends the same question with and without a 16×16 PNG and checks the answer and the image's token
// count.
func checkImage(t *testing.T, s *server, opt testmodel.ProjectorOptions) {
	t.Helper()
	text := map[string]any{"type": "text", "text": "What is in this image?"}
	img := map[string]any{"type": "image_url", "image_url": map[string]any{"url": pngDataURI(t)}}
	without := s.chat(t, map[string]any{"messages": []any{map[string]any{"role": "user",
		"content": []any{text}}}, "max_tokens": 16})
	with := s.chat(t, map[string]any{"messages": []any{map[string]any{"role": "user",
		"content": []any{text, img}}}, "max_tokens": 16})
	wantAnswer(t, without, testmodel.Answer)
	wantAnswer(t, with, testmodel.Answer)
	tokens, err := opt.ImageTokens()
	if err != nil {
		t.Fatal(err)
	}
	if got := with.prompt - without.prompt; got != tokens {
		t.Errorf("the image added %d prompt tokens (%d vs %d), want %d", got, with.prompt, without.prompt, tokens)
	}
}

// TestServerScaledProjector checks that a projector scaled up through ProjectorOptions still loads and encodes, and
// that the image costs (ImageSize/PatchSize)² tokens, and that a tool call still works beside it.
func TestServerScaledProjector(t *testing.T) {
	if testing.Short() {
		t.Skip("starts llama-server")
	}
	opt := testmodel.ProjectorOptions{ImageSize: 64, PatchSize: 8, EmbeddingLength: 64, Blocks: 3, Heads: 8}
	s := startServer(t, opt)
	checkImage(t, s, opt)
	r := s.chat(t, map[string]any{"messages": []any{user("list the files")}, "tools": []any{listDirTool()},
		"max_tokens": 64})
	wantCall(t, r, "list_dir", `{"path":"."}`)
	if t.Failed() {
		t.Logf("llama-server log:\n%s", s.log())
	}
}

// TestServerQuantizedKV runs the agent loop with a q4_0 KV cache: the feature heads' keys and values must
// survive quantization, and the head size must suit its 32-wide blocks.
func TestServerQuantizedKV(t *testing.T) {
	if testing.Short() {
		t.Skip("starts llama-server")
	}
	s := startServer(t, testmodel.ProjectorOptions{}, "-fa", "on", "-ctk", "q4_0", "-ctv", "q4_0")
	wantAnswer(t, s.chat(t, map[string]any{"messages": []any{user("hello")}, "max_tokens": 16}), testmodel.Answer)
	r := s.chat(t, map[string]any{"messages": []any{user("list the files")}, "tools": []any{listDirTool()},
		"max_tokens": 64})
	wantCall(t, r, "list_dir", `{"path":"."}`)
	history := listDirHistory("a.txt")
	wantAnswer(t, s.chat(t, map[string]any{"messages": history, "tools": []any{listDirTool()}, "max_tokens": 64}),
		testmodel.Answer)
	if t.Failed() {
		t.Logf("llama-server log:\n%s", s.log())
	}
}
