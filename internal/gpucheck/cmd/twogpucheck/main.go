// Command twogpucheck runs the seed's model (engine-notes §8: the header-only Qwen3.6-35B-A3B and its BF16
// projector) on two GPUs in the placement visor's planner recommends, and checks it: each device's NVML use
// against the plan (within 5%), each buffer's device in the load log (vram.CheckPlacement), and one request
// carrying a 1440p screenshot. It takes gpu-plan-check.sh's flags, so on a machine with two GPUs
//
//	VISOR_VRAMCHECK=.cache/twogpucheck scripts/gpu-plan-check.sh
//
// runs it (build it as the script says for vramcheck); the script's argument names the placements to start
// (default: the recommended one). Without GPUs, -no-nvml -rpc HOST:PORT,… -gpu SIZES -devices RPC0,RPC1 runs the
// same steps over ggml RPC devices (scripts/rpc-devices.sh), NVML excepted; -experts 8 -ctx 16384 -image 320x180
// keep such a run within a small host's RAM and CPU.
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/visorhq/visor/engine/gguf"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/engine/modelgen"
	"github.com/visorhq/visor/engine/vram"
)

// result is what the run found, written to results.json.
type result struct {
	Mode       vram.Mode    `json:"mode"`
	Args       []string     `json:"args"`
	Devices    []deviceUse  `json:"devices"`
	Checks     []vram.Check `json:"checks"`
	CheckErr   string       `json:"check_error,omitempty"`
	ImageHTTP  int          `json:"image_http_status"`
	ImageSecs  float64      `json:"image_seconds"`
	ImageReply string       `json:"image_reply,omitempty"`
	Pass       bool         `json:"pass"`
	Err        string       `json:"error,omitempty"`
}

type deviceUse struct {
	Device     string  `json:"device"`
	PlannedMiB float64 `json:"planned_mib"`
	// BeforeMiB, LoadedMiB and AfterMiB are NVML's used memory before the start, once the server is healthy and
	// after the image request; the delta compared with the plan is AfterMiB − BeforeMiB.
	BeforeMiB float64 `json:"before_mib"`
	LoadedMiB float64 `json:"loaded_mib"`
	AfterMiB  float64 `json:"after_mib"`
	ErrorPct  float64 `json:"error_pct"`
	OK        bool    `json:"ok"`
}

