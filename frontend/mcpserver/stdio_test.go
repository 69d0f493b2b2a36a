package mcpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/frontend/mcpserver"
	"github.com/visorhq/visor/images"
	"github.com/visorhq/visor/internal/testkit"
)

// echoRunner stands in for the agent where the test is about frames, not answers: it answers with the size of
// the images it was given, so a test can see what reached the agent.
type echoRunner struct{}

func (echoRunner) Run(_ context.Context, _ []agent.Message, user agent.Message, _ func(agent.Event)) agent.Finished {
	n := 0
	for _, im := range user.Images {
		n += len(im.Data)
	}
	return agent.Finished{Reason: "answer", Steps: 1, Final: agent.Message{Role: "assistant",
		Content: fmt.Sprintf("%d images, %d bytes", len(user.Images), n)}}
}

func (echoRunner) Prefill(context.Context, []agent.Message, agent.Message) (*engine.Timings, error) {
	return nil, nil
}

type rpcReply struct {
	ID     any             `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// stdio runs ServeIO on pipes, as `visor mcp serve` does on stdin and stdout.
type stdio struct {
	t       *testing.T
	in      *io.PipeWriter
	replies chan rpcReply
	done    chan error
}

func serveStdio(t *testing.T) *stdio {
	t.Helper()
	c := startStdio(t)
	c.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if r := c.reply(); r.ID != "init" || r.Error != nil {
		t.Fatalf("initialize: %+v", r)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c
}

// startStdio is serveStdio before the client's first frame.
func startStdio(t *testing.T) *stdio {
	t.Helper()
	s, err := mcpserver.New(mcpserver.Config{Sessions: testkit.FakeService(t, echoRunner{}, nil)})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &stdio{t: t, in: inW, replies: make(chan rpcReply, 64), done: make(chan error, 1)}
	go func() { c.done <- s.ServeIO(context.Background(), inR, outW); outW.Close() }()
	go func() {
		br := bufio.NewReaderSize(outR, 1<<20)
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				close(c.replies)
				return
			}
			var r rpcReply
			if err := json.Unmarshal(line, &r); err != nil {
				r.ID = "unparsable reply: " + string(line)
			}
			c.replies <- r
		}
	}()
	t.Cleanup(func() { inW.Close() })
	return c
}

func (c *stdio) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// reply waits for the next reply until shortly before the test binary's -timeout, not for a fixed time: a frame
// with a 20 MiB image takes about a second in a plain build and over 20 s in a -race build beside the HTTP
// test's image on two shared cores. A server that hangs still fails here, naming the test, before go test's
// alarm; with -timeout 0 it waits for ever, as asked.
func (c *stdio) reply() rpcReply {
	c.t.Helper()
	var expired <-chan time.Time
	if d, ok := c.t.Deadline(); ok {
		left := time.Until(d)
		timer := time.NewTimer(left - left/10)
		defer timer.Stop()
		expired = timer.C
	}
	select {
	case r, ok := <-c.replies:
		if !ok {
			c.t.Fatalf("the server stopped (ServeIO: %v)", <-c.done)
		}
		return r
	case <-expired:
		c.t.Fatal("no reply before the test's deadline (go test -timeout)")
	}
	return rpcReply{}
}

// alive checks the server still answers.
func (c *stdio) alive(id int) {
	c.t.Helper()
	c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, id))
	if r := c.reply(); r.ID != float64(id) || r.Error != nil {
		c.t.Fatalf("ping %d: %+v", id, r)
	}
}

// TestStdioAnswersMalformedFramesAndGoesOn sends each kind of frame that used to end `visor mcp serve`: every
// one gets a JSON-RPC error naming the problem, and the server answers the next request.
func TestStdioAnswersMalformedFramesAndGoesOn(t *testing.T) {
	c := serveStdio(t)
	for i, tc := range []struct {
		frame string
		code  int
		id    any
		want  string
	}{
		{"not json", -32700, nil, "frame 3 is not valid JSON"},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\x00", -32700, nil, "NUL"},
		{"\x00", -32700, nil, "not valid JSON"},
		{`{"jsonrpc":"1.0","id":7,"method":"ping"}`, -32600, float64(7), `set "jsonrpc": "2.0"`},
		{`{"id":"x","method":"ping"}`, -32600, "x", `"jsonrpc": missing`},
		{`[{"jsonrpc":"2.0","id":8,"method":"ping"}]`, -32600, nil, "is a batch"},
		{`[]`, -32600, nil, "batch"},
		{`42`, -32600, nil, "not a JSON-RPC request object"},
		{`{"jsonrpc":"2.0"}`, -32600, nil, `needs "method"`},
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, -32600, nil, "not a valid JSON-RPC 2.0 message"},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"} {"jsonrpc":"2.0","id":2,"method":"ping"}`, -32700, nil, "more follows"},
		{`{"jsonrpc":"2.0","id":3,"method`, -32700, nil, "not valid JSON"},
		// Ids the SDK would answer under another id (it reads them as int64) or not at all.
		{`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, -32600, nil, `"id" 1.5 is not an integer`},
		{`{"jsonrpc":"2.0","id":99999999999999999999999,"method":"ping"}`, -32600, nil, "use a string or a smaller integer"},
		{`{"jsonrpc":"2.0","id":null,"method":"ping"}`, -32600, nil, `"id" is null`},
	} {
		c.send(tc.frame)
		r := c.reply()
		if r.Error == nil || r.Error.Code != tc.code || r.ID != tc.id || !strings.Contains(r.Error.Message, tc.want) {
			t.Errorf("frame %q: got %+v (error %+v), want code %d id %v with %q", tc.frame, r, r.Error, tc.code, tc.id, tc.want)
		}
		c.alive(100 + i)
	}
	c.send("")
	c.send("   \r")
	c.alive(200) // blank lines are skipped, not answered
	// Whitespace after a frame used to stop the SDK.
	c.send(`{"jsonrpc":"2.0","id":201,"method":"ping"}` + " \t")
	if r := c.reply(); r.ID != float64(201) || r.Error != nil {
		t.Errorf("a ping with trailing whitespace: %+v (error %+v)", r, r.Error)
	}
	c.alive(202)
	c.in.Close()
	if err := <-c.done; err != nil {
		t.Fatalf("ServeIO after the client closed: %v", err)
	}
}

// TestStdioSkipsAByteOrderMark starts a stdio session the way Windows PowerShell pipes one (its first line
// begins with a UTF-8 byte order mark) and sends a later frame with one too: each is answered as if the mark
// were not there, where the frame was refused as "invalid character 'ï'" and the client never initialized.
func TestStdioSkipsAByteOrderMark(t *testing.T) {
	c := startStdio(t)
	c.send("\uFEFF" + `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"pwsh","version":"1"}}}`)
	if r := c.reply(); r.ID != "init" || r.Error != nil || !strings.Contains(string(r.Result), "protocolVersion") {
		t.Fatalf("initialize after a byte order mark: %+v (error %+v)", r, r.Error)
	}
	c.send("\uFEFF" + `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	c.send("\uFEFF " + `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if r := c.reply(); r.ID != float64(1) || r.Error != nil {
		t.Fatalf("a ping after a byte order mark and a space: %+v (error %+v)", r, r.Error)
	}
	c.send("\uFEFFnot json")
	if r := c.reply(); r.Error == nil || r.Error.Code != -32700 || strings.Contains(r.Error.Message, "ï") {
		t.Errorf("not JSON after a byte order mark: %+v (error %+v), want a parse error about the frame, not the mark", r, r.Error)
	}
	c.alive(2)
}

// TestStdioFramesFitTheImageLimit sends an image of the documented 20 MiB limit (27 MiB of base64, over the
// SDK's 16 MiB default line cap) and a frame over MaxFrameBytes, which is answered, not fatal.
func TestStdioFramesFitTheImageLimit(t *testing.T) {
	c := serveStdio(t)
	t.Parallel()
	data := bigImage()
	if len(data) > images.DefaultMaxBytes || len(data) < images.DefaultMaxBytes*9/10 {
		t.Fatalf("the test image is %d bytes, not just under %d", len(data), images.DefaultMaxBytes)
	}
	// Base64 needs no JSON escaping; %q would spend seconds of a -race build's CPU quoting 27 MiB.
	call := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"ask","arguments":{"prompt":"look","images":[{"data":"` +
		base64.StdEncoding.EncodeToString(data) + `","mime":"image/png"}]}}}`
	if len(call) <= 16<<20 {
		t.Fatalf("the frame is %d bytes: not past the 16 MiB the SDK allows by default", len(call))
	}
	c.send(call)
	r := c.reply()
	if r.ID != float64(5) || r.Error != nil || !strings.Contains(string(r.Result), fmt.Sprintf("1 images, %d bytes", len(data))) {
		t.Fatalf("a %d-byte image (a %d-byte frame): %+v %s", len(data), len(call), r.Error, r.Result)
	}
	c.send(`{"jsonrpc":"2.0","id":6,"method":"ping","params":{"pad":"` + strings.Repeat("x", mcpserver.MaxFrameBytes) + `"}}`)
	r = c.reply()
	if r.Error == nil || r.Error.Code != -32600 || !strings.Contains(r.Error.Message, "longer than 33554432 bytes (32 MiB)") {
		t.Fatalf("oversized frame: %+v", r.Error)
	}
	c.alive(7)
}

