package llamacpp_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/gguf"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/engine/modelgen"
	"github.com/visorhq/visor/internal/enginetest"
)

func stories(t *testing.T) string { return enginetest.SharedModel(t, "stories260K.gguf") }

func alive(pid int) bool {
	// A zombie still answers kill(0); read its state instead.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z"
}

func waitGone(t *testing.T, pid int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("llama-server pid %d still alive after %s: orphan", pid, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestStartReadyChatAndStop(t *testing.T) {
	var mu sync.Mutex
	var states []llamacpp.State
	s := enginetest.Start(t, llamacpp.Config{Model: stories(t), Ctx: 512, Parallel: 1,
		OnState: func(st llamacpp.State) { mu.Lock(); states = append(states, st); mu.Unlock() }})
	if s.State() != llamacpp.StateReady {
		t.Fatalf("state after Start = %v, want ready", s.State())
	}
	resp, err := http.Get(s.URL() + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/health after ready: %v %v", resp, err)
	}
	resp.Body.Close()

	c := s.Client()
	ctx := context.Background()
	n := 16
	out, err := c.Chat(ctx, engine.Request{ChatCompletionRequest: openai.ChatCompletionRequest{
		Messages:  []openai.ChatCompletionMessage{{Role: "user", Content: "Once upon a time"}},
		MaxTokens: 16}, Extra: engine.Extra{NPredict: &n}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Choices) != 1 || strings.TrimSpace(out.Choices[0].Message.Content) == "" {
		t.Fatalf("empty answer: %+v", out)
	}
	if out.Timings == nil || out.Timings.PredictedN == 0 || out.Timings.PredictedPerSecond <= 0 {
		t.Fatalf("timings missing from non-streamed answer: %+v", out.Timings)
	}

	st, err := c.ChatStream(ctx, engine.Request{ChatCompletionRequest: openai.ChatCompletionRequest{
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "Once upon a time"}}, MaxTokens: 24}})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	var timings *engine.Timings
	var finish openai.FinishReason
	for {
		ch, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		for _, c := range ch.Choices {
			text.WriteString(c.Delta.Content)
			if c.FinishReason != "" {
				finish = c.FinishReason
			}
		}
		if ch.Timings != nil {
			timings = ch.Timings
		}
	}
	st.Close()
	if text.Len() == 0 || finish != openai.FinishReasonLength {
		t.Fatalf("stream text %q finish %q, want text and length", text.String(), finish)
	}
	if timings == nil || timings.PredictedN != 24 {
		t.Fatalf("stream timings %+v, want predicted_n 24", timings)
	}

	pid := s.PID()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid, 5*time.Second)
	if s.State() != llamacpp.StateStopped || s.Err() != nil {
		t.Fatalf("after Stop: state %v err %v", s.State(), s.Err())
	}
	mu.Lock()
	defer mu.Unlock()
	if states[0] != llamacpp.StateStarting || states[len(states)-1] != llamacpp.StateStopped {
		t.Fatalf("state sequence %v", states)
	}
}

func TestExtraFieldsReachServer(t *testing.T) {
	s := enginetest.Start(t, llamacpp.Config{Model: stories(t), Ctx: 512, Parallel: 1})
	c := s.Client()
	n := 5
	out, err := c.Chat(context.Background(), engine.Request{ChatCompletionRequest: openai.ChatCompletionRequest{
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "Tom"}}}, Extra: engine.Extra{NPredict: &n}})
	if err != nil {
		t.Fatal(err)
	}
	// n_predict is a llama.cpp field go-openai cannot send; the server honouring it proves the merge.
	if out.Usage.CompletionTokens != 5 {
		t.Fatalf("n_predict=5 gave %d completion tokens", out.Usage.CompletionTokens)
	}
}

