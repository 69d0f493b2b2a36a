package engine_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/internal/enginetest"
)

const benchTokens = 256

func streamReq() engine.Request {
	seed := 7
	// go-openai drops temperature 0 (omitempty), so greedy decoding goes through Extra.
	return engine.Request{ChatCompletionRequest: openai.ChatCompletionRequest{
		Messages:  []openai.ChatCompletionMessage{{Role: "user", Content: "Once upon a time"}},
		MaxTokens: benchTokens, Seed: &seed},
		Extra: engine.Extra{Fields: map[string]any{"ignore_eos": true, "temperature": 0}}}
}

func TestStreamMatchesRawHTTP(t *testing.T) {
	s := enginetest.Start(t, llamacpp.Config{Model: enginetest.SharedModel(t, "stories260K.gguf"), Ctx: 1024, Parallel: 1})
	c := s.Client()
	got := visorStream(t, c)
	want := rawStream(t, s.URL())
	if got != want {
		t.Fatalf("visor stream text differs from the raw SSE text:\nvisor %q\nraw   %q", got, want)
	}
	if n := len(strings.Fields(got)); n < 10 {
		t.Fatalf("too little text for %d tokens: %q", benchTokens, got)
	}
}

func visorStream(t testing.TB, c *engine.Client) string {
	st, err := c.ChatStream(context.Background(), streamReq())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var b strings.Builder
	for {
		ch, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return b.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range ch.Choices {
			b.WriteString(c.Delta.Content)
		}
	}
}

// rawStream is the baseline: the same request over plain net/http, reading SSE lines and pulling the content
// out with the least work possible.
func rawStream(t testing.TB, base string) string {
	body := `{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":256,"temperature":0,"seed":7,` +
		`"ignore_eos":true,"stream":true}`
	req, err := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	// The same retry visor's client makes when llama-server has closed the idle connection.
	req.Header["X-Idempotency-Key"] = nil
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("data: {")) {
			continue
		}
		b.WriteString(contentOf(line))
	}
	return b.String()
}

func contentOf(line []byte) string {
	var ch openai.ChatCompletionStreamResponse
	if err := jsonUnmarshal(line[len("data: "):], &ch); err != nil {
		return ""
	}
	var s string
	for _, c := range ch.Choices {
		s += c.Delta.Content
	}
	return s
}

// BenchmarkStream reports visor's streaming throughput against the same request read raw over HTTP (net/http and
// encoding/json, nothing else), measured in one run. Each iteration runs both, in alternating order so neither
// always follows the other, and the reported ratio is the median of the per-iteration raw/visor time ratios,
// which the load of other processes on a shared machine moves far less than a ratio of sums (1.0 = no overhead).
func BenchmarkStream(b *testing.B) {
	// One generation thread leaves a core for the client: on a 2-core machine, a server on both cores turns any
	// client CPU time into slower generation, and the benchmark would measure the scheduler, not the client.
	s := enginetest.Start(b, llamacpp.Config{Model: enginetest.SharedModel(b, "stories260K.gguf"), Ctx: 1024, Parallel: 1,
		Threads: 1})
	c := s.Client()
	visorStream(b, c) // warm up: first request allocates buffers
	rawStream(b, s.URL())
	var visorNS, rawNS int64
	ratios := make([]float64, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var v, r int64
		if i%2 == 0 {
			t0 := nanotime()
			visorStream(b, c)
			t1 := nanotime()
			rawStream(b, s.URL())
			v, r = t1-t0, nanotime()-t1
		} else {
			t0 := nanotime()
			rawStream(b, s.URL())
			t1 := nanotime()
			visorStream(b, c)
			r, v = t1-t0, nanotime()-t1
		}
		visorNS += v
		rawNS += r
		ratios = append(ratios, float64(r)/float64(v))
	}
	sort.Float64s(ratios)
	b.ReportMetric(float64(benchTokens)*1e9*float64(b.N)/float64(visorNS), "visor-tok/s")
	b.ReportMetric(float64(benchTokens)*1e9*float64(b.N)/float64(rawNS), "raw-tok/s")
	b.ReportMetric(ratios[len(ratios)/2], "ratio")
}

