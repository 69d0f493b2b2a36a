package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/visorhq/visor/engine/launch"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/engine/vram"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/syncbuf"
	"github.com/visorhq/visor/internal/testkit"
	"github.com/visorhq/visor/internal/testmodel"
	"github.com/visorhq/visor/memory"
)

func visor(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), err
}

// tinyWorkspace writes the tiny chat model and a workspace holding hello.txt into a fresh folder.
func tinyWorkspace(t *testing.T) (dir, chat, ws string) {
	t.Helper()
	dir = t.TempDir()
	chat, _, err := testmodel.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	ws = filepath.Join(dir, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, chat, ws
}

func TestAskStoresResumesAndCompacts(t *testing.T) {
	enginetest.Binary(t)
	dir, chat, ws := tinyWorkspace(t)
	db := filepath.Join(dir, "visor.db")
	common := []string{"--model", chat, "--db", db, "--tools", "list_dir", "--workspace", ws, "--ctx", "1280"}

	out, errOut, err := visor(t, append([]string{"ask", "What is here?"}, common...)...)
	if err != nil {
		t.Fatalf("ask: %v\n%s", err, errOut)
	}
	if strings.TrimSpace(out) != "Hi!" || !strings.Contains(errOut, "→ list_dir") || !strings.Contains(errOut, "hello.txt") {
		t.Fatalf("stdout %q stderr %q", out, errOut)
	}
	if !regexp.MustCompile(`\d+ tokens generated, [\d.]+ tokens/s`).MatchString(errOut) {
		t.Fatalf("no speed line: %s", errOut)
	}
	m := regexp.MustCompile(`session ([0-9a-f]+) `).FindStringSubmatch(errOut)
	if m == nil {
		t.Fatalf("no session id printed: %s", errOut)
	}
	id := m[1]
	store, err := memory.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := store.EngineEvents(context.Background(), id, 10)
	store.Close()
	if err != nil || len(evs) != 2 || evs[0].Kind != memory.EngineStart || evs[1].Kind != memory.EngineStop ||
		evs[0].Duration <= 0 {
		t.Fatalf("engine events %+v, %v", evs, err)
	}

	// The stored conversation filled most of a 1280-token context, so continuing it compacts first.
	out, errOut, err = visor(t, append([]string{"ask", "--session", id[:8], "And now?"}, common...)...)
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, errOut)
	}
	if strings.TrimSpace(out) != "Hi!" || !strings.Contains(errOut, "compacting") || !strings.Contains(errOut, "compacted into session") {
		t.Fatalf("no compaction reported: %s", errOut)
	}

	out, _, err = visor(t, "sessions", "list", "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(out, "\n") < 3 { // header + parent + linked
		t.Fatalf("sessions list:\n%s", out)
	}
	out, _, err = visor(t, "sessions", "export", id, "--format", "json", "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	var exp map[string]any
	if err := json.Unmarshal([]byte(out), &exp); err != nil {
		t.Fatalf("export is not JSON: %v\n%.300s", err, out)
	}
	if !strings.Contains(out, "hello.txt") {
		t.Fatalf("export lacks the tool result")
	}
}

func TestAskErrorsNameTheFix(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"ask", "q", "--no-store"}, "--model"},
		{[]string{"ask", "--no-store"}, "no question"},
		{[]string{"ask", "q", "--image", "/nonexistent.png", "--no-store"}, "--image"},
		{[]string{"ask", "q", "--tools", "nope", "--no-store"}, "--tools"},
		{[]string{"bogus"}, "unknown command"},
		{[]string{"plan"}, "--model"},
	}
	for _, tc := range cases {
		t.Setenv("VISOR_MODEL", "")
		t.Setenv("VISOR_ENDPOINT", "")
		_, _, err := visor(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want mention of %q", tc.args, err, tc.want)
		}
	}
	notImage := filepath.Join(t.TempDir(), "x.png")
	_ = os.WriteFile(notImage, []byte("plain text"), 0o644)
	if _, _, err := visor(t, "ask", "q", "--image", notImage, "--no-store"); err == nil || !strings.Contains(err.Error(), "not an image") {
		t.Errorf("text file as image: %v", err)
	}
}

