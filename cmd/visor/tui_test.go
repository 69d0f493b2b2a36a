package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testkit"
	"github.com/visorhq/visor/internal/testmodel"
	"github.com/visorhq/visor/memory"
)

// slowMCPEnv makes the test binary a real MCP server on stdio with one tool, slow, that answers only when its
// call is canceled: a turn that stays running until the user cancels it, whatever the machine's speed.
const slowMCPEnv = "VISOR_TEST_SLOW_MCP"

func serveSlowMCP() {
	s := sdk.NewServer(&sdk.Implementation{Name: "visor-test-slow", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "slow", Description: "Wait until canceled"},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Minute):
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "done"}}}, nil, nil
		})
	_ = s.Run(context.Background(), &sdk.StdioTransport{})
}

// tmuxServers numbers the private tmux servers this test binary starts.
var tmuxServers atomic.Int64

// tmuxTerm is a real terminal (a tmux pane on a private server) running this binary as visor.
type tmuxTerm struct {
	t      *testing.T
	socket string
	name   string
	dir    string
}

func startTmux(t *testing.T, dir, name string, args ...string) *tmuxTerm {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no tmux to drive the terminal chat: scripts/test.sh installs it (apt-get install tmux)")
		}
		t.Skip("no tmux (apt-get install tmux) to drive the terminal chat")
	}
	// A private tmux server per terminal: two terminals on one server raced its shutdown when the first ended
	// (issue 22: TestChatInATerminal failed 6 runs of 7 alone).
	tt := &tmuxTerm{t: t, socket: fmt.Sprintf("visor-test-%d-%d", os.Getpid(), tmuxServers.Add(1)), name: name, dir: dir}
	quoted := []string{"exec", "env", "VISOR_TEST_AS_MAIN=1", shellQuote(os.Args[0])}
	for _, a := range args {
		quoted = append(quoted, shellQuote(a))
	}
	errFile, codeFile := filepath.Join(dir, name+".stderr"), filepath.Join(dir, name+".exit")
	script := fmt.Sprintf("(%s) 2>%s; echo $? >%s", strings.Join(quoted, " "), shellQuote(errFile), shellQuote(codeFile))
	tt.tmux("new-session", "-d", "-s", name, "-x", "120", "-y", "32", "sh", "-c", script)
	t.Cleanup(func() {
		_ = exec.Command("tmux", "-L", tt.socket, "kill-server").Run()
		if t.Failed() {
			b, _ := os.ReadFile(errFile)
			t.Logf("%s stderr:\n%s", name, b)
		}
	})
	return tt
}

func (tt *tmuxTerm) tmux(args ...string) string {
	tt.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", tt.socket}, args...)...).CombinedOutput()
	if err != nil {
		tt.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func (tt *tmuxTerm) screen() string {
	out, err := exec.Command("tmux", "-L", tt.socket, "capture-pane", "-p", "-t", tt.name).CombinedOutput()
	if err != nil {
		return ""
	}
	return string(out)
}

func (tt *tmuxTerm) keys(keys ...string) {
	tt.tmux(append([]string{"send-keys", "-t", tt.name}, keys...)...)
}

// paste sends text as a bracketed paste, as a terminal does for a file dropped on it.
func (tt *tmuxTerm) paste(text string) {
	tt.tmux("set-buffer", "-b", "drop", text)
	tt.tmux("paste-buffer", "-p", "-d", "-b", "drop", "-t", tt.name)
}

// waitScreen waits until the screen matches re and returns it.
func (tt *tmuxTerm) waitScreen(what string, re *regexp.Regexp) string {
	tt.t.Helper()
	return tt.waitUntil(what, re.String(), re.MatchString)
}

func (tt *tmuxTerm) waitUntil(what, want string, ok func(string) bool) string {
	tt.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		s := tt.screen()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			tt.t.Fatalf("%s: the screen never showed %s:\n%s", what, want, s)
		}
		time.Sleep(30 * time.Millisecond)
	}
}

// exitCode waits for the program to end and returns its exit status.
func (tt *tmuxTerm) exitCode() string {
	tt.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(filepath.Join(tt.dir, tt.name+".exit")); err == nil && len(b) > 0 {
			return strings.TrimSpace(string(b))
		}
		time.Sleep(50 * time.Millisecond)
	}
	tt.t.Fatalf("%s did not exit:\n%s", tt.name, tt.screen())
	return ""
}

