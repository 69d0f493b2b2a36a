package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	_ "image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/visorhq/visor/engine/launch"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/syncbuf"
	"github.com/visorhq/visor/internal/testimage"
	"github.com/visorhq/visor/internal/testkit"
	"github.com/visorhq/visor/internal/testmodel"
	"github.com/visorhq/visor/memory"
)

// The tests here run one behaviour through every front end (ask, run, chat, web, mcp serve), because the session
// service is meant to give them all the same behaviour: same setup errors, same image intake, same compaction,
// same crash recovery.

var frontEnds = []string{"ask", "run", "chat", "web", "mcp"}

// runSafely runs visor in-process and turns a panic into a test failure.
func runSafely(t *testing.T, args []string, stdin io.Reader) (out, errOut string, err error) {
	t.Helper()
	var o, e bytes.Buffer
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("%v panicked: %v", args, r)
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		err = run(ctx, args, stdin, &o, &e)
	}()
	return o.String(), e.String(), err
}

// commandFor turns a front end and its flags into visor's arguments; run gets an agent file holding the flags'
// model, so its mistakes come from the file as a user's would.
func commandFor(t *testing.T, fe string, flags []string) []string {
	switch fe {
	case "ask":
		return append([]string{"ask", "hello"}, flags...)
	case "run":
		yml := filepath.Join(t.TempDir(), "agent.yaml")
		if err := os.WriteFile(yml, []byte("name: t\nprompt: hello\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return append([]string{"run", yml}, flags...)
	case "chat":
		return append([]string{"chat"}, flags...)
	case "web":
		return append([]string{"web", "--addr", "127.0.0.1:0"}, flags...)
	case "mcp":
		return append([]string{"mcp", "serve"}, flags...)
	}
	t.Fatalf("unknown front end %s", fe)
	return nil
}

// TestFirstMistakes is a new user's first mistakes, through every front end, with the store on and off: each
// ends with an error that names the input and says what to do — never a panic, never a hang.
func TestFirstMistakes(t *testing.T) {
	t.Setenv("VISOR_MODEL", "")
	t.Setenv("VISOR_MMPROJ", "")
	t.Setenv("VISOR_ENDPOINT", "")
	dir, chat, ws := tinyWorkspace(t)
	fifo := filepath.Join(dir, "model.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	notGGUF := filepath.Join(dir, "notes.gguf")
	_ = os.WriteFile(notGGUF, []byte("these are my notes, not a model\n"), 0o644)
	// The example config as a newcomer copies it: its default model is a file they do not have.
	missingDefault := filepath.Join(dir, "config.yaml")
	_ = os.WriteFile(missingDefault, []byte("model: qwen\nmodels:\n  qwen:\n    path: /nope/qwen.gguf\n"), 0o644)
	cases := []struct {
		name  string
		flags []string
		want  []string // all must appear
	}{
		{"no model", nil, []string{"--model", "--endpoint"}},
		{"config's default model missing", []string{"--config", missingDefault}, []string{`the default model "qwen" of ` + missingDefault + ": path /nope/qwen.gguf: no such file", "--model NAME"}},
		{"wrong model path", []string{"--model", "/nope/model.gguf"}, []string{"--model /nope/model.gguf", "no such file", "give"}},
		{"model is a folder", []string{"--model", dir}, []string{"--model", "is a folder"}},
		{"model is a FIFO", []string{"--model", fifo}, []string{"--model", "not a regular file"}},
		{"missing projector", []string{"--model", chat, "--mmproj", "/nope/mmproj.gguf"}, []string{"--mmproj /nope/mmproj.gguf", "no such file"}},
		{"unknown tool", []string{"--model", chat, "--tools", "list_dri"}, []string{"--tools", "list_dri", "choose from", "list_dir"}},
		{"missing workspace", []string{"--model", chat, "--tools", "list_dir", "--workspace", "/nope/ws"}, []string{"--workspace /nope/ws", "not a folder"}},
		{"zero steps", []string{"--model", chat, "--max-steps", "0"}, []string{"--max-steps 0", "1 or more"}},
		{"negative tokens", []string{"--model", chat, "--max-tokens", "-5"}, []string{"--max-tokens -5"}},
		{"negative context", []string{"--model", chat, "--ctx", "-1"}, []string{"--ctx -1"}},
		{"zero slots", []string{"--model", chat, "--parallel", "0"}, []string{"--parallel 0", "1 or more"}},
		{"bad plan", []string{"--model", chat, "--plan", "maybe"}, []string{"--plan \"maybe\"", "auto or off"}},
		{"bad cache type", []string{"--model", chat, "--cache-type", "q9"}, []string{"--cache-type \"q9\"", "q8_0"}},
		{"bad tool format", []string{"--model", chat, "--tool-format", "xml"}, []string{"--tool-format"}},
		{"no llama-server", []string{"--model", chat, "--server", "/nope/llama-server"}, []string{"llama-server", "/nope/llama-server"}},
		{"server is not llama-server", []string{"--model", chat, "--plan", "off", "--server", "/bin/true"}, []string{"is /bin/true llama-server", "--server"}},
		{"endpoint not a URL", []string{"--endpoint", "localhost:8080"}, []string{"--endpoint localhost:8080", "http://"}},
		{"model and endpoint", []string{"--model", chat, "--endpoint", "http://127.0.0.1:1"}, []string{"--model and --endpoint"}},
		{"not a GGUF", []string{"--model", notGGUF, "--plan", "off"}, []string{"--model " + notGGUF, "not a GGUF model"}},
		{"huge context", []string{"--model", chat, "--ctx", "999999999"}, []string{"--ctx 999999999", "trained for", "give at most"}},
		{"database on a read-only filesystem", []string{"--model", chat, "--db", "/proc/visor.db"}, []string{"/proc/visor.db", "pass --db"}},
		{"database is not a database", []string{"--model", chat, "--db", notGGUF}, []string{notGGUF, "not a visor database", "pass --db"}},
	}
	for _, store := range []bool{false, true} {
		for _, fe := range frontEnds {
			for _, c := range cases {
				if fe == "run" && c.name != "no model" && c.name != "wrong model path" {
					continue // run takes its engine and tools from the agent file, not from flags
				}
				ownDB := strings.HasPrefix(c.name, "database")
				if ownDB && !store {
					continue
				}
				flags := append([]string(nil), c.flags...)
				if fe == "run" && c.name == "wrong model path" {
					flags = nil
				}
				if store && !ownDB {
					flags = append(flags, "--db", filepath.Join(t.TempDir(), "v.db"))
				} else if !store {
					flags = append(flags, "--no-store")
				}
				args := commandFor(t, fe, flags)
				if fe == "run" && c.name == "wrong model path" {
					yml := args[1]
					_ = os.WriteFile(yml, []byte("name: t\nprompt: hello\nmodel:\n  path: /nope/model.gguf\n"), 0o644)
				}
				_, _, err := runSafely(t, args, strings.NewReader(""))
				if err == nil {
					t.Errorf("%s %s (store %v): no error", fe, c.name, store)
					continue
				}
				want := c.want
				if fe == "run" {
					want = map[string][]string{"no model": {"model", "endpoint"},
						"wrong model path": {"agent.yaml:4", "model.path /nope/model.gguf", "fix the path"}}[c.name]
				}
				for _, w := range want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s %s (store %v): %q lacks %q", fe, c.name, store, err, w)
					}
				}
			}
		}
	}
	_ = ws
}

// driver runs turns through one front end, as its user would.
type driver interface {
	// send sends text with an optional image; it returns the answer, or the error the front end reported.
	send(t *testing.T, text string, image []byte) (string, error)
	close(t *testing.T)
	// stderr is what the front end told its user so far.
	stderr() string
}

// startFrontEnd starts fe over the tiny model with a store at db; extra flags follow.
func startFrontEnd(t *testing.T, fe, chat, mmproj, db string, extra ...string) driver {
	t.Helper()
	flags := append([]string{"--model", chat, "--plan", "off", "--db", db}, extra...)
	if mmproj != "" {
		flags = append(flags, "--mmproj", mmproj)
	}
	switch fe {
	case "ask", "run":
		return &oneShot{fe: fe, flags: flags, dir: t.TempDir(), chat: chat, mmproj: mmproj}
	case "chat":
		return startChat(t, flags)
	case "web":
		return startWeb(t, flags)
	case "mcp":
		return startMCP(t, flags)
	}
	t.Fatalf("unknown front end %s", fe)
	return nil
}

// oneShot is ask or run: a process per message, continuing the session with --session.
type oneShot struct {
	fe, chat, mmproj string
	flags            []string
	dir              string
	session          string
	log              strings.Builder
}

var sessionLine = regexp.MustCompile(`session ([0-9a-f]{16})`)

func (o *oneShot) send(t *testing.T, text string, image []byte) (string, error) {
	t.Helper()
	var args []string
	if o.fe == "ask" {
		args = append([]string{"ask", text}, o.flags...)
	} else {
		// The agent file holds the model; the command line the prompt, the store and the session.
		yml := filepath.Join(o.dir, "agent.yaml")
		src := fmt.Sprintf("name: t\nmodel:\n  path: %s\n  plan: off\n", o.chat)
		if o.mmproj != "" {
			src += "  mmproj: " + o.mmproj + "\n"
		}
		for i := 0; i < len(o.flags); i++ {
			switch {
			case o.flags[i] == "--allow-fetch":
				src += "allow_fetch: true\n"
			case i+1 == len(o.flags):
			case o.flags[i] == "--ctx":
				src += "  ctx: " + o.flags[i+1] + "\n"
			case o.flags[i] == "--tools":
				src += "tools: [" + o.flags[i+1] + "]\n"
			case o.flags[i] == "--allow-shell":
				src += "allow_shell: [" + o.flags[i+1] + "]\n"
			}
		}
		for i := 0; i+1 < len(o.flags); i++ {
			if name, url, ok := strings.Cut(o.flags[i+1], "="); ok && o.flags[i] == "--mcp" {
				src += fmt.Sprintf("mcp:\n  - name: %s\n    url: %s\n", name, url)
			}
		}
		if err := os.WriteFile(yml, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		args = []string{"run", yml, text}
		for i := 0; i+1 < len(o.flags); i++ {
			if o.flags[i] == "--db" {
				args = append(args, "--db", o.flags[i+1])
			}
		}
	}
	if image != nil {
		p := filepath.Join(o.dir, fmt.Sprintf("img%d.png", time.Now().UnixNano()))
		if err := os.WriteFile(p, image, 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--image", p)
	}
	if o.session != "" {
		args = append(args, "--session", o.session)
	}
	out, errOut, err := runSafely(t, args, strings.NewReader(""))
	o.log.WriteString(errOut)
	if m := sessionLine.FindAllStringSubmatch(errOut, -1); m != nil {
		o.session = m[len(m)-1][1]
	}
	return strings.TrimSpace(out), err
}

func (o *oneShot) close(*testing.T) {}
func (o *oneShot) stderr() string   { return o.log.String() }

// chatDriver types into `visor chat`.
type chatDriver struct {
	in   *io.PipeWriter
	out  *syncbuf.Buffer
	errb *syncbuf.Buffer
	done chan error
	dir  string
}

var turnError = regexp.MustCompile(`(?m)^(> )?error: `)

func startChat(t *testing.T, flags []string) *chatDriver {
	r, w := io.Pipe()
	c := &chatDriver{in: w, out: &syncbuf.Buffer{}, errb: &syncbuf.Buffer{}, done: make(chan error, 1), dir: t.TempDir()}
	go func() { c.done <- run(context.Background(), append([]string{"chat"}, flags...), r, c.out, c.errb) }()
	return c
}

func (c *chatDriver) send(t *testing.T, text string, image []byte) (string, error) {
	t.Helper()
	before := c.errb.String()
	if image != nil {
		p := filepath.Join(c.dir, fmt.Sprintf("img%d.png", time.Now().UnixNano()))
		if err := os.WriteFile(p, image, 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c.in, "/image %s\n", p)
		waitFor(t, "the attachment to be taken or refused", func() bool {
			s := strings.TrimPrefix(c.errb.String(), before)
			return strings.Contains(s, "(attached") || strings.Contains(s, "/image "+p+":")
		})
		if s := strings.TrimPrefix(c.errb.String(), before); strings.Contains(s, "/image "+p+":") {
			return "", fmt.Errorf("%s", s[strings.Index(s, "/image "+p+":"):])
		}
	}
	mark := c.errb.String()
	fmt.Fprintln(c.in, text)
	waitFor(t, "the turn to end", func() bool { return strings.Contains(strings.TrimPrefix(c.errb.String(), mark), " tokens generated, ") })
	s := strings.TrimPrefix(c.errb.String(), mark)
	// The chat reports a failed turn on a line of its own; "← error:" is a tool's result, which the model reads.
	if loc := turnError.FindStringIndex(s); loc != nil {
		return "", fmt.Errorf("%s", s[loc[0]:])
	}
	lines := strings.Split(strings.TrimSpace(c.out.String()), "\n")
	return lines[len(lines)-1], nil
}

func (c *chatDriver) close(t *testing.T) {
	fmt.Fprintln(c.in, "/quit")
	c.in.Close()
	select {
	case err := <-c.done:
		if err != nil {
			t.Errorf("chat: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("chat did not quit")
	}
}
func (c *chatDriver) stderr() string { return c.errb.String() }

// webDriver uses `visor web`'s API as its page does.
type webDriver struct {
	cancel      context.CancelFunc
	done        chan error
	errb, out   *syncbuf.Buffer
	base, token string
	chat        string
}

func startWeb(t *testing.T, flags []string) *webDriver {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &webDriver{cancel: cancel, done: make(chan error, 1), errb: &syncbuf.Buffer{}, out: &syncbuf.Buffer{}}
	go func() {
		w.done <- run(ctx, append([]string{"web", "--addr", "127.0.0.1:0"}, flags...), strings.NewReader(""), w.out, w.errb)
	}()
	re := regexp.MustCompile(`chat at (http://\S+)`)
	waitFor(t, "visor web to listen", func() bool {
		select {
		case err := <-w.done:
			t.Fatalf("web exited: %v\n%s", err, w.errb.String())
		default:
		}
		m := re.FindStringSubmatch(w.out.String())
		if m != nil {
			w.base = m[1]
		}
		return m != nil
	})
	resp, err := http.Get(w.base + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`<meta name="visor-token" content="([^"]+)">`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no page token")
	}
	w.token = string(m[1])
	return w
}

func (w *webDriver) post(t *testing.T, path, ctype string, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", w.base+path, bytes.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	req.Header.Set("X-Visor-Token", w.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func (w *webDriver) send(t *testing.T, text string, image []byte) (string, error) {
	t.Helper()
	if w.chat == "" {
		resp, b := w.post(t, "/api/sessions", "application/json", []byte("{}"))
		var created struct{ Session string }
		if err := json.Unmarshal(b, &created); err != nil || resp.StatusCode != 200 {
			t.Fatalf("create chat: %d %s", resp.StatusCode, b)
		}
		w.chat = created.Session
	}
	if image != nil {
		resp, b := w.post(t, "/api/sessions/"+w.chat+"/attach", "image/png", image)
		if resp.StatusCode != 200 {
			return "", fmt.Errorf("attach: %d %s", resp.StatusCode, b)
		}
	}
	body, _ := json.Marshal(map[string]string{"text": text})
	resp, b := w.post(t, "/api/sessions/"+w.chat+"/send", "application/json", body)
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("send: %d %s", resp.StatusCode, b)
	}
	events, err := testkit.ReadEvents(bytes.NewReader(b))
	if err != nil {
		return "", err
	}
	var answer strings.Builder
	var done map[string]any
	for _, e := range events {
		switch e.Kind {
		case "token":
			answer.WriteString(fmt.Sprint(e.Data["text"]))
		case "notice":
			w.errb.Write([]byte(fmt.Sprint(e.Data["text"]) + "\n"))
		case "done":
			done = e.Data
		}
	}
	if done == nil {
		return "", fmt.Errorf("no done event in %s", b)
	}
	if e, ok := done["error"]; ok {
		return answer.String(), fmt.Errorf("%v", e)
	}
	return strings.TrimSpace(answer.String()), nil
}

func (w *webDriver) close(t *testing.T) {
	w.cancel()
	select {
	case <-w.done:
	case <-time.After(30 * time.Second):
		t.Error("web did not stop")
	}
}
func (w *webDriver) stderr() string { return w.errb.String() }

// mcpDriver calls `visor mcp serve --http`'s ask tool with the Go SDK's client.
type mcpDriver struct {
	cancel  context.CancelFunc
	done    chan error
	errb    *syncbuf.Buffer
	cs      *sdk.ClientSession
	session string
}

func startMCP(t *testing.T, flags []string) *mcpDriver {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	m := &mcpDriver{cancel: cancel, done: make(chan error, 1), errb: &syncbuf.Buffer{}}
	go func() {
		m.done <- run(ctx, append([]string{"mcp", "serve", "--http", "127.0.0.1:0"}, flags...), strings.NewReader(""), io.Discard, m.errb)
	}()
	re := regexp.MustCompile(`visor MCP server at (http://\S+)`)
	var url string
	waitFor(t, "mcp serve to listen", func() bool {
		select {
		case err := <-m.done:
			t.Fatalf("mcp serve exited: %v\n%s", err, m.errb.String())
		default:
		}
		if mm := re.FindStringSubmatch(m.errb.String()); mm != nil {
			url = mm[1]
		}
		return url != ""
	})
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
			m.errb.Write([]byte(r.Params.Message + "\n"))
		}})
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.cs = cs
	return m
}

func (m *mcpDriver) send(t *testing.T, text string, image []byte) (string, error) {
	t.Helper()
	args := map[string]any{"prompt": text}
	if image != nil {
		args["images"] = []map[string]any{{"data": base64.StdEncoding.EncodeToString(image)}}
	}
	if m.session != "" {
		args["session"] = m.session
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := m.cs.CallTool(ctx, &sdk.CallToolParams{Name: "ask", Arguments: args, Meta: sdk.Meta{"progressToken": 1}})
	if err != nil {
		return "", err
	}
	txt := ""
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*sdk.TextContent); ok {
			txt = tc.Text
		}
	}
	if res.IsError {
		return "", fmt.Errorf("%s", txt)
	}
	if out, ok := res.StructuredContent.(map[string]any); ok {
		if s, _ := out["session"].(string); s != "" {
			m.session = s
		}
	}
	return strings.TrimSpace(txt), nil
}

