package main

import (
	"bufio"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testmodel"
	"github.com/visorhq/visor/memory"
)

// TestMain lets a test run this binary as the visor command itself, to send it real signals.
func TestMain(m *testing.M) {
	if os.Getenv(slowMCPEnv) != "" { // first: visor's own subprocesses inherit VISOR_TEST_AS_MAIN
		serveSlowMCP()
		return
	}
	if os.Getenv(bigToolsMCPEnv) != "" {
		serveBigToolsMCP()
		return
	}
	if os.Getenv(hostileMCPEnv) != "" {
		serveHostileMCP()
		return
	}
	if os.Getenv("VISOR_TEST_AS_MAIN") != "" {
		main()
		return
	}
	// No test reads the developer's own config file; tests that want one write it here.
	cfgDir, err := os.MkdirTemp("", "visor-test-config")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_CONFIG_HOME", cfgDir)
	// The tests start many servers at once on few cores: llama.cpp's polling workers would spin against each other.
	os.Setenv("VISOR_SERVER_ARGS", "--poll 0")
	flag.Parse()
	// The untagged build recompiles SQLite's C and every package above it: minutes on a cold, busy machine.
	// Started now, it runs beside the package's other tests instead of after them.
	plain := startPlainBuild()
	code := m.Run()
	plain.cleanup()
	os.RemoveAll(cfgDir)
	os.Exit(code)
}

// TestCtrlCStopsCleanly interrupts a streaming `visor ask` with SIGINT: it must exit promptly, stop the
// llama-server it started, and leave the stored turn marked interrupted with the question and partial answer.
func TestCtrlCStopsCleanly(t *testing.T) {
	enginetest.Binary(t)
	model := enginetest.SharedModel(t, "stories260K.gguf")
	db := filepath.Join(t.TempDir(), "v.db")
	cmd := exec.Command(os.Args[0], "ask", "Once upon a time", "--model", model, "--ctx", "2048", "--max-tokens", "1900",
		"--db", db, "--plan", "off", "--server-arg", "-t", "--server-arg", "1")
	cmd.Env = append(os.Environ(), "VISOR_TEST_AS_MAIN=1", "VISOR_DEBUG=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// The debug log names the server's pid; collect it while the answer streams.
	pidc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if i := strings.Index(sc.Text(), "pid="); i >= 0 && strings.Contains(sc.Text(), "llama-server started") {
				pidc <- strings.Fields(sc.Text()[i+4:])[0]
			}
		}
	}()
	if _, err := bufio.NewReader(stdout).ReadString(' '); err != nil {
		t.Fatalf("no answer streamed: %v", err)
	}
	var serverPID string
	select {
	case serverPID = <-pidc:
	case <-time.After(10 * time.Second):
		t.Fatal("server pid not logged")
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("visor ask did not exit after SIGINT")
	}
	if _, err := os.Stat("/proc/" + serverPID); err == nil {
		b, _ := os.ReadFile("/proc/" + serverPID + "/stat")
		if f := strings.Fields(string(b)); len(f) > 2 && f[2] != "Z" {
			t.Fatalf("llama-server %s still running after visor exited", serverPID)
		}
	}
	store, err := memory.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	sessions, err := store.ListSessions(context.Background(), memory.SessionFilter{})
	if err != nil || len(sessions) != 1 {
		t.Fatalf("sessions %v %v", sessions, err)
	}
	msgs, err := store.Messages(context.Background(), sessions[0].ID)
	if err != nil || len(msgs) != 2 || msgs[0].Content != "Once upon a time" || !msgs[1].Interrupted || msgs[1].Content == "" {
		t.Fatalf("stored turn after Ctrl-C: %+v %v", msgs, err)
	}
}

// TestTwoAsksShareOneDatabase runs two visor processes at once against one database file: both must succeed and
// both conversations must be stored whole.
func TestTwoAsksShareOneDatabase(t *testing.T) {
	enginetest.Binary(t)
	model := enginetest.SharedModel(t, "stories260K.gguf")
	db := filepath.Join(t.TempDir(), "v.db")
	var cmds []*exec.Cmd
	for _, q := range []string{"Once upon a time", "Tom had a dog"} {
		cmd := exec.Command(os.Args[0], "ask", q, "--model", model, "--ctx", "512", "--max-tokens", "40", "--db", db,
			"--plan", "off", "--server-arg", "-t", "--server-arg", "1")
		cmd.Env = append(os.Environ(), "VISOR_TEST_AS_MAIN=1")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("a concurrent visor ask failed: %v", err)
		}
	}
	store, err := memory.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	sessions, err := store.ListSessions(context.Background(), memory.SessionFilter{})
	if err != nil || len(sessions) != 2 {
		t.Fatalf("sessions %+v %v", sessions, err)
	}
	for _, s := range sessions {
		msgs, err := store.Messages(context.Background(), s.ID)
		if err != nil || len(msgs) != 2 || msgs[1].Content == "" || msgs[1].Interrupted {
			t.Fatalf("session %s: %+v %v", s.Title, msgs, err)
		}
	}
}