func TestToolcallsParseCommand(t *testing.T) {
	var out, errb bytes.Buffer
	in := "Sure.\n<tool_call>\n{\"name\": \"list_dir\", \"arguments\": {\"path\": \".\"}}\n</tool_call>"
	if err := run(context.Background(), []string{"toolcalls", "parse"}, strings.NewReader(in), &out, &errb); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Content string `json:"content"`
		Calls   []struct {
			Name      string         `json:"name"`
			Arguments map[string]any `json:"arguments"`
		} `json:"calls"`
		Errors []string `json:"errors"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if got.Content != "Sure." || len(got.Calls) != 1 || got.Calls[0].Name != "list_dir" || got.Calls[0].Arguments["path"] != "." {
		t.Fatalf("%+v", got)
	}
	// The file given as an argument is read (it was ignored, and the command waited on stdin); stdin is not.
	file := filepath.Join(t.TempDir(), "output.txt")
	if err := os.WriteFile(file, []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	var fromFile bytes.Buffer
	if err := run(context.Background(), []string{"toolcalls", "parse", file}, strings.NewReader("not this"), &fromFile, &errb); err != nil {
		t.Fatal(err)
	}
	if fromFile.String() != out.String() {
		t.Errorf("toolcalls parse FILE printed %s, want what stdin gave: %s", fromFile.String(), out.String())
	}
	for args, want := range map[string]string{
		"toolcalls":              "toolcalls: say parse: visor toolcalls parse",
		"toolcalls parse a b":    `toolcalls parse: one file of model output at most`,
		"toolcalls parse /nope/": "toolcalls parse: ",
	} {
		code, stdout, stderr := visorExit(t, "", strings.Fields(args)...)
		if code == 0 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, want) {
			t.Errorf("visor %s: exit %d, stdout %q, stderr %q; want one line with %q", args, code, stdout, stderr, want)
		}
	}
}

// firstWrite records when the first answer byte reaches stdout.
type firstWrite struct {
	at time.Time
	bytes.Buffer
}

func (f *firstWrite) Write(p []byte) (int, error) {
	if f.at.IsZero() && len(p) > 0 {
		f.at = time.Now()
	}
	return f.Buffer.Write(p)
}

// BenchmarkAskFirstToken measures `visor ask` on the tiny model from the command's start (engine launch included)
// to the first answer byte on stdout, and the whole command, in one run.
func BenchmarkAskFirstToken(b *testing.B) {
	enginetest.Binary(b)
	chat, _, err := testmodel.Files(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	var first, total time.Duration
	for i := 0; i < b.N; i++ {
		out := &firstWrite{}
		var errb bytes.Buffer
		t0 := time.Now()
		if err := run(context.Background(), []string{"ask", "hello", "--model", chat, "--no-store"}, strings.NewReader(""), out, &errb); err != nil {
			b.Fatalf("%v\n%s", err, errb.String())
		}
		total += time.Since(t0)
		if out.at.IsZero() {
			b.Fatalf("no answer: %s", errb.String())
		}
		first += out.at.Sub(t0)
	}
	b.ReportMetric(float64(first.Milliseconds())/float64(b.N), "ms-to-first-token")
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-total")
}

func TestServeIsReusedByAsk(t *testing.T) {
	enginetest.Binary(t)
	t.Setenv("VISOR_ENGINE_DIR", t.TempDir()) // run files go under the engine dir; keep them private to the test
	t.Setenv("VISOR_LLAMA_SERVER", enginetest.Binary(t))
	chat, _, err := testmodel.Files(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var serveOut, serveErr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--model", chat}, strings.NewReader(""), &serveOut, &serveErr)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		files, _ := filepath.Glob(filepath.Join(launch.RunDir(), "*.json"))
		if len(files) == 1 {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("serve never advertised itself: %s %s", serveOut.String(), serveErr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	out, errOut, err := visor(t, "ask", "hi", "--model", chat, "--no-store")
	if err != nil || !strings.Contains(errOut, "reusing the engine") || strings.Contains(errOut, "loading") ||
		strings.TrimSpace(out) != "Hi!" {
		t.Fatalf("ask did not reuse the served engine: %v\n%s\n%s", err, out, errOut)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	if files, _ := filepath.Glob(filepath.Join(launch.RunDir(), "*.json")); len(files) != 0 {
		t.Fatalf("serve left its run file behind: %v", files)
	}
	// Without the server, ask starts its own engine again.
	if _, errOut, err := visor(t, "ask", "hi", "--model", chat, "--no-store"); err != nil || strings.Contains(errOut, "reusing") {
		t.Fatalf("after serve stopped: %v %s", err, errOut)
	}
}

// TestAskStartsFromThePlan: with a GPU size given, ask places the model by the VRAM plan and says which mode it
// chose; the real server then runs those arguments (on the CPU here).
func TestAskStartsFromThePlan(t *testing.T) {
	enginetest.Binary(t)
	chat, proj, err := testmodel.Files(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, err := visor(t, "ask", "hi", "--model", chat, "--mmproj", proj, "--gpu", "8GiB", "--no-store")
	if err != nil || strings.TrimSpace(out) != "Hi!" || !strings.Contains(errOut, "engine started in mode resident") {
		t.Fatalf("%v\n%s\n%s", err, out, errOut)
	}
	if _, _, err := visor(t, "ask", "hi", "--model", chat, "--plan", "sometimes", "--no-store"); err == nil ||
		!strings.Contains(err.Error(), "--plan") {
		t.Fatalf("bad --plan accepted: %v", err)
	}
}

func TestRunAgentFromYAML(t *testing.T) {
	enginetest.Binary(t)
	dir := t.TempDir()
	if _, _, err := testmodel.Files(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ws", "todo.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	yml := filepath.Join(dir, "lister.yaml")
	src := "name: lister\nmodel:\n  path: " + testmodel.ChatFileName + "\n  plan: off\ntools: [list_dir]\nworkspace: ws\n" +
		"prompt: What is here?\nmax_steps: 3\ntemperature: 0\n"
	if err := os.WriteFile(yml, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "v.db")
	out, errOut, err := visor(t, "run", yml, "--db", db)
	if err != nil || strings.TrimSpace(out) != "Hi!" || !strings.Contains(errOut, "todo.txt") {
		t.Fatalf("%v\n%s\n%s", err, out, errOut)
	}
	list, _, err := visor(t, "sessions", "list", "--db", db, "--agent", "lister")
	if err != nil || !strings.Contains(list, "What is here?") {
		t.Fatalf("session not stored under the agent's name: %v\n%s", err, list)
	}
	bad := filepath.Join(dir, "bad.yaml")
	_ = os.WriteFile(bad, []byte("name: x\nmodel: {path: m.gguf}\nmax_stpes: 2\n"), 0o644)
	if _, _, err := visor(t, "run", bad, "hi"); err == nil || !strings.Contains(err.Error(), bad+":3:1: unknown key max_stpes — did you mean max_steps?") {
		t.Fatalf("typo in agent file: %v", err)
	}
}

// TestChatPrefillsScreenshots drives `visor chat` through its input: attach a real PNG, ask, ask again. The image
// is prefilled when attached, so the first answer's request finds it (16 image tokens) already in the cache.
func TestChatPrefillsScreenshots(t *testing.T) {
	enginetest.Binary(t)
	dir := t.TempDir()
	chat, proj, err := testmodel.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	shot := testkit.WritePNG(t, filepath.Join(dir, "shot.png"), 16, 16, 0)
	db := filepath.Join(dir, "v.db")
	in := "/image " + shot + "\nWhat is on screen?\nAnd now?\n/session\n/quit\n"
	var out, errb bytes.Buffer
	err = run(context.Background(), []string{"chat", "--model", chat, "--mmproj", proj, "--db", db, "--plan", "off"},
		strings.NewReader(in), &out, &errb)
	if err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	if out.String() != "Hi!\nHi!\n" || !strings.Contains(errb.String(), "encoding it now") {
		t.Fatalf("stdout %q\nstderr %s", out.String(), errb.String())
	}
	store, err := memory.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ss, err := store.ListSessions(context.Background(), memory.SessionFilter{Agent: "chat"})
	if err != nil || len(ss) != 1 {
		t.Fatalf("sessions %+v %v", ss, err)
	}
	msgs, err := store.Messages(context.Background(), ss[0].ID)
	sent, _ := os.ReadFile(shot)
	if err != nil || len(msgs) != 4 || len(msgs[0].Images) != 1 || !bytes.Equal(msgs[0].Images[0].Data, sent) {
		t.Fatalf("stored chat %+v %v", msgs, err)
	}
	if tm := msgs[1].Timings; tm == nil || tm.CachedTokens < 16 {
		t.Fatalf("first answer's request did not find the prefilled image in the cache: %+v", tm)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestChatRestartsACrashedEngine kills the llama-server under a running `visor chat` between two messages: the
// next message must bring the engine back at the same address and be answered, and the crash is recorded.
func TestChatRestartsACrashedEngine(t *testing.T) {
	enginetest.Binary(t)
	t.Setenv("VISOR_DEBUG", "1") // the debug log names the server's pid
	_, chat, _ := tinyWorkspace(t)
	db := filepath.Join(t.TempDir(), "v.db")
	inR, inW := io.Pipe()
	var out, errb syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), []string{"chat", "--model", chat, "--db", db, "--plan", "off"}, inR, &out, &errb)
	}()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("chat's stderr:\n%s", errb.String())
		}
	})
	fmt.Fprintln(inW, "hello")
	waitFor(t, "the first answer", func() bool { return out.String() == "Hi!\n" })
	m := regexp.MustCompile(`llama-server started" pid=(\d+)`).FindStringSubmatch(errb.String())
	if m == nil {
		t.Fatalf("no pid in the log: %s", errb.String())
	}
	pid, _ := strconv.Atoi(m[1])
	_ = syscall.Kill(pid, syscall.SIGKILL)
	waitFor(t, "the server to die", func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		return err != nil || strings.Fields(string(b))[2] == "Z"
	})
	fmt.Fprintln(inW, "still there?")
	waitFor(t, "the second answer", func() bool { return out.String() == "Hi!\nHi!\n" })
	fmt.Fprintln(inW, "/quit")
	inW.Close()
	if err := <-done; err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	if !strings.Contains(errb.String(), "the engine crashed") || !strings.Contains(errb.String(), "engine restarted") {
		t.Fatalf("crash not reported: %s", errb.String())
	}
	store, err := memory.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ss, _ := store.ListSessions(context.Background(), memory.SessionFilter{})
	evs, err := store.EngineEvents(context.Background(), ss[0].ID, 10)
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, string(e.Kind))
	}
	if err != nil || strings.Join(kinds, ",") != "start,crash,start,stop" {
		t.Fatalf("engine events %v %v", kinds, err)
	}
}

