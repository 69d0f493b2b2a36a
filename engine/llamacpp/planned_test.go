package llamacpp_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/internal/enginetest"
)

// vulkanOOM is what llama-server prints when the weights do not fit through Vulkan (the format of real logs from
// b5xxx–b7xxx builds: ggml-vulkan's allocation message, then the loader giving up).
const vulkanOOM = `load_tensors: loading model tensors, this can take a while... (mmap = true)
ggml_vulkan: Device memory allocation of size 1037832192 failed.
ggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory
alloc_tensor_range: failed to allocate Vulkan0 buffer of size 1037832192
llama_model_load: error loading model: unable to allocate Vulkan0 buffer
llama_model_load_from_file_impl: failed to load model
srv    load_model: failed to load model
srv    operator(): operator(): cleaning up before exit...
main: exiting due to model loading error`

// cudaOOM is the CUDA spelling when the weights fit but the KV cache does not.
const cudaOOM = `llama_context: n_ctx = 262144
ggml_backend_cuda_buffer_type_alloc_buffer: allocating 13285.50 MiB on device 0: cudaMalloc failed: out of memory
alloc_tensor_range: failed to allocate CUDA0 buffer of size 13931044864
llama_init_from_model: failed to initialize the context: failed to allocate buffer for kv cache
common_init_from_params: failed to create context with model 'model.gguf'
srv    load_model: failed to load model
main: exiting due to model loading error`

