package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/tidwall/gjson"

	"github.com/visorhq/visor/internal/httpguard"
)

// MaxFrameBytes bounds one stdio frame (one line): the same bound as an HTTP body, which carries an image of the
// documented 20 MiB limit in base64 with room for the prompt.
const MaxFrameBytes = httpguard.MaxBodyBytes

// utf8BOM is U+FEFF in UTF-8.
var utf8BOM = []byte("\uFEFF")

// JSON-RPC 2.0 error codes for frames that never reach the SDK.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
)

// screenFrames reads newline-delimited frames from r and passes each well-formed JSON-RPC 2.0 message, one per
// line, to forward. A frame the SDK would stop on (not JSON, a NUL byte, a wrong "jsonrpc", a batch, more than
// max bytes) is answered on reply with a JSON-RPC error instead, and reading goes on: one bad line from a client
// must not end the server. It returns nil at the end of r, or the first read or write error.
func screenFrames(r io.Reader, forward, reply io.Writer, max int) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		line, tooLong, err := readLine(br, max)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		// Trimmed: the SDK stops on anything but a line ending after the value, a space or a tab included.
		// A byte order mark first is skipped, as JSON readers that take files do: Windows PowerShell's pipes and
		// "UTF-8 with BOM" files start with one, and encoding/json calls it "invalid character 'ï'".
		frame := bytes.TrimSpace(bytes.TrimPrefix(bytes.TrimSpace(line), utf8BOM))
		if len(frame) > 0 || tooLong {
			if resp := checkFrame(n, frame, tooLong, max); resp != nil {
				if _, werr := reply.Write(resp); werr != nil {
					return werr
				}
			} else if _, werr := forward.Write(append(frame, '\n')); werr != nil {
				return werr
			}
		}
		if err != nil {
			return nil // io.EOF
		}
	}
}

// readLine returns the next line without its line ending. A line longer than max is read to its end and
// dropped, reported as tooLong, so memory stays bounded whatever the client sends.
func readLine(br *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > max+2 { // +2: the line ending is not part of the frame
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimRight(line, "\r\n"), tooLong, err
	}
}

