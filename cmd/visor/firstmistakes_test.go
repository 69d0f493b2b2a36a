package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/syncbuf"
	"github.com/visorhq/visor/internal/testimage"
	"github.com/visorhq/visor/internal/testkit"
	"github.com/visorhq/visor/internal/testmodel"
	"github.com/visorhq/visor/memory"
)

// Issue 22's acceptance: "a table test of the first mistakes above (and the 33 of the newcomer run that apply),
// through every front end". Each row is one mistake a newcomer made, run through each front end it applies to,
// as a user meets it: this test binary run as visor in a process of its own (so a moved package changes
// nothing here), a real terminal (tmux) for the chat TUI, the served page's HTTP API for web, the Go SDK's MCP
// client for mcp serve, plain HTTP for the gateway. Every row asserts the exit or HTTP status, an error naming
// the input and the fix, no panic, no hang (each process runs under a deadline and is killed after it), and
// nothing lost or created: no empty session stored, no database made by a command that only reads.

// fmDeadline bounds one visor process: not a timing assertion, a hang guard (a hang is the failure).
const fmDeadline = 90 * time.Second

// fmRun is what one visor process did.
type fmRun struct {
	code        int
	stdout, out string // out: stdout and stderr together
}

// firstHour holds what the rows share: one tiny model pair, files a newcomer would have made by mistake, and
// the served front ends with an engine, started once.
type firstHour struct {
	t          *testing.T
	dir        string
	chat, proj string
	nobody     *syscall.Credential // who runs the permission rows when the test runs as root (root reads anything)
	otherBin   string              // this binary where that user can run it
	served     map[string]*fmServer
}

func newFirstHour(t *testing.T) *firstHour {
	t.Helper()
	t.Setenv("VISOR_MODEL", "")
	t.Setenv("VISOR_MMPROJ", "")
	t.Setenv("VISOR_ENDPOINT", "")
	// A fresh config and data folder: no developer's config, and a default database nobody else uses.
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "config"))
	t.Setenv("XDG_DATA_HOME", filepath.Join(home, "data"))
	dir := t.TempDir()
	// The permission rows run visor as another user, who must reach these files.
	for _, d := range []string{dir, filepath.Dir(dir)} {
		_ = os.Chmod(d, 0o755)
	}
	chat, proj, err := testmodel.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	f := &firstHour{t: t, dir: dir, chat: chat, proj: proj, served: map[string]*fmServer{}}
	if os.Geteuid() == 0 {
		f.nobody = &syscall.Credential{Uid: 65534, Gid: 65534}
	}
	t.Cleanup(func() {
		for _, s := range f.served {
			s.stop()
		}
	})
	return f
}

// file writes name in the test's folder and returns its path.
func (f *firstHour) file(name, text string) string {
	f.t.Helper()
	return testkit.WriteFile(f.t, f.dir, name, text)
}

// visor runs visor with args and stdin; cred, if set, is the user it runs as.
func (f *firstHour) visor(t *testing.T, cred *syscall.Credential, stdin string, args ...string) fmRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), fmDeadline)
	defer cancel()
	bin := os.Args[0]
	if cred != nil {
		bin = f.otherBin
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "VISOR_TEST_AS_MAIN=1")
	cmd.Dir = f.dir
	cmd.Stdin = strings.NewReader(stdin)
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		cmd.Env = append(cmd.Env, "HOME="+f.dir, "XDG_DATA_HOME="+filepath.Join(f.dir, "nobody-data"),
			"XDG_CONFIG_HOME="+filepath.Join(f.dir, "nobody-config"))
	}
	var o, all syncbuf.Buffer // two pipes, two copying goroutines: all is written from both
	cmd.Stdout = io.MultiWriter(&o, &all)
	cmd.Stderr = &all
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("visor %v hung: killed after %v\n%s", args, fmDeadline, all.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("visor %v: %v", args, err)
	}
	return fmRun{code: cmd.ProcessState.ExitCode(), stdout: o.String(), out: all.String()}
}

// expect checks a finished run: its exit status (-1: any failure), each wanted text, and no panic.
func (r fmRun) expect(t *testing.T, code int, want ...string) {
	t.Helper()
	if code == -1 && r.code == 0 || code != -1 && r.code != code {
		t.Errorf("exit %d, want %s\n%s", r.code, map[bool]string{true: "a failure", false: fmt.Sprint(code)}[code == -1], r.out)
	}
	noPanic(t, r.out)
	for _, w := range want {
		if !strings.Contains(r.out, w) {
			t.Errorf("output lacks %q:\n%s", w, r.out)
		}
	}
}

func noPanic(t *testing.T, out string) {
	t.Helper()
	if strings.Contains(out, "panic:") || strings.Contains(out, "goroutine ") {
		t.Errorf("a panic or a goroutine dump:\n%s", out)
	}
}