func (tt *tmuxTerm) stderr() string {
	b, _ := os.ReadFile(filepath.Join(tt.dir, tt.name+".stderr"))
	return string(b)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// TestChatInATerminal drives `visor chat` in a real terminal (tmux) against real llama-servers, as a person
// would: drop a screenshot on it, ask, read the streamed answer and the status line, quit with Ctrl-C twice;
// then cancel a turn with Ctrl-C (its tool, a real MCP server, waits until canceled) and resume the first
// session from the session picker.
func TestChatInATerminal(t *testing.T) {
	enginetest.Binary(t)
	dir := t.TempDir()
	chat, proj, err := testmodel.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	shot := testkit.WritePNG(t, filepath.Join(dir, "shot.png"), 16, 16, 0)
	db := filepath.Join(dir, "v.db")

	a := startTmux(t, dir, "vision", "chat", "--model", chat, "--mmproj", proj, "--db", db, "--plan", "off", "--explain")
	a.waitScreen("status line", regexp.MustCompile(`tiny-bigram\.gguf · ctx 0/\d+ .*resident: projector`))
	a.paste(shot)
	// The image and its size are named once (issue 22: the notice repeated the 📎 list).
	if s := a.waitScreen("dropped screenshot", regexp.MustCompile(`📎 shot\.png 16×16 \d+ bytes · encoding it while you type`)); strings.Count(s, "16×16") != 1 {
		t.Errorf("the attachment's size is shown %d times, want once:\n%s", strings.Count(s, "16×16"), s)
	}
	a.keys("What is on the screen?", "Enter")
	a.waitScreen("streamed answer", regexp.MustCompile(`(?s)you › \[1 image\] What is on the screen\?.*Hi!.*ctx [1-9]\d*/\d+ .*tok/s`))
	// The turn ends after the answer is stored; only then is the prompt idle.
	a.waitUntil("turn over", "no “answering”", func(s string) bool { return !strings.Contains(s, "answering") })
	// --explain: the screenshot was evaluated ahead, and the question's request found it in the cache.
	a.waitScreen("explained prefill", regexp.MustCompile(`(?s)explain: prefill 1 image\(s\) ahead \(attached .*explain: step 1: the request found its 1 image\(s\) in the cache`))
	a.keys("C-c")
	a.waitScreen("first Ctrl-C at an idle prompt", regexp.MustCompile(`press Ctrl\+C again to quit`))
	a.keys("C-c")
	if code := a.exitCode(); code != "0" {
		t.Fatalf("chat exited %s:\n%s", code, a.stderr())
	}
	m := regexp.MustCompile(`continue with: visor chat --session ([0-9a-f]+)`).FindStringSubmatch(a.stderr())
	if m == nil {
		t.Fatalf("no session to continue printed:\n%s", a.stderr())
	}
	first := m[1]

	// The only tool blocks until canceled, and the tiny model calls a tool whenever it is offered one.
	slow := "slow=env " + slowMCPEnv + "=1 " + os.Args[0]
	b := startTmux(t, dir, "cancel", "chat", "--model", chat, "--db", db, "--plan", "off", "--mcp", slow)
	b.waitScreen("status line", regexp.MustCompile(`tiny-bigram\.gguf · ctx 0/\d+`))
	b.keys("Take your time", "Enter")
	b.waitScreen("a running turn", regexp.MustCompile(`(?s)→ slow__slow.*answering … Ctrl\+C cancels`))
	b.keys("C-c")
	s := b.waitScreen("canceled answer", regexp.MustCompile(`\(answer canceled\)`))
	if strings.Contains(s, "answering") {
		t.Errorf("canceled, but the screen still says answering:\n%s", s)
	}
	b.keys("/sessions", "Enter")
	b.waitScreen("session picker", regexp.MustCompile(`continue which session\?(?s).*`+first+`.*What is on the screen\?`))
	b.keys("Down", "Enter")
	b.waitScreen("resumed session", regexp.MustCompile(`(?s)resumed session `+first+`.*session `+first))
	s = b.screen()
	if !strings.Contains(s, "you › [1 image] What is on the screen?") || !strings.Contains(s, "Hi!") {
		t.Fatalf("the resumed session's conversation is not shown:\n%s", s)
	}
	b.keys("C-c", "C-c")
	if code := b.exitCode(); code != "0" {
		t.Fatalf("chat exited %s:\n%s", code, b.stderr())
	}

	store, err := memory.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	full, err := store.ResolveSessionID(context.Background(), first)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := store.Messages(context.Background(), full)
	sent, _ := os.ReadFile(shot)
	if err != nil || len(msgs) != 2 || len(msgs[0].Images) != 1 || !bytes.Equal(msgs[0].Images[0].Data, sent) {
		t.Fatalf("the first session as stored: %+v %v", msgs, err)
	}
	ss, err := store.ListSessions(context.Background(), memory.SessionFilter{})
	if err != nil || len(ss) != 2 || ss[0].Title != "Take your time" {
		t.Fatalf("sessions %+v %v", ss, err)
	}
	cut, err := store.Messages(context.Background(), ss[0].ID)
	if err != nil || len(cut) == 0 || !cut[len(cut)-1].Interrupted {
		t.Fatalf("the canceled answer is not stored as interrupted: %+v %v", cut, err)
	}
}
