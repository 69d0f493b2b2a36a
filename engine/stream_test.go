package engine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

var chunkSeeds = []string{
	`{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"created":1796025575,"id":"chatcmpl-Zs","model":"models/tiny-bigram.gguf","system_fingerprint":"b11669-Debian","object":"chat.completion.chunk"}`,
	`{"choices":[{"finish_reason":null,"index":0,"delta":{"content":"H\u00e9\n\"\\"}}],"created":1,"id":"x","model":"m","object":"chat.completion.chunk"}`,
	`{"choices":[{"finish_reason":null,"index":0,"delta":{"tool_calls":[{"index":0,"id":"GMA","type":"function","function":{"name":"get_weather","arguments":"{"}}]}}],"created":1,"id":"x","model":"m","object":"chat.completion.chunk"}`,
	`{"choices":[{"finish_reason":null,"index":0,"delta":{"reasoning_content":"hmm"}}],"created":1,"id":"x"}`,
	`{"choices":[{"finish_reason":"tool_calls","index":0,"delta":{}}],"created":1,"id":"x","model":"m"}`,
	`{"choices":[],"created":1,"id":"x","usage":{"completion_tokens":8,"prompt_tokens":46,"total_tokens":54,"prompt_tokens_details":{"cached_tokens":45}},"timings":{"cache_n":45,"prompt_n":1,"prompt_ms":2.785,"predicted_n":8,"predicted_ms":2.77,"predicted_per_second":2527.07,"draft_n":3,"draft_n_accepted":2}}`,
	`{"choices":[{"index":1,"delta":{"function_call":{"name":"f","arguments":"{}"},"refusal":"no"},"logprobs":{"content":[{"token":"a","logprob":-0.5,"bytes":[97],"top_logprobs":[]}]}}]}`,
	`{}`,
}

var keyRE = regexp.MustCompile(`"((?:[^"\\]|\\.)*)"\s*:`)

// FuzzDecodeChunk holds visor's one-pass chunk decoder to encoding/json's reading of the same bytes into
// go-openai's types (what the client did before): wherever encoding/json accepts a chunk, both give the same.
func FuzzDecodeChunk(f *testing.F) {
	for _, s := range chunkSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want openai.ChatCompletionStreamResponse
		if json.Unmarshal(data, &want) != nil || len(strings.TrimSpace(string(data))) == 0 || strings.TrimSpace(string(data))[0] != '{' {
			return
		}
		// encoding/json also matches keys case-insensitively; servers write them as the API names them.
		for _, m := range keyRE.FindAllSubmatch(data, -1) {
			if k := string(m[1]); strings.ToLower(k) != k {
				return
			}
		}
		var got Chunk
		if err := decodeChunk(data, &got); err != nil {
			var ae *openai.APIError
			if errors.As(err, &ae) && strings.Contains(string(data), `"error"`) {
				return
			}
			t.Fatalf("decodeChunk(%q): %v; encoding/json accepts it", data, err)
		}
		if !reflect.DeepEqual(got.ChatCompletionStreamResponse, want) {
			t.Fatalf("decodeChunk(%q)\n got  %+v\n want %+v", data, got.ChatCompletionStreamResponse, want)
		}
		if wt := timingsFrom(data); !reflect.DeepEqual(got.Timings, wt) {
			t.Fatalf("timings of %q: got %+v, want %+v", data, got.Timings, wt)
		}
	})
}

// sseServer is a fake server, for what llama-server does not do: it answers every request with body as it is.
func sseServer(t *testing.T, status int, body string) *Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return NewClient(srv.URL, "")
}

// readAll streams a one-message request from c and returns its text.
func readAll(ctx context.Context, t testing.TB, c *Client) (string, error) {
	t.Helper()
	st, err := c.ChatStream(ctx, Request{ChatCompletionRequest: openai.ChatCompletionRequest{
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}}})
	if err != nil {
		return "", err
	}
	defer st.Close()
	var b strings.Builder
	for {
		ch, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return b.String(), nil
		}
		if err != nil {
			return b.String(), err
		}
		for _, c := range ch.Choices {
			b.WriteString(c.Delta.Content)
		}
	}
}

func chunk(content, finish string) string {
	fr := "null"
	if finish != "" {
		fr = fmt.Sprintf("%q", finish)
	}
	return fmt.Sprintf(`data: {"choices":[{"finish_reason":%s,"index":0,"delta":{"content":%q}}],"object":"chat.completion.chunk"}`+"\n\n", fr, content)
}