func (m *mcpDriver) close(t *testing.T) {
	_ = m.cs.Close()
	m.cancel()
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		t.Error("mcp serve did not stop")
	}
}
func (m *mcpDriver) stderr() string { return m.errb.String() }

// storedMessages are the messages of every session stored in db.
func storedMessages(t *testing.T, db string) []memory.Message {
	t.Helper()
	var all []memory.Message
	eachStoredSession(t, db, func(_ string, msgs []memory.Message) { all = append(all, msgs...) })
	return all
}

// eachStoredSession calls f with each session stored in db and its messages, in the store's order.
func eachStoredSession(t *testing.T, db string, f func(id string, msgs []memory.Message)) {
	t.Helper()
	st, err := memory.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ss, err := st.ListSessions(context.Background(), memory.SessionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		msgs, err := st.Messages(context.Background(), s.ID)
		if err != nil {
			t.Fatal(err)
		}
		f(s.ID, msgs)
	}
}

// TestImageIntakeInEveryFrontEnd sends a corrupt, a truncated, an oversized and a bomb image through each front
// end: each is refused at intake with the reason, and nothing of it reaches the engine or the store; a good image
// then goes through.
func TestImageIntakeInEveryFrontEnd(t *testing.T) {
	enginetest.Binary(t)
	dir := t.TempDir()
	chat, proj, err := testmodel.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	good, large := testkit.PNG(t, 16, 16), testkit.PNG(t, 96, 64)
	corrupt := append(append([]byte(nil), good[:40]...), bytes.Repeat([]byte{0xff}, 300)...)
	bad := map[string]struct {
		data []byte
		want string
	}{
		"corrupt":   {corrupt, "corrupt"},
		"truncated": {good[:len(good)-30], "corrupt or truncated"},
		"oversized": {append(append([]byte(nil), good...), make([]byte, 21<<20)...), "20 MiB"},
		"bomb":      {testimage.BombPNG(60000, 60000), "too many pixels"},
		"not image": {[]byte("GIF? no, a text file"), "not an image"},
	}
	for _, fe := range frontEnds {
		t.Run(fe, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "v.db")
			d := startFrontEnd(t, fe, chat, proj, db)
			defer d.close(t)
			for name, b := range bad {
				_, err := d.send(t, "what is this?", b.data)
				if err == nil || !strings.Contains(err.Error(), b.want) {
					t.Errorf("%s image: %v, want a refusal saying %q", name, err, b.want)
				}
			}
			for _, m := range storedMessages(t, db) {
				if len(m.Images) > 0 || m.Content == "what is this?" {
					t.Fatalf("a refused image's turn reached the store: %+v", m)
				}
			}
			// A good image larger than the projector's 32 px encoder is sized at intake, once, to what the
			// encoder uses (shorter side 32): the store keeps, and every later turn sends, those bytes.
			answer, err := d.send(t, "and this?", large)
			if err != nil || answer != "Hi!" {
				t.Fatalf("good image: %q %v\n%s", answer, err, d.stderr())
			}
			var stored []memory.Image
			for _, m := range storedMessages(t, db) {
				stored = append(stored, m.Images...)
			}
			if len(stored) != 1 {
				t.Fatalf("%d images stored, want the one good image", len(stored))
			}
			if cfg, _, err := image.DecodeConfig(bytes.NewReader(stored[0].Data)); err != nil || cfg.Width != 48 ||
				cfg.Height != 32 || stored[0].MIME != "image/png" {
				t.Fatalf("stored image %s %dx%d (%v), want the 96×64 screenshot sized to 48×32 PNG", stored[0].MIME,
					cfg.Width, cfg.Height, err)
			}
			toolImageIntake(t, fe, chat, proj)
		})
	}
}

