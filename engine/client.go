package engine

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"github.com/tidwall/gjson"
)

// Client speaks the OpenAI-compatible chat API of llama-server or any remote endpoint (vLLM, SGLang, another
// llama-server host). It is safe for concurrent use.
type Client struct {
	base  string
	shown string // base with any credentials redacted, for errors
	oa    *openai.Client
	http  *http.Client
	key   string
	idle  time.Duration // a started stream's bound on silence; 0: none
}

// NewClient returns a client for baseURL, the server's root (e.g. http://127.0.0.1:8080) or its /v1 URL.
// apiKey may be empty for a local server.
func NewClient(baseURL, apiKey string) *Client {
	root := strings.TrimSuffix(strings.TrimRight(baseURL, "/"), "/v1")
	hc := &http.Client{}
	cfg := openai.DefaultConfig(apiKey)
	cfg.BaseURL = root + "/v1"
	cfg.HTTPClient = &extraDoer{next: hc}
	return &Client{base: root, shown: RedactURL(root), oa: openai.NewClientWithConfig(cfg), http: hc, key: apiKey,
		idle: DefaultStreamIdle}
}

// SetStreamIdle sets how long a started stream may send nothing before Recv fails with ErrStreamIdle (0: wait
// as long as the context allows). The default is DefaultStreamIdle.
func (c *Client) SetStreamIdle(d time.Duration) { c.idle = d }

// BaseURL returns the server root the client talks to, with any credentials in it redacted (RedactURL): it is
// for showing, and the client keeps the real one.
func (c *Client) BaseURL() string { return c.shown }

// Extra holds the llama.cpp request fields go-openai lacks. Nil pointers are left out of the request.
type Extra struct {
	CachePrompt *bool
	IDSlot      *int
	NPredict    *int
	// Fields are merged into the request body last, for anything else the server understands.
	Fields map[string]any
}

func (e Extra) fields() map[string]any {
	m := map[string]any{}
	if e.CachePrompt != nil {
		m["cache_prompt"] = *e.CachePrompt
	}
	if e.IDSlot != nil {
		m["id_slot"] = *e.IDSlot
	}
	if e.NPredict != nil {
		m["n_predict"] = *e.NPredict
	}
	for k, v := range e.Fields {
		m[k] = v
	}
	return m
}

// Request is a chat request plus llama.cpp extras. ChatTemplateKwargs is go-openai's own field.
type Request struct {
	openai.ChatCompletionRequest
	Extra Extra
	// inline are the image parts AddImage noted, in message order, whose JSON the body takes from cache.
	inline []*Inline
}

// Timings is llama-server's per-request timing block, including speculative-decoding counters.
type Timings struct {
	CacheN             int     `json:"cache_n"`
	PromptN            int     `json:"prompt_n"`
	PromptMS           float64 `json:"prompt_ms"`
	PromptPerSecond    float64 `json:"prompt_per_second"`
	PredictedN         int     `json:"predicted_n"`
	PredictedMS        float64 `json:"predicted_ms"`
	PredictedPerSecond float64 `json:"predicted_per_second"`
	DraftN             int     `json:"draft_n"`
	DraftNAccepted     int     `json:"draft_n_accepted"`
}

// Response is a complete chat answer with the server's timings when it reports them.
type Response struct {
	openai.ChatCompletionResponse
	Timings *Timings
}

// Chat sends a non-streaming request.
func (c *Client) Chat(ctx context.Context, req Request) (Response, error) {
	req.Stream = false
	var raw []byte
	ctx = withExtra(ctx, req.Extra, &raw)
	resp, err := c.oa.CreateChatCompletion(ctx, req.ChatCompletionRequest)
	if err != nil {
		return Response{}, fmt.Errorf("chat completion at %s: %w", c.shown, redactErr(err))
	}
	return Response{ChatCompletionResponse: resp, Timings: timingsFrom(raw)}, nil
}

// Chunk is one streamed delta. Timings is set on the chunk that carries them (llama-server: the last one).
type Chunk struct {
	openai.ChatCompletionStreamResponse
	Timings *Timings
}

func timingsFrom(raw []byte) *Timings {
	if len(raw) == 0 || !bytes.Contains(raw, []byte(`"timings"`)) {
		return nil
	}
	r := gjson.GetBytes(raw, "timings")
	if !r.IsObject() {
		return nil
	}
	var t Timings
	if err := json.Unmarshal([]byte(r.Raw), &t); err != nil {
		return nil
	}
	return &t
}