// TestStreamReadsWhatServersSend covers the SSE forms other servers (and proxies) send, and the broken and failed
// streams a CPU llama-server cannot be made to produce at will.
func TestStreamReadsWhatServersSend(t *testing.T) {
	long := strings.Repeat("x", 200<<10) // a chunk longer than the reader's 64 KiB buffer
	for _, tc := range []struct {
		name, body string
		status     int
		want       string
		err        string // substring of the error; "" for none
		broken     bool
	}{
		{name: "llama-server's form", body: chunk("a", "") + chunk("b", "stop") + "data: [DONE]\n\n", want: "ab"},
		{name: "CRLF, comments, events, blank keep-alives, no space after data:",
			body: ": ping\r\n\r\n\r\nevent: message\r\nid: 1\r\n" + strings.Replace(strings.ReplaceAll(chunk("a", ""), "\n", "\r\n"), "data: ", "data:", 1) +
				"retry: 10\n" + chunk("b", "stop") + "data: [DONE]", want: "ab"},
		{name: "a long chunk", body: chunk(long, "") + chunk("", "stop") + "data: [DONE]\n\n", want: long},
		{name: "no [DONE] after a finish reason", body: chunk("a", "") + chunk("b", "length"), want: "ab"},
		{name: "cut off before the finish", body: chunk("a", "") + chunk("b", ""), want: "ab", broken: true},
		{name: "cut off mid-line", body: chunk("a", "") + `data: {"choices":[{"delta":{"content":"b`, want: "a", broken: true},
		{name: "a last chunk without its line end", body: chunk("a", "") + strings.TrimSpace(chunk("b", "stop")), want: "ab"},
		{name: "an error chunk", body: chunk("a", "") + `data: {"error":{"code":500,"message":"the model crashed","type":"server_error"}}` + "\n\n",
			want: "a", err: "the model crashed"},
		{name: "an error event", body: chunk("a", "") + `error: {"code":500,"message":"out of memory","type":"server_error"}` + "\n\n",
			want: "a", err: "out of memory"},
		{name: "not JSON", body: "data: <html>\n\n", err: "bad chunk"},
		{name: "a line without end", body: chunk("a", "") + "data: " + strings.Repeat("x", maxLine+1<<20), want: "a", err: "longer than 32 MiB"},
		{name: "an HTTP error", status: 400, body: `{"error":{"code":400,"message":"the request exceeds the available context size","type":"exceed_context_size_error"}}`,
			err: "exceeds the available context size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status := tc.status
			if status == 0 {
				status = http.StatusOK
			}
			got, err := readAll(context.Background(), t, sseServer(t, status, tc.body))
			if got != tc.want {
				t.Errorf("text %.40q, want %.40q", got, tc.want)
			}
			switch {
			case tc.broken:
				if !errors.Is(err, ErrStreamBroken) {
					t.Errorf("err = %v, want ErrStreamBroken", err)
				}
			case tc.err == "":
				if err != nil {
					t.Errorf("err = %v", err)
				}
			case err == nil || !strings.Contains(err.Error(), tc.err):
				t.Errorf("err = %v, want one with %q", err, tc.err)
			}
			if tc.status != 0 && StatusCode(err) != tc.status {
				t.Errorf("StatusCode(%v) = %d, want %d", err, StatusCode(err), tc.status)
			}
		})
	}
}

// TestStreamDoesNotHangOnAServerThatStaysOpen: a server that sends [DONE] and keeps the response open must not
// hold up Recv (it reads the rest of the body so the connection can be reused).
func TestStreamDoesNotHangOnAServerThatStaysOpen(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, chunk("a", "stop")+"data: [DONE]\n\n")
		w.(http.Flusher).Flush()
		<-release
	}))
	defer srv.Close()
	defer close(release)
	done := make(chan error, 1)
	go func() { _, err := readAll(context.Background(), t, NewClient(srv.URL, "")); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Recv still waiting 10 s after [DONE]")
	}
}

// TestStreamReusesTheConnection: after [DONE] the stream reads the end of the body, so a server that keeps
// connections alive after a stream (vLLM, OpenAI; llama-server closes them) serves the next request on the same
// one. go-openai's reader stopped at [DONE], and closing the unread body closed the connection.
func TestStreamReusesTheConnection(t *testing.T) {
	// The body's end follows [DONE] a moment later, as from a server still finishing its response.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, chunk("a", "")+chunk("b", "stop")+"data: [DONE]\n\n")
		w.(http.Flusher).Flush()
		time.Sleep(50 * time.Millisecond)
	}))
	defer srv.Close()
	c := NewClient(srv.URL, "")
	var reused []bool
	for range 3 {
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			GotConn: func(i httptrace.GotConnInfo) { reused = append(reused, i.Reused) }})
		if _, err := readAll(ctx, t, c); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(reused, []bool{false, true, true}) {
		t.Fatalf("connections reused: %v, want [false true true]", reused)
	}
}