// TestStreamChunksMatchGoOpenAI reads the same requests from the real server twice, through visor's stream and
// raw with every line decoded by encoding/json into go-openai's types, and wants the same chunks: text, a native
// tool call (the tiny model calls one when tools are required), finish reasons, usage and timings. Ids and
// creation times differ per request and are left out; timings must be present on the same chunks.
func TestStreamChunksMatchGoOpenAI(t *testing.T) {
	s := enginetest.Tiny(t, false, llamacpp.Config{})
	weather := openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{Name: "get_weather",
		Description: "Get weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}}
	msgs := []openai.ChatCompletionMessage{{Role: "user", Content: "What is the weather in Paris?"}}
	for name, req := range map[string]openai.ChatCompletionRequest{
		"plain": {Messages: msgs, MaxTokens: 32},
		"tools": {Messages: msgs, MaxTokens: 128, Tools: []openai.Tool{weather}, ToolChoice: "required"},
	} {
		t.Run(name, func(t *testing.T) {
			zero := 0
			extra := engine.Extra{Fields: map[string]any{"temperature": zero}}
			var got []engine.Chunk
			st, err := s.Client().ChatStream(context.Background(), engine.Request{ChatCompletionRequest: req, Extra: extra})
			if err != nil {
				t.Fatal(err)
			}
			for {
				ch, err := st.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, ch)
			}
			st.Close()
			req.Stream = true
			body, _ := json.Marshal(req)
			body = append(body[:len(body)-1], []byte(`,"temperature":0}`)...)
			hr, err := http.NewRequest(http.MethodPost, s.URL()+"/v1/chat/completions", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			// llama-server closes a connection after a stream: retry one that was closed while idle, as visor's
			// client does.
			hr.Header["X-Idempotency-Key"] = nil
			resp, err := http.DefaultClient.Do(hr)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var want []engine.Chunk
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				line, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
				if !ok || string(line) == "[DONE]" {
					continue
				}
				var ch engine.Chunk
				if err := json.Unmarshal(line, &ch.ChatCompletionStreamResponse); err != nil {
					t.Fatalf("raw line %q: %v", line, err)
				}
				var tm struct{ Timings *engine.Timings }
				_ = json.Unmarshal(line, &tm)
				ch.Timings = tm.Timings
				want = append(want, ch)
			}
			if len(got) != len(want) {
				t.Fatalf("visor read %d chunks, the raw read %d", len(got), len(want))
			}
			calls := 0
			for i := range got {
				g, w := got[i], want[i]
				if (g.Timings == nil) != (w.Timings == nil) || g.ID == "" || g.Created == 0 {
					t.Errorf("chunk %d: timings %v vs %v, id %q, created %d", i, g.Timings, w.Timings, g.ID, g.Created)
				}
				g.ID, w.ID, g.Created, w.Created, g.Timings, w.Timings = "", "", 0, 0, nil, nil
				for _, c := range g.Choices {
					for _, tc := range c.Delta.ToolCalls {
						calls++
						tc.ID = ""
					}
				}
				for _, chs := range [][]openai.ChatCompletionStreamChoice{g.Choices, w.Choices} {
					for _, c := range chs {
						for j := range c.Delta.ToolCalls {
							c.Delta.ToolCalls[j].ID = "" // ids are random per request
						}
					}
				}
				if !reflect.DeepEqual(g, w) {
					t.Errorf("chunk %d:\nvisor %+v\nraw   %+v", i, g, w)
				}
			}
			if name == "tools" && calls == 0 {
				t.Errorf("no tool call chunk in the tools stream")
			}
		})
	}
}