// oneShot front ends: the arguments that send "hello" through fe with flags (run: an agent file holding agent,
// or a plain one); the line chat reads stdin.
func (f *firstHour) command(t *testing.T, fe, agent string, flags ...string) (args []string, stdin string) {
	switch fe {
	case "ask":
		return append([]string{"ask", "hello"}, flags...), ""
	case "run":
		if agent == "" {
			// run takes its engine from the agent file: the flags that set one go there, the rest stay flags.
			agent = "name: t\nprompt: hello\n"
			model := ""
			var rest []string
			for i := 0; i < len(flags); i++ {
				key := map[string]string{"--model": "path", "--mmproj": "mmproj", "--plan": "plan", "--ctx": "ctx"}[flags[i]]
				if key == "" || i+1 == len(flags) {
					rest = append(rest, flags[i])
					continue
				}
				model += "  " + key + ": " + flags[i+1] + "\n"
				i++
			}
			if model != "" {
				agent += "model:\n" + model
			}
			flags = rest
		}
		p := filepath.Join(t.TempDir(), "agent.yaml")
		if err := os.WriteFile(p, []byte(agent), 0o644); err != nil {
			t.Fatal(err)
		}
		return append([]string{"run", p}, flags...), ""
	case "chat":
		return append([]string{"chat"}, flags...), "hello\n/quit\n"
	case "web":
		return append([]string{"web", "--addr", "127.0.0.1:0"}, flags...), ""
	case "mcp":
		return append([]string{"mcp", "serve", "--http", "127.0.0.1:0"}, flags...), ""
	case "gateway":
		return append([]string{"gateway", "--addr", "127.0.0.1:0"}, flags...), ""
	}
	t.Fatalf("front end %s", fe)
	return nil, ""
}

// tui runs `visor chat` with flags in a real terminal and returns its exit status and what it wrote.
func (f *firstHour) tui(t *testing.T, keys []string, flags ...string) fmRun {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("no tmux for the terminal chat")
	}
	name := fmt.Sprintf("fm%d", tmuxServers.Add(1))
	tt := startTmux(t, t.TempDir(), name, append([]string{"chat"}, flags...)...)
	if len(keys) > 0 {
		tt.waitScreen("the chat's prompt", regexp.MustCompile(`ctx \d+/\d+`))
		tt.keys(keys...)
		return fmRun{code: -2, out: tt.waitUntil("the answer to the keys", "a notice", func(s string) bool {
			return strings.Contains(s, "did you mean")
		})}
	}
	code := tt.exitCode()
	out := tt.stderr() + tt.screen()
	var c int
	fmt.Sscan(code, &c)
	return fmRun{code: c, out: out}
}

// sessionsIn lists the sessions stored in db with their message counts (nil when db does not exist).
func sessionsIn(t *testing.T, db string) map[string]int {
	t.Helper()
	if _, err := os.Stat(db); err != nil {
		return nil
	}
	out := map[string]int{}
	eachStoredSession(t, db, func(id string, msgs []memory.Message) { out[id] = len(msgs) })
	return out
}

// noEmptySession: a failed turn leaves no session without messages behind.
func noEmptySession(t *testing.T, db string) {
	t.Helper()
	for id, n := range sessionsIn(t, db) {
		if n == 0 {
			t.Errorf("an empty session %s is stored in %s", id, db)
		}
	}
}

// fmServer is a served front end (web, mcp serve, gateway) in a process of its own.
type fmServer struct {
	cmd    *exec.Cmd
	out    *syncbuf.Buffer
	base   string // web: the page; mcp: the MCP endpoint; gateway: the /v1 base
	token  string // web's page token
	cs     *sdk.ClientSession
	exited chan struct{}
}

var fmListening = map[string]*regexp.Regexp{
	"web":     regexp.MustCompile(`chat at (http://\S+)`),
	"mcp":     regexp.MustCompile(`visor MCP server at (http://\S+)`),
	"gateway": regexp.MustCompile(`endpoint at (http://\S+/v1)`),
}

// serve starts fe with flags and waits until it listens; key names a server shared by the rows (empty: this
// row's own, stopped when it ends).
func (f *firstHour) serve(t *testing.T, key, fe string, flags ...string) *fmServer {
	t.Helper()
	if s := f.served[key]; key != "" && s != nil {
		return s
	}
	args, _ := f.command(t, fe, "", flags...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "VISOR_TEST_AS_MAIN=1")
	s := &fmServer{cmd: cmd, out: &syncbuf.Buffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = s.out, s.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(s.exited) }()
	if key != "" {
		f.served[key] = s
	} else {
		t.Cleanup(s.stop)
	}
	deadline := time.Now().Add(fmDeadline)
	for s.base == "" {
		select {
		case <-s.exited:
			t.Fatalf("%s exited before it listened:\n%s", fe, s.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never listened:\n%s", fe, s.out.String())
		}
		if m := fmListening[fe].FindStringSubmatch(s.out.String()); m != nil {
			s.base = m[1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	switch fe {
	case "web":
		_, page := s.do(t, "GET", "/", "", nil)
		m := regexp.MustCompile(`<meta name="visor-token" content="([^"]+)">`).FindSubmatch(page)
		if m == nil {
			t.Fatal("no page token")
		}
		s.token = string(m[1])
	case "mcp":
		c := sdk.NewClient(&sdk.Implementation{Name: "first-hour", Version: "1"}, nil)
		cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: s.base}, nil)
		if err != nil {
			t.Fatal(err)
		}
		s.cs = cs
	}
	return s
}

func (s *fmServer) stop() {
	if s.cs != nil {
		_ = s.cs.Close()
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(fmDeadline):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// do sends an HTTP request to the served front end (web's token added) under the deadline.
func (s *fmServer) do(t *testing.T, method, path, ctype string, body []byte) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), fmDeadline)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, s.base+path, bytes.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if s.token != "" {
		req.Header.Set("X-Visor-Token", s.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v (hung or refused)\n%s", method, path, err, s.out.String())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	noPanic(t, string(b))
	return resp.StatusCode, b
}

// newChat is the web page's "New chat".
func (s *fmServer) newChat(t *testing.T) string {
	t.Helper()
	code, b := s.do(t, "POST", "/api/sessions", "application/json", []byte("{}"))
	var c struct{ Session string }
	if err := json.Unmarshal(b, &c); err != nil || code != 200 {
		t.Fatalf("new chat: %d %s", code, b)
	}
	return c.Session
}

// askTool calls mcp serve's ask tool and returns its text and whether it is an error result.
func (s *fmServer) askTool(t *testing.T, args map[string]any) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), fmDeadline)
	defer cancel()
	res, err := s.cs.CallTool(ctx, &sdk.CallToolParams{Name: "ask", Arguments: args})
	if err != nil {
		return err.Error(), true
	}
	txt := ""
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			txt += tc.Text
		}
	}
	noPanic(t, txt)
	return txt, res.IsError
}

