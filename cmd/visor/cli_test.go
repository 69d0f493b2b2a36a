package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/visorhq/visor/engine/gguf"
	"github.com/visorhq/visor/engine/modelgen"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testkit"
	"github.com/visorhq/visor/memory"
)

// visorExit runs this test binary as visor itself and returns its exit code, stdout and stderr.
func visorExit(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "VISOR_TEST_AS_MAIN=1", "VISOR_MODEL=", "VISOR_ENDPOINT=")
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

func TestCommandLineConventions(t *testing.T) {
	if code, out, _ := visorExit(t, "", "--version"); code != 0 || !strings.HasPrefix(out, "visor ") {
		t.Errorf("--version: exit %d, %q", code, out)
	}
	for _, args := range [][]string{{"-h"}, {"ask", "-h"}, {"chat", "--help"}, {"run", "-h"}} {
		code, out, errOut := visorExit(t, "", args...)
		if code != 0 || !strings.Contains(out, "usage") || errOut != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 0 and the usage on stdout", args, code, out, errOut)
		}
	}
	typos := []struct {
		args []string
		want string
	}{
		{[]string{"ask", "q", "--modle", "m.gguf"}, "did you mean --model?"},
		{[]string{"chat", "--mmprj", "p.gguf"}, "did you mean --mmproj?"},
		{[]string{"aks", "q"}, `did you mean "ask"?`},
	}
	for _, tc := range typos {
		code, out, errOut := visorExit(t, "", tc.args...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line with %q", tc.args, code, errOut, tc.want)
		}
	}
	if code, _, errOut := visorExit(t, "", "ask", "--no-store"); code != 2 || !strings.Contains(errOut, "no question") {
		t.Errorf("ask with empty stdin: exit %d, %q", code, errOut)
	}
}

// TestAskReadsAPipedQuestion pipes the question to `visor ask` on the tiny model.
func TestAskReadsAPipedQuestion(t *testing.T) {
	enginetest.Binary(t)
	_, chat, _ := tinyWorkspace(t)
	code, out, errOut := visorExit(t, "What is here?\n", "ask", "--model", chat, "--no-store", "--plan", "off")
	if code != 0 || strings.TrimSpace(out) != "Hi!" {
		t.Fatalf("echo q | visor ask: exit %d, stdout %q, stderr %s", code, out, errOut)
	}
	if !strings.Contains(errOut, "[1 step, ") {
		t.Errorf("a one-step answer's summary: %s", errOut)
	}
}

// writeConfig writes config.yaml where the tests' XDG_CONFIG_HOME points and removes it when the test ends.
func writeConfig(t *testing.T, src string) {
	t.Helper()
	dir := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "visor")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(path) })
}

// TestConfigFileAndSessionsRememberTheirModel: the config's default model runs `visor ask` with no --model; a
// session resumes with the model it was stored with after the config changed; a flag beats the config.
func TestConfigFileAndSessionsRememberTheirModel(t *testing.T) {
	enginetest.Binary(t)
	dir, chat, ws := tinyWorkspace(t)
	db := filepath.Join(dir, "v.db")
	t.Setenv("VISOR_MODEL", "")
	writeConfig(t, fmt.Sprintf("model: tiny\nmodels:\n  tiny:\n    path: %s\n    plan: off\n    ctx: 2048\ntools: [list_dir]\nworkspace: %s\n", chat, ws))

	out, errOut, err := visor(t, "ask", "What is here?", "--db", db)
	if err != nil || strings.TrimSpace(out) != "Hi!" || !strings.Contains(errOut, "→ list_dir") {
		t.Fatalf("ask on the config's model and tools: %v\nstdout %q\nstderr %s", err, out, errOut)
	}
	id := regexp.MustCompile(`session ([0-9a-f]+) `).FindStringSubmatch(errOut)
	if id == nil {
		t.Fatalf("no session: %s", errOut)
	}
	store, err := memory.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := store.Session(context.Background(), id[1])
	store.Close()
	if err != nil || sess.Model != "tiny" || !strings.Contains(sess.EngineProfile, chat) {
		t.Fatalf("stored session %+v, %v: want model tiny and its path", sess, err)
	}

	// The config now names a model that does not exist; the session still resumes on its own.
	writeConfig(t, "model: gone\nmodels:\n  gone: {path: /nonexistent.gguf}\n")
	if out, errOut, err := visor(t, "ask", "--session", id[1], "--db", db, "And now?"); err != nil || strings.TrimSpace(out) != "Hi!" {
		t.Fatalf("resume with the stored model: %v\n%s", err, errOut)
	}
	// A new question uses the config's default, which fails naming the file.
	if _, _, err := visor(t, "ask", "--db", db, "--no-store", "q"); err == nil || !strings.Contains(err.Error(), "nonexistent.gguf") {
		t.Fatalf("new session on the config's default: %v", err)
	}
	// --model beats the config.
	if out, _, err := visor(t, "ask", "--model", chat, "--no-store", "--plan", "off", "q"); err != nil || strings.TrimSpace(out) != "Hi!" {
		t.Fatalf("--model over the config: %v", err)
	}
	// A broken config is reported with its line and the fix.
	writeConfig(t, "models:\n  tiny:\n    pth: x.gguf\n")
	if _, _, err := visor(t, "ask", "--no-store", "q"); err == nil || !strings.Contains(err.Error(), `config.yaml:3:5: unknown key pth in models.tiny — did you mean path?`) {
		t.Fatalf("broken config: %v", err)
	}
}