func TestCapabilities(t *testing.T) {
	bin := enginetest.Binary(t)
	cache := &llamacpp.HelpCache{Dir: t.TempDir()}
	f, err := cache.Flags(context.Background(), bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"--mmproj", "-mm", "--spec-type", "--no-mmproj-offload", "-ctk", "--jinja"} {
		if !f.Has(flag) {
			t.Errorf("flag %s not detected", flag)
		}
	}
	if !f.SupportsSpec("draft-mtp") || f.SupportsSpec("bogus") {
		t.Errorf("spec types %v", f.SpecTypes)
	}
	if f.MMProjGPUSwap() {
		t.Errorf("Debian's build has no --mmproj-gpu-swap, yet it was detected")
	}
	if !strings.Contains(f.Version, "version") {
		t.Errorf("version %q", f.Version)
	}
	// Second read comes from disk in a fresh cache without running the binary.
	files, _ := filepath.Glob(filepath.Join(cache.Dir, "help-*.json"))
	if len(files) != 1 {
		t.Fatalf("help cache files %v", files)
	}
	f2, err := (&llamacpp.HelpCache{Dir: cache.Dir}).Flags(context.Background(), bin)
	if err != nil || len(f2.Names) != len(f.Names) {
		t.Fatalf("cached flags differ: %v", err)
	}

	s := enginetest.Start(t, llamacpp.Config{Model: stories(t), Ctx: 1024, Parallel: 2})
	p, err := llamacpp.ReadProps(context.Background(), s.Client())
	if err != nil {
		t.Fatal(err)
	}
	if p.NCtx != 512 { // per-slot context: 1024 split over 2 slots
		t.Errorf("n_ctx %d", p.NCtx)
	}
	if p.TotalSlots != 2 || len(p.Slots) != 2 || p.Vision || p.ToolsInTemplate() || p.Speculating() {
		t.Errorf("props %+v", p)
	}
	if len(p.Models) != 1 || !strings.Contains(p.Build, "b") {
		t.Errorf("models %v build %q", p.Models, p.Build)
	}
}

func TestParseHelpIgnoresFlagsInDescriptions(t *testing.T) {
	help := "-m,    --model FNAME                    model path (see also --not-a-flag)\n" +
		"--spec-type none,draft-mtp,ngram-simple   speculative decoding type\n"
	f := llamacpp.ParseHelp(help)
	if !f.Has("-m") || !f.Has("--model") || f.Has("--not-a-flag") {
		t.Fatalf("names %v", f.Names)
	}
	if strings.Join(f.SpecTypes, ",") != "none,draft-mtp,ngram-simple" {
		t.Fatalf("spec types %v", f.SpecTypes)
	}
}

func TestEarlyExitIsExplained(t *testing.T) {
	bin := enginetest.Binary(t)
	bad := filepath.Join(t.TempDir(), "corrupt.gguf")
	if err := os.WriteFile(bad, []byte("GGUF\x03\x00\x00\x00garbage that is not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		cfg  llamacpp.Config
		want string
	}{
		{"unknown flag", llamacpp.Config{Model: stories(t), ExtraArgs: []string{"--no-such-flag"}}, "no-such-flag"},
		{"corrupt model", llamacpp.Config{Model: bad}, "failed to load model"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Binary = bin
			start := time.Now()
			_, err := llamacpp.Start(context.Background(), tc.cfg)
			var ee *llamacpp.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("want ExitError, got %v", err)
			}
			if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(tc.want)) {
				t.Fatalf("error does not explain the cause (%q):\n%v", tc.want, err)
			}
			// --plan auto falls back to a smaller mode only on out-of-memory; these would fail in every mode.
			if llamacpp.IsOOM(err) {
				t.Fatalf("the real server's %s exit was taken for out-of-memory:\n%v", tc.name, err)
			}
			if time.Since(start) > 30*time.Second {
				t.Fatalf("early exit took %s to report", time.Since(start))
			}
		})
	}
	if _, err := llamacpp.Start(context.Background(), llamacpp.Config{Binary: bin, Model: "/nonexistent/m.gguf"}); err == nil ||
		!strings.Contains(err.Error(), "model file") {
		t.Fatalf("missing model: %v", err)
	}
}