// everywhere runs the same flags through the given front ends and checks each run.
func (f *firstHour) everywhere(t *testing.T, fes []string, flags []string, code int, want ...string) {
	t.Helper()
	for _, fe := range fes {
		t.Run(fe, func(t *testing.T) {
			if fe == "tui" {
				f.tui(t, nil, flags...).expect(t, code, want...)
				return
			}
			args, stdin := f.command(t, fe, "", flags...)
			f.visor(t, nil, stdin, args...).expect(t, code, want...)
		})
	}
}

var (
	cliFrontEnds = []string{"ask", "chat", "tui", "web", "mcp"}
	allFrontEnds = []string{"ask", "run", "chat", "tui", "web", "mcp", "gateway"}
)

// TestFirstMistakesOfTheNewcomerRun is the table. Run alone with
//
//	go test ./cmd/visor -run 'FirstMistakes'
func TestFirstMistakesOfTheNewcomerRun(t *testing.T) {
	enginetest.Binary(t)
	f := newFirstHour(t)
	notGGUF := f.file("notes.gguf", "these are my notes, not a model\n")
	folder := filepath.Join(f.dir, "models")
	_ = os.MkdirAll(folder, 0o755)
	noDefault := f.file("cfg/config.yaml", "model: qwen\nmodels:\n  qwen:\n    path: /nope/qwen.gguf\n")
	keyCfg := f.file("key/config.yaml", "model: remote\nmodels:\n  remote:\n    endpoint: http://127.0.0.1:1\n    api_key_env: VISOR_FIRST_HOUR_KEY\n")
	t.Setenv("VISOR_FIRST_HOUR_KEY", "")
	os.Unsetenv("VISOR_FIRST_HOUR_KEY")
	shot := testkit.WritePNG(t, filepath.Join(f.dir, "shot.png"), 96, 64, 1)
	webp := f.file("shot.webp", string(testimage.WebP()))
	bomb := f.file("bomb.png", string(testimage.BombPNG(60000, 60000)))
	rows := []struct {
		name string
		test func(t *testing.T)
	}{
		{"no model at all", func(t *testing.T) {
			f.everywhere(t, allFrontEnds, nil, -1, "--model")
		}},
		{"missing model file", func(t *testing.T) {
			f.everywhere(t, []string{"ask", "chat", "tui", "web", "mcp", "gateway"}, []string{"--model", "/nope/model.gguf"}, -1,
				"/nope/model.gguf", "no such file")
			t.Run("run", func(t *testing.T) {
				args, _ := f.command(t, "run", "name: t\nprompt: hello\nmodel:\n  path: /nope/model.gguf\n")
				f.visor(t, nil, "", args...).expect(t, 1, "agent.yaml:4", "/nope/model.gguf", "fix the path")
			})
		}},
		{"model is a folder", func(t *testing.T) {
			f.everywhere(t, []string{"ask", "chat", "web", "mcp", "gateway"}, []string{"--model", folder}, -1, folder, "folder")
		}},
		{"model is not a GGUF", func(t *testing.T) {
			f.everywhere(t, cliFrontEnds, []string{"--model", notGGUF, "--plan", "off"}, -1, notGGUF, "not a GGUF model")
		}},
		{"the projector as --model, the model as --mmproj", func(t *testing.T) {
			f.everywhere(t, []string{"ask", "run", "chat", "web", "mcp", "gateway"}, []string{"--model", f.proj}, -1,
				"--model "+f.proj, "is a vision projector", "pass it as --mmproj")
			f.everywhere(t, cliFrontEnds, []string{"--model", f.chat, "--mmproj", f.chat}, -1, "--mmproj "+f.chat, "is a chat model")
		}},
		{"a mistyped model name of the config", func(t *testing.T) {
			cfg := f.file("names/config.yaml", "models:\n  tiny:\n    path: "+f.chat+"\n")
			f.everywhere(t, []string{"ask", "chat", "web", "mcp"}, []string{"--config", cfg, "--model", "tny"}, -1,
				"--model tny", "did you mean tiny?", cfg)
			t.Run("run", func(t *testing.T) {
				args, _ := f.command(t, "run", "name: t\nprompt: hello\n", "--config", cfg, "--model", "tny")
				f.visor(t, nil, "", args...).expect(t, 1, "--model tny", "did you mean tiny?", cfg)
			})
		}},
		{"missing projector", func(t *testing.T) {
			f.everywhere(t, cliFrontEnds, []string{"--model", f.chat, "--mmproj", "/nope/mmproj.gguf"}, -1, "--mmproj /nope/mmproj.gguf", "no such file")
		}},
		{"the config's default model is a file the newcomer lacks", func(t *testing.T) {
			f.everywhere(t, cliFrontEnds, []string{"--config", noDefault}, -1,
				`the default model "qwen" of `+noDefault, "/nope/qwen.gguf", "--model NAME")
		}},
		{"api_key_env names an unset variable", func(t *testing.T) {
			f.everywhere(t, []string{"ask", "chat", "web", "mcp"}, []string{"--config", keyCfg}, -1,
				"api_key_env VISOR_FIRST_HOUR_KEY is not set", "export VISOR_FIRST_HOUR_KEY=")
		}},
		{"endpoint is not a URL", func(t *testing.T) {
			f.everywhere(t, cliFrontEnds, []string{"--endpoint", "localhost:8080"}, -1, "--endpoint localhost:8080", "http://")
		}},
		{"a flag mistyped", func(t *testing.T) {
			f.everywhere(t, allFrontEnds, []string{"--modle", "m.gguf"}, 2, "unknown flag --modle (did you mean --model?)")
		}},
		{"a command mistyped", func(t *testing.T) {
			for typo, meant := range map[string]string{"stat": "stats", "aks": "ask", "gatway": "gateway", "chta": "chat", "valdate": "validate"} {
				r := f.visor(t, nil, "", typo)
				r.expect(t, 2, `unknown command "`+typo+`" (did you mean "`+meant+`"?`)
			}
		}},
		{"-h on each command", func(t *testing.T) {
			for _, args := range [][]string{{"ask", "-h"}, {"run", "-h"}, {"chat", "-h"}, {"web", "-h"}, {"mcp", "-h"},
				{"mcp", "serve", "-h"}, {"gateway", "-h"}, {"validate", "-h"}, {"sessions", "-h"}, {"stats", "-h"},
				{"models", "write", "-h"}, {"schema", "-h"}, {"toolcalls", "-h"}, {"engine", "-h"}} {
				r := f.visor(t, nil, "", args...)
				r.expect(t, 0, "usage")
				if r.out != r.stdout {
					t.Errorf("visor %v -h wrote to stderr:\n%s", args, r.out)
				}
			}
			if _, err := os.Stat(filepath.Join(f.dir, "-h")); err == nil {
				t.Error("visor models write -h made a folder named -h")
			}
		}},
		{"a misspelled tool", func(t *testing.T) {
			f.everywhere(t, []string{"ask", "chat", "web", "mcp"}, []string{"--model", f.chat, "--tools", "list_dri"}, -1,
				`"list_dri" (did you mean list_dir?)`)
			agent := "name: t\nprompt: hello\ntools: [list_dri]\n"
			t.Run("run", func(t *testing.T) {
				args, _ := f.command(t, "run", agent)
				f.visor(t, nil, "", args...).expect(t, 1, "agent.yaml:3", `"list_dri" (did you mean list_dir?)`)
			})
			t.Run("validate", func(t *testing.T) {
				p := f.file("typo/agent.yaml", agent)
				f.visor(t, nil, "", "validate", p).expect(t, 1, p+":3", `"list_dri" (did you mean list_dir?)`)
			})
		}},
		{"a missing step image passes validate but not run", func(t *testing.T) {
			p := f.file("steps/agent.yaml", "name: t\nsteps:\n  - prompt: look\n    images: [nope.png]\n")
			f.visor(t, nil, "", "validate", p).expect(t, 1, p+":4", "nope.png does not exist", "fix the path")
			f.visor(t, nil, "", "run", p, "--endpoint", "http://127.0.0.1:1").expect(t, 1, p+":4", "nope.png does not exist")
		}},
		{"a gateway models.yaml given to run and validate", func(t *testing.T) {
			p := f.file("gw/models.yaml", "addr: 127.0.0.1:8080\nmodels:\n  tiny:\n    model: "+f.chat+"\n")
			f.visor(t, nil, "", "validate", p).expect(t, 0, "ok (gateway models file)")
			f.visor(t, nil, "", "run", p).expect(t, 1, p, "gateway models file", "visor gateway --config "+p)
		}},
		{"a second YAML document in an agent file", func(t *testing.T) {
			p := f.file("two/agent.yaml", "name: a\nprompt: hi\n---\nname: b\n")
			for _, args := range [][]string{{"validate", p}, {"run", p}} {
				f.visor(t, nil, "", args...).expect(t, 1, p+":3:1", "second YAML document", "own file")
			}
		}},
		{"unreachable --endpoint", func(t *testing.T) {
			for _, fe := range []string{"ask", "run", "chat"} {
				t.Run(fe, func(t *testing.T) {
					db := filepath.Join(t.TempDir(), "v.db")
					args, stdin := f.command(t, fe, "", "--endpoint", "http://127.0.0.1:1", "--db", db)
					r := f.visor(t, nil, stdin, args...)
					if fe == "chat" {
						r.expect(t, 0, "http://127.0.0.1:1", "no server answers there", "start llama-server")
					} else {
						r.expect(t, 1, "http://127.0.0.1:1", "no server answers there", "start llama-server")
					}
					if strings.Contains(r.out, "continue with") || strings.Contains(r.out, " tokens generated, ") {
						t.Errorf("a failed turn reads like a session:\n%s", r.out)
					}
					if n := len(sessionsIn(t, db)); n != 0 {
						t.Errorf("%d sessions stored for a turn that never ran", n)
					}
				})
			}
			t.Run("web", func(t *testing.T) {
				db := filepath.Join(t.TempDir(), "v.db")
				s := f.serve(t, "", "web", "--endpoint", "http://127.0.0.1:1", "--db", db)
				id := s.newChat(t)
				code, b := s.do(t, "POST", "/api/sessions/"+id+"/send", "application/json", []byte(`{"text":"hello"}`))
				if code != 200 || !strings.Contains(string(b), "event: done") || !strings.Contains(string(b), "no server answers there") {
					t.Errorf("send: %d %s", code, b)
				}
				_, list := s.do(t, "GET", "/api/sessions", "", nil)
				if !strings.Contains(string(list), `"sessions":[]`) {
					t.Errorf("the sidebar lists a chat that has no message: %s", list)
				}
				noEmptySession(t, db)
			})
			t.Run("mcp", func(t *testing.T) {
				db := filepath.Join(t.TempDir(), "v.db")
				s := f.serve(t, "", "mcp", "--endpoint", "http://127.0.0.1:1", "--db", db)
				txt, isErr := s.askTool(t, map[string]any{"prompt": "hello"})
				if !isErr || !strings.Contains(txt, "http://127.0.0.1:1") || !strings.Contains(txt, "start llama-server") {
					t.Errorf("ask tool: error %v, %q", isErr, txt)
				}
				noEmptySession(t, db)
			})
			t.Run("gateway", func(t *testing.T) {
				s := f.serve(t, "", "gateway", "--endpoint", "http://127.0.0.1:1")
				code, b := s.do(t, "POST", "/chat/completions", "application/json",
					[]byte(`{"model":"remote","messages":[{"role":"user","content":"hello"}]}`))
				if code < 500 || !strings.Contains(string(b), "127.0.0.1:1") {
					t.Errorf("gateway: %d %s, want a 5xx naming the endpoint", code, b)
				}
			})
		}},
		{"a folder as --db", func(t *testing.T) {
			f.everywhere(t, []string{"ask", "chat", "web", "mcp"}, []string{"--model", f.chat, "--db", folder}, -1,
				folder, "is a directory", "give the path of a file")
			f.visor(t, nil, "", "sessions", "list", "--db", folder).expect(t, 1, folder, "is a directory")
			f.visor(t, nil, "", "gateway", "--model", f.chat, "--store", "--db", folder, "--addr", "127.0.0.1:0").
				expect(t, 1, folder, "is a directory")
		}},
		{"a text file as --db", func(t *testing.T) {
			f.everywhere(t, []string{"ask", "chat", "web", "mcp"}, []string{"--model", f.chat, "--db", notGGUF}, -1,
				notGGUF, "not a visor database", "pass --db")
			f.visor(t, nil, "", "sessions", "list", "--db", notGGUF).expect(t, 1, notGGUF, "not a visor database")
		}},
		{"a database on a read-only filesystem", func(t *testing.T) {
			f.everywhere(t, []string{"ask", "chat", "web", "mcp"}, []string{"--model", f.chat, "--db", "/proc/visor.db"}, -1,
				"/proc/visor.db", "pass --db")
		}},
		{"--db in a folder that does not exist, on a command that only reads", func(t *testing.T) {
			missing := filepath.Join(t.TempDir(), "typo", "dir", "v.db")
			for _, args := range [][]string{{"sessions", "list"}, {"sessions", "show", "abc"}, {"sessions", "search", "x"}, {"stats"}} {
				f.visor(t, nil, "", append(args, "--db", missing)...).expect(t, 1, missing, "no such database")
			}
			if _, err := os.Stat(filepath.Dir(filepath.Dir(missing))); err == nil {
				t.Errorf("a read command created %s", filepath.Dir(filepath.Dir(missing)))
			}
		}},
		{"--db in a folder that does not exist, on a command that stores", func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "typo", "v.db")
			said := "(the first conversation stored in " + db + "; --db names another, --no-store keeps none)"
			// A newcomer's first command often fails before the engine answers: it stores nothing, so it
			// announces nothing, and the first command that stores there still says where.
			failed := f.visor(t, nil, "", "ask", "hello", "--endpoint", "http://127.0.0.1:1", "--db", db)
			failed.expect(t, 1, "127.0.0.1:1")
			if strings.Contains(failed.out, "first conversation") {
				t.Errorf("a turn that stored nothing announces the database:\n%s", failed.out)
			}
			first := f.visor(t, nil, "", "ask", "hello", "--model", f.chat, "--plan", "off", "--db", db)
			first.expect(t, 0, said)
			again := f.visor(t, nil, "", "ask", "hello", "--model", f.chat, "--plan", "off", "--db", db)
			again.expect(t, 0)
			if strings.Contains(again.out, "first conversation") {
				t.Errorf("an existing database is announced as new:\n%s", again.out)
			}
		}},
		{"stats of an unknown session", func(t *testing.T) {
			db := f.storedDB(t, "stats-unknown")
			r := f.visor(t, nil, "", "stats", "nope", "--db", db)
			r.expect(t, 1, `"nope"`, "not found", "visor sessions list")
			if n := strings.Count(r.out, "visor sessions list"); n != 1 {
				t.Errorf("the hint is given %d times:\n%s", n, r.out)
			}
		}},
		{"run of an agent file that does not exist", func(t *testing.T) {
			f.visor(t, nil, "", "run", "/nope/agent.yaml").expect(t, 1, "agent file /nope/agent.yaml: no such file", "examples")
		}},
		{"--session of an unknown id", func(t *testing.T) {
			db := f.storedDB(t, "resume-unknown")
			for _, fe := range []string{"ask", "chat"} {
				args, stdin := f.command(t, fe, "", "--model", f.chat, "--plan", "off", "--db", db, "--session", "deadbeef")
				r := f.visor(t, nil, stdin, args...)
				r.expect(t, 1, `"deadbeef"`, "not found", "visor sessions list")
				if n := strings.Count(r.out, "visor sessions list"); n != 1 {
					t.Errorf("%s: the hint is given %d times:\n%s", fe, n, r.out)
				}
			}
			if n := len(sessionsIn(t, db)); n != 1 {
				t.Errorf("%d sessions after resuming an unknown one, want the one stored before", n)
			}
		}},
		{"a word after visor engine", func(t *testing.T) {
			f.visor(t, nil, "", "engine", "instal").expect(t, 2, `unknown argument "instal"`, "visor engine install")
			f.visor(t, nil, "", "engine", "install", "a", "b").expect(t, 2, "at most one folder", "visor engine install [DIR]")
			engine := filepath.Join(t.TempDir(), "engine")
			f.visor(t, nil, "", "engine", "install", "--debs", "/nope/debs", engine).expect(t, 1, "--debs /nope/debs: no such folder")
			f.visor(t, nil, "", "engine", "install", "--gpu", "tpu", engine).expect(t, 1, "--gpu tpu: use auto, vulkan, cuda or off")
			if _, err := os.Stat(engine); err == nil {
				t.Errorf("a refused flag of visor engine install made %s", engine)
			}
		}},
		{"an unreadable database", func(t *testing.T) {
			db := f.storedDB(t, "unreadable")
			perms(t, db, 0o000)
			cred := f.asOther(t)
			for _, args := range [][]string{{"sessions", "list"}, {"stats"}, {"ask", "hello", "--endpoint", "http://127.0.0.1:1"}} {
				r := f.visor(t, cred, "", append(args, "--db", db)...)
				r.expect(t, 1, db, "cannot read the database", "chmod u+rw")
				if strings.Contains(r.out, "folder is not writable") {
					t.Errorf("an unreadable database reported as an unwritable folder:\n%s", r.out)
				}
			}
		}},
		{"a read-only database", func(t *testing.T) {
			db := f.storedDB(t, "readonly")
			perms(t, db, 0o444)
			cred := f.asOther(t)
			f.visor(t, cred, "", "sessions", "list", "--db", db).expect(t, 0, "hello")
			f.visor(t, cred, "", "sessions", "search", "hello", "--db", db).expect(t, 0, "hello")
			f.visor(t, cred, "", "stats", "--db", db).expect(t, 0, "tokens/s")
			f.visor(t, cred, "", "sessions", "rm", "--db", db, "0").expect(t, 1, db, "read-only", "write access")
			f.visor(t, cred, "", "ask", "hello", "--endpoint", "http://127.0.0.1:1", "--db", db).
				expect(t, 1, db, "read-only", "chmod u+w", "--no-store")
			if n := len(sessionsIn(t, db)); n != 1 {
				t.Errorf("%d sessions in the read-only database, want the one it held", n)
			}
		}},
		{"sessions show of an unknown or empty id", func(t *testing.T) {
			db := f.storedDB(t, "show")
			f.visor(t, nil, "", "sessions", "show", "deadbeef", "--db", db).expect(t, 1, `"deadbeef"`, "not found", "visor sessions list")
			f.visor(t, nil, "", "sessions", "show", "", "--db", db).expect(t, 2, "session id is empty", "visor sessions list")
			r := f.visor(t, nil, "", "sessions", "show", "--db", db)
			r.expect(t, -1, "visor sessions list")
		}},
		{"visor sessions used wrong", func(t *testing.T) {
			db := f.storedDB(t, "sessions-wrong")
			id := ""
			for k := range sessionsIn(t, db) {
				id = k
			}
			for _, c := range []struct {
				args []string
				want string
			}{
				{[]string{"frok", id}, `sessions: unknown command "frok" (did you mean "fork"?`},
				{[]string{"serach", "x"}, `(did you mean "search"?`},
				{[]string{"search"}, "sessions search: no query: visor sessions search WORDS"},
				{[]string{"show", id, "extra"}, `sessions show takes one session id, not "` + id + ` extra"`},
				{[]string{"list", "all"}, `sessions list takes no arguments, not "all"`},
				{[]string{"rm"}, "sessions rm: which session? give its id"},
				{[]string{"export", id, "--format", "pdf"}, `sessions export: --format "pdf": use md or json`},
				{[]string{"search", "--since", "yday", "x"}, `date "yday": use 2006-01-02`},
				{nil, "sessions: say which: visor sessions list, show ID"},
			} {
				r := f.visor(t, nil, "", append(append([]string{"sessions"}, c.args...), "--db", db)...)
				r.expect(t, 2, c.want)
				stderr := strings.TrimPrefix(r.out, r.stdout)
				if strings.Contains(r.out, "invalid input") || strings.Contains(r.out, "visor: visor") || strings.Count(stderr, "\n") != 1 {
					t.Errorf("visor sessions %v: not one plain line on stderr:\n%s", c.args, stderr)
				}
			}
			r := f.visor(t, nil, "", "sessions", "show", "nope", "--db", db)
			if r.expect(t, 1, `session "nope": not found`); strings.Contains(r.out, "memory:") {
				t.Errorf("a package name in the message:\n%s", r.out)
			}
		}},
		{"sessions show reads as a report", func(t *testing.T) {
			db := f.storedDB(t, "report")
			ids := sessionsIn(t, db)
			for id := range ids {
				r := f.visor(t, nil, "", "sessions", "show", id, "--db", db)
				r.expect(t, 0, "- engine profile: path "+f.chat)
				if strings.Contains(r.out, `{"`) || strings.Contains(r.out, "&{") {
					t.Errorf("sessions show prints a raw struct:\n%s", r.out)
				}
			}
		}},
		{"stats with no sessions and with an empty newest session", func(t *testing.T) {
			empty := filepath.Join(t.TempDir(), "empty.db")
			st, err := memory.Open(context.Background(), empty)
			if err != nil {
				t.Fatal(err)
			}
			st.Close()
			f.visor(t, nil, "", "stats", "--db", empty).expect(t, 1, "no stored sessions yet", "visor ask")
			db := f.storedDB(t, "stats")
			st, err = memory.Open(context.Background(), db)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.CreateSession(context.Background(), memory.Session{Title: "left empty by an older visor"}); err != nil {
				t.Fatal(err)
			}
			st.Close()
			r := f.visor(t, nil, "", "stats", "--db", db)
			r.expect(t, 0, "tokens/s")
			for id, n := range sessionsIn(t, db) {
				if n > 0 && !strings.Contains(r.out, id) {
					t.Errorf("stats does not show the newest session with messages (%s):\n%s", id, r.out)
				}
			}
		}},
		{"a WebP screenshot", func(t *testing.T) {
			f.images(t, webp, testimage.WebP(), "WebP", "convert it to a PNG")
		}},
		{"a missing image file", func(t *testing.T) {
			for _, fe := range []string{"ask", "run"} {
				args, _ := f.command(t, fe, "", "--model", f.chat, "--mmproj", f.proj, "--image", "/nope/shot.png", "--no-store")
				f.visor(t, nil, "", args...).expect(t, 1, "--image /nope/shot.png", "no such file")
			}
			r := f.visor(t, nil, "/image /nope/shot.png\n/quit\n", "chat", "--model", f.chat, "--mmproj", f.proj, "--no-store")
			r.expect(t, 0, "/image /nope/shot.png", "no such file")
		}},
		{"a URL as the image", func(t *testing.T) {
			url := "https://example.com/shot.png"
			for _, fe := range []string{"ask", "run"} {
				args, _ := f.command(t, fe, "", "--model", f.chat, "--mmproj", f.proj, "--image", url, "--no-store")
				f.visor(t, nil, "", args...).expect(t, 1, "--image "+url, "is a URL", "download it first")
			}
			r := f.visor(t, nil, "/image "+url+"\n/quit\n", "chat", "--model", f.chat, "--mmproj", f.proj, "--no-store")
			r.expect(t, 0, "/image "+url, "is a URL", "download it first")
		}},
		{"a huge image (too many pixels)", func(t *testing.T) {
			data, _ := os.ReadFile(bomb)
			f.images(t, bomb, data, "too many pixels", "downscale it")
		}},
		{"an image without a projector", func(t *testing.T) {
			for _, fe := range []string{"ask", "run"} {
				args, _ := f.command(t, fe, "", "--model", f.chat, "--image", shot, "--no-store")
				f.visor(t, nil, "", args...).expect(t, 1, shot, "--mmproj")
			}
			r := f.visor(t, nil, "/image "+shot+"\n/quit\n", "chat", "--model", f.chat, "--no-store", "--plan", "off")
			r.expect(t, 0, "--mmproj")
		}},
		{"/imag in the chat", func(t *testing.T) {
			r := f.visor(t, nil, "/imag shot.png\n/quit\n", "chat", "--model", f.chat, "--no-store", "--plan", "off")
			r.expect(t, 0, "/imag", "did you mean /image?")
			t.Run("tui", func(t *testing.T) {
				r := f.tui(t, []string{"/imag x.png", "Enter"}, "--model", f.chat, "--no-store", "--plan", "off")
				noPanic(t, r.out)
				if !strings.Contains(r.out, "/image") {
					t.Errorf("the terminal chat does not suggest /image:\n%s", r.out)
				}
			})
		}},
		{"MCP tools that overflow the context", func(t *testing.T) {
			// The MCP server's tools describe themselves at length: with them the request cannot fit a
			// 512-token context, which the server would only say with its 400.
			for _, fe := range []string{"ask", "chat"} {
				t.Run(fe, func(t *testing.T) {
					args, stdin := f.command(t, fe, "", "--model", f.chat, "--plan", "off", "--ctx", "512", "--no-store",
						"--mcp", "big=env "+bigToolsMCPEnv+"=1 "+os.Args[0])
					f.visor(t, nil, stdin, args...).expect(t, map[string]int{"ask": 1, "chat": 0}[fe], "big", "context", "--ctx")
				})
			}
		}},
		{"a relative workspace in the config", func(t *testing.T) {
			proj := filepath.Join(f.dir, "project")
			_ = os.MkdirAll(proj, 0o755)
			f.file("project/only-here.txt", "x\n")
			cfg := f.file("wscfg/config.yaml", "workspace: ../project\ntools: [list_dir]\n")
			r := f.visor(t, nil, "", "ask", "what is here?", "--config", cfg, "--model", f.chat, "--plan", "off", "--no-store")
			r.expect(t, 0, "only-here.txt")
		}},
		{"a command that reads stdin, run at a terminal", func(t *testing.T) {
			// mcp serve and toolcalls parse read a protocol or a paste from stdin: at a terminal they said
			// nothing and looked hung.
			stderrShows := func(tt *tmuxTerm, want string) {
				t.Helper()
				for deadline := time.Now().Add(fmDeadline); !strings.Contains(tt.stderr(), want); time.Sleep(30 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("stderr never said %q:\n%s\n%s", want, tt.stderr(), tt.screen())
					}
				}
			}
			mcp := startTmux(t, t.TempDir(), "mcp", "mcp", "serve", "--model", f.chat, "--plan", "off", "--no-store")
			stderrShows(mcp, "waits for an MCP client's JSON-RPC on stdin")
			mcp.keys("C-d") // Ctrl-C would also end the harness's shell (the terminal is not in raw mode)
			if code := mcp.exitCode(); code != "0" {
				t.Errorf("mcp serve after Ctrl-D: exit %s\n%s", code, mcp.stderr())
			}
			tc := startTmux(t, t.TempDir(), "tc", "toolcalls", "parse")
			stderrShows(tc, "paste it, then Ctrl-D")
			tc.keys(`<tool_call>{"name": "list_dir", "arguments": {}}</tool_call>`, "Enter", "C-d")
			if code := tc.exitCode(); code != "0" { // what it prints is TestToolcallsParseCommand's
				t.Errorf("toolcalls parse: exit %s\n%s", code, tc.stderr())
			}
		}},
		{"zero steps", func(t *testing.T) {
			f.everywhere(t, cliFrontEnds, []string{"--model", f.chat, "--max-steps", "0"}, -1, "--max-steps 0", "1 or more")
		}},
	}
	for _, r := range rows {
		t.Run(r.name, r.test)
	}
	t.Logf("%d rows", len(rows))
}