// TestAskUsesAnMCPServersTools gives visor ask an MCP server that is itself visor (`visor mcp serve`, a real
// subprocess on stdio wrapping an agent on the tiny model): the outer agent calls the inner one's ask tool through
// the registry, gets its answer and answers in turn.
func TestAskUsesAnMCPServersTools(t *testing.T) {
	enginetest.Binary(t)
	chat, _, err := testmodel.Files(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	inner := "VISOR_TEST_AS_MAIN=1 " + os.Args[0] + " mcp serve --model " + chat + " --no-store --plan off"
	out, errOut, err := visor(t, "ask", "delegate", "--model", chat, "--no-store", "--plan", "off", "--mcp", "sub="+inner)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if !strings.Contains(errOut, "→ sub__ask") || !strings.Contains(errOut, "← Hi!") || strings.TrimSpace(out) != "Hi!" {
		t.Fatalf("stdout %q\nstderr %s", out, errOut)
	}
}

// TestPlainBuildSearchesSessions runs visor built the way `go install ./cmd/visor` builds it (no build tags, so
// mattn/go-sqlite3 has no FTS5 and the store indexes with FTS4) as `visor sessions search`: full-text search must
// work in it. The scripts and CI build with -tags sqlite_fts5 (scripts/cgo-flags.sh); this test binary then
// builds a copy of itself without tags and runs the test in that.
func TestPlainBuildSearchesSessions(t *testing.T) {
	if taggedBuild() {
		plainBuildSearch(t)
		return
	}
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "v.db")
	store, err := memory.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := store.CreateSession(ctx, memory.Session{Title: "plain build"})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.AppendStep(ctx, sess.ID, memory.Step{Messages: []memory.Message{
		{Role: "user", Content: "where do marmots sleep"}}}); err != nil {
		t.Fatal(err)
	}
	store.Close()
	cmd := exec.Command(os.Args[0], "sessions", "search", "--db", db, "marmots")
	cmd.Env = append(os.Environ(), "VISOR_TEST_AS_MAIN=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("visor sessions search: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "marmots") {
		t.Errorf("search did not find the stored message:\n%s", out)
	}
	// Stemmed as FTS5 would: the singular finds the plural.
	cmd = exec.Command(os.Args[0], "sessions", "search", "--db", db, "marmot")
	cmd.Env = append(os.Environ(), "VISOR_TEST_AS_MAIN=1")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "marmots") {
		t.Errorf("visor sessions search marmot: %v\n%s", err, out)
	}
}

// plainBuilt is the untagged copy of this package's tests that TestMain starts building when the build has tags
// and TestPlainBuildSearchesSessions is to run.
type plainBuilt struct {
	done chan struct{}
	dir  string
	bin  string
	out  []byte
	err  error
	env  []string
}

var plainBuild *plainBuilt

func startPlainBuild() *plainBuilt {
	p := &plainBuilt{done: make(chan struct{})}
	run := flag.Lookup("test.run").Value.String()
	if ok, _ := regexp.MatchString(run, "TestPlainBuildSearchesSessions"); !ok || !taggedBuild() {
		close(p.done)
		return p
	}
	var flags []string
	for _, f := range strings.Fields(os.Getenv("GOFLAGS")) {
		if !strings.HasPrefix(f, "-tags") && !strings.HasPrefix(f, "--tags") {
			flags = append(flags, f)
		}
	}
	p.env = append(os.Environ(), "GOFLAGS="+strings.Join(flags, " "))
	p.dir, p.err = os.MkdirTemp("", "visor-plain")
	if p.err != nil {
		close(p.done)
		return p
	}
	p.bin = filepath.Join(p.dir, "visor-plain.test")
	plainBuild = p
	go func() {
		defer close(p.done)
		build := exec.Command("go", "test", "-c", "-o", p.bin, ".")
		build.Env = p.env
		p.out, p.err = build.CombinedOutput()
	}()
	return p
}

func (p *plainBuilt) cleanup() {
	<-p.done
	if p.dir != "" {
		os.RemoveAll(p.dir)
	}
}

func taggedBuild() bool {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-tags" && s.Value != "" {
				return true
			}
		}
	}
	return false
}

// plainBuildSearch runs TestPlainBuildSearchesSessions in the untagged copy of this package's tests.
func plainBuildSearch(t *testing.T) {
	if plainBuild == nil {
		t.Fatal("TestMain did not build the untagged copy of these tests")
	}
	<-plainBuild.done
	if plainBuild.err != nil {
		t.Fatalf("go test -c without tags: %v\n%s", plainBuild.err, plainBuild.out)
	}
	run := exec.Command(plainBuild.bin, "-test.run", "^TestPlainBuildSearchesSessions$", "-test.v")
	run.Env = plainBuild.env
	out, err := run.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestPlainBuildSearchesSessions") {
		t.Fatalf("the plain build's search test: %v\n%s", err, out)
	}
}