// TestToolsThatNeedPermissionInEveryFrontEnd: run_shell with --allow-shell and fetch_url with --allow-fetch (in
// run, the agent file's allow_shell and allow_fetch) are offered to the model and called in every front end. The
// check before the start once built its list of tools without the allow settings and refused both.
func TestToolsThatNeedPermissionInEveryFrontEnd(t *testing.T) {
	enginetest.Binary(t)
	dir, chat, ws := tinyWorkspace(t)
	_ = dir
	for _, c := range []struct {
		tool  string
		flags []string
	}{
		{"run_shell", []string{"--tools", "run_shell", "--allow-shell", "ls"}},
		{"fetch_url", []string{"--tools", "fetch_url", "--allow-fetch"}},
	} {
		for _, fe := range frontEnds {
			t.Run(c.tool+"/"+fe, func(t *testing.T) {
				db := filepath.Join(t.TempDir(), "v.db")
				d := startFrontEnd(t, fe, chat, "", db, append([]string{"--workspace", ws}, c.flags...)...)
				defer d.close(t)
				// The tiny model calls the only tool it is offered, with "." for its string argument: ls and
				// the fetch refuse it, and the model answers after the tool's result.
				answer, err := d.send(t, "use your tool", nil)
				if err != nil || answer != "Hi!" {
					t.Fatalf("answer %q, %v\n%s", answer, err, d.stderr())
				}
				called := false
				for _, m := range storedMessages(t, db) {
					for _, tc := range m.ToolCalls {
						called = called || tc.Name == c.tool
					}
				}
				if !called {
					t.Fatalf("no %s call stored\n%s", c.tool, d.stderr())
				}
			})
		}
	}
}