// images sends the image at path (data: its bytes) through every front end that takes images: each refuses it
// naming why and what to do, before any model call, and stores nothing.
func (f *firstHour) images(t *testing.T, path string, data []byte, want ...string) {
	t.Helper()
	vision := []string{"--model", f.chat, "--mmproj", f.proj, "--plan", "off"}
	for _, fe := range []string{"ask", "run"} {
		t.Run(fe, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "v.db")
			args, _ := f.command(t, fe, "", append(vision, "--image", path, "--db", db)...)
			f.visor(t, nil, "", args...).expect(t, 1, append([]string{"--image " + path}, want...)...)
			if n := len(sessionsIn(t, db)); n != 0 {
				t.Errorf("%d sessions stored for a refused image", n)
			}
		})
	}
	t.Run("chat", func(t *testing.T) {
		f.visor(t, nil, "/image "+path+"\n/quit\n", append([]string{"chat", "--no-store"}, vision...)...).
			expect(t, 0, append([]string{"/image " + path}, want...)...)
	})
	t.Run("web", func(t *testing.T) {
		s := f.serve(t, "web", "web", append(vision, "--no-store")...)
		id := s.newChat(t)
		code, b := s.do(t, "POST", "/api/sessions/"+id+"/attach", "application/octet-stream", data)
		if code < 400 || code >= 500 {
			t.Errorf("attach: %d, want a 4xx", code)
		}
		for _, w := range want {
			if !strings.Contains(string(b), w) {
				t.Errorf("attach: %s lacks %q", b, w)
			}
		}
	})
	t.Run("mcp", func(t *testing.T) {
		s := f.serve(t, "mcp", "mcp", append(vision, "--no-store")...)
		txt, isErr := s.askTool(t, map[string]any{"prompt": "what is this?",
			"images": []map[string]any{{"data": base64.StdEncoding.EncodeToString(data)}}})
		if !isErr {
			t.Errorf("ask tool took the image: %q", txt)
		}
		for _, w := range want {
			if !strings.Contains(txt, w) {
				t.Errorf("ask tool: %q lacks %q", txt, w)
			}
		}
	})
	t.Run("gateway", func(t *testing.T) {
		s := f.serve(t, "gateway", "gateway", "--model", f.chat, "--mmproj", f.proj)
		body, _ := json.Marshal(map[string]any{"model": "tiny-bigram", "messages": []map[string]any{{"role": "user", "content": []map[string]any{
			{"type": "text", "text": "what is this?"},
			{"type": "image_url", "image_url": map[string]string{"url": "data:image/png;base64," + base64.StdEncoding.EncodeToString(data)}}}}}})
		code, b := s.do(t, "POST", "/chat/completions", "application/json", body)
		if code < 400 || code >= 500 {
			t.Errorf("gateway: %d %s, want a 4xx", code, b)
		}
		if !strings.Contains(string(b), want[0]) {
			t.Errorf("gateway: %s lacks %q", b, want[0])
		}
	})
}