// TestValidateReportsWhatRunRefuses: visor validate checks an agent file as visor run loads it (a step image that
// is missing, a misspelled tool, run_shell without allowed commands) and a gateway models file as one, not as an
// agent.
func TestValidateReportsWhatRunRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		file, src, want string
	}{
		{"steps.yaml", "name: a\nsteps:\n  - prompt: look\n    images: [gone.png]\n", "step 1: image " + filepath.Join(dir, "gone.png") + " does not exist"},
		{"typo.yaml", "name: a\ntools: [list_dir, raed_file]\n", `typo.yaml:2:1: no built-in tool "raed_file"`},
		{"shell.yaml", "name: a\ntools: [run_shell]\n", "shell.yaml:2:1: run_shell runs only the commands it is allowed"},
		{"gw.yaml", "models:\n  qwen:\n    model: /nope/q.gguf\n    parallel: -1\n", "gw.yaml"},
	} {
		p := testkit.WriteFile(t, dir, c.file, c.src)
		code, out, _ := visorExit(t, "", "validate", p)
		if code != 1 || !strings.Contains(out, c.want) {
			t.Errorf("validate %s: exit %d\n%s\nwant %q", c.file, code, out, c.want)
		}
		if strings.Contains(out, "name is missing") {
			t.Errorf("validate %s read a gateway models file as an agent file:\n%s", c.file, out)
		}
	}
	ok := testkit.WriteFile(t, dir, "models.yaml", "models:\n  tiny:\n    model: ~/m.gguf\n")
	shell := testkit.WriteFile(t, dir, "shell-ok.yaml", "name: a\ntools: [run_shell, fetch_url]\nallow_shell: [ls]\nallow_fetch: true\n")
	code, out, _ := visorExit(t, "", "validate", ok, shell)
	if code != 0 || !strings.Contains(out, ok+": ok (gateway models file)") || !strings.Contains(out, shell+": ok") {
		t.Fatalf("validate good files: exit %d\n%s", code, out)
	}
}