// shotServer is a real MCP server over streamable HTTP with one tool, shot, whose result the test sets.
type shotServer struct {
	url string
	mu  sync.Mutex
	res *sdk.CallToolResult
}

func startShotServer(t *testing.T) *shotServer {
	t.Helper()
	s := &shotServer{}
	srv := sdk.NewServer(&sdk.Implementation{Name: "shots", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "shot", Description: "Take a screenshot"},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.res, nil, nil
		})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	s.url = ts.URL
	return s
}

func (s *shotServer) returns(content ...sdk.Content) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.res = &sdk.CallToolResult{Content: content}
}

// toolImageIntake is image intake for the images a tool returns, through front end fe: an MCP tool returning a
// WebP, a bomb, a 20000×20000 header or a thousand images gets a result the model reads (the turn is answered,
// nothing is stored as rejected, no refused image is stored), and one returning only an image is answered too
// (its tool message carries content, which llama-server requires).
func toolImageIntake(t *testing.T, fe, chat, proj string) {
	shots := startShotServer(t)
	db := filepath.Join(t.TempDir(), "tools.db")
	d := startFrontEnd(t, fe, chat, proj, db, "--mcp", "shots="+shots.url)
	defer func() { d.close(t) }()
	good := testkit.PNG(t, 16, 16)
	img := func(b []byte, mime string) sdk.Content { return &sdk.ImageContent{Data: b, MIMEType: mime} }
	thousand := make([]sdk.Content, 1000)
	for i := range thousand {
		thousand[i] = img(testkit.SeededPNG(t, 8, 8, i), "image/png")
	}
	cases := []struct {
		name    string
		content []sdk.Content
		says    string // in the stored tool result
		kept    int    // images stored with it
	}{
		{"webp", []sdk.Content{img(testimage.WebP(), "image/webp")}, "WebP, which llama-server cannot decode", 0},
		{"bomb", []sdk.Content{&sdk.TextContent{Text: "the screen"}, img(testimage.BombPNG(60000, 60000), "image/png")}, "too many pixels", 0},
		{"20000×20000 header", []sdk.Content{img(testimage.BombPNG(20000, 20000), "image/png")}, "20000×20000", 0},
		{"a thousand images", thousand, "images 9–1000", 8},
		{"only an image", []sdk.Content{img(good, "image/png")}, "", 1},
	}
	for i, c := range cases {
		// The model calls a tool only in a conversation without a tool result yet: each case is a new one.
		if i > 0 {
			switch v := d.(type) {
			case *oneShot:
				v.session = ""
			case *webDriver:
				v.chat = ""
			case *mcpDriver:
				v.session = ""
			default:
				d.close(t)
				d = startFrontEnd(t, fe, chat, proj, db, "--mcp", "shots="+shots.url)
			}
		}
		shots.returns(c.content...)
		answer, err := d.send(t, "look at the screen: "+c.name, nil)
		if err != nil || answer != "Hi!" {
			t.Errorf("%s: %q %v: want the turn to go on to the answer\n%s", c.name, answer, err, d.stderr())
			continue
		}
		msgs := storedMessages(t, db)
		var result *memory.Message // the newest tool result: this case's
		for i := range msgs {
			if msgs[i].Rejected {
				t.Errorf("%s: a message is stored as rejected: %+v", c.name, msgs[i])
			}
			if msgs[i].Role == "tool" && (result == nil || msgs[i].ID > result.ID) {
				result = &msgs[i]
			}
		}
		switch {
		case result == nil:
			t.Errorf("%s: no tool result stored", c.name)
		case !strings.Contains(result.Content, c.says):
			t.Errorf("%s: stored tool result %q lacks %q", c.name, result.Content, c.says)
		case len(result.Images) != c.kept:
			t.Errorf("%s: %d images stored with the tool result, want %d", c.name, len(result.Images), c.kept)
		}
		for _, im := range result.Images {
			if im.MIME != "image/png" {
				t.Errorf("%s: a %s image is stored", c.name, im.MIME)
			}
		}
	}
}

