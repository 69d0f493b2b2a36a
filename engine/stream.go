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
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
	"github.com/tidwall/gjson"
)

// Stream is an open streaming response. Recv returns io.EOF after the server's [DONE].
//
// Visor reads the SSE stream itself instead of through go-openai's reader, which matched two regular expressions
// against every line and decoded every chunk by reflection: 6.1× a plain line read's client time a token
// (8.8 µs against 1.4 µs, BenchmarkStreamRead), now 3.0× (3.1 µs against 1.0). Against a real CPU server a 512-token request took the
// client 58–66 ms of CPU through go-openai, 51–52 ms now and 49–53 ms read plain. Reading to the end of the body
// also lets a server that keeps connections alive reuse them.
type Stream struct {
	body   io.ReadCloser
	r      *bufio.Reader
	cancel context.CancelFunc
	base   string // redacted
	long   []byte // a line longer than r's buffer, assembled
	// finished is set once a finish_reason arrived, ended once the server's [DONE] did: a stream that closes
	// after a finish_reason but without [DONE] (some servers omit it) is complete; one that closes before is
	// broken.
	finished, ended bool
	// idle bounds the wait for each next line; idleTimer cuts the request when it passes, and idled says it did.
	idle      time.Duration
	idleTimer *time.Timer
	idled     atomic.Bool
}

// ChunkStream is a streamed answer, chunk by chunk; *Stream implements it. Consumers take this interface so a
// recorded stream can stand in for a server in unit tests.
type ChunkStream interface {
	Recv() (Chunk, error)
	Close() error
}

// ErrStreamBroken reports a stream that ended before the server said it was done (server crash, dropped
// connection).
var ErrStreamBroken = errors.New("stream ended before the server finished")

// ErrStreamIdle reports a stream that started and then sent nothing for longer than the client's idle bound
// (SetStreamIdle): a server that hangs, or a connection that stalls without closing.
var ErrStreamIdle = errors.New("the server stopped sending")

// DefaultStreamIdle is the longest a started stream may send nothing before it is cut off. A token, a tool
// call's piece or a keep-alive line comes every few seconds at most once the answer streams (the long wait, the
// prompt's evaluation, comes before llama-server sends its first line); a minute of silence after that is a
// hung server, and five leave room for a slow remote endpoint.
const DefaultStreamIdle = 5 * time.Minute