func main() {
	server := flag.String("server", "llama-server", "llama-server binary (a wrapper that sets up Vulkan)")
	dir := flag.String("dir", os.TempDir(), "folder for the generated model files (sparse: no disk space)")
	out := flag.String("out", ".", "folder for results.json and the server log")
	cases := flag.String("cases", "", "placements to start, comma-separated (default: the recommended one); gpu-plan-check.sh passes its argument here")
	gpu := flag.String("gpu", "auto", "GPUs to plan for (visor plan's --gpu)")
	names := flag.String("devices", "", "llama-server's device names (default: llama-server --list-devices)")
	rpc := flag.String("rpc", "", "RPC servers standing in for GPUs (host:port,…); their endpoints name their buffers")
	ctxSize := flag.Int("ctx", 262144, "context")
	noNVML := flag.Bool("no-nvml", false, "skip NVML (a dry run over RPC devices)")
	experts := flag.Int("experts", 256, "experts per layer: 256 is the real header; fewer shrinks the weights for a dry run")
	imgSize := flag.String("image", "2560x1440", "screenshot size WxH")
	flag.Parse()
	var w, h int
	if _, err := fmt.Sscanf(*imgSize, "%dx%d", &w, &h); err != nil || w < 16 || h < 16 || w > 8192 || h > 8192 {
		fmt.Fprintf(os.Stderr, "twogpucheck: -image %q: want WxH, each 16 to 8192\n", *imgSize)
		os.Exit(2)
	}
	if *experts < 8 || *experts > 256 {
		fmt.Fprintf(os.Stderr, "twogpucheck: -experts %d: want 8 to 256 (8 are used per token)\n", *experts)
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	modes := []vram.Mode{""}
	if *cases != "" {
		modes = nil
		for _, m := range strings.Split(*cases, ",") {
			modes = append(modes, vram.Mode(strings.TrimSpace(m)))
		}
	}
	var all []result
	pass := true
	for _, m := range modes {
		res, err := run(context.Background(), log, *server, *dir, *out, *gpu, *names, *rpc, *ctxSize, m, *noNVML, *experts, w, h)
		if err != nil {
			res.Err = err.Error()
		}
		pass = pass && res.Pass
		all = append(all, res)
		b, _ := json.MarshalIndent(all, "", "  ")
		_ = os.WriteFile(filepath.Join(*out, "results.json"), b, 0o644)
	}
	b, _ := json.MarshalIndent(all, "", "  ")
	os.Stdout.Write(append(b, '\n'))
	if !pass {
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger, server, dir, out, gpu, names, rpc string, ctxSize int, mode vram.Mode,
	noNVML bool, experts, imgW, imgH int) (result, error) {
	var res result
	model, mmproj := filepath.Join(dir, "qwen3.6-35b-a3b.gguf"), filepath.Join(dir, "mmproj-qwen3vl.gguf")
	kv, ts := modelgen.Qwen36()
	if experts != 256 {
		shrink(kv, ts, experts)
	}
	byteTokens(kv)
	if err := gguf.WriteFile(model, kv, ts); err != nil {
		return res, err
	}
	kv, ts = modelgen.QwenVLProjector()
	if err := gguf.WriteFile(mmproj, kv, ts); err != nil {
		return res, err
	}
	var src vram.GPUSource = vram.NVML{Logger: log}
	if noNVML {
		src = nil
	}
	var nameList []string
	if names != "" {
		nameList = strings.Split(names, ",")
	} else if listed, err := llamacpp.ListDevices(ctx, server); err == nil && len(listed) > 1 {
		for _, d := range listed {
			nameList = append(nameList, d.Name)
		}
	}
	fo := vram.FileOptions{Model: model, MMProj: mmproj, GPU: gpu, DeviceNames: nameList, Source: src,
		Options: vram.Options{Ctx: ctxSize, CacheK: "q4_0", CacheV: "q4_0", UBatch: 2048, Parallel: 1, DraftMax: 3}}
	plan, err := vram.PlanFiles(ctx, fo)
	if err != nil {
		return res, err
	}
	if rpc != "" {
		for i, ep := range strings.Split(rpc, ",") {
			if i < len(plan.Devices) {
				plan.Devices[i].Description = ep
			}
		}
	}
	var tbl bytes.Buffer
	_ = plan.WriteTable(&tbl)
	fmt.Fprint(os.Stderr, tbl.String())
	if len(plan.Devices) < 2 {
		return res, fmt.Errorf("found %d GPU(s): this check needs two", len(plan.Devices))
	}
	p, ok := plan.Recommended()
	if mode != "" {
		p, ok = plan.Mode(mode)
	}
	if !ok || len(p.Devices) < 2 || !p.Fits {
		return res, fmt.Errorf("no fitting multi-device placement (got %s, fits %v)", p.Mode, p.Fits)
	}
	res.Mode, res.Args = p.Mode, p.Args
	before := map[string]float64{}
	if !noNVML {
		if before, err = usedByDevice(ctx, plan.Devices); err != nil {
			return res, err
		}
	}
	var args []string
	if rpc != "" {
		args = append(args, "--rpc", rpc) // before -dev: the RPC devices exist only once it is parsed
	}
	args = append(args, p.Args...)
	logPath := filepath.Join(out, "llama-server-"+string(p.Mode)+".log")
	var lines vram.LogLines
	log.Info("starting", "mode", p.Mode, "args", strings.Join(args, " "))
	srv, err := llamacpp.Start(ctx, llamacpp.Config{Binary: server, Args: args, ExtraArgs: []string{"-lv", "4"},
		LogFile: logPath, OnLog: lines.Add, Ready: 5 * time.Minute})
	if err != nil {
		return res, fmt.Errorf("%w (log: %s)", err, logPath)
	}
	defer func() { _ = srv.Stop(context.WithoutCancel(ctx)) }()
	base := srv.URL()
	loaded := map[string]float64{}
	if !noNVML {
		loaded, _ = usedByDevice(ctx, plan.Devices)
	}
	res.Checks, err = vram.CheckPlacement(p, plan.Devices, vram.ParseLoadLog(lines.Lines()))
	if err != nil {
		res.CheckErr = err.Error()
	}
	start := time.Now()
	res.ImageHTTP, res.ImageReply, err = askImage(ctx, base, imgW, imgH)
	res.ImageSecs = time.Since(start).Seconds()
	if err != nil {
		return res, err
	}
	allOK := res.CheckErr == "" && res.ImageHTTP == http.StatusOK
	after := map[string]float64{}
	if !noNVML {
		if after, err = usedByDevice(ctx, plan.Devices); err != nil {
			return res, err
		}
	}
	for _, d := range p.Devices {
		u := deviceUse{Device: d.Device, PlannedMiB: float64(d.Total) / vram.MiB, BeforeMiB: before[d.Device],
			LoadedMiB: loaded[d.Device], AfterMiB: after[d.Device]}
		if !noNVML {
			delta := u.AfterMiB - u.BeforeMiB
			u.ErrorPct = 100 * (u.PlannedMiB/delta - 1)
			u.OK = delta > 0 && math.Abs(u.ErrorPct) <= 5
			allOK = allOK && u.OK
		}
		res.Devices = append(res.Devices, u)
	}
	res.Pass = allOK
	return res, nil
}

// byteTokens makes the first 256 tokens of the synthetic vocabulary GPT-2's byte characters, so that any text
// tokenizes (one token per byte). Without them the prompt's text becomes no tokens at all, and llama-server
// asserts on the empty batch after the image (GGML_ASSERT(batch.size() > 0), seen on b11669).
func byteTokens(kv []gguf.KV) {
	for i := range kv {
		toks, ok := kv[i].Value.([]string)
		if kv[i].Key != "tokenizer.ggml.tokens" || !ok || len(toks) < 256 {
			continue
		}
		n := 0
		for b := 0; b < 256; b++ {
			r := rune(b)
			if !(b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF) {
				r = rune(256 + n) // GPT-2 moves the bytes it does not print to U+0100 and up
				n++
			}
			toks[b] = string(r)
		}
	}
}

// shrink gives the Qwen3.6 header n experts per layer instead of 256, for a dry run that must fit in RAM.
func shrink(kv []gguf.KV, ts []gguf.Tensor, n int) {
	for i := range kv {
		if kv[i].Key == "qwen35moe.expert_count" {
			kv[i].Value = uint32(n)
		}
	}
	for i := range ts {
		switch {
		case strings.Contains(ts[i].Name, "_exps"):
			ts[i].Shape[2] = uint64(n)
		case strings.HasSuffix(ts[i].Name, "ffn_gate_inp.weight"):
			ts[i].Shape[1] = uint64(n)
		}
	}
}

// usedByDevice is NVML's used memory per planned device, MiB. The plan's devices are NVML's in order.
func usedByDevice(ctx context.Context, devs []vram.Device) (map[string]float64, error) {
	gpus, err := vram.NVML{}.GPUs(ctx)
	if err != nil {
		return nil, err
	}
	m := map[string]float64{}
	for _, d := range devs {
		for _, g := range gpus {
			if g.Index == d.GPU.Index {
				m[d.Name] = float64(g.Used) / vram.MiB
			}
		}
	}
	return m, nil
}

// askImage sends one chat request carrying a w×h screenshot-like PNG and returns the status and reply.
func askImage(ctx context.Context, base string, w, h int) (int, string, error) {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			// Window-like panels and text-like stripes, so the image is not one flat colour.
			c := color.RGBA{R: uint8(40 + x/20%4*30), G: uint8(50 + y/30%3*40), B: 200, A: 255}
			if y%24 < 3 && x%400 < 300 {
				c = color.RGBA{R: 240, G: 240, B: 240, A: 255}
			}
			img.Set(x, y, c)
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return 0, "", err
	}
	body, _ := json.Marshal(map[string]any{
		"max_tokens": 16,
		"messages": []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "image_url", "image_url": map[string]string{
				"url": "data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())}},
			map[string]any{"type": "text", "text": "What is on this screen?"},
		}}},
	})
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, string(b), nil
}