// TestCompactionInEveryFrontEnd fills most of a small context with one long message; the next turn, in every
// front end, compacts the conversation into a linked session and is answered.
func TestCompactionInEveryFrontEnd(t *testing.T) {
	enginetest.Binary(t)
	dir := t.TempDir()
	chat, _, err := testmodel.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("lorem ", 220) // ~1,320 byte tokens in a 1,536-token context: over 3/4 of it
	for _, fe := range frontEnds {
		t.Run(fe, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "v.db")
			d := startFrontEnd(t, fe, chat, "", db, "--ctx", "1536")
			defer d.close(t)
			if a, err := d.send(t, long, nil); err != nil || a != "Hi!" {
				t.Fatalf("first turn: %q %v\n%s", a, err, d.stderr())
			}
			a, err := d.send(t, "And now?", nil)
			if err != nil || a != "Hi!" {
				t.Fatalf("second turn: %q %v\n%s", a, err, d.stderr())
			}
			if !strings.Contains(d.stderr(), "compacted into session") {
				t.Fatalf("no compaction reported:\n%s", d.stderr())
			}
		})
	}
}

// TestCrashRecoveryInEveryFrontEnd kills the llama-server a long-lived front end runs between two turns: the next
// turn is answered by a restarted engine. (ask and run start an engine per process; theirs is the stored turn
// that survives a killed engine, tested in TestCtrlCStopsCleanly's family.)
func TestCrashRecoveryInEveryFrontEnd(t *testing.T) {
	enginetest.Binary(t)
	t.Setenv("VISOR_DEBUG", "1") // the debug log names the server's pid
	dir := t.TempDir()
	chat, _, err := testmodel.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	pidRE := regexp.MustCompile(`llama-server started" pid=(\d+)`)
	for _, fe := range []string{"chat", "web", "mcp"} {
		t.Run(fe, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "v.db")
			d := startFrontEnd(t, fe, chat, "", db)
			defer d.close(t)
			if a, err := d.send(t, "hello", nil); err != nil || a != "Hi!" {
				t.Fatalf("first turn: %q %v", a, err)
			}
			m := pidRE.FindAllStringSubmatch(d.stderr(), -1)
			if m == nil {
				t.Fatalf("no pid in the log:\n%s", d.stderr())
			}
			var pid int
			fmt.Sscan(m[len(m)-1][1], &pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			waitFor(t, "the server to die", func() bool {
				b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
				return err != nil || strings.Fields(string(b))[2] == "Z"
			})
			a, err := d.send(t, "still there?", nil)
			if err != nil || a != "Hi!" {
				t.Fatalf("after the crash: %q %v\n%s", a, err, d.stderr())
			}
			if !strings.Contains(d.stderr(), "engine restarted") {
				t.Fatalf("restart not reported:\n%s", d.stderr())
			}
		})
	}
}