// bigImage is a real PNG of 20 MB of pixels that do not compress: just under the 20 MiB limit.
var bigImage = sync.OnceValue(func() []byte { return noisePNG(2500, 2000) })

func noisePNG(w, h int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	x := uint32(2463534242)
	for i := range img.Pix {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		img.Pix[i] = byte(x)
	}
	var b bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.NoCompression}).Encode(&b, img); err != nil {
		panic(err) // encoding to memory does not fail
	}
	return b.Bytes()
}

// FuzzStdioFrame sends one arbitrary line after the handshake: whatever it is, the server must not stop or
// hang, and must answer the ping that follows.
func FuzzStdioFrame(f *testing.F) {
	for _, seed := range []string{"not json", "\x00", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, `[]`, `[{"jsonrpc":"2.0","id":8,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`, `{"jsonrpc":"2.0","id":"zz","error":{"code":1,"message":"x"}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"init"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask","arguments":{"prompt":"x","images":[{"data":"!!"}]}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":"x"}`, `{"jsonrpc":"2.0","id":4,"method":"initialize","params":{}}`,
		`{"jsonrpc":"2.0","id":1e400,"method":"ping"}`, `{"jsonrpc":"2.0","id":-0.5,"method":"ping"}`, "{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"ping\"}",
		`{"jsonrpc":"2.0","id":null,"method":"ping"}`, `{"jsonrpc":"2.0","id":9,"method":""}`, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"} \t\v"} {
		f.Add(seed)
	}
	var mu sync.Mutex // one server at a time keeps the fuzzer's memory small
	f.Fuzz(func(t *testing.T, frame string) {
		mu.Lock()
		defer mu.Unlock()
		c := serveStdio(t)
		c.send(strings.ReplaceAll(frame, "\n", " "))
		c.send(`{"jsonrpc":"2.0","id":"last","method":"ping"}`)
		for {
			r := c.reply()
			if r.ID == "last" {
				if r.Error != nil {
					t.Fatalf("ping after %q: %+v", frame, r.Error)
				}
				return
			}
		}
	})
}

// TestStdioStopIsNoError: stopping the stdio server the normal way (Ctrl-C cancels the context) ends ServeIO
// without an error and logs nothing at error level (the SDK's "server run cancelled" was printed on every quit);
// a terminal gets a banner that says what the server waits for.
func TestStdioStopIsNoError(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := mcpserver.New(mcpserver.Config{Sessions: testkit.FakeService(t, echoRunner{}, nil), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe() // a reader that never ends, as a terminal's stdin
	defer inW.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ServeIO(ctx, inR, io.Discard) }()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("ServeIO after its context ended: %v", err)
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("a normal stop logged an error:\n%s", logs.String())
	}
	if b := mcpserver.StdioBanner("ask", true); !strings.Contains(b, "waits for an MCP client") || !strings.Contains(b, "--http") {
		t.Errorf("terminal banner %q", b)
	}
	if b := mcpserver.StdioBanner("ask", false); b != "visor MCP server on stdio (tool ask)" {
		t.Errorf("client banner %q", b)
	}
}
