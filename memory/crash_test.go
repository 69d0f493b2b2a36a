package memory

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"image/color"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	code := m.Run()
	cleanupBenchData()
	os.Exit(code)
}

// Environment of TestHelperWriter, a child process that the crash and concurrency tests start.
const (
	envHelperDB      = "VISOR_MEMORY_HELPER_DB"
	envHelperSession = "VISOR_MEMORY_HELPER_SESSION" // write to this session, creating it if needed
	envHelperTag     = "VISOR_MEMORY_HELPER_TAG"
	envHelperSteps   = "VISOR_MEMORY_HELPER_STEPS" // 0 or unset: until killed
	envHelperBusy    = "VISOR_MEMORY_HELPER_BUSY"  // the store's BusyTimeout (a time.ParseDuration); unset: the default
)

// helperStep is step i of a writer tagged tag: three messages, an image every third step, one tool run.
func helperStep(t testing.TB, tag string, i int) Step {
	st := Step{Messages: []Message{
		{Role: "assistant", Content: fmt.Sprintf("%s step %d call", tag, i),
			ToolCalls: []ToolCall{{ID: fmt.Sprintf("%s-%d", tag, i), Name: "shell", Arguments: []byte(`{"cmd":"true"}`)}}},
		{Role: "tool", ToolCallID: fmt.Sprintf("%s-%d", tag, i), Content: strings.Repeat("output ", 200)},
		{Role: "assistant", Content: fmt.Sprintf("%s step %d done", tag, i)},
	}, ToolRuns: []ToolRun{{CallID: fmt.Sprintf("%s-%d", tag, i), Name: "shell", Result: "ok"}}}
	if i%3 == 0 {
		st.Messages[0].Images = []Image{{Data: pngBytes(t, 4+i%7, 3, color.Gray{Y: uint8(i)})}}
	}
	return st
}

func TestHelperWriter(t *testing.T) {
	path := os.Getenv(envHelperDB)
	if path == "" {
		t.Skip("child process of TestCrash* and TestTwoProcesses*")
	}
	ctx := context.Background()
	busy, _ := time.ParseDuration(os.Getenv(envHelperBusy))
	s, err := OpenWithOptions(ctx, path, Options{BusyTimeout: busy})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	id := os.Getenv(envHelperSession)
	if _, err := s.CreateSession(ctx, Session{ID: id}); err != nil && !(id != "" && errors.Is(err, ErrExists)) {
		t.Fatal(err)
	}
	if id == "" {
		list, err := s.ListSessions(ctx, SessionFilter{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		id = list[0].ID
	}
	fmt.Printf("session %s\n", id)
	tag := os.Getenv(envHelperTag)
	steps, _ := strconv.Atoi(os.Getenv(envHelperSteps))
	for i := 1; steps == 0 || i <= steps; i++ {
		if err := s.AppendStep(ctx, id, helperStep(t, tag, i)); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("committed %d\n", i)
	}
}

type helperProc struct {
	cmd       *exec.Cmd
	session   chan string
	committed chan int // every "committed N", closed at EOF
}

func startHelper(t *testing.T, env ...string) *helperProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWriter$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &helperProc{cmd: cmd, session: make(chan string, 1), committed: make(chan int, 100000)}
	go func() {
		defer close(p.committed)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			if id, ok := strings.CutPrefix(line, "session "); ok {
				p.session <- id
			} else if n, ok := strings.CutPrefix(line, "committed "); ok {
				v, _ := strconv.Atoi(n)
				p.committed <- v
			}
		}
	}()
	return p
}

// lastCommitted drains the output after the process ended.
func (p *helperProc) lastCommitted() int {
	last := 0
	for n := range p.committed {
		last = n
	}
	return last
}

