package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/visorhq/visor/internal/testkit"
	"github.com/visorhq/visor/internal/testmodel"
	"github.com/visorhq/visor/memory"
)

// visorProcess runs this binary as visor in a process of its own, so a command that blocks (on a FIFO, say) is
// a failure with what it printed, not a test run that never ends. env is added to the test's environment.
func visorProcess(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "VISOR_TEST_AS_MAIN=1"), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("visor %v was still waiting after 60 s (killed):\n%s%s", args, o.String(), e.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), o.String(), e.String()
}

// Issue 24, finding 6: a FIFO where visor reads a file blocked every command (the config file), validate (an
// agent file) and the conversation database; each is now refused at once, naming the path and what it is.
func TestFIFOsAreRefusedWhereverVisorReads(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	cfgHome := filepath.Join(dir, "cfg")
	if err := os.MkdirAll(filepath.Join(cfgHome, "visor"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(cfgHome, "visor", "config.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "v.db")
	for _, c := range []struct {
		env  []string
		args []string
	}{
		{nil, []string{"validate", fifo}},
		{nil, []string{"ask", "hi", "--config", fifo, "--endpoint", "http://127.0.0.1:1", "--no-store"}},
		{[]string{"XDG_CONFIG_HOME=" + cfgHome}, []string{"ask", "hi", "--endpoint", "http://127.0.0.1:1", "--db", db}},
		{nil, []string{"ask", "hi", "--endpoint", "http://127.0.0.1:1", "--db", fifo}},
		{nil, []string{"sessions", "list", "--db", fifo}},
		{nil, []string{"run", fifo}},
	} {
		code, stdout, stderr := visorProcess(t, c.env, c.args...)
		if code == 0 || !strings.Contains(stdout+stderr, "named pipe (FIFO)") {
			t.Errorf("visor %v: exit %d, want an error saying the path is a FIFO:\n%s%s", c.args, code, stdout, stderr)
		}
	}
}

// The first SIGTERM stops visor at once, also while it reads a question from a pipe that never ends: it used
// to cancel a context nothing was waiting on, and visor stayed until its 20-second backstop.
func TestFirstSignalStopsAReadFromAHangingPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close() // the writer stays open and silent
	cmd := exec.Command(os.Args[0], "ask", "--endpoint", "http://127.0.0.1:1", "--no-store")
	cmd.Env = append(os.Environ(), "VISOR_TEST_AS_MAIN=1")
	cmd.Stdin = r
	var e bytes.Buffer
	cmd.Stderr = &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	defer cmd.Process.Kill()
	// Wait until visor is blocked reading standard input, so the signal cannot come before it is listened for.
	waitFor(t, "visor reading standard input", func() bool { return readingStdin(t, cmd.Process.Pid) })
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if strings.Contains(e.String(), "still stopping") || !strings.Contains(e.String(), "stopped while reading the question") {
		t.Fatalf("the first SIGTERM did not stop the read (exit %d):\n%s", cmd.ProcessState.ExitCode(), e.String())
	}
}

// readingStdin reports whether a thread of pid sits in read(0, …), from /proc.
func readingStdin(t *testing.T, pid int) bool {
	tasks, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "syscall"))
	if err != nil || len(tasks) == 0 {
		t.Skip("no /proc to see what visor waits on")
	}
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			if errors.Is(err, os.ErrPermission) {
				t.Skip("/proc/PID/task/*/syscall is not readable here")
			}
			continue
		}
		f := strings.Fields(string(b))
		if len(f) >= 2 && f[0] == "0" && f[1] == "0x0" { // read(2) on fd 0
			return true
		}
	}
	return false
}

// Issue 24, finding 8: a mistyped --db on a command that only reads created the folders and an empty database,
// which then listed nothing. Each read command names the missing path instead, and creates nothing.
func TestReadCommandsNeverCreateADatabase(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "typo", "sub", "v.db")
	for _, args := range [][]string{
		{"sessions", "list"}, {"sessions", "show", "abc"}, {"sessions", "search", "x"}, {"sessions", "export", "abc"},
		{"stats"}, {"stats", "abc"}, {"stats", "--costs"},
	} {
		_, _, err := runSafely(t, append(args, "--db", db), strings.NewReader(""))
		if err == nil || !strings.Contains(err.Error(), db) || !strings.Contains(err.Error(), "no such database") {
			t.Errorf("%v --db %s: %v, want an error naming the missing database", args, db, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "typo")); err == nil {
			t.Fatalf("%v created folders for a missing database", args)
		}
	}
}

// An empty id is not a prefix of some session: it is refused, where it exported (or showed) whichever session
// came first.
func TestAnEmptySessionIDIsAnError(t *testing.T) {
	s := openCLIStore(t)
	sess := cliSession(t, s, memory.Session{Title: "only one", Agent: "ask"})
	cliAppend(t, s, sess.ID, memory.Message{Role: "user", Content: "hello"})
	for _, args := range [][]string{{"export", ""}, {"show", ""}, {"rm", ""}, {"fork", " "}} {
		out, err := runCLI(t, s, args...)
		if err == nil || !strings.Contains(err.Error(), "the session id is empty") {
			t.Errorf("sessions %q: %v\n%s", args, err, out)
		}
	}
	if got, err := s.ListSessions(context.Background(), memory.SessionFilter{}); err != nil || len(got) != 1 {
		t.Fatalf("sessions after the refusals: %v %v", got, err)
	}
}