func TestPlanEngineAndModelsCommands(t *testing.T) {
	bin := enginetest.Binary(t)
	t.Setenv("VISOR_ENGINE_DIR", t.TempDir()) // the --help cache goes there
	dir := t.TempDir()
	out, _, err := visor(t, "models", "write", dir)
	if err != nil || !strings.Contains(out, testmodel.ChatFileName) || !strings.Contains(out, testmodel.ProjectorFileName) {
		t.Fatalf("models write: %v %s", err, out)
	}
	chat, proj := filepath.Join(dir, testmodel.ChatFileName), filepath.Join(dir, testmodel.ProjectorFileName)
	out, _, err = visor(t, "plan", "--model", chat, "--mmproj", proj, "--gpu", "24GiB", "--ctx", "4096", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var plan struct {
		GPU   struct{ Total uint64 } `json:"gpu"`
		Modes []struct {
			Mode string   `json:"mode"`
			Fits bool     `json:"fits"`
			Args []string `json:"args"`
		} `json:"modes"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil || plan.GPU.Total != 24<<30 || len(plan.Modes) == 0 ||
		plan.Modes[0].Mode != "resident" || !plan.Modes[0].Fits || !strings.Contains(strings.Join(plan.Modes[0].Args, " "), "--mmproj") {
		t.Fatalf("plan --json: %v\n%s", err, out)
	}
	out, _, err = visor(t, "plan", "--model", chat, "--gpu", "24GiB")
	if err != nil || !strings.Contains(out, "recommended") {
		t.Fatalf("plan table: %v\n%s", err, out)
	}
	out, _, err = visor(t, "engine", "--server", bin, "--json")
	var eng struct {
		Binary    string            `json:"binary"`
		SpecTypes []string          `json:"spec_types"`
		Devices   []llamacpp.Device `json:"devices"`
		DevErr    string            `json:"devices_error"`
	}
	if err != nil || json.Unmarshal([]byte(out), &eng) != nil || eng.Binary == "" || !strings.Contains(strings.Join(eng.SpecTypes, ","), "draft-mtp") {
		t.Fatalf("engine --json: %v\n%s", err, out)
	}
	if eng.DevErr != "" {
		t.Errorf("engine could not list devices: %s", eng.DevErr)
	}
	out, _, err = visor(t, "engine", "--server", bin)
	if err != nil || !strings.Contains(out, "devices:") {
		t.Fatalf("engine shows no devices line: %v\n%s", err, out)
	}
	for _, d := range eng.Devices {
		if !strings.Contains(out, d.Name+": "+d.Description) {
			t.Errorf("engine output lacks device %s:\n%s", d.Name, out)
		}
	}

	// Without a GPU, plan shows the system-RAM plan instead of only an error.
	if _, err := (vram.NVML{}).GPUs(context.Background()); err == nil {
		t.Log("NVML sees a GPU here: the CPU plan is shown only on machines without one")
		return
	}
	out, _, err = visor(t, "plan", "--model", chat, "--mmproj", proj, "--ctx", "4096")
	if err != nil || !strings.Contains(out, "CPU (system RAM)") || !strings.Contains(out, "no GPU found") ||
		!strings.Contains(out, "recommended: resident") || !strings.Contains(out, "-ngl 0") {
		t.Fatalf("plan without a GPU: %v\n%s", err, out)
	}
}

// reasoningReplay is a FAKE OpenAI-compatible server, named so: it streams a reasoning model's answer
// (reasoning_content deltas, then content), which the tiny generated model cannot produce.
func reasoningReplay(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for _, d := range []string{`{"reasoning_content":"Two and two "}`, `{"reasoning_content":"make four."}`, `{"content":"4"}`} {
		fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":null}]}\n\n", d)
	}
	fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
}

func TestAskShowsOrHidesReasoning(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(reasoningReplay))
	defer hs.Close()
	out, errOut, err := visor(t, "ask", "2+2?", "--endpoint", hs.URL, "--no-store")
	if err != nil || out != "4\n" || strings.Contains(errOut, "Two and two") || !strings.Contains(errOut, "reasoning hidden") {
		t.Fatalf("hidden: %v %q %s", err, out, errOut)
	}
	out, errOut, err = visor(t, "ask", "2+2?", "--endpoint", hs.URL, "--no-store", "--show-reasoning")
	if err != nil || out != "4\n" || !strings.Contains(errOut, "Two and two make four.") {
		t.Fatalf("shown: %v %q %s", err, out, errOut)
	}
}
