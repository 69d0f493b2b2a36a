// Command vramcheck compares the VRAM planner with a real llama-server on a real GPU: it generates test models
// (header-only, sparse), plans each case, starts the server with the plan's arguments, answers one request, and
// reads the server's memory use through NVML. scripts/gpu-plan-check.sh runs it on the lent H200.
//
// Usage: vramcheck -server PATH [-dir DIR] [-out DIR] [-cases a,b,...]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/visorhq/visor/engine/gguf"
	"github.com/visorhq/visor/engine/llamacpp"
	vtm "github.com/visorhq/visor/engine/modelgen"
	"github.com/visorhq/visor/engine/vram"
	"github.com/visorhq/visor/internal/testmodel"
)

type shape struct {
	name string
	s    vtm.LlamaShape
	// vocab of the synthetic tokenizer
	vocab int
}

var shapes = map[string]shape{
	// 1.6 GiB: the shape of docs/engine-notes.md §7's measurements.
	"A": {"A", vtm.LlamaShape{Embd: 2048, Layers: 16, Heads: 16, HeadsKV: 8, FF: 5632, Ctx: 131072, Type: gguf.TypeF16}, 32000},
	// 3.2 GiB, wider and with GQA 4:1.
	"B": {"B", vtm.LlamaShape{Embd: 4096, Layers: 8, Heads: 32, HeadsKV: 8, FF: 11008, Ctx: 131072, Type: gguf.TypeF16}, 32000},
	// Not used to fit the compute estimate: a check on a third shape and vocabulary.
	"C": {"C", vtm.LlamaShape{Embd: 3072, Layers: 12, Heads: 24, HeadsKV: 4, FF: 8192, Ctx: 131072, Type: gguf.TypeF16}, 64000},
}

type testCase struct {
	Name   string `json:"name"`
	Shape  string `json:"shape"`
	Ctx    int    `json:"ctx"`
	K, V   string
	UBatch int  `json:"ubatch"`
	Proj   bool `json:"projector"`
	NoFA   bool `json:"no_fa"`
}

var cases = []testCase{
	{Name: "A-8k-f16", Shape: "A", Ctx: 8192, K: "f16", V: "f16"},
	{Name: "A-64k-f16", Shape: "A", Ctx: 65536, K: "f16", V: "f16"},
	{Name: "A-64k-q8_0", Shape: "A", Ctx: 65536, K: "q8_0", V: "q8_0"},
	{Name: "A-64k-q4_0", Shape: "A", Ctx: 65536, K: "q4_0", V: "q4_0"},
	{Name: "A-64k-f16-ub2048", Shape: "A", Ctx: 65536, K: "f16", V: "f16", UBatch: 2048},
	{Name: "B-32k-f16", Shape: "B", Ctx: 32768, K: "f16", V: "f16"},
	{Name: "B-128k-q8_0", Shape: "B", Ctx: 131072, K: "q8_0", V: "q8_0"},
	{Name: "A-8k-f16-clipL", Shape: "A", Ctx: 8192, K: "f16", V: "f16", Proj: true},
	{Name: "C-16k-f16", Shape: "C", Ctx: 16384, K: "f16", V: "f16"},
	{Name: "C-100k-q8_0-ub1024", Shape: "C", Ctx: 100000, K: "q8_0", V: "q8_0", UBatch: 1024},
	{Name: "C-128k-q4_0-f16", Shape: "C", Ctx: 131072, K: "q4_0", V: "f16"},
	{Name: "C-16k-f16-clipL", Shape: "C", Ctx: 16384, K: "f16", V: "f16", Proj: true},
	{Name: "A-16k-f16-nofa", Shape: "A", Ctx: 16384, K: "f16", V: "f16", NoFA: true},
}

// outcome is one case's numbers, MiB.
type outcome struct {
	Case        testCase           `json:"case"`
	Planned     float64            `json:"planned_mib"`
	Components  map[string]float64 `json:"planned_components_mib"`
	NVMLDelta   float64            `json:"nvml_delta_mib"`
	ProcessUsed float64            `json:"nvml_process_mib"`
	Logged      map[string]float64 `json:"logged_mib"`
	ErrorPct    float64            `json:"error_pct"`
	OnGPU       bool               `json:"on_gpu"`
	Err         string             `json:"error,omitempty"`
	Args        []string           `json:"args"`
}