// TestCrashRecoveryOfOneShotFrontEnds is crash recovery for ask and run, which start an engine per process or
// reuse the one `visor serve` keeps: the served llama-server is killed between two turns of a session, and the
// next turn is answered (by serve's restarted engine or one of its own) and continues the stored session.
func TestCrashRecoveryOfOneShotFrontEnds(t *testing.T) {
	bin := enginetest.Binary(t)
	t.Setenv("VISOR_ENGINE_DIR", t.TempDir()) // a private run folder: no other test's `visor serve`
	t.Setenv("VISOR_LLAMA_SERVER", bin)
	dir := t.TempDir()
	chat, _, err := testmodel.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var serveOut, serveErr syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--model", chat, "--plan", "off"}, strings.NewReader(""), &serveOut, &serveErr)
	}()
	waitFor(t, "serve to advertise its engine", func() bool {
		files, _ := filepath.Glob(filepath.Join(launch.RunDir(), "*.json"))
		return len(files) == 1
	})
	servedPID := func() int {
		files, _ := filepath.Glob(filepath.Join(launch.RunDir(), "*.json"))
		b, _ := os.ReadFile(files[0])
		var st launch.Served
		_ = json.Unmarshal(b, &st)
		return st.PID
	}
	for _, fe := range []string{"ask", "run"} {
		t.Run(fe, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "v.db")
			d := startFrontEnd(t, fe, chat, "", db)
			if a, err := d.send(t, "hello", nil); err != nil || a != "Hi!" {
				t.Fatalf("first turn: %q %v\n%s", a, err, d.stderr())
			}
			pid := servedPID()
			_ = syscall.Kill(pid, syscall.SIGKILL)
			waitFor(t, "the served engine to die", func() bool {
				b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
				return err != nil || strings.Fields(string(b))[2] == "Z"
			})
			a, err := d.send(t, "still there?", nil)
			if err != nil || a != "Hi!" {
				t.Fatalf("after the crash: %q %v\n%s\nserve: %s", a, err, d.stderr(), serveErr.String())
			}
			if n := len(storedMessages(t, db)); n != 4 {
				t.Fatalf("%d stored messages, want both turns in one session", n)
			}
		})
	}
	cancel()
	<-done
}