// checkSteps verifies that the session holds whole steps 1..k of tag in order, k >= committed, and that
// the file is intact.
func checkSteps(t *testing.T, path, sessionID, tag string, committed int) int {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer s.Close()
	var integrity string
	if err := s.db.QueryRow(`PRAGMA integrity_check`).Scan(&integrity); err != nil || integrity != "ok" {
		t.Fatalf("integrity_check = %q (%v)", integrity, err)
	}
	msgs, err := s.Messages(ctx, sessionID)
	if err != nil {
		t.Fatal(err)
	}
	var mine []Message
	for _, m := range msgs {
		if strings.HasPrefix(m.Content, tag+" ") || (m.Role == "tool" && strings.HasPrefix(m.ToolCallID, tag+"-")) {
			mine = append(mine, m)
		}
	}
	if len(mine)%3 != 0 {
		t.Fatalf("%s: %d messages: a step is half-present", tag, len(mine))
	}
	steps := len(mine) / 3
	if steps < committed {
		t.Fatalf("%s: %d steps in the file, but %d were reported committed", tag, steps, committed)
	}
	for i := 1; i <= steps; i++ {
		want := helperStep(t, tag, i)
		got := mine[(i-1)*3 : i*3]
		for j := range got {
			if got[j].Content != want.Messages[j].Content || len(got[j].Images) != len(want.Messages[j].Images) {
				t.Fatalf("%s step %d message %d = %q with %d images, want %q", tag, i, j, got[j].Content, len(got[j].Images), want.Messages[j].Content)
			}
			for k := range got[j].Images {
				if string(got[j].Images[k].Data) != string(want.Messages[j].Images[k].Data) {
					t.Fatalf("%s step %d: image bytes differ", tag, i)
				}
			}
		}
	}
	return steps
}

func TestCrashLosesAtMostTheStepInFlight(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 30 processes")
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 1))
	t.Logf("seed %d", seed)
	start := time.Now()
	midRun := 0
	for i := 0; i < 30; i++ {
		tag := fmt.Sprintf("iter%d", i)
		p := startHelper(t, envHelperDB+"="+path, envHelperTag+"="+tag)
		var id string
		select {
		case id = <-p.session:
		case <-time.After(30 * time.Second):
			p.cmd.Process.Kill()
			t.Fatal("helper did not start")
		}
		// Kill somewhere in the first few steps, at a random moment that can fall inside a commit: after 0 to 2
		// commits the writer reported (counted, not timed: a loaded machine writes slower than the sleep below
		// assumes, and then every kill came before the first commit), then 0 to 120 ms on.
		seen := 0
		for seen < i%3 {
			n, ok := <-p.committed
			if !ok {
				p.cmd.Wait()
				t.Fatalf("%s: the writer exited after %d commits: %s", tag, seen, p.cmd.Stderr)
			}
			seen = n
		}
		time.Sleep(time.Duration(rng.IntN(120_000)) * time.Microsecond)
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		p.cmd.Wait()
		committed := max(seen, p.lastCommitted())
		steps := checkSteps(t, path, id, tag, committed)
		if steps > committed+1 {
			t.Fatalf("%s: %d steps in the file, but the writer only got to step %d", tag, steps, committed+1)
		}
		if committed > 0 {
			midRun++
		}
		t.Logf("%s: %d committed, %d in file", tag, committed, steps)
	}
	if midRun < 10 {
		t.Errorf("only %d of 30 kills happened after a commit; the test is not exercising much", midRun)
	}
	t.Logf("30 kills in %s", time.Since(start).Round(time.Millisecond))
}