// ImagePart makes an image content part as a data URI, the form llama-server and OpenAI accept. The bytes are
// sent unchanged so the server's image cache (keyed on decoded pixels) hits on every later turn.
func ImagePart(mime string, data []byte) openai.ChatMessagePart {
	return openai.ChatMessagePart{
		Type:     openai.ChatMessagePartTypeImageURL,
		ImageURL: &openai.ChatMessageImageURL{URL: "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(data)},
	}
}

type extraKey struct{}

type extraVal struct {
	fields map[string]any
	raw    *[]byte
}

func withExtra(ctx context.Context, e Extra, raw *[]byte) context.Context {
	f := e.fields()
	if len(f) == 0 && raw == nil {
		return ctx
	}
	return context.WithValue(ctx, extraKey{}, extraVal{fields: f, raw: raw})
}

// extraDoer merges request-scoped llama.cpp fields into the JSON body and keeps the raw non-streamed response,
// so go-openai stays unforked and its types stay ours to extend.
type extraDoer struct{ next *http.Client }

func (d *extraDoer) Do(req *http.Request) (*http.Response, error) {
	// llama-server closes idle keep-alive connections; a request written onto one that just closed fails with
	// EOF before the server saw it. Marking the request idempotent (the header is not sent with a nil value) lets
	// net/http retry it on a fresh connection in exactly that case.
	req.Header["X-Idempotency-Key"] = nil
	ev, ok := req.Context().Value(extraKey{}).(extraVal)
	if !ok {
		return d.next.Do(req)
	}
	if len(ev.fields) > 0 && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("read request body: %w", err)
		}
		if body, err = mergeFields(body, ev.fields); err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	resp, err := d.next.Do(req)
	if err != nil || ev.raw == nil {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read response body: %w", err)
	}
	*ev.raw = body
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// mergeFields sets fields at the top level of the JSON object body. A screenshot makes the body megabytes of
// base64, and a decode and re-encode of it cost tens of milliseconds on the critical path of every turn, so
// when no field's key occurs in body (as "key": anywhere, which over-approximates the top level) the fields are
// appended before the closing brace. Otherwise the object is decoded and re-encoded, and a field replaces the
// key the body already has.
func mergeFields(body []byte, fields map[string]any) ([]byte, error) {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	enc := make([][]byte, len(keys))
	clash := false
	for i, k := range keys {
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(fields[k])
		if err != nil {
			return nil, fmt.Errorf("merge llama.cpp field %s: %w", k, err)
		}
		enc[i] = append(append(kb, ':'), vb...)
		clash = clash || bytes.Contains(body, append(kb, ':'))
	}
	trimmed := bytes.TrimRight(body, " \t\r\n")
	if !clash && len(trimmed) >= 2 && trimmed[0] == '{' && trimmed[len(trimmed)-1] == '}' {
		out := make([]byte, 0, len(trimmed)+64*len(enc))
		out = append(out, trimmed[:len(trimmed)-1]...)
		empty := len(bytes.TrimSpace(trimmed[1:len(trimmed)-1])) == 0
		for i, e := range enc {
			if i > 0 || !empty {
				out = append(out, ',')
			}
			out = append(out, e...)
		}
		return append(out, '}'), nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("merge llama.cpp fields: %w", err)
	}
	for i, k := range keys {
		m[k] = enc[i][bytes.IndexByte(enc[i], ':')+1:]
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("merge llama.cpp fields: %w", err)
	}
	return out, nil
}

// Get fetches a JSON endpoint of the server (e.g. /props, /slots) into out.
func (c *Client) Get(ctx context.Context, path string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return c.exchange(ctx, http.MethodGet, path, nil, out)
}

// newRequest is a request to the server's path with what every request of visor's carries: the API key, and
// the mark (an idempotency key, not sent with a nil value) that lets net/http retry a request written onto a
// keep-alive connection the server had just closed, which llama-server does after every streamed answer.
func (c *Client) newRequest(ctx context.Context, method, path string, body []byte) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s%s: %w", method, c.shown, path, redactErr(err))
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	req.Header["X-Idempotency-Key"] = nil
	return req, nil
}

// exchange sends body (none when nil) to path and decodes the JSON answer into out; a non-200 answer is an
// *HTTPError. Every URL in its errors is redacted.
func (c *Client) exchange(ctx context.Context, method, path string, body []byte, out any) error {
	req, err := c.newRequest(ctx, method, path, body)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s%s: %w", method, c.shown, path, redactErr(err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s%s: %w", method, c.shown, path, redactErr(err))
	}
	if resp.StatusCode != http.StatusOK {
		return &HTTPError{URL: c.shown + path, Status: resp.StatusCode, Body: strings.TrimSpace(string(raw))}
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s%s: decode: %w", method, c.shown, path, err)
	}
	return nil
}

// HTTPError is a non-200 answer from the server.
type HTTPError struct {
	URL    string
	Status int
	Body   string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("%s: HTTP %d: %.300s", e.URL, e.Status, e.Body)
}

// StatusCode is the HTTP status a server answered a failed request with (0 when it did not answer): visor's own
// HTTPError and go-openai's API and request errors all carry it.
func StatusCode(err error) int {
	var he *HTTPError
	if errors.As(err, &he) {
		return he.Status
	}
	var ae *openai.APIError
	if errors.As(err, &ae) {
		return ae.HTTPStatusCode
	}
	var re *openai.RequestError
	if errors.As(err, &re) {
		return re.HTTPStatusCode
	}
	return 0
}