// fakeOOMServer writes a stand-in for llama-server: it records each command line in calls, and when its
// arguments contain one of the keys of oom it prints that value (real llama.cpp out-of-memory output) and exits
// 1, as llama-server does on a card that is too small. Otherwise it execs real with the arguments it got, so a
// start that does not "run out of memory" is a real server. A real out-of-memory needs a GPU; this does not.
func fakeOOMServer(t *testing.T, real string, oom map[string]string) (bin, calls string) {
	t.Helper()
	dir := t.TempDir()
	bin, calls = filepath.Join(dir, "fakeOOMServer"), filepath.Join(dir, "calls")
	var sb strings.Builder
	fmt.Fprintf(&sb, "#!/bin/sh\n# fakeOOMServer: llama-server that runs out of memory for some arguments.\n")
	fmt.Fprintf(&sb, "echo \"$*\" >> '%s'\ncase \" $* \" in\n", calls)
	for key, log := range oom {
		fmt.Fprintf(&sb, "*' %s '*)\n  cat >&2 <<'EOF'\n%s\nEOF\n  exit 1;;\n", key, log)
	}
	fmt.Fprintf(&sb, "esac\nexec '%s' \"$@\"\n", real)
	if err := os.WriteFile(bin, []byte(sb.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, calls
}

func callCount(t *testing.T, calls string) int {
	t.Helper()
	b, err := os.ReadFile(calls)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// storiesArgs are plan-shaped arguments for the shared tiny model: what a vram.ModePlan's Args look like.
func storiesArgs(t *testing.T, ctx string, extra ...string) []string {
	return append([]string{"-m", stories(t), "-c", ctx, "-ngl", "999", "-fa", "on", "-np", "1"}, extra...)
}

type reported struct {
	name string
	err  error
}

func TestStartPlannedFallsBackOnOOM(t *testing.T) {
	bin, calls := fakeOOMServer(t, enginetest.Binary(t), map[string]string{"-c 4096": vulkanOOM})
	var got []reported
	attempts := []llamacpp.Attempt{
		{Name: "resident (ctx 4096)", Args: storiesArgs(t, "4096")},
		{Name: "text-only (ctx 2048)", Args: storiesArgs(t, "2048")},
	}
	s, used, err := llamacpp.StartPlanned(context.Background(), llamacpp.Config{Binary: bin, Threads: 2, Alias: "tiny",
		LogFile: filepath.Join(t.TempDir(), "server.log")}, attempts,
		func(a llamacpp.Attempt, err error) { got = append(got, reported{a.Name, err}) })
	if err != nil {
		t.Fatalf("second attempt should start a real server: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	if used.Name != "text-only (ctx 2048)" {
		t.Errorf("started with %q, want the second attempt", used.Name)
	}
	if len(got) != 1 || got[0].name != "resident (ctx 4096)" || !llamacpp.IsOOM(got[0].err) ||
		!strings.Contains(got[0].err.Error(), "ErrorOutOfDeviceMemory") {
		t.Fatalf("report should be called once with the first mode and its out-of-memory lines: %+v", got)
	}
	t.Logf("reported: %s: %v", got[0].name, got[0].err)
	resp, err := http.Get(s.URL() + "/health")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/health of the fallback server: %v %v", resp, err)
	}
	resp.Body.Close()
	if n := callCount(t, calls); n != 2 {
		t.Errorf("llama-server ran %d times, want 2", n)
	}
	// The attempt's arguments reached the real server as they are.
	props, err := llamacpp.ReadProps(context.Background(), s.Client())
	if err != nil {
		t.Fatal(err)
	}
	if props.NCtx != 2048 {
		t.Errorf("server runs with n_ctx %d, want the second attempt's 2048", props.NCtx)
	}
}

// TestStartPlannedStopsOnOtherFailure: a failure that is not out of memory (here the real server rejecting a
// flag) would fail in every mode, so the launcher must not try the next one.
func TestStartPlannedStopsOnOtherFailure(t *testing.T) {
	bin, calls := fakeOOMServer(t, enginetest.Binary(t), nil)
	reports := 0
	_, used, err := llamacpp.StartPlanned(context.Background(), llamacpp.Config{Binary: bin, Threads: 2},
		[]llamacpp.Attempt{
			{Name: "resident", Args: storiesArgs(t, "2048", "--no-such-flag")},
			{Name: "text-only", Args: storiesArgs(t, "2048")},
		}, func(llamacpp.Attempt, error) { reports++ })
	if err == nil {
		t.Fatal("an unknown flag must fail")
	}
	var ee *llamacpp.ExitError
	if !errors.As(err, &ee) || llamacpp.IsOOM(err) || used.Name != "resident" ||
		!strings.Contains(err.Error(), "no-such-flag") || !strings.Contains(err.Error(), "mode resident") {
		t.Fatalf("want the first attempt's non-OOM exit naming the mode and the flag, got attempt %q: %v", used.Name, err)
	}
	if reports != 0 || callCount(t, calls) != 1 {
		t.Errorf("fell back after a non-OOM failure: %d reports, %d starts", reports, callCount(t, calls))
	}
}

// TestStartPlannedAllOOM needs no real server: every attempt runs out of memory.
func TestStartPlannedAllOOM(t *testing.T) {
	bin, _ := fakeOOMServer(t, "/bin/false", map[string]string{"-c 4096": vulkanOOM, "-c 2048": cudaOOM})
	model := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(model, []byte("GGUF"), 0o644); err != nil {
		t.Fatal(err)
	}
	var names []string
	_, _, err := llamacpp.StartPlanned(context.Background(), llamacpp.Config{Binary: bin}, []llamacpp.Attempt{
		{Name: "mtp-swap", Args: []string{"-m", model, "-c", "4096"}},
		{Name: "vision-cpu", Args: []string{"-m", model, "-c", "2048"}},
	}, func(a llamacpp.Attempt, err error) { names = append(names, a.Name) })
	var oe *llamacpp.OOMError
	if !errors.As(err, &oe) || len(oe.Tried) != 2 || !llamacpp.IsOOM(err) {
		t.Fatalf("want an OOMError of two attempts, got %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"all 2 planned modes", "mtp-swap (llama-server -m", "ErrorOutOfDeviceMemory",
		"vision-cpu (llama-server -m", "cudaMalloc failed: out of memory", "lower the context"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "cleaning up before exit") {
		t.Errorf("summary should keep only the allocation lines:\n%s", msg)
	}
	if strings.Join(names, ",") != "mtp-swap,vision-cpu" {
		t.Errorf("reports %v", names)
	}
	t.Logf("\n%s", msg)
}

func TestStartPlannedBadInput(t *testing.T) {
	ctx := context.Background()
	if _, _, err := llamacpp.StartPlanned(ctx, llamacpp.Config{}, nil, nil); err == nil || !strings.Contains(err.Error(), "visor plan") {
		t.Errorf("no attempts: %v", err)
	}
	_, _, err := llamacpp.StartPlanned(ctx, llamacpp.Config{Args: []string{"-m", "x"}}, []llamacpp.Attempt{{Name: "a"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "already has Args") {
		t.Errorf("base with Args: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := llamacpp.StartPlanned(cancelled, llamacpp.Config{}, []llamacpp.Attempt{{Name: "a"}}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestConfigArgs(t *testing.T) {
	c := llamacpp.Config{Args: []string{"-m", "m.gguf", "-c", "8192", "--mmproj", "p.gguf"}, Alias: "a", Threads: 2,
		ExtraArgs: []string{"--jinja"}}
	want := "--host h --port 1 -m m.gguf -c 8192 --mmproj p.gguf --alias a -t 2 --jinja"
	if got := strings.Join(c.CommandLine("h", 1), " "); got != want {
		t.Errorf("command line %q, want %q", got, want)
	}
	dir := t.TempDir()
	model := filepath.Join(dir, "m.gguf")
	if err := os.WriteFile(model, []byte("GGUF"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  llamacpp.Config
		want string
	}{
		{"typed field too", llamacpp.Config{Args: []string{"-m", model}, Ctx: 4096}, "Config.Ctx is set together with Config.Args"},
		{"no model", llamacpp.Config{Args: []string{"-c", "4096"}}, "name no model"},
		{"dangling flag", llamacpp.Config{Args: []string{"-m"}}, "ends with -m"},
		{"missing model", llamacpp.Config{Args: []string{"-m", filepath.Join(dir, "none.gguf")}}, "model file"},
		{"missing projector", llamacpp.Config{Args: []string{"-m", model, "--mmproj", filepath.Join(dir, "none.gguf")}}, "mmproj file"},
	} {
		tc.cfg.Binary = "/bin/true" // never reached: the config is rejected first
		if _, err := llamacpp.Start(context.Background(), tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestIsOOM(t *testing.T) {
	exit := func(log string) error {
		return &llamacpp.ExitError{Binary: "llama-server", Err: errors.New("exit status 1"), Reason: strings.Split(log, "\n")}
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"vulkan weights", exit(vulkanOOM), true},
		{"cuda kv cache", exit(cudaOOM), true},
		{"vulkan exception only", exit("ggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory"), true},
		{"vk exception type", exit("terminate called after throwing an instance of 'vk::OutOfDeviceMemoryError'"), true},
		{"cuda error macro", exit("CUDA error: out of memory\n  current device: 0, in function ggml_backend_cuda_buffer_type_alloc_buffer"), true},
		{"compute buffers", exit("graph_reserve: failed to allocate compute buffers\nllama_init_from_model: failed to initialize the context: failed to allocate compute pp buffers"), true},
		{"cpu backend", exit("ggml_aligned_malloc: insufficient memory (attempted to allocate 36000.00 MB)\nggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 37748736000"), true},
		{"metal", exit("ggml_metal_buffer_type_alloc_buffer: error: failed to allocate buffer, size = 20480.00 MiB"), true},
		{"bad_alloc", exit("terminate called after throwing an instance of 'std::bad_alloc'\n  what():  std::bad_alloc"), true},
		{"wrapped", fmt.Errorf("start: %w", exit(cudaOOM)), true},
		{"unknown flag", exit("error: invalid argument: --no-such-flag"), false},
		{"corrupt model", exit("gguf_init_from_file_impl: failed to read tensor info\nllama_model_load: error loading model: llama_model_loader: failed to load model from corrupt.gguf\nsrv    load_model: failed to load model, 'corrupt.gguf'"), false},
		{"context without allocation cause", exit("llama_init_from_model: failed to initialize the context: quantized V cache was requested, but this requires Flash Attention\ncommon_init_from_params: failed to create context with model 'm.gguf'"), false},
		{"port taken", exit("couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 8080"), false},
		{"not an exit", errors.New("cudaMalloc failed: out of memory"), false},
		{"nil", nil, false},
	} {
		if got := llamacpp.IsOOM(tc.err); got != tc.want {
			t.Errorf("%s: IsOOM = %v, want %v", tc.name, got, tc.want)
		}
	}
}
