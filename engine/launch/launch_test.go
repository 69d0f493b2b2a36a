package launch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/visorhq/visor/engine/launch"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/engine/vram"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testmodel"
)

// oomLog is llama-server's output when the projector does not fit through Vulkan (real log lines' format).
const oomLog = `clip_model_loader: model name:   tiny
ggml_vulkan: Device memory allocation of size 617611264 failed.
ggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory
alloc_tensor_range: failed to allocate Vulkan0 buffer of size 617611264
clip_init: failed to load model
srv    load_model: failed to load multimodal model
main: exiting due to model loading error`

// fakeOOMServer writes a stand-in for llama-server that prints oomLog and exits 1 when its arguments, after
// the --host/--port the supervisor puts first, are exactly one of oomArgs; otherwise it execs the real server
// with everything it got. It lets a CPU machine test the fallback that a real GPU's out-of-memory triggers.
func fakeOOMServer(t *testing.T, real string, oomArgs ...[]string) string {
	t.Helper()
	var sb strings.Builder
	sb.WriteString("#!/bin/sh\n# fakeOOMServer: llama-server that runs out of memory for some argument lists.\n")
	sb.WriteString("host=\"$2\" port=\"$4\"\nshift 4\ncase \"$*\" in\n")
	for _, a := range oomArgs {
		joined := strings.Join(a, " ")
		if strings.ContainsAny(joined, "'*?[") {
			t.Fatalf("fakeOOMServer cannot match %q", joined)
		}
		fmt.Fprintf(&sb, "'%s')\n  cat >&2 <<'EOF'\n%s\nEOF\n  exit 1;;\n", joined, oomLog)
	}
	fmt.Fprintf(&sb, "esac\nexec '%s' --host \"$host\" --port \"$port\" \"$@\"\n", real)
	bin := filepath.Join(t.TempDir(), "fakeOOMServer")
	if err := os.WriteFile(bin, []byte(sb.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// tinyPlan plans visor's generated chat model and projector for a 4 GiB card: every mode fits.
func tinyPlan(t *testing.T) vram.Result {
	t.Helper()
	chat, proj, err := testmodel.Files(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	res, err := vram.PlanFiles(context.Background(), vram.FileOptions{Model: chat, MMProj: proj, GPU: "4GiB",
		Options: vram.Options{Ctx: 4096, Parallel: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestPlanAutoFallsBack runs the whole --plan auto path: plan → attempts → the recommended mode runs out of
// memory (fakeOOMServer) → the report names it → the next mode's arguments start a real llama-server.
func TestPlanAutoFallsBack(t *testing.T) {
	real := enginetest.Binary(t)
	res := tinyPlan(t)
	attempts := launch.Attempts(res)
	var names []string
	for _, a := range attempts {
		names = append(names, a.Name)
	}
	if got := strings.Join(names, ", "); got != "resident (ctx 4096), vision-cpu (ctx 4096), text-only (ctx 4096)" {
		t.Fatalf("attempts: %s", got)
	}
	bin := fakeOOMServer(t, real, attempts[0].Args)
	var report bytes.Buffer
	s, used, err := launch.Start(context.Background(), llamacpp.Config{Binary: bin,
		LogFile: filepath.Join(t.TempDir(), "llama-server.log")}, res, launch.Reporter(&report))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	t.Logf("report:\n%s", report.String())
	if used.Name != "vision-cpu (ctx 4096)" {
		t.Errorf("started %q, want vision-cpu after resident ran out of memory", used.Name)
	}
	for _, want := range []string{"ran out of memory in mode resident (ctx 4096); trying the next mode",
		"  ggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory", "full log: "} {
		if !strings.Contains(report.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(report.String(), "clip_model_loader") {
		t.Errorf("report should show only the allocation lines")
	}
	resp, err := http.Get(s.URL() + "/health")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/health: %v %v", resp, err)
	}
	resp.Body.Close()
	props, err := llamacpp.ReadProps(context.Background(), s.Client())
	if err != nil {
		t.Fatal(err)
	}
	if !props.Vision || props.NCtx != 4096 {
		t.Errorf("vision-cpu should serve images at n_ctx 4096: vision=%v n_ctx=%d", props.Vision, props.NCtx)
	}
}

func TestAttemptsReducedContext(t *testing.T) {
	res := vram.Result{Modes: []vram.ModePlan{
		{Mode: vram.ModeResident, Available: true, Ctx: 32768, MaxCtx: 16384, Args: []string{"-c", "16384"}},
		{Mode: vram.ModeTextOnly, Available: true, Fits: true, Ctx: 32768, MaxCtx: 32768, Args: []string{"-c", "32768"}},
	}}
	a := launch.Attempts(res)
	if len(a) != 2 || a[0].Name != "text-only (ctx 32768)" || a[1].Name != "resident (ctx 16384, reduced from 32768)" ||
		a[1].Args[1] != "16384" {
		t.Fatalf("attempts %+v", a)
	}
	a[1].Args[1] = "x"
	if res.Modes[0].Args[1] != "16384" {
		t.Error("attempts must not share the plan's argument slices")
	}
}

func TestStartNothingFits(t *testing.T) {
	res := vram.Result{Model: vram.Facts{Path: "big.gguf"}, GPU: vram.GPU{Name: "8 GiB card"},
		Modes: []vram.ModePlan{{Mode: vram.ModeTextOnly, Available: true, Ctx: 32768}}}
	_, _, err := launch.Start(context.Background(), llamacpp.Config{}, res, nil)
	if err == nil || !strings.Contains(err.Error(), "no mode of the plan for big.gguf fits") ||
		!strings.Contains(err.Error(), "recommended: none") {
		t.Fatalf("want the plan in the error, got %v", err)
	}
}

// TestStartRefusesSilentCPUFallback: a plan for a GPU NVML found, started by a llama-server that cannot use it
// (here: the CPU-only engine of a machine without a GPU), must not pass as a GPU start. Before the check this
// returned a running server, ~15× slower than the plan promised, with nothing said.
func TestStartRefusesSilentCPUFallback(t *testing.T) {
	real := enginetest.Binary(t)
	if devs, err := llamacpp.ListDevices(context.Background(), real); err != nil {
		t.Fatal(err)
	} else if len(devs) > 0 {
		t.Skipf("this llama-server sees %s: it cannot show a CPU fallback here", devs[0].Name)
	}
	chat, proj, err := testmodel.Files(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	res, err := vram.PlanFiles(context.Background(), vram.FileOptions{Model: chat, MMProj: proj, GPU: "auto",
		Source:  vram.StaticGPUs{{Name: "NVIDIA H200", Total: 140 << 30, Free: 140 << 30, Source: "nvml"}},
		Options: vram.Options{Ctx: 4096, Parallel: 1}})
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := launch.Start(context.Background(), llamacpp.Config{Binary: real}, res, nil)
	if err == nil {
		_ = s.Stop(context.Background())
		t.Fatal("a GPU plan started on the CPU without an error")
	}
	if !errors.Is(err, llamacpp.ErrCPUFallback) || !strings.Contains(err.Error(), "NVIDIA H200") ||
		!strings.Contains(err.Error(), "visor engine install --gpu vulkan") {
		t.Errorf("error should name the GPU and the fix: %v", err)
	}
}