// ChatStream starts a streaming request.
func (c *Client) ChatStream(ctx context.Context, req Request) (ChunkStream, error) {
	req.Stream = true
	body, err := chatBody(req)
	if err != nil {
		return nil, fmt.Errorf("chat stream at %s: %w", c.shown, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	resp, err := c.doFresh(ctx, func() (*http.Request, error) {
		hr, err := c.newRequest(ctx, http.MethodPost, "/v1/chat/completions", body)
		if err != nil {
			return nil, fmt.Errorf("chat stream: %w", err)
		}
		hr.Header.Set("Accept", "text/event-stream")
		return hr, nil
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("chat stream at %s: %w", c.shown, redactErr(err))
	}
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		defer cancel()
		defer resp.Body.Close()
		return nil, fmt.Errorf("chat stream at %s: %w", c.shown, statusError(resp))
	}
	st := &Stream{body: resp.Body, r: bufio.NewReaderSize(resp.Body, 64<<10), cancel: cancel, base: c.shown, idle: c.idle}
	if st.idle > 0 {
		st.idleTimer = time.AfterFunc(st.idle, func() {
			st.idled.Store(true)
			cancel()
		})
	}
	return st, nil
}

// doFresh sends the request build makes and, when it failed on a kept-alive connection, sends a new one (twice
// at most). llama-server closes the connection of a streamed answer soon after it ends, so a request written onto
// it races the close; net/http retries that only when nothing of the body went out, and a body of megabytes (a
// conversation with screenshots) loses the race after its first bytes did ("use of closed network connection").
// The server acts on a request only once it has read all of it, so sending it again is safe.
func (c *Client) doFresh(ctx context.Context, build func() (*http.Request, error)) (*http.Response, error) {
	for try := 0; ; try++ {
		hr, err := build()
		if err != nil {
			return nil, err
		}
		reused := false
		hr = hr.WithContext(httptrace.WithClientTrace(hr.Context(), &httptrace.ClientTrace{
			GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}))
		resp, err := c.http.Do(hr)
		if err == nil || !reused || try == 2 || ctx.Err() != nil {
			return resp, err
		}
	}
}

// statusError is a failed answer as go-openai reports it (an *openai.APIError with the server's message, or an
// *openai.RequestError with its body), so StatusCode and every caller that reads the message see one shape for
// streamed and plain requests.
func statusError(resp *http.Response) error {
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("HTTP %d: reading the error body: %w", resp.StatusCode, err)
	}
	var er openai.ErrorResponse
	if err := json.Unmarshal(body, &er); err != nil || er.Error == nil {
		return &openai.RequestError{HTTPStatus: resp.Status, HTTPStatusCode: resp.StatusCode, Err: err, Body: body}
	}
	er.Error.HTTPStatus, er.Error.HTTPStatusCode = resp.Status, resp.StatusCode
	return er.Error
}

// Recv returns the next chunk.
func (s *Stream) Recv() (Chunk, error) {
	if s.ended {
		return Chunk{}, io.EOF
	}
	for {
		line, err := s.line()
		if s.idled.Load() {
			return Chunk{}, fmt.Errorf("stream from %s: %w: nothing arrived for %s (the engine hangs or the connection stalled; the bound is VISOR_STREAM_IDLE)", s.base, ErrStreamIdle, s.idle)
		}
		eof := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
		if err != nil && !eof {
			return Chunk{}, fmt.Errorf("stream from %s: %w", s.base, redactErr(err))
		}
		if eof && len(line) == 0 {
			if s.finished {
				s.ended = true
				return Chunk{}, io.EOF
			}
			return Chunk{}, s.broken(err)
		}
		data, ok := field(line, "data")
		if !ok {
			if msg, isErr := field(line, "error"); isErr {
				return Chunk{}, fmt.Errorf("stream from %s: %w", s.base, eventError(msg))
			}
			// Blank lines end events (llama-server also sends them alone while it prefills a long prompt), and
			// comments and other fields (event:, id:, retry:) carry nothing visor reads.
			continue
		}
		if len(data) == 0 {
			continue
		}
		if string(data) == "[DONE]" {
			s.ended = true
			s.drain()
			return Chunk{}, io.EOF
		}
		var ch Chunk
		if derr := decodeChunk(data, &ch); derr != nil {
			if eof {
				// The last line, cut off: the stream broke in the middle of a chunk.
				return Chunk{}, s.broken(fmt.Errorf("%w, in a chunk cut off at %d bytes", err, len(data)))
			}
			return Chunk{}, fmt.Errorf("stream from %s: %w", s.base, derr)
		}
		for _, c := range ch.Choices {
			if c.FinishReason != "" {
				s.finished = true
			}
		}
		return ch, nil
	}
}

// broken is ErrStreamBroken with its cause as text, not wrapped: a broken stream must not satisfy
// errors.Is(err, io.EOF), which every reader takes for the end of a complete answer.
func (s *Stream) broken(cause error) error {
	return fmt.Errorf("%w (%s): %v", ErrStreamBroken, s.base, redactErr(cause))
}

// line returns the next line without its line ending; the slice is valid until the next call.
func (s *Stream) line() ([]byte, error) {
	l, err := s.readSlice()
	if errors.Is(err, bufio.ErrBufferFull) {
		s.long = append(s.long[:0], l...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if len(s.long) > maxLine {
				// A remote endpoint is outside visor's control: one line must not take all memory.
				return nil, fmt.Errorf("a stream line longer than %d MiB", maxLine>>20)
			}
			l, err = s.readSlice()
			s.long = append(s.long, l...)
		}
		l = s.long
	}
	return bytes.TrimRight(l, "\r\n"), err
}

// readSlice reads up to a newline (or a full buffer); what arrives restarts the idle bound.
func (s *Stream) readSlice() ([]byte, error) {
	l, err := s.r.ReadSlice('\n')
	if s.idleTimer != nil && len(l) > 0 && !s.idled.Load() {
		s.idleTimer.Reset(s.idle)
	}
	return l, err
}

// maxLine bounds one SSE line: a chunk is a few hundred bytes, and a whole tool call's arguments in one chunk
// stay far below it.
const maxLine = 32 << 20

// field returns the value of an SSE line "name: value" (the space is optional).
func field(line []byte, name string) ([]byte, bool) {
	if len(line) <= len(name) || string(line[:len(name)]) != name || line[len(name)] != ':' {
		return nil, false
	}
	v := line[len(name)+1:]
	if len(v) > 0 && v[0] == ' ' {
		v = v[1:]
	}
	return v, true
}

// drain reads what follows [DONE] (the end of the chunked body), so the connection goes back to the pool
// instead of being closed: the raw read a user compares with does the same. A server that keeps the response
// open after [DONE] is cut off after a second instead of hanging the caller.
func (s *Stream) drain() {
	t := time.AfterFunc(time.Second, s.cancel)
	defer t.Stop()
	_, _ = io.Copy(io.Discard, io.LimitReader(s.r, 64<<10))
}

// Close releases the connection; closing mid-stream makes llama-server stop generating.
func (s *Stream) Close() error {
	if s.idleTimer != nil {
		s.idleTimer.Stop()
	}
	err := s.body.Close()
	s.cancel()
	return err
}

// eventError is a server's error event or error chunk ({"error": {...}} or {"message": ...}).
func eventError(data []byte) error {
	var er openai.ErrorResponse
	if json.Unmarshal(data, &er) == nil && er.Error != nil {
		return er.Error
	}
	var ae openai.APIError
	if json.Unmarshal(data, &ae) == nil && ae.Message != "" {
		return &ae
	}
	return fmt.Errorf("server error: %.300s", data)
}

// decodeChunk fills ch from one chunk's JSON in a single pass over its keys. The fields visor reads are taken
// directly; the rare ones (tool calls, a legacy function call, log-probabilities, usage, timings) go through
// encoding/json.
func decodeChunk(data []byte, ch *Chunk) error {
	if !gjson.ValidBytes(data) {
		return fmt.Errorf("bad chunk %.200q", data)
	}
	root := gjson.Parse(string(data))
	if !root.IsObject() {
		return fmt.Errorf("bad chunk %.200q: not an object", data)
	}
	var err error
	root.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "id":
			ch.ID = str(v)
		case "object":
			ch.Object = str(v)
		case "created":
			ch.Created = v.Int()
		case "model":
			ch.Model = str(v)
		case "system_fingerprint":
			ch.SystemFingerprint = str(v)
		case "choices":
			if v.IsArray() {
				ch.Choices = make([]openai.ChatCompletionStreamChoice, 0, 1)
				v.ForEach(func(_, c gjson.Result) bool {
					var cc openai.ChatCompletionStreamChoice
					err = decodeChoice(c, &cc)
					ch.Choices = append(ch.Choices, cc)
					return err == nil
				})
			}
		case "usage":
			if v.IsObject() {
				ch.Usage, err = decodeNew[openai.Usage](v)
			}
		case "timings":
			if v.IsObject() {
				ch.Timings, err = decodeNew[Timings](v)
			}
		case "error":
			if v.Type != gjson.Null {
				err = eventError([]byte(root.Raw))
			}
		case "prompt_annotations":
			if v.IsArray() {
				err = json.Unmarshal([]byte(v.Raw), &ch.PromptAnnotations)
			}
		case "prompt_filter_results":
			if v.IsArray() {
				err = json.Unmarshal([]byte(v.Raw), &ch.PromptFilterResults)
			}
		}
		return err == nil
	})
	if err != nil && !isServerError(err) {
		return fmt.Errorf("bad chunk %.200q: %w", data, err)
	}
	return err
}