func TestCrashMidStream(t *testing.T) {
	s := enginetest.Start(t, llamacpp.Config{Model: stories(t), Ctx: 2048, Parallel: 1})
	st, err := s.Client().ChatStream(context.Background(), engine.Request{ChatCompletionRequest: openai.ChatCompletionRequest{
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "Once upon a time"}}, MaxTokens: 1900}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	pid := s.PID()
	s.Kill()
	done := make(chan error, 1)
	go func() {
		for {
			if _, err := st.Recv(); err != nil {
				done <- err
				return
			}
		}
	}()
	select {
	case err := <-done:
		if !errors.Is(err, engine.ErrStreamBroken) {
			t.Fatalf("stream after crash: %v, want ErrStreamBroken", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("stream hangs after the server died")
	}
	waitGone(t, pid, 5*time.Second)
	<-s.Done()
	var ee *llamacpp.ExitError
	if err := s.Err(); !errors.As(err, &ee) || !ee.WhileRun {
		t.Fatalf("Err after crash = %v, want ExitError while running", err)
	}
	if s.State() != llamacpp.StateCrashed {
		t.Fatalf("state %v", s.State())
	}
}

// TestNoOrphanWhenVisorIsKilled runs a child test process that starts a server, then SIGKILLs the child: the
// server must follow it, since nothing else would ever stop it.
func TestNoOrphanWhenVisorIsKilled(t *testing.T) {
	if os.Getenv("VISOR_ORPHAN_CHILD") != "" {
		s, err := llamacpp.Start(context.Background(), llamacpp.Config{Model: os.Getenv("VISOR_ORPHAN_CHILD"), Ctx: 256})
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		fmt.Println("PID", s.PID())
		time.Sleep(time.Minute)
		return
	}
	enginetest.Binary(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestNoOrphanWhenVisorIsKilled$")
	cmd.Env = append(os.Environ(), "VISOR_ORPHAN_CHILD="+stories(t))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "PID ") {
		t.Fatalf("child said %q, %v", line, err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "PID ")))
	if !alive(pid) {
		t.Fatalf("server %d not running", pid)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	waitGone(t, pid, 5*time.Second)
}

// TestHealthWhileLoading starts a server on a model big enough (200 MB, sparse on disk, read without mmap) that
// it answers /health with 503 for a while; the supervisor must report loading, then ready.
func TestHealthWhileLoading(t *testing.T) {
	bin := enginetest.Binary(t)
	tok, err := gguf.Open(stories(t))
	if err != nil {
		t.Fatal(err)
	}
	kv, ts, err := modelgen.Llama(modelgen.LlamaShape{Embd: 1024, Layers: 8, Heads: 16, HeadsKV: 16, FF: 2816,
		Ctx: 512, Type: gguf.TypeF16}, tok)
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(t.TempDir(), "big.gguf")
	if err := gguf.WriteFile(model, kv, ts); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var states []llamacpp.State
	var loadingSeen, readySeen time.Time
	s := enginetest.Start(t, llamacpp.Config{Binary: bin, Model: model, Ctx: 256, Parallel: 1,
		ExtraArgs: []string{"--load-mode", "none"},
		OnState: func(st llamacpp.State) {
			mu.Lock()
			defer mu.Unlock()
			states = append(states, st)
			switch st {
			case llamacpp.StateLoading:
				loadingSeen = time.Now()
			case llamacpp.StateReady:
				readySeen = time.Now()
			}
		}})
	mu.Lock()
	defer mu.Unlock()
	if loadingSeen.IsZero() || readySeen.Before(loadingSeen) || s.State() != llamacpp.StateReady {
		t.Fatalf("states %v: want loading (HTTP 503) before ready", states)
	}
	t.Logf("loading for %s", readySeen.Sub(loadingSeen))
}

func TestRestartAfterCrashKeepsTheAddress(t *testing.T) {
	s := enginetest.Start(t, llamacpp.Config{Model: stories(t), Ctx: 512, Parallel: 1})
	url, pid := s.URL(), s.PID()
	c := s.Client() // made before the crash, used after the restart
	s.Kill()
	<-s.Done()
	if s.Err() == nil {
		t.Fatal("a killed server reports no error")
	}
	s2, err := s.Restart(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s2.Stop(context.Background()) })
	if s2.URL() != url || s2.PID() == pid || s2.State() != llamacpp.StateReady {
		t.Fatalf("restart: url %s (was %s), pid %d (was %d), state %v", s2.URL(), url, s2.PID(), pid, s2.State())
	}
	n := 3
	out, err := c.Chat(context.Background(), engine.Request{ChatCompletionRequest: openai.ChatCompletionRequest{
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "Tom"}}}, Extra: engine.Extra{NPredict: &n}})
	if err != nil || out.Usage.CompletionTokens != 3 {
		t.Fatalf("old client after restart: %+v %v", out.Usage, err)
	}
}