// TestEveryCommandHelp: every command and subcommand answers -h with exit 0, its usage on stdout naming its
// arguments, nothing on stderr and nothing written (models write -h once made a folder named -h); typos of flags
// and commands get one line naming the nearest.
func TestEveryCommandHelp(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		args []string
		want string // an argument the usage names
	}{
		{[]string{"-h"}, "COMMAND"},
		{[]string{"-h"}, "engine [install"},
		{[]string{"-h"}, "fork ID"},
		{[]string{"help"}, "COMMAND"},
		{[]string{"help", "ask"}, `usage: visor ask "question"`},
		{[]string{"help", "sessions"}, "usage: visor sessions"},
		{[]string{"ask", "-h"}, `"question"`},
		{[]string{"chat", "--help"}, "chat [flags]"},
		{[]string{"web", "-h"}, "--addr"},
		{[]string{"run", "-h"}, "agent.yaml"},
		{[]string{"validate", "-h"}, "FILE"},
		{[]string{"schema", "-h"}, "agent|config"},
		{[]string{"mcp", "-h"}, "mcp serve"},
		{[]string{"mcp", "serve", "-h"}, "--http"},
		{[]string{"demo", "-h"}, "-q"},
		{[]string{"serve", "-h"}, "--model"},
		{[]string{"gateway", "-h"}, "models.yaml"},
		{[]string{"gateway", "-h"}, "visor gateway running | load NAME | unload NAME"},
		{[]string{"gateway", "running", "-h"}, "-url string"},
		{[]string{"gateway", "load", "-h"}, "load NAME"},
		{[]string{"gateway", "unload", "-h"}, "unload NAME"},
		{[]string{"toolcalls", "-h"}, "output.txt"},
		{[]string{"toolcalls", "parse", "-h"}, "output.txt"},
		{[]string{"stats", "-h"}, "SESSION"},
		{[]string{"sessions", "-h"}, "ID"},
		{[]string{"sessions", "list", "-h"}, "list"},
		{[]string{"sessions", "show", "-h"}, "ID"},
		{[]string{"sessions", "search", "-h"}, "QUERY"},
		{[]string{"sessions", "export", "-h"}, "--format"},
		{[]string{"sessions", "fork", "-h"}, "--at"},
		{[]string{"sessions", "rm", "-h"}, "--cascade"},
		{[]string{"plan", "-h"}, "--model"},
		{[]string{"models", "-h"}, "DIR"},
		{[]string{"models", "write", "-h"}, "DIR"},
		{[]string{"engine", "-h"}, "visor engine install"},
		{[]string{"engine", "install", "-h"}, "[DIR]"},
		{[]string{"simulate", "-h"}, "--trace"},
	}
	// A command added to visor and left out of this table, or out of visor's usage, fails here.
	tested := map[string]bool{"version": true} // takes nothing: -h prints the version, exit 0
	for _, c := range cases {
		tested[c.args[0]] = true
	}
	for _, name := range commands {
		if !tested[name] {
			t.Errorf("visor %s -h is not checked here", name)
		}
		if name != "help" && !strings.Contains(usage, "\n  visor "+name+" ") {
			t.Errorf("visor's usage does not list %s", name)
		}
	}
	for _, c := range cases {
		cmd := exec.Command(os.Args[0], c.args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "VISOR_TEST_AS_MAIN=1", "HOME="+dir, "XDG_CONFIG_HOME="+dir)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if err != nil || !strings.Contains(out.String(), "usage") || !strings.Contains(out.String(), c.want) || errb.Len() > 0 {
			t.Errorf("visor %s: %v\nstdout %q\nstderr %q\nwant exit 0 and a usage naming %s", strings.Join(c.args, " "), err,
				out.String(), errb.String(), c.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) > 0 {
		t.Errorf("-h wrote into the folder: %v", entries)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ask", "q", "--modle", "m.gguf"}, "visor: unknown flag --modle (did you mean --model?)\n"},
		{[]string{"stat"}, `visor: unknown command "stat" (did you mean "stats"?`},
		{[]string{"gatway"}, `(did you mean "gateway"?`},
		{[]string{"simulat"}, `(did you mean "simulate"?`},
		{[]string{"--model", "m.gguf", "ask", "q"}, "visor: --model before the command: flags follow it"},
		{[]string{"models", "write", "--out"}, `"--out" looks like a flag`},
	} {
		code, _, errOut := visorExit(t, "", c.args...)
		if code != 2 || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("visor %s: exit %d, stderr %q; want exit 2 and one line with %q", strings.Join(c.args, " "), code, errOut, c.want)
		}
	}
}

// TestBareCommandsSayWhatTheyNeed: a command run with nothing it needs says so in one line naming the flag,
// without Go's "Usage of …" flag dump or a package's name in front.
func TestBareCommandsSayWhatTheyNeed(t *testing.T) {
	proj := filepath.Join(t.TempDir(), "mmproj.gguf")
	kv, ts := modelgen.QwenVLProjector()
	if err := gguf.WriteFile(proj, kv, ts); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"simulate"}, 2, "simulate: give --trace FILE"},
		{[]string{"plan"}, 1, "visor: no model: pass --model M.gguf"},
		{[]string{"plan", "--model", proj}, 1, "--model " + proj + ": is a vision projector, not a chat model: pass it as --mmproj"},
		{[]string{"mcp"}, 2, "mcp: say serve: visor mcp serve"},
		{[]string{"toolcalls"}, 2, "toolcalls: say parse"},
	} {
		code, out, errOut := visorExit(t, "", c.args...)
		if code != c.code || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, c.want) ||
			strings.Contains(errOut, "Usage of") || strings.Contains(errOut, "vram:") {
			t.Errorf("visor %s: exit %d, stdout %q, stderr %q; want exit %d and one line with %q", strings.Join(c.args, " "),
				code, out, errOut, c.code, c.want)
		}
	}
}