// `sessions export --out DIR` writes DIR/ID.md and the images as DIR/<sha256>.<ext>, names anyone can predict:
// a symlink planted at one, or DIR itself a symlink, is refused and its target left alone; an existing ID.md is
// kept unless --force.
func TestExportRefusesSymlinksAndKeepsFiles(t *testing.T) {
	s := openCLIStore(t)
	png := testkit.PNG(t, 4, 4)
	sess := cliSession(t, s, memory.Session{Title: "shot", Agent: "ask"})
	cliAppend(t, s, sess.ID, memory.Message{Role: "user", Content: "look", Images: []memory.Image{{MIME: "image/png", Data: png}}},
		memory.Message{Role: "assistant", Content: "seen"})
	sum := sha256.Sum256(png)
	imageName := hex.EncodeToString(sum[:]) + ".png"

	base := t.TempDir()
	victim := filepath.Join(base, "victim.txt")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(base, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(out, imageName)); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, s, "export", sess.ID, "--out", out); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("export through a planted symlink: %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Fatalf("the export wrote through the planted symlink: %q", b)
	}

	linked := filepath.Join(base, "linked")
	if err := os.Symlink(victim, linked); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, s, "export", sess.ID, "--out", linked); err == nil || !strings.Contains(err.Error(), "is a symlink") {
		t.Errorf("export into a symlinked --out: %v", err)
	}

	clean := filepath.Join(base, "clean")
	if _, err := runCLI(t, s, "export", sess.ID, "--out", clean); err != nil {
		t.Fatal(err)
	}
	md := filepath.Join(clean, sess.ID+".md")
	if err := os.WriteFile(md, []byte("my notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, s, "export", sess.ID, "--out", clean); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Errorf("export over an existing file without --force: %v", err)
	}
	if b, _ := os.ReadFile(md); string(b) != "my notes\n" {
		t.Fatalf("the export replaced a file without --force: %q", b)
	}
	if _, err := runCLI(t, s, "export", sess.ID, "--out", clean, "--force"); err != nil {
		t.Fatalf("export --force: %v", err)
	}
	if b, _ := os.ReadFile(md); !strings.Contains(string(b), "seen") {
		t.Fatalf("export --force did not replace the file: %q", b)
	}
	if b, err := os.ReadFile(filepath.Join(clean, imageName)); err != nil || !bytes.Equal(b, png) {
		t.Fatalf("the image beside the export: %v", err)
	}
}

// Small lies: `plan --ctx -5` planned for the model's default context; a config model whose api_key_env is unset
// ran without a key. Both are errors naming the input.
func TestNegativeCountsAndUnsetKeyVariablesAreErrors(t *testing.T) {
	for _, flag := range []string{"--ctx", "--parallel", "--ubatch"} {
		_, _, err := runSafely(t, []string{"plan", "--model", "m.gguf", flag, "-5"}, strings.NewReader(""))
		if err == nil || !strings.Contains(err.Error(), flag+" -5") {
			t.Errorf("plan %s -5: %v", flag, err)
		}
	}
	const unset = "VISOR_TEST_KEY_NOBODY_SET"
	os.Unsetenv(unset)
	writeConfig(t, "model: remote\nmodels:\n  remote:\n    endpoint: http://127.0.0.1:1\n    api_key_env: "+unset+"\n")
	_, _, err := runSafely(t, []string{"ask", "hi", "--no-store"}, strings.NewReader(""))
	if err == nil || !strings.Contains(err.Error(), "api_key_env "+unset+" is not set") {
		t.Errorf("a config model whose api_key_env is unset: %v", err)
	}
	_, _, err = runSafely(t, []string{"ask", "hi", "--no-store", "--model", "remote"}, strings.NewReader(""))
	if err == nil || !strings.Contains(err.Error(), "api_key_env "+unset+" is not set") {
		t.Errorf("--model remote with api_key_env unset: %v", err)
	}
}

// Issue 24, finding 6: a --port among the engine's extra arguments started llama-server elsewhere and visor waited
// for it forever; so from the command line, the config file and the gateway's models file. Each is refused by
// name before anything starts.
func TestEngineArgumentsVisorOwnsAreRefused(t *testing.T) {
	dir := t.TempDir()
	chat, _, err := testmodel.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfgHome := filepath.Join(dir, "cfg")
	if err := os.MkdirAll(filepath.Join(cfgHome, "visor"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfgFile := "model: tiny\nmodels:\n  tiny:\n    path: " + chat + "\n    plan: \"off\"\n    server_args: [--port, \"1\"]\n"
	if err := os.WriteFile(filepath.Join(cfgHome, "visor", "config.yaml"), []byte(cfgFile), 0o644); err != nil {
		t.Fatal(err)
	}
	models := filepath.Join(dir, "models.yaml")
	gw := "addr: 127.0.0.1:0\npreload: [tiny]\nmodels:\n  tiny:\n    model: " + chat + "\n    args: [--host, 0.0.0.0]\n"
	if err := os.WriteFile(models, []byte(gw), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"ask", "hi", "--model", chat, "--plan", "off", "--no-store", "--server-arg", "--port", "--server-arg", "1"}, `"--port"`},
		{nil, []string{"ask", "hi", "--model", chat, "--plan", "off", "--no-store", "--server-arg=-m", "--server-arg", chat}, `"-m"`},
		{[]string{"XDG_CONFIG_HOME=" + cfgHome}, []string{"ask", "hi", "--no-store"}, `"--port"`},
		{nil, []string{"gateway", "--config", models}, `"--host"`},
	} {
		code, stdout, stderr := visorProcess(t, c.env, c.args...)
		if code == 0 || !strings.Contains(stderr, "engine argument "+c.want) || !strings.Contains(stderr, "visor sets itself") {
			t.Errorf("visor %v: exit %d, want a refusal naming %s:\n%s%s", c.args, code, c.want, stdout, stderr)
		}
	}
}