// checkFrame returns the error response for a frame the SDK must not see, or nil for a good one.
func checkFrame(n int, line []byte, tooLong bool, max int) []byte {
	if tooLong {
		return errorResponse(nil, codeInvalidRequest, fmt.Sprintf("frame %d is longer than %d bytes (%d MiB), the most "+
			"this server reads: send images of at most 20 MiB each, fewer per call", n, max, max>>20))
	}
	// A good frame is scanned, not decoded: one may carry 27 MiB of base64, which decoding into any copies into
	// a string and a map before the SDK parses it again. Only a frame that fails is decoded, to say why.
	if len(line) > 0 && line[0] == '{' && json.Valid(line) {
		if _, err := jsonrpc.DecodeMessage(line); err == nil {
			if msg := badID(line); msg != "" {
				return errorResponse(nil, codeInvalidRequest, fmt.Sprintf("frame %d: %s", n, msg))
			}
			return nil
		}
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber() // an id must come back exactly as sent, however many digits it has
	err := dec.Decode(&v)
	if err == nil && len(bytes.TrimSpace(line[dec.InputOffset():])) > 0 {
		err = errors.New("more follows the first JSON value")
	}
	if err != nil {
		return errorResponse(nil, codeParseError, fmt.Sprintf("parse error: frame %d is not valid JSON (%v): send one "+
			"JSON-RPC 2.0 object per line, with no raw control characters such as NUL", n, err))
	}
	obj, ok := v.(map[string]any)
	if !ok {
		what := fmt.Sprintf("a JSON %T", v)
		if _, batch := v.([]any); batch {
			return errorResponse(nil, codeInvalidRequest, fmt.Sprintf("frame %d is a batch (a JSON array): this server "+
				"takes one message per line, as MCP does since 2025-06-18", n))
		}
		return errorResponse(nil, codeInvalidRequest, fmt.Sprintf("frame %d is %s, not a JSON-RPC request object", n, what))
	}
	id := obj["id"]
	switch id.(type) {
	case string, json.Number:
	default:
		id = nil
	}
	if obj["jsonrpc"] != "2.0" {
		return errorResponse(id, codeInvalidRequest, fmt.Sprintf(`frame %d has "jsonrpc": %s: set "jsonrpc": "2.0"`, n,
			jsonText(obj["jsonrpc"])))
	}
	// The SDK's own decoder has the last word: what it refuses would end the connection.
	if _, err := jsonrpc.DecodeMessage(line); err != nil {
		return errorResponse(id, codeInvalidRequest, fmt.Sprintf("frame %d is not a valid JSON-RPC 2.0 message (%v): a "+
			`request needs "method" (and "id" unless it is a notification), a response needs "id"`, n, err))
	}
	return nil
}

// badID says what is wrong with a message's "id" that the SDK would take but not send back as sent: it reads
// an id as an int64, so 1.5 comes back as 1 and 2^64 as -2^63, and the client never matches the answer; a null
// id gets no answer at all. "" for a good id (a string, an integer in range) or none (a notification). Only the
// id is read: a frame may carry 27 MiB of base64.
func badID(msg []byte) string {
	id := gjson.GetBytes(msg, "id")
	switch {
	case !id.Exists() || id.Type == gjson.String:
		return ""
	case id.Type == gjson.Null:
		if gjson.GetBytes(msg, "method").Exists() { // an error response may have a null id
			return `"id" is null: give a request a string or integer id, or leave "id" out of a notification`
		}
		return ""
	case id.Type == gjson.Number:
		if _, err := strconv.ParseInt(id.Raw, 10, 64); err != nil {
			return fmt.Sprintf(`"id" %.40s is not an integer from -2^63 to 2^63-1, so it could not be answered as sent: `+
				`use a string or a smaller integer`, id.Raw)
		}
		return ""
	}
	return "" // objects, arrays and booleans the SDK refuses itself
}

// screenIDs wraps the streamable HTTP handler so a POST body whose message (or batch element) has an id the SDK
// would answer under another id is refused with a JSON-RPC error naming it, as stdio frames are.
func screenIDs(next http.Handler, idle time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get("Mcp-Session-Id"); id != "" {
			nf := &sessionNotFound{ResponseWriter: w, id: id, idle: idle}
			defer nf.finish()
			w = nf
		}
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body) // bounded by the guard's MaxBodyBytes; the SDK reads it whole too
		if err != nil {
			httpguard.Error(w, http.StatusRequestEntityTooLarge, "read the request body: %v", err)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		msgs := []gjson.Result{gjson.ParseBytes(body)}
		if msgs[0].IsArray() {
			msgs = msgs[0].Array()
		}
		for i, m := range msgs {
			if !m.IsObject() {
				continue
			}
			if msg := badID([]byte(m.Raw)); msg != "" {
				if len(msgs) > 1 {
					msg = fmt.Sprintf("batch element %d: %s", i, msg)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write(errorResponse(nil, codeInvalidRequest, msg))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// sessionNotFound rewrites the SDK's plain "session not found" (an Mcp-Session-Id it does not hold) into an
// error that says why a session goes and what to send instead; every other answer passes through.
type sessionNotFound struct {
	http.ResponseWriter
	id   string
	idle time.Duration
	held bool // a plain-text 404 whose body is being read
	body bytes.Buffer
}

func (w *sessionNotFound) WriteHeader(code int) {
	if code == http.StatusNotFound && strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.held = true
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *sessionNotFound) Write(p []byte) (int, error) {
	if w.held {
		return w.body.Write(p)
	}
	return w.ResponseWriter.Write(p)
}

// Flush keeps the SDK's event streams flowing through the wrapper.
func (w *sessionNotFound) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && !w.held {
		f.Flush()
	}
}

func (w *sessionNotFound) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *sessionNotFound) finish() {
	if !w.held {
		return
	}
	if strings.TrimSpace(w.body.String()) == "session not found" {
		httpguard.Error(w.ResponseWriter, http.StatusNotFound, "MCP session %.40q is not one this server holds (a "+
			"session ends after %s without a request, on DELETE, or when the server restarts): send \"initialize\" "+
			"again without an Mcp-Session-Id header", w.id, w.idle)
		return
	}
	w.ResponseWriter.WriteHeader(http.StatusNotFound)
	_, _ = w.ResponseWriter.Write(w.body.Bytes())
}

func jsonText(v any) string {
	if v == nil {
		return "missing"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func errorResponse(id any, code int, msg string) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
	return append(b, '\n')
}

// lockedWriter keeps whole frames whole: the SDK writes each message in one Write, and so do error replies,
// but the two come from different goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