// BenchmarkStreamRead is the client's own cost per streamed token, without a model: a local server replays a
// 512-token llama-server stream, read by visor's stream and by a plain line read (bufio and two byte searches,
// nothing decoded) in alternating order. It reports both in ns per token and their ratio (1.0 = no overhead).
// On a server that shares its cores with the client, this time is taken from generation.
func BenchmarkStreamRead(b *testing.B) {
	const tokens = 512
	line := `data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":" the"}}],"created":1796025271,"id":"chatcmpl-WhERZKtrp3AMgtmyI8sxQb9DOC33JtnQ","model":"models/stories260K.gguf","system_fingerprint":"b11669-Debian","object":"chat.completion.chunk"}` + "\n\n"
	body := strings.Repeat(line, tokens) + `data: {"choices":[{"finish_reason":"length","index":0,"delta":{}}],"created":1,"id":"x","object":"chat.completion.chunk","timings":{"predicted_n":512}}` + "\n\ndata: [DONE]\n\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	c := NewClient(srv.URL, "")
	visor := func() {
		if text, err := readAll(context.Background(), b, c); err != nil || len(text) != 4*tokens {
			b.Fatalf("read %d bytes: %v", len(text), err)
		}
	}
	raw := func() {
		resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{}`))
		if err != nil {
			b.Fatal(err)
		}
		br := bufio.NewReader(resp.Body)
		n := 0
		for {
			l, err := br.ReadSlice('\n')
			if bytes.Contains(l, []byte(`"content":"`)) {
				n++
			}
			_ = bytes.Contains(l, []byte(`"timings":`))
			if err != nil {
				break
			}
		}
		_ = resp.Body.Close()
		if n != tokens {
			b.Fatalf("raw read %d tokens", n)
		}
	}
	visor()
	raw()
	var vNS, rNS time.Duration
	b.ResetTimer()
	for i := range b.N {
		first, second := visor, raw
		if i%2 == 1 {
			first, second = raw, visor
		}
		t0 := time.Now()
		first()
		t1 := time.Now()
		second()
		d0, d1 := t1.Sub(t0), time.Since(t1)
		if i%2 == 1 {
			d0, d1 = d1, d0
		}
		vNS += d0
		rNS += d1
	}
	b.ReportMetric(float64(vNS.Nanoseconds())/float64(b.N*tokens), "visor-ns/token")
	b.ReportMetric(float64(rNS.Nanoseconds())/float64(b.N*tokens), "raw-ns/token")
	b.ReportMetric(float64(vNS)/float64(rNS), "visor/raw")
}

// TestStreamCanceledMidway: a caller's cancel mid-stream is reported as the cancel (errors.Is context.Canceled),
// not as a broken stream or a bad chunk, even when it cuts a line in half.
func TestStreamCanceledMidway(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, chunk("a", "")+`data: {"choices":[{"delta":{"content":"b`)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	ctx, cancel := context.WithCancel(context.Background())
	st, err := NewClient(srv.URL, "").ChatStream(ctx, Request{ChatCompletionRequest: openai.ChatCompletionRequest{
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if ch, err := st.Recv(); err != nil || ch.Choices[0].Delta.Content != "a" {
		t.Fatalf("first chunk: %+v %v", ch, err)
	}
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err = st.Recv()
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrStreamBroken) || errors.Is(err, io.EOF) {
		t.Fatalf("after the cancel: %v, want context.Canceled", err)
	}
}

// A stream that starts and then sends nothing more (a hung server, a stalled connection: a FAKE server, named so,
// since a real llama-server cannot be made to hang at will) ends with ErrStreamIdle after the client's bound,
// not a wait as long as the caller's context.
func TestStreamIdleBound(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, chunk("partial ", ""))
		w.(http.Flusher).Flush()
		select { // never sends again
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	c := NewClient(srv.URL, "")
	c.SetStreamIdle(200 * time.Millisecond)
	// The caller's own bound is far away: only the idle bound can end this read.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	text, err := readAll(ctx, t, c)
	if !errors.Is(err, ErrStreamIdle) || ctx.Err() != nil || text != "partial " {
		t.Fatalf("a stalled stream: %q, %v (context: %v); want the partial text and ErrStreamIdle", text, err, ctx.Err())
	}
	if !strings.Contains(err.Error(), "nothing arrived for 200ms") || !strings.Contains(err.Error(), "VISOR_STREAM_IDLE") {
		t.Errorf("the error does not say the bound and how to change it: %v", err)
	}
	if errors.Is(err, ErrStreamBroken) || errors.Is(err, io.EOF) {
		t.Errorf("an idle stream must not read as broken or complete: %v", err)
	}
	if NewClient(srv.URL, "").idle != DefaultStreamIdle {
		t.Errorf("a new client's idle bound is not DefaultStreamIdle")
	}
}