// BenchmarkStreamSharedCores is the user's case on a CPU machine: llama-server on every core (its default), so
// each microsecond the client spends per token is taken from generation. Three clients stream the same greedy
// request in rotating order: visor's, a plain line read (the baseline), and go-openai's own stream reader, which
// visor's client used until it read the stream itself. Reported: the server's own tokens/s for each, as medians
// of per-round ratios to the baseline's (1.0 = the client costs generation nothing).
func BenchmarkStreamSharedCores(b *testing.B) {
	s := enginetest.Start(b, llamacpp.Config{Model: enginetest.SharedModel(b, "stories260K.gguf"), Ctx: 1024, Parallel: 1})
	c := s.Client()
	body := `{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":256,"temperature":0,"seed":7,` +
		`"ignore_eos":true,"stream":true}`
	visor := func() float64 {
		st, err := c.ChatStream(context.Background(), streamReq())
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		var tim *engine.Timings
		for {
			ch, err := st.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			if ch.Timings != nil {
				tim = ch.Timings
			}
		}
		return tim.PredictedPerSecond
	}
	plain := func() float64 {
		req, _ := http.NewRequest(http.MethodPost, s.URL()+"/v1/chat/completions", strings.NewReader(body))
		req.Header["X-Idempotency-Key"] = nil
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		var last []byte
		for {
			l, err := br.ReadSlice('\n')
			if bytes.Contains(l, []byte(`"timings":`)) {
				last = append(last[:0], l...)
			}
			if err != nil {
				break
			}
		}
		return timingsOf(b, bytes.TrimPrefix(bytes.TrimSpace(last), []byte("data: ")))
	}
	cfg := openai.DefaultConfig("")
	cfg.BaseURL = s.URL() + "/v1"
	cfg.HTTPClient = bodyDoer(body)
	oa := openai.NewClientWithConfig(cfg)
	goOpenAI := func() float64 {
		st, err := oa.CreateChatCompletionStream(context.Background(), openai.ChatCompletionRequest{})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		var last []byte
		for {
			line, err := st.RecvRaw()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			var ch openai.ChatCompletionStreamResponse
			if err := json.Unmarshal(line, &ch); err != nil {
				b.Fatal(err)
			}
			if bytes.Contains(line, []byte(`"timings"`)) {
				last = line
			}
		}
		return timingsOf(b, last)
	}
	arms := []func() float64{plain, visor, goOpenAI}
	for _, a := range arms {
		a() // warm up
	}
	var rv, rg []float64
	b.ResetTimer()
	for i := range b.N {
		var got [3]float64
		for j := range arms {
			k := (i + j) % len(arms)
			got[k] = arms[k]()
		}
		rv, rg = append(rv, got[1]/got[0]), append(rg, got[2]/got[0])
	}
	sort.Float64s(rv)
	sort.Float64s(rg)
	b.ReportMetric(rv[len(rv)/2], "visor/plain")
	b.ReportMetric(rg[len(rg)/2], "go-openai/plain")
}

func timingsOf(b *testing.B, chunk []byte) float64 {
	var tm struct{ Timings engine.Timings }
	if err := json.Unmarshal(chunk, &tm); err != nil || tm.Timings.PredictedPerSecond == 0 {
		b.Fatalf("no timings in %q: %v", chunk, err)
	}
	return tm.Timings.PredictedPerSecond
}

// bodyDoer sends body instead of what go-openai wrote (it cannot send llama.cpp's fields), so every arm of the
// benchmark sends the same bytes.
type bodyDoer string

func (d bodyDoer) Do(req *http.Request) (*http.Response, error) {
	req.Body, req.ContentLength = io.NopCloser(strings.NewReader(string(d))), int64(len(d))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(string(d))), nil }
	req.Header["X-Idempotency-Key"] = nil
	return http.DefaultClient.Do(req)
}

// TestStreamSendsTheAPIKey: a llama-server started with --api-key streams to a client with the key and answers
// one without it 401, which StatusCode reads from the stream's error as from any other.
func TestStreamSendsTheAPIKey(t *testing.T) {
	s := enginetest.Tiny(t, false, llamacpp.Config{ExtraArgs: []string{"--api-key", "s3cret"}})
	req := engine.Request{ChatCompletionRequest: openai.ChatCompletionRequest{MaxTokens: 4,
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}}}
	st, err := engine.NewClient(s.URL(), "s3cret").ChatStream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := st.Recv(); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	_, err = engine.NewClient(s.URL(), "").ChatStream(context.Background(), req)
	if engine.StatusCode(err) != http.StatusUnauthorized {
		t.Fatalf("without the key: %v (status %d), want 401", err, engine.StatusCode(err))
	}
}

// TestStreamCanceledOnTheRealServer: a caller's cancel in the middle of a long answer from llama-server ends the
// stream with the cancel (errors.Is context.Canceled), never as a complete answer (io.EOF) or a broken stream.
// (TestStreamCanceledMidway covers a cancel that cuts a line in half, which a real server cannot be timed to.)
func TestStreamCanceledOnTheRealServer(t *testing.T) {
	s := enginetest.Start(t, llamacpp.Config{Model: enginetest.SharedModel(t, "stories260K.gguf"), Ctx: 2048, Parallel: 1})
	ctx, cancel := context.WithCancel(context.Background())
	req := streamReq()
	req.MaxTokens = 1900
	st, err := s.Client().ChatStream(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	cancel()
	for i := 0; ; i++ {
		_, err := st.Recv()
		if err == nil {
			continue // chunks already read before the cancel
		}
		if !errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) || errors.Is(err, engine.ErrStreamBroken) {
			t.Fatalf("after %d more chunks: %v, want context.Canceled", i, err)
		}
		return
	}
}