func main() {
	server := flag.String("server", "llama-server", "llama-server binary (a wrapper that sets up Vulkan)")
	dir := flag.String("dir", os.TempDir(), "folder for generated models")
	out := flag.String("out", ".", "folder for results.json and the server logs")
	only := flag.String("cases", "", "comma-separated case names (default: all)")
	noNVML := flag.Bool("no-nvml", false, "skip NVML (dry run on a machine without a GPU: plans with --gpu 80GiB)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx := context.Background()
	var res []outcome
	for _, c := range cases {
		if *only != "" && !strings.Contains(","+*only+",", ","+c.Name+",") {
			continue
		}
		o, err := runCase(ctx, log, *server, *dir, *out, c, *noNVML)
		if err != nil {
			o.Err = err.Error()
			log.Error("case failed", "case", c.Name, "err", err)
		}
		res = append(res, o)
		b, _ := json.MarshalIndent(res, "", "  ")
		_ = os.WriteFile(filepath.Join(*out, "results.json"), b, 0o644)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tplanned MiB\tNVML delta MiB\terror %\tlogged weights\tlogged KV\tlogged compute\tlogged mmproj\tGPU\t")
	for _, o := range res {
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%+.1f\t%.0f\t%.0f\t%.0f\t%.0f\t%v\t%s\n", o.Case.Name, o.Planned, o.NVMLDelta, o.ErrorPct,
			o.Logged["weights"], o.Logged["kv"], o.Logged["compute"], o.Logged["mmproj"], o.OnGPU, o.Err)
	}
	tw.Flush()
}

func runCase(ctx context.Context, log *slog.Logger, server, dir, out string, c testCase, noNVML bool) (o outcome, err error) {
	o = outcome{Case: c, Logged: map[string]float64{}, Components: map[string]float64{}}
	sh := shapes[c.Shape]
	model := filepath.Join(dir, "llama-"+sh.name+".gguf")
	if _, err := os.Stat(model); err != nil {
		kv := []gguf.KV{}
		tok := &gguf.File{Name: "synthetic", KV: vtm.Vocab(sh.vocab)}
		mkv, ts, err := vtm.Llama(sh.s, tok)
		if err != nil {
			return o, err
		}
		kv = append(kv, mkv...)
		if err := gguf.WriteFile(model, kv, ts); err != nil {
			return o, err
		}
	}
	var mmproj string
	if c.Proj {
		// CLIP-L/14 at 336 px: 24 blocks of width 1024, 576 patches, projected to the text model's width.
		mmproj = filepath.Join(dir, "clip-l-"+sh.name+".gguf")
		if _, err := os.Stat(mmproj); err != nil {
			err := testmodel.WriteProjectorFile(mmproj, testmodel.ProjectorOptions{ImageSize: 336, PatchSize: 14,
				EmbeddingLength: 1024, Blocks: 24, Heads: 16, FeedForwardLength: 4096, TextEmbeddingLength: sh.s.Embd})
			if err != nil {
				return o, err
			}
		}
	}
	opts := vram.Options{Ctx: c.Ctx, CacheK: c.K, CacheV: c.V, UBatch: c.UBatch, NoFlashAttn: c.NoFA}
	gpu := "0"
	if noNVML {
		gpu = "80GiB"
	}
	res, err := vram.PlanFiles(ctx, vram.FileOptions{Model: model, MMProj: mmproj, GPU: gpu, Options: opts})
	if err != nil {
		return o, err
	}
	mode := vram.ModeTextOnly
	if c.Proj {
		mode = vram.ModeResident
	}
	p, _ := res.Mode(mode)
	o.Planned = float64(p.Total) / vram.MiB
	for _, comp := range p.Components {
		o.Components[comp.Name] = float64(comp.Bytes) / vram.MiB
	}
	used := used
	if noNVML {
		used = func(context.Context) (float64, error) { return 0, nil }
	}
	base, err := used(ctx)
	if err != nil {
		return o, err
	}
	port, err := llamacpp.FreePort("127.0.0.1")
	if err != nil {
		return o, err
	}
	args := append(append([]string{}, p.Args...), "--host", "127.0.0.1", "--port", strconv.Itoa(port), "-lv", "4")
	o.Args = args
	logPath := filepath.Join(out, c.Name+".log")
	lf, err := os.Create(logPath)
	if err != nil {
		return o, err
	}
	defer lf.Close()
	cmd := exec.Command(server, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return o, fmt.Errorf("start %s: %w", server, err)
	}
	stop := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	defer func() { parseLog(logPath, &o) }()
	defer stop()
	base2 := fmt.Sprintf("http://127.0.0.1:%d", port)
	if err := waitHealthy(ctx, base2, 180*time.Second); err != nil {
		return o, err
	}
	body := `{"prompt":"Hello there, how are","n_predict":4}`
	resp, err := http.Post(base2+"/completion", "application/json", strings.NewReader(body))
	if err != nil {
		return o, fmt.Errorf("request: %w", err)
	}
	resp.Body.Close()
	time.Sleep(time.Second)
	after, err := used(ctx)
	if err != nil {
		return o, err
	}
	o.NVMLDelta = (after - base) / vram.MiB
	if gpus, err := (vram.NVML{Logger: log}).GPUs(ctx); err == nil && len(gpus) > 0 {
		for _, pr := range gpus[0].Processes {
			o.ProcessUsed += float64(pr.Used) / vram.MiB
		}
	}
	if o.NVMLDelta > 0 {
		o.ErrorPct = 100 * (o.Planned/o.NVMLDelta - 1)
	}
	return o, nil
}

var (
	reModelBuf = regexp.MustCompile(`load_tensors:\s+Vulkan0 model buffer size =\s*([\d.]+) MiB`)
	reKVBuf    = regexp.MustCompile(`llama_kv_cache:\s+Vulkan0 KV buffer size =\s*([\d.]+) MiB`)
	reCompute  = regexp.MustCompile(`sched_reserve:\s+Vulkan0 compute buffer size =\s*([\d.]+) MiB`)
	reMtmd     = regexp.MustCompile(`estimated worst-case memory usage of mmproj is ([\d.]+) MiB`)
	reClipBuf  = regexp.MustCompile(`clip.*Vulkan0.*buffer size =\s*([\d.]+) MiB`)
)

func parseLog(path string, o *outcome) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	num := func(s string) float64 { v, _ := strconv.ParseFloat(s, 64); return v }
	computeSeen := false
	for sc.Scan() {
		l := sc.Text()
		if strings.Contains(l, "Vulkan0") && strings.Contains(l, "using device") || reModelBuf.MatchString(l) {
			o.OnGPU = true
		}
		if m := reModelBuf.FindStringSubmatch(l); m != nil {
			o.Logged["weights"] += num(m[1])
		}
		if m := reKVBuf.FindStringSubmatch(l); m != nil {
			o.Logged["kv"] += num(m[1])
		}
		if m := reCompute.FindStringSubmatch(l); m != nil && !computeSeen {
			o.Logged["compute"] = num(m[1])
			computeSeen = true
		}
		if m := reMtmd.FindStringSubmatch(l); m != nil {
			o.Logged["mmproj"] = num(m[1])
		}
		if m := reClipBuf.FindStringSubmatch(l); m != nil {
			o.Logged["clip_buffers"] += num(m[1])
		}
	}
}

// used returns device 0's used memory (NVML v2, which excludes the driver's reserve).
func used(ctx context.Context) (float64, error) {
	gpus, err := vram.NVML{}.GPUs(ctx)
	if err != nil {
		return 0, err
	}
	if len(gpus) == 0 {
		return 0, errors.New("no GPU")
	}
	return float64(gpus[0].Used), nil
}

func waitHealthy(ctx context.Context, base string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if err := ctx.Err(); err != nil {
			return err
		}
		resp, err := http.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("llama-server at %s not healthy after %v", base, limit)
}