// bigToolsMCPEnv makes the test binary a real MCP server on stdio whose tools' descriptions fill ~20,000 tokens.
const bigToolsMCPEnv = "VISOR_TEST_BIG_TOOLS_MCP"

func serveBigToolsMCP() {
	s := sdk.NewServer(&sdk.Implementation{Name: "visor-test-big", Version: "1"}, nil)
	for i := range 40 {
		sdk.AddTool(s, &sdk.Tool{Name: fmt.Sprintf("tool%d", i), Description: strings.Repeat("A tool that does a great many things. ", 50)},
			func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "done"}}}, nil, nil
			})
	}
	_ = s.Run(context.Background(), &sdk.StdioTransport{})
}

// storedDB is a database holding one answered session, made by visor ask on the tiny model.
func (f *firstHour) storedDB(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(f.dir, "db-"+name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "v.db")
	f.visor(t, nil, "", "ask", "hello", "--model", f.chat, "--plan", "off", "--db", db).expect(t, 0)
	return db
}

// asOther is the user who runs a permission row: nobody when the test runs as root, whom permissions do not stop.
func (f *firstHour) asOther(t *testing.T) *syscall.Credential {
	t.Helper()
	if f.nobody == nil {
		return nil
	}
	if f.otherBin == "" {
		// go test keeps its binary in a folder only root may enter: a copy goes where the other user can run it.
		bin := filepath.Join(f.dir, "visor-as-nobody")
		src, err := os.ReadFile(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, src, 0o755); err != nil {
			t.Fatal(err)
		}
		f.otherBin = bin
	}
	return f.nobody
}

func perms(t *testing.T, db string, mode os.FileMode) {
	t.Helper()
	for _, p := range []string{db, db + "-wal", db + "-shm"} {
		if err := os.Chmod(p, mode); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, p := range []string{db, db + "-wal", db + "-shm"} {
			_ = os.Chmod(p, 0o644)
		}
	})
}