// decodeNew decodes a value visor does not read on the hot path with encoding/json.
func decodeNew[T any](v gjson.Result) (*T, error) {
	t := new(T)
	return t, json.Unmarshal([]byte(v.Raw), t)
}

// str is a JSON string's value as encoding/json gives it: each byte that is not UTF-8 becomes U+FFFD.
func str(v gjson.Result) string {
	s := v.String()
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		b.WriteRune(r)
	}
	return b.String()
}

func isServerError(err error) bool {
	var ae *openai.APIError
	return errors.As(err, &ae)
}

func decodeChoice(c gjson.Result, cc *openai.ChatCompletionStreamChoice) error {
	var err error
	c.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "index":
			cc.Index = int(v.Int())
		case "finish_reason":
			cc.FinishReason = openai.FinishReason(str(v))
		case "delta":
			v.ForEach(func(k, v gjson.Result) bool {
				d := &cc.Delta
				switch k.Str {
				case "content":
					d.Content = str(v)
				case "reasoning_content":
					d.ReasoningContent = str(v)
				case "role":
					d.Role = str(v)
				case "refusal":
					d.Refusal = str(v)
				case "tool_calls":
					if v.IsArray() {
						err = json.Unmarshal([]byte(v.Raw), &d.ToolCalls)
					}
				case "function_call":
					if v.IsObject() {
						d.FunctionCall, err = decodeNew[openai.FunctionCall](v)
					}
				}
				return err == nil
			})
		case "logprobs":
			if v.IsObject() {
				cc.Logprobs, err = decodeNew[openai.ChatCompletionStreamChoiceLogprobs](v)
			}
		case "content_filter_results":
			if v.IsObject() {
				err = json.Unmarshal([]byte(v.Raw), &cc.ContentFilterResults)
			}
		}
		return err == nil
	})
	return err
}

// ParseStreamIdle reads VISOR_STREAM_IDLE's value v as the stream bound conductor.Config.StreamIdle takes: a
// Go duration such as 90s or 10m, 0 for no bound (-1 there), "" for DefaultStreamIdle (0 there).
func ParseStreamIdle(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("VISOR_STREAM_IDLE=%q: give a duration such as 90s or 10m (0: no bound)", v)
	}
	if d == 0 {
		return -1, nil
	}
	return d, nil
}