// TestTwoProcessesWriteAtOnce: two processes append to one session of a fresh file at once (so they also race
// to create the schema); every step of both is kept whole. SQLite's lock is not fair: a writer in a tight loop
// takes it again before the other's busy wait looks (measured: one writer's 40 steps, then the other's 40), so
// the second waits for the whole of the first, which on a loaded machine took longer than the store's 10 s busy
// timeout. visor writes a step every few seconds, not in a loop; here the writers wait as long as the test may
// run, so what is checked is what they wrote, not how fast the machine is.
func TestTwoProcessesWriteAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "two.db")
	const steps = 40
	env := []string{envHelperDB + "=" + path, envHelperSession + "=shared", envHelperSteps + "=" + strconv.Itoa(steps), envHelperBusy + "=10m"}
	a := startHelper(t, append(env, envHelperTag+"=procA")...)
	b := startHelper(t, append(env, envHelperTag+"=procB")...)
	for _, p := range []*helperProc{a, b} {
		err := p.cmd.Wait()
		if n := p.lastCommitted(); err != nil || n != steps {
			t.Fatalf("writer exited with %v after %d of %d steps: %s", err, n, steps, p.cmd.Stderr)
		}
	}
	checkSteps(t, path, "shared", "procA", steps)
	checkSteps(t, path, "shared", "procB", steps)
}

// TestCrashWhileCreatingTheSchema kills writers during Open of a fresh file, inside the migrations.
func TestCrashWhileCreatingTheSchema(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	latest := 0
	if migs, err := loadMigrations(); err == nil {
		latest = migs[len(migs)-1].version
	}
	for i := 0; i < 6; i++ {
		path := filepath.Join(t.TempDir(), "fresh.db")
		p := startHelper(t, envHelperDB+"="+path, envHelperTag+"=x")
		time.Sleep(time.Duration(i*4) * time.Millisecond)
		p.cmd.Process.Signal(syscall.SIGKILL)
		p.cmd.Wait()
		p.lastCommitted()
		s, err := Open(context.Background(), path)
		if err != nil {
			t.Fatalf("open after a kill at %d ms: %v", i*4, err)
		}
		var integrity string
		s.db.QueryRow(`PRAGMA integrity_check`).Scan(&integrity)
		v, _ := s.schemaVersion(context.Background())
		s.Close()
		if integrity != "ok" || v != latest {
			t.Fatalf("after a kill at %d ms: integrity %q, version %d", i*4, integrity, v)
		}
	}
}

// TestFullDiskKeepsCommittedSteps fills the database to SQLite's page limit (PRAGMA max_page_count), which fails
// a write with SQLITE_FULL exactly as a full disk does: the step that does not fit is refused whole with an error
// that says so, the steps before it stay readable and searchable, and writing resumes once there is room.
func TestFullDiskKeepsCommittedSteps(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	s.db.SetMaxOpenConns(1) // max_page_count is per connection
	sess := newSession(t, s, Session{Title: "full"})
	appendText(t, s, sess.ID, Message{Role: "user", Content: "kept before the disk filled"})
	var pages int64
	if err := s.db.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(fmt.Sprintf(`PRAGMA max_page_count = %d`, pages+2)); err != nil {
		t.Fatal(err)
	}
	big := Step{Messages: []Message{
		{Role: "assistant", Content: "a screenshot that does not fit", Images: []Image{{Data: pngBytes(t, 400, 400, color.Gray{Y: 7})}}},
		{Role: "tool", ToolCallID: "c", Content: strings.Repeat("log line that fills the disk\n", 4000)},
	}}
	err := s.AppendStep(ctx, sess.ID, big)
	if !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), s.Path()) {
		t.Fatalf("append to a full database: %v, want ErrDiskFull naming the file", err)
	}
	msgs, err := s.Messages(ctx, sess.ID)
	if err != nil || len(msgs) != 1 || msgs[0].Content != "kept before the disk filled" {
		t.Fatalf("after the failed step: %+v %v", msgs, err)
	}
	if hits, err := s.Search(ctx, Query{Text: "disk"}); err != nil || len(hits) != 1 {
		t.Errorf("search after the failed step: %+v %v", hits, err)
	}
	if _, err := s.db.Exec(`PRAGMA max_page_count = 1073741823`); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendStep(ctx, sess.ID, big); err != nil {
		t.Fatalf("append once there is room: %v", err)
	}
	if msgs, err := s.Messages(ctx, sess.ID); err != nil || len(msgs) != 3 || len(msgs[1].Images) != 1 {
		t.Fatalf("after room was made: %d messages %v", len(msgs), err)
	}
}
