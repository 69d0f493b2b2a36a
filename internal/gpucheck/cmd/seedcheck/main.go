// Command seedcheck runs the seed's 24 GB scenario end to end on a real GPU (scripts/gpu-seed-check.sh runs it on
// the lent H200): it writes shape-exact stand-ins of Qwen3.6-35B-A3B and its Qwen-VL projector (zero weights,
// sparse), holds GPU memory with a CUDA ballast until the seed's free memory is left, has visor plan and start the
// mode (visor serve), sends 1080p, 1440p and largest-size screenshots, and compares:
//   - the plan's total with NVML's measured use, including the largest screenshot;
//   - the minimum free memory during the image turns with the plan's margin;
//   - the first image's time to first token after start with a later image's (with and without visor's warm-up,
//     each on a fresh shader cache, so both pay the one-time pipeline compiles);
//   - tokens/s streamed through visor's client with a raw HTTP read of the same server: identical greedy requests
//     (temperature 0, fixed seed), one after the other in alternating pairs. The server's own rate still swings
//     by a third between identical requests on the H200, so -aa measures the same comparison between two
//     identical clients (its noise floor), and -concurrent has both clients stream at once from a two-slot
//     server, where that noise is shared.
//
// Usage: seedcheck -visor VISOR -server LLAMA_SERVER [-work DIR] [-out DIR] [-free 23.4GB] [-control=true]
// [-tps-only] [-reps 6] [-tps-tokens 512] [-tps-budget 0] [-aa 0] [-concurrent 0]
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	openai "github.com/sashabaranov/go-openai"

	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/gguf"
	"github.com/visorhq/visor/engine/modelgen"
	"github.com/visorhq/visor/engine/vram"
)

type shot struct {
	Name string `json:"name"`
	W, H int
	Seed uint64 `json:"-"`
	path string
	png  []byte
}

// Turn is one image request.
type Turn struct {
	Image       string  `json:"image"`
	TTFTSeconds float64 `json:"ttft_s"`
	PromptN     int     `json:"prompt_n"`
	PromptMS    float64 `json:"prompt_ms"`
	MinFreeMiB  float64 `json:"min_free_mib"`
	Err         string  `json:"error,omitempty"`
}

// Run is one visor serve start and what was measured on it.
type Run struct {
	Warmup       bool    `json:"warmup"`
	StartSeconds float64 `json:"start_s"`
	// WarmupSeconds is how long serve's background warm-up ran after it said where it serves (0: none).
	WarmupSeconds float64   `json:"warmup_s,omitempty"`
	Mode          string    `json:"mode"`
	ServeLog      []string  `json:"serve_log"`
	FreeBeforeMiB float64   `json:"free_before_mib"`
	FreeReadyMiB  float64   `json:"free_ready_mib"`
	Turns         []Turn    `json:"turns"`
	MinFreeMiB    float64   `json:"min_free_mib"`
	PeakUseMiB    float64   `json:"peak_use_mib"`
	VisorTPS      []float64 `json:"visor_tps,omitempty"`
	RawTPS        []float64 `json:"raw_tps,omitempty"`
	ServerTPS     []float64 `json:"server_tps,omitempty"`
	RawServerTPS  []float64 `json:"raw_server_tps,omitempty"`
	// The server's timings for each tokens/s request (drafts accepted included), to show its own noise.
	VisorTimings []engine.Timings `json:"visor_timings,omitempty"`
	RawTimings   []engine.Timings `json:"raw_timings,omitempty"`
	// Concurrent pairs (-concurrent): both clients stream the same request at once from a two-slot server, so
	// the server decodes both in the same batches and its own run-to-run noise is the same for both.
	ConcVisorTPS []float64 `json:"concurrent_visor_tps,omitempty"`
	// -goopenai: the same request read through go-openai's own stream reader, which visor's client used until
	// it read the stream itself: a reference in the same rounds.
	GoOpenAITPS []float64 `json:"goopenai_tps,omitempty"`
	ConcRawTPS  []float64 `json:"concurrent_raw_tps,omitempty"`
	// Controls (-aa): the same alternating comparison between two identical clients, and between visor and raw
	// again interleaved with them.
	Controls  []string `json:"controls,omitempty"`
	Placement []string `json:"placement_lines,omitempty"`
	Err       string   `json:"error,omitempty"`
}

// Report is results.json.
type Report struct {
	GPU           string  `json:"gpu"`
	TPSOnly       bool    `json:"tps_only,omitempty"`
	TotalMiB      float64 `json:"total_mib"`
	FreeStartMiB  float64 `json:"free_start_mib"`
	FreeBallast   float64 `json:"free_after_ballast_mib"`
	PlanMode      string  `json:"plan_mode"`
	PlanCtx       int     `json:"plan_ctx"`
	PlanTotalMiB  float64 `json:"plan_total_mib"`
	PlanMarginMiB float64 `json:"plan_margin_mib"`
	PlanHeadroom  float64 `json:"plan_headroom_mib"`
	PlanImageTok  int     `json:"plan_max_image_tokens"`
	PlanKVOffers  []string
	PlanTable     string `json:"plan_table"`
	Runs          []Run  `json:"runs"`
	// Chat is the -chat run: a long screenshot chat through visor's session service (chat.go).
	Chat *ChatRun `json:"chat,omitempty"`
	// Cut is the -cut run: checkpoint spacing and older images (cut.go).
	Cut    *CutReport `json:"cut,omitempty"`
	Checks []string
}

func main() {
	visor := flag.String("visor", "visor", "visor binary (a wrapper that can run it here)")
	server := flag.String("server", "llama-server", "llama-server binary")
	work := flag.String("work", filepath.Join(os.TempDir(), "seedcheck"), "folder for models and state")
	out := flag.String("out", ".", "folder for results.json and logs")
	freeSpec := flag.String("free", "23.4GB", "free GPU memory to leave (the seed's budget)")
	control := flag.Bool("control", true, "first run a start without warm-up, to show what it saves")
	reps := flag.Int("reps", 6, "tokens/s measurements per client (pairs alternate which goes first)")
	tpsOnly := flag.Bool("tps-only", false, "only the tokens/s part: no control run and no image turns (ballast, plan and the warm-up start stay, so the server is the one visor picks)")
	flag.IntVar(&tpsTokens, "tps-tokens", tpsTokens, "tokens per tokens/s request")
	flag.IntVar(&controlPairs, "aa", 0, "also measure this many alternating pairs of raw vs raw and of visor vs visor: the noise floor of the alternating comparison")
	flag.IntVar(&concurrentPairs, "concurrent", 0, "also measure this many pairs with both clients streaming at once (visor serve then runs --parallel 2)")
	flag.BoolVar(&goOpenAI, "goopenai", false, "also read each round's request through go-openai's own stream reader (the client visor used before): a reference measured in the same rounds")
	tpsBudget := flag.Duration("tps-budget", 0, "stop the tokens/s pairs (after an even number) before they take longer than this; 0: no limit")
	dry := flag.Bool("dry", false, "dry run without a GPU (no NVML, no ballast): checks the flow on a CPU machine")
	flag.StringVar(&dryModel, "model", "", "with -dry: the model (instead of the 17 GB stand-in)")
	flag.StringVar(&dryMMProj, "mmproj", "", "with -dry: the projector")
	flag.IntVar(&chatTurns, "chat", 0, "instead of the image turns and tokens/s: a screenshot chat of this many turns through visor's session service, with lookahead, each turn's time to first token against the engine's floor (issue 25)")
	flag.DurationVar(&chatTyping, "typing", 6*time.Second, "with -chat: how long the user types after attaching each screenshot")
	flag.IntVar(&chatAgain, "chat-again", 0, "with -chat: then this many turns of a second session")
	flag.BoolVar(&chatAttachSend, "attach-send", false, "with -chat: then the same chat without lookahead, each screenshot sent as soon as attached")
	flag.StringVar(&cutSteps, "cut", "", "with -chat: then a raw window chat on the stand-in at each of these --checkpoint-min-step values (comma-separated), and older images downscaled against stubbed")
	pool := flag.Bool("pool", false, "no run: pool the tokens/s pairs of the results.json files named as arguments (each run's warm-up start) and print the same checks over all of them")
	flag.Parse()
	if *pool {
		lines, err := pooled(flag.Args())
		if err != nil {
			fmt.Fprintln(os.Stderr, "seedcheck -pool:", err)
			os.Exit(1)
		}
		fmt.Println(strings.Join(lines, "\n"))
		return
	}
	ctx := context.Background()
	dryRun = *dry
	if *tpsOnly {
		*control = false
	}
	if err := run(ctx, *visor, *server, *work, *out, *freeSpec, *control, *tpsOnly, *reps, *tpsBudget); err != nil {
		fmt.Fprintln(os.Stderr, "seedcheck:", err)
		os.Exit(1)
	}
}

// -chat settings.
var (
	chatTurns      int
	chatTyping     time.Duration
	chatAgain      int
	chatAttachSend bool
	cutSteps       string
)

// Dry-run settings: a CPU machine has no NVML and cannot hold the 17 GB stand-in.
var (
	dryRun              bool
	dryModel, dryMMProj string
)

func say(f string, a ...any) { fmt.Printf("seedcheck: "+f+"\n", a...) }

func run(ctx context.Context, visor, server, work, out, freeSpec string, control, tpsOnly bool, reps int,
	tpsBudget time.Duration) error {
	target, err := vram.ParseSize(freeSpec)
	if err != nil {
		return err
	}
	for _, d := range []string{work, out} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	model, mmproj := filepath.Join(work, "qwen3.6-35b-a3b.gguf"), filepath.Join(work, "mmproj-qwen3.6.gguf")
	if dryRun {
		model, mmproj = dryModel, dryMMProj
	} else {
		kv, ts := modelgen.Qwen36()
		if err := gguf.WriteFile(model, kv, ts); err != nil {
			return err
		}
		kv, ts = modelgen.QwenVLProjector()
		if err := gguf.WriteFile(mmproj, kv, ts); err != nil {
			return err
		}
	}
	if chatTurns > 0 {
		tpsOnly = true // no fixed screenshots: the chat draws its own
	}
	shots := []*shot{{Name: "1440p-a", W: 2560, H: 1440, Seed: 1}, {Name: "1440p-b", W: 2560, H: 1440, Seed: 2},
		{Name: "1080p", W: 1920, H: 1080, Seed: 3}, {Name: "largest-2048", W: 2048, H: 2048, Seed: 4},
		{Name: "1440p-c", W: 2560, H: 1440, Seed: 5}}
	if tpsOnly {
		shots = nil
	}
	for _, s := range shots {
		if s.png, err = screenshot(s.W, s.H, s.Seed); err != nil {
			return err
		}
		s.path = filepath.Join(work, s.Name+".png") // $OUT brings back only a few files
		if err := os.WriteFile(s.path, s.png, 0o644); err != nil {
			return err
		}
	}
	mon, err := newMonitor()
	if err != nil {
		return err
	}
	defer mon.stop()
	rep := Report{GPU: mon.name, TotalMiB: mib(mon.total), TPSOnly: tpsOnly}
	rep.FreeStartMiB = mib(mon.free())
	say("%s: %.0f MiB free of %.0f; holding memory until %.0f MiB are left", mon.name, rep.FreeStartMiB, rep.TotalMiB, mib(target))
	left := target
	if !dryRun {
		if left, err = ballast(ctx, target); err != nil {
			return err
		}
	}
	rep.FreeBallast = mib(left)
	say("ballast holds %.0f MiB: %.0f MiB free", rep.FreeStartMiB-rep.FreeBallast, rep.FreeBallast)

	plan, table, err := visorPlan(ctx, visor, server, model, mmproj, filepath.Join(work, "state-plan"))
	if err != nil {
		return err
	}
	rep.PlanTable = table
	fmt.Println(table)
	if rec, ok := plan.Recommended(); ok {
		rep.PlanMode, rep.PlanCtx, rep.PlanTotalMiB, rep.PlanHeadroom = string(rec.Mode), rec.LaunchCtx(), mib(rec.Total), float64(rec.Headroom)/vram.MiB
		if !rec.Fits {
			// Launched at MaxCtx: re-plan that context to get the total the server was started with.
			o := plan.Options
			o.Ctx = rec.MaxCtx
			if r2, err := vram.Plan(plan.Model, plan.Projector, plan.GPU, o); err == nil {
				if p2, ok := r2.Mode(rec.Mode); ok {
					rep.PlanTotalMiB, rep.PlanHeadroom = mib(p2.Total), float64(p2.Headroom)/vram.MiB
				}
			}
		}
	}
	rep.PlanMarginMiB, rep.PlanImageTok = mib(plan.Options.Margin), plan.MaxImageTokens
	for _, k := range plan.KVOffers {
		rep.PlanKVOffers = append(rep.PlanKVOffers, k.Cache+" "+string(k.Mode))
	}
	if chatTurns > 0 {
		cr := runChat(ctx, visor, server, model, mmproj, filepath.Join(work, "state-chat"), out, chatTurns, chatTyping)
		rep.Chat = &cr
		rep.Checks = cr.Checks
		if cutSteps != "" {
			steps, err := parseSteps(cutSteps)
			if err != nil {
				return err
			}
			cut := runCut(ctx, server, model, mmproj, out, steps, 14)
			rep.Cut = &cut
		}
		for _, c := range rep.Checks {
			fmt.Println(c)
		}
		b, _ := json.MarshalIndent(rep, "", "  ")
		return os.WriteFile(filepath.Join(out, "results.json"), b, 0o644)
	}
	var modes []bool
	if control {
		modes = append(modes, false)
	}
	modes = append(modes, true)
	for i, warm := range modes {
		r := serveRun(ctx, mon, visor, server, model, mmproj, filepath.Join(work, fmt.Sprintf("state-%d", i)), out, i, warm, shots, reps, tpsBudget)
		rep.Runs = append(rep.Runs, r)
		b, _ := json.MarshalIndent(rep, "", "  ")
		_ = os.WriteFile(filepath.Join(out, "results.json"), b, 0o644)
	}
	rep.Checks = checks(rep)
	for _, c := range rep.Checks {
		fmt.Println(c)
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	return os.WriteFile(filepath.Join(out, "results.json"), b, 0o644)
}

func visorPlan(ctx context.Context, visor, server, model, mmproj, state string) (vram.Result, string, error) {
	env := append(os.Environ(), "VISOR_ENGINE_DIR="+state)
	cmd := exec.CommandContext(ctx, visor, "plan", "--model", model, "--mmproj", mmproj, "--server", server, "--json")
	cmd.Env = env
	b, err := cmd.Output()
	if err != nil {
		return vram.Result{}, "", fmt.Errorf("visor plan: %w: %s", err, stderrOf(err))
	}
	var res vram.Result
	if err := json.Unmarshal(b, &res); err != nil {
		return res, "", fmt.Errorf("visor plan --json: %w", err)
	}
	cmd = exec.CommandContext(ctx, visor, "plan", "--model", model, "--mmproj", mmproj, "--server", server)
	cmd.Env = env
	t, _ := cmd.CombinedOutput()
	return res, string(t), nil
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}

var servingRE = regexp.MustCompile(`serving \S+ at (http://\S+)`)

// What visor serve says of its background warm-up: in the address line while it runs, and on stderr at its end.
const (
	warmingUpNote = "warming up the GPU"
	warmedUpLine  = "engine warmed up in "
)

// serveRun starts `visor serve` (plan auto, warm-up on or off) on a fresh shader cache and measures it.
func serveRun(ctx context.Context, mon *monitor, visor, server, model, mmproj, state, out string, n int, warm bool,
	shots []*shot, reps int, tpsBudget time.Duration) (r Run) {
	r.Warmup = warm
	fail := func(err error) Run { r.Err = err.Error(); say("run %d: %v", n, err); return r }
	shader := filepath.Join(state, "shader-cache")
	_ = os.RemoveAll(state)
	if err := os.MkdirAll(shader, 0o755); err != nil {
		return fail(err)
	}
	args := []string{"serve", "--model", model, "--mmproj", mmproj, "--server", server, fmt.Sprintf("--warmup=%v", warm)}
	if concurrentPairs > 0 {
		args = append(args, "--parallel", "2")
	}
	if !warm {
		// The control run's log carries llama-server's buffer sizes and its exit breakdown (-lv 4), to compare
		// the plan's components with; the measured run keeps the default verbosity, so its tokens/s are the
		// user's.
		args = append(args, "--server-arg", "-lv", "--server-arg", "4")
	}
	cmd := exec.Command(visor, args...)
	// A fresh, private driver shader cache: every run pays the one-time pipeline compiles of a new install.
	cmd.Env = append(os.Environ(), "VISOR_ENGINE_DIR="+state, "__GL_SHADER_DISK_CACHE_PATH="+shader,
		"__GL_SHADER_DISK_CACHE=1", "__GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	r.FreeBeforeMiB = mib(mon.free())
	t0 := time.Now()
	mark := mon.mark()
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	defer func() {
		stopServe(cmd)
		copyFile(filepath.Join(state, "logs", "llama-server.log"), filepath.Join(out, fmt.Sprintf("llama-server-%d.log", n)))
		r.Placement = grepFile(filepath.Join(state, "logs", "llama-server.log"),
			"offloaded|using device|CLIP using|model buffer size|compute buffer size|KV buffer size|warmup with image|worst-case")
		time.Sleep(2 * time.Second)
	}()
	var mu sync.Mutex
	warmed := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		told := false
		for sc.Scan() {
			mu.Lock()
			r.ServeLog = append(r.ServeLog, sc.Text())
			mu.Unlock()
			say("run %d serve: %s", n, sc.Text())
			if !told && strings.Contains(sc.Text(), warmedUpLine) {
				told = true
				close(warmed)
			}
		}
	}()
	warming := false
	url, err := waitServing(stdout, func(line string) {
		say("run %d serve: %s", n, line)
		warming = warming || strings.Contains(line, warmingUpNote)
	})
	if err != nil {
		return fail(err)
	}
	r.StartSeconds = time.Since(t0).Seconds()
	if warming {
		// serve warms up in the background and a request sent meanwhile waits for it (80 s for the first 1440p
		// screenshot): the image turns measure what the warm-up left, so they start once it has ended.
		select {
		case <-warmed:
			r.WarmupSeconds = time.Since(t0).Seconds() - r.StartSeconds
			say("run %d: warm-up ended %.1f s after serving", n, r.WarmupSeconds)
		case <-time.After(5 * time.Minute):
			return fail(fmt.Errorf("visor serve said it warms up, but told no end within 5 minutes"))
		}
	}
	r.FreeReadyMiB = mib(mon.free())
	mu.Lock()
	for _, l := range r.ServeLog {
		if i := strings.Index(l, "engine started in mode "); i >= 0 {
			r.Mode = l[i+len("engine started in mode "):]
		}
	}
	mu.Unlock()
	c := engine.NewClient(url, "")
	for _, s := range shots {
		m := mon.mark()
		t := imageTurn(ctx, c, s)
		t.MinFreeMiB = mib(mon.minSince(m))
		say("run %d image %s: ttft %.2f s, prompt %d tokens in %.0f ms, min free %.0f MiB %s", n, s.Name, t.TTFTSeconds,
			t.PromptN, t.PromptMS, t.MinFreeMiB, t.Err)
		r.Turns = append(r.Turns, t)
	}
	if warm {
		t0 := time.Now()
		for i := range reps {
			// Stop after an even number of pairs, so both orders count equally, when another two would overrun.
			if i%2 == 0 && i > 0 && tpsBudget > 0 && time.Since(t0)*time.Duration(i+2)/time.Duration(i) > tpsBudget {
				say("run %d tokens/s: stopping after %d pairs (budget %s)", n, i, tpsBudget)
				break
			}
			// Rounds rotate which client goes first, so none gets a systematic position.
			var v, raw, goa float64
			var vt, rt engine.Timings
			var err, rerr, gerr error
			steps := []func(){
				func() { v, vt, err = streamVisor(ctx, c) },
				func() { raw, rt, rerr = streamRaw(ctx, url) },
			}
			if goOpenAI {
				steps = append(steps, func() { goa, gerr = streamGoOpenAI(ctx, url) })
			}
			for j := range steps {
				steps[(i+j)%len(steps)]()
			}
			if err = errors.Join(err, rerr, gerr); err != nil {
				// Keep the pairs measured so far: the run is a FAIL either way, and they still show the ratio.
				r.Err = fmt.Sprintf("tokens/s pair %d: %v", i, err)
				say("run %d: %s", n, r.Err)
				break
			}
			if goOpenAI {
				r.GoOpenAITPS = append(r.GoOpenAITPS, goa)
				say("run %d tokens/s #%d: go-openai's reader %.1f: ratio to raw %.3f", n, i, goa, goa/raw)
			}
			r.VisorTPS, r.RawTPS = append(r.VisorTPS, v), append(r.RawTPS, raw)
			r.ServerTPS, r.RawServerTPS = append(r.ServerTPS, vt.PredictedPerSecond), append(r.RawServerTPS, rt.PredictedPerSecond)
			r.VisorTimings, r.RawTimings = append(r.VisorTimings, vt), append(r.RawTimings, rt)
			say("run %d tokens/s #%d: visor %.1f (server %.1f, %d tokens in %.0f ms, drafts %d/%d), raw %.1f (server %.1f, %d tokens in %.0f ms, drafts %d/%d): ratio %.3f",
				n, i, v, vt.PredictedPerSecond, vt.PredictedN, vt.PredictedMS, vt.DraftNAccepted, vt.DraftN,
				raw, rt.PredictedPerSecond, rt.PredictedN, rt.PredictedMS, rt.DraftNAccepted, rt.DraftN, v/raw)
		}
	}
	if warm && r.Err == "" && controlPairs > 0 {
		visor := func() (float64, error) { v, _, err := streamVisor(ctx, c); return v, err }
		raw := func() (float64, error) { v, _, err := streamRaw(ctx, url); return v, err }
		for _, ctl := range []struct {
			name string
			a, b func() (float64, error)
		}{{"raw vs raw", raw, raw}, {"visor vs visor", visor, visor}, {"visor vs raw", visor, raw}} {
			var pr []float64
			for i := range controlPairs {
				first, second := ctl.a, ctl.b
				if i%2 == 1 {
					first, second = second, first
				}
				x, err := first()
				y, err2 := second()
				if err = errors.Join(err, err2); err != nil {
					r.Err = fmt.Sprintf("%s pair %d: %v", ctl.name, i, err)
					break
				}
				if i%2 == 1 {
					x, y = y, x
				}
				pr = append(pr, x/y)
			}
			lo, hi := minMax(pr)
			r.Controls = append(r.Controls, fmt.Sprintf("%s: median pair ratio %.3f of %d alternating pairs (%.3f–%.3f)",
				ctl.name, median(pr), len(pr), lo, hi))
			say("run %d control %s", n, r.Controls[len(r.Controls)-1])
		}
	}
	if warm && r.Err == "" {
		for i := range concurrentPairs {
			var v, raw float64
			var err, rerr error
			var wg sync.WaitGroup
			start := make(chan struct{})
			wg.Add(2)
			go func() { defer wg.Done(); <-start; v, _, err = streamVisor(ctx, c) }()
			go func() { defer wg.Done(); <-start; raw, _, rerr = streamRaw(ctx, url) }()
			close(start)
			wg.Wait()
			if err = errors.Join(err, rerr); err != nil {
				r.Err = fmt.Sprintf("concurrent tokens/s pair %d: %v", i, err)
				say("run %d: %s", n, r.Err)
				break
			}
			r.ConcVisorTPS, r.ConcRawTPS = append(r.ConcVisorTPS, v), append(r.ConcRawTPS, raw)
			say("run %d concurrent tokens/s #%d: visor %.1f, raw %.1f: ratio %.3f", n, i, v, raw, v/raw)
		}
	}
	r.MinFreeMiB = mib(mon.minSince(mark))
	r.PeakUseMiB = r.FreeBeforeMiB - r.MinFreeMiB
	return r
}

// concurrentChecks holds the concurrent pairs to the same 0.99: there the server's noise is shared, so what is
// left is the clients'.
func concurrentChecks(r *Run) []string {
	var out []string
	for _, c := range r.Controls {
		out = append(out, "info  control "+c)
	}
	n := min(len(r.ConcVisorTPS), len(r.ConcRawTPS))
	if n == 0 {
		return out
	}
	var pr []float64
	for i := range n {
		if r.ConcRawTPS[i] > 0 {
			pr = append(pr, r.ConcVisorTPS[i]/r.ConcRawTPS[i])
		}
	}
	lo, hi := minMax(pr)
	v, raw := median(r.ConcVisorTPS[:n]), median(r.ConcRawTPS[:n])
	verdict := "FAIL"
	if len(pr) == n && median(pr) >= 0.99 && v >= 0.99*raw {
		verdict = "PASS"
	}
	return append(out, fmt.Sprintf("%s  concurrent pairs (one two-slot server, both clients at once): visor %.1f vs raw %.1f tokens/s, "+
		"ratio of medians %.3f, median pair ratio %.3f of %d (pairs %.3f–%.3f; ≥ 0.99)", verdict, v, raw, v/raw, median(pr), n, lo, hi))
}

const question = "Describe this screenshot in one sentence."

func imageTurn(ctx context.Context, c *engine.Client, s *shot) Turn {
	t := Turn{Image: s.Name}
	req := engine.Request{ChatCompletionRequest: openai.ChatCompletionRequest{MaxTokens: 8,
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, MultiContent: []openai.ChatMessagePart{
			engine.ImagePart("image/png", s.png), {Type: openai.ChatMessagePartTypeText, Text: question}}}}}}
	start := time.Now()
	st, err := c.ChatStream(ctx, req)
	if err != nil {
		t.Err = err.Error()
		return t
	}
	defer st.Close()
	for {
		ch, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Err = err.Error()
			return t
		}
		for _, cc := range ch.Choices {
			if t.TTFTSeconds == 0 && (cc.Delta.Content != "" || cc.Delta.ReasoningContent != "") {
				t.TTFTSeconds = time.Since(start).Seconds()
			}
		}
		if ch.Timings != nil {
			t.PromptN, t.PromptMS = ch.Timings.PromptN, ch.Timings.PromptMS
		}
	}
	return t
}

const tpsPrompt = "Write a long story about a lighthouse keeper."

// tpsSeed is every tokens/s request's seed. With temperature 0 the server decodes greedily, so every request
// generates the same tokens and accepts the same MTP drafts: the two clients are compared on equal work.
const tpsSeed = 7

// tpsTokens is each tokens/s request's length (a variable so the CPU test can ask for fewer).
var tpsTokens = 512

// concurrentPairs is -concurrent; controlPairs is -aa.
var concurrentPairs, controlPairs int

// goOpenAI is -goopenai.
var goOpenAI bool

// streamVisor streams through visor's engine client and returns tokens/s after the first token, and the server's
// own timings.
func streamVisor(ctx context.Context, c *engine.Client) (float64, engine.Timings, error) {
	noCache, seed := false, tpsSeed
	// go-openai leaves temperature 0 out (omitempty), so it goes through Extra.
	req := engine.Request{ChatCompletionRequest: openai.ChatCompletionRequest{MaxTokens: tpsTokens, Seed: &seed,
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: tpsPrompt}}},
		Extra: engine.Extra{CachePrompt: &noCache, Fields: map[string]any{"ignore_eos": true, "temperature": 0}}}
	st, err := c.ChatStream(ctx, req)
	if err != nil {
		return 0, engine.Timings{}, err
	}
	defer st.Close()
	var first time.Time
	var tim *engine.Timings
	for {
		ch, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, engine.Timings{}, err
		}
		for _, cc := range ch.Choices {
			if first.IsZero() && (cc.Delta.Content != "" || cc.Delta.ReasoningContent != "") {
				first = time.Now()
			}
		}
		if ch.Timings != nil {
			tim = ch.Timings
		}
	}
	el := time.Since(first)
	if tim == nil || first.IsZero() {
		return 0, engine.Timings{}, fmt.Errorf("visor stream: no timings or no content")
	}
	return float64(tim.PredictedN-1) / el.Seconds(), *tim, nil
}

// streamGoOpenAI reads the same request through go-openai's stream reader, as visor's client did before it read
// the stream itself, and returns tokens/s after the first token.
func streamGoOpenAI(ctx context.Context, url string) (float64, error) {
	cfg := openai.DefaultConfig("")
	cfg.BaseURL = url + "/v1"
	cfg.HTTPClient = rawBodyDoer{}
	st, err := openai.NewClientWithConfig(cfg).CreateChatCompletionStream(ctx, goOpenAIRequest())
	if err != nil {
		return 0, err
	}
	defer st.Close()
	var first time.Time
	var raw []byte
	for {
		line, err := st.RecvRaw()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, err
		}
		var ch openai.ChatCompletionStreamResponse
		if err := json.Unmarshal(line, &ch); err != nil {
			return 0, err
		}
		for _, cc := range ch.Choices {
			if first.IsZero() && (cc.Delta.Content != "" || cc.Delta.ReasoningContent != "") {
				first = time.Now()
			}
		}
		if bytes.Contains(line, []byte(`"timings"`)) {
			raw = line
		}
	}
	el := time.Since(first)
	var tim struct {
		Timings engine.Timings `json:"timings"`
	}
	if err := json.Unmarshal(raw, &tim); err != nil || first.IsZero() || tim.Timings.PredictedN == 0 {
		return 0, fmt.Errorf("go-openai stream: no content or no timings (%v)", err)
	}
	return float64(tim.Timings.PredictedN-1) / el.Seconds(), nil
}

// goOpenAIRequest is rawBody as a go-openai request. go-openai cannot send llama.cpp's fields, so rawBodyDoer
// sends rawBody itself: the three clients' requests are the same bytes.
func goOpenAIRequest() openai.ChatCompletionRequest {
	seed := tpsSeed
	return openai.ChatCompletionRequest{MaxTokens: tpsTokens, Seed: &seed,
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: tpsPrompt}}}
}

type rawBodyDoer struct{}

func (rawBodyDoer) Do(req *http.Request) (*http.Response, error) {
	b := rawBody()
	req.Body, req.ContentLength = io.NopCloser(strings.NewReader(b)), int64(len(b))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(b)), nil }
	req.Header["X-Idempotency-Key"] = nil
	return http.DefaultClient.Do(req)
}

// rawBody is the request streamVisor sends, as go-openai and visor's client write it (TestClientsSendTheSameRequest
// holds the two equal).
func rawBody() string {
	return fmt.Sprintf(`{"model":"","messages":[{"role":"user","content":%q}],"max_tokens":%d,"seed":%d,"stream":true,"cache_prompt":false,"ignore_eos":true,"temperature":0}`,
		tpsPrompt, tpsTokens, tpsSeed)
}

// streamRaw reads the same request's SSE stream with net/http and nothing else; it returns tokens/s after the
// first token and the server's own timings.
func streamRaw(ctx context.Context, url string) (float64, engine.Timings, error) {
	var tim struct {
		Timings engine.Timings `json:"timings"`
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(rawBody()))
	if err != nil {
		return 0, tim.Timings, err
	}
	req.Header.Set("Content-Type", "application/json")
	// As in visor's client: a request written onto a keep-alive connection the server just closed is retried on
	// a fresh one (the header is not sent with a nil value).
	req.Header["X-Idempotency-Key"] = nil
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, tim.Timings, err
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	var first time.Time
	var last []byte
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && bytes.HasPrefix(line, []byte("data: ")) {
			if first.IsZero() && bytes.Contains(line, []byte(`"content":"`)) {
				first = time.Now()
			}
			if bytes.Contains(line, []byte(`"timings":`)) {
				last = line
			}
		}
		if err != nil {
			break
		}
	}
	el := time.Since(first)
	// The timings chunk is decoded after the clock stopped, so the raw read stays a plain read.
	if last != nil {
		if err := json.Unmarshal(bytes.TrimPrefix(bytes.TrimSpace(last), []byte("data: ")), &tim); err != nil {
			return 0, tim.Timings, fmt.Errorf("raw stream: timings chunk: %w", err)
		}
	}
	if first.IsZero() || tim.Timings.PredictedN == 0 {
		return 0, tim.Timings, fmt.Errorf("raw stream: no content or no timings")
	}
	return float64(tim.Timings.PredictedN-1) / el.Seconds(), tim.Timings, nil
}

// verdict is a check's line: PASS or FAIL, then what was checked.
func verdict(ok bool, f string, a ...any) string {
	v := "FAIL"
	if ok {
		v = "PASS"
	}
	return fmt.Sprintf("%s  %s", v, fmt.Sprintf(f, a...))
}

func checks(rep Report) []string {
	var out []string
	add := func(ok bool, f string, a ...any) { out = append(out, verdict(ok, f, a...)) }
	var main, ctl *Run
	for i := range rep.Runs {
		r := &rep.Runs[i]
		if r.Warmup {
			main = r
		} else {
			ctl = r
		}
		// Every failed turn and run is a FAIL of its own, the control run's too: a crash there is a crash a
		// user without warm-up meets.
		for _, t := range r.Turns {
			if t.Err != "" {
				add(false, "run %d (%s) image %s failed: %s", i, runKind(r), t.Image, t.Err)
			}
		}
		if r.Err != "" {
			add(false, "run %d (%s) did not complete: %s", i, runKind(r), r.Err)
		}
	}
	if main == nil {
		add(false, "no warm-up run")
		return out
	}
	if rep.TPSOnly {
		out = append(out, "info  tokens/s only (-tps-only): no image turns, so no plan, margin, OOM or first-image checks")
		return append(append(out, tpsChecks(main)...), concurrentChecks(main)...)
	}
	if main.Err != "" || len(main.Turns) < 4 {
		add(false, "the warm-up run did not complete: %d of 4 or more image turns, mode %q, error %q", len(main.Turns),
			main.Mode, main.Err)
		return out
	}
	errPct := 100 * (rep.PlanTotalMiB/main.PeakUseMiB - 1)
	add(errPct >= -5 && errPct <= 5, "plan %.0f MiB vs NVML peak use %.0f MiB (largest screenshot included): %+.1f%% (within 5%%)",
		rep.PlanTotalMiB, main.PeakUseMiB, errPct)
	min1440 := 1e18
	oom := false
	for _, t := range main.Turns {
		if strings.HasPrefix(t.Image, "1440p") && t.MinFreeMiB < min1440 {
			min1440 = t.MinFreeMiB
		}
		oom = oom || t.Err != ""
	}
	add(min1440 >= 0.9*rep.PlanMarginMiB, "min free during 1440p turns %.0f MiB vs planned margin %.0f MiB (≥ 90%%: %.0f); plan expected %.0f (margin + headroom)",
		min1440, rep.PlanMarginMiB, 0.9*rep.PlanMarginMiB, rep.PlanMarginMiB+rep.PlanHeadroom)
	add(!oom && main.Err == "", "no OOM or failed turn in the warm-up run")
	first, later := main.Turns[0].TTFTSeconds, main.Turns[1].TTFTSeconds
	add(first > 0 && later > 0 && first <= 2*later, "first image after start (and %.0f s of warm-up) TTFT %.2f s vs later image %.2f s (≤ 2×: ratio %.2f)",
		main.WarmupSeconds, first, later, first/later)
	if ctl != nil && len(ctl.Turns) > 1 {
		out = append(out, fmt.Sprintf("info  without warm-up: first image TTFT %.2f s vs later %.2f s (ratio %.2f)",
			ctl.Turns[0].TTFTSeconds, ctl.Turns[1].TTFTSeconds, ctl.Turns[0].TTFTSeconds/max(ctl.Turns[1].TTFTSeconds, 1e-9)))
	}
	return append(append(out, tpsChecks(main)...), concurrentChecks(main)...)
}

// tpsChecks compares visor's streamed tokens/s with the raw read's two ways, both held to 0.99: the ratio of the
// medians, and the median of the per-pair ratios (each pair ran back to back on the same server, so it also
// cancels slow drift). The server's own per-request rates and accepted drafts show how much noise is left.
func tpsChecks(r *Run) []string {
	var out []string
	add := func(ok bool, f string, a ...any) { out = append(out, verdict(ok, f, a...)) }
	n := min(len(r.VisorTPS), len(r.RawTPS))
	if n == 0 {
		add(false, "no tokens/s pairs measured")
		return out
	}
	v, raw := median(r.VisorTPS[:n]), median(r.RawTPS[:n])
	add(v >= 0.99*raw, "visor streamed %.1f tokens/s vs raw HTTP %.1f, medians of %d alternating pairs (≥ 0.99×: ratio of medians %.3f)",
		v, raw, n, v/raw)
	var pr []float64
	for i := range n {
		if r.RawTPS[i] > 0 {
			pr = append(pr, r.VisorTPS[i]/r.RawTPS[i])
		}
	}
	lo, hi := minMax(pr)
	add(len(pr) == n && median(pr) >= 0.99, "visor / raw tokens/s per pair: median %.3f of %d pairs (≥ 0.99; pairs %.3f–%.3f)",
		median(pr), len(pr), lo, hi)
	gm, ciLo, ciHi := geoMeanCI(pr)
	out = append(out, fmt.Sprintf("info  visor / raw per pair: geometric mean %.3f, 95%% interval %.3f–%.3f", gm, ciLo, ciHi))
	if ciHi-ciLo > 0.02 {
		// The server's own per-request noise, not the clients, sets this width; one run's verdict on a 1% line
		// is then mostly luck.
		out = append(out, fmt.Sprintf("info  the interval is ±%.1f%%, wider than the 1%% line: pool this run with others (seedcheck -pool F...) before reading the verdicts above",
			100*(ciHi-ciLo)/2))
	}
	if m := min(n, len(r.GoOpenAITPS)); m > 0 {
		var gr []float64
		for i := range m {
			if r.RawTPS[i] > 0 {
				gr = append(gr, r.GoOpenAITPS[i]/r.RawTPS[i])
			}
		}
		gm, ciLo, ciHi := geoMeanCI(gr)
		out = append(out, fmt.Sprintf("info  go-openai's reader (visor's client before) / raw per round: median %.3f, geometric mean %.3f, 95%% interval %.3f–%.3f, of %d",
			median(gr), gm, ciLo, ciHi, len(gr)))
	}
	// The server's variation: its own rate and accepted drafts per request, and each client's rate over it.
	var sv, ov, or []float64
	drafts := map[[2]int]int{}
	for i := range n {
		for _, t := range []engine.Timings{at(r.VisorTimings, i), at(r.RawTimings, i)} {
			sv = append(sv, t.PredictedPerSecond)
			drafts[[2]int{t.DraftNAccepted, t.DraftN}]++
		}
		if i < len(r.ServerTPS) && i < len(r.RawServerTPS) && r.ServerTPS[i] > 0 && r.RawServerTPS[i] > 0 {
			ov, or = append(ov, r.VisorTPS[i]/r.ServerTPS[i]), append(or, r.RawTPS[i]/r.RawServerTPS[i])
		}
	}
	lo, hi = minMax(sv)
	var ds []string
	for k, c := range drafts {
		ds = append(ds, fmt.Sprintf("%d/%d ×%d", k[0], k[1], c))
	}
	sort.Strings(ds)
	out = append(out, fmt.Sprintf("info  server's own rate over the %d requests: %.1f–%.1f tokens/s (spread %.1f%%); drafts accepted: %s",
		len(sv), lo, hi, 100*(hi/max(lo, 1e-9)-1), strings.Join(ds, ", ")))
	out = append(out, fmt.Sprintf("info  client rate / server rate: visor %.3f, raw %.3f", median(ov), median(or)))
	return out
}

// pooled reads earlier runs' results.json files and holds all their tokens/s pairs together to the checks one run
// gets: the server's per-request noise (a 7% standard deviation on the H200) makes one run's 1% line a coin toss.
func pooled(files []string) ([]string, error) {
	if len(files) == 0 {
		return nil, fmt.Errorf("name the results.json files to pool")
	}
	var all Run
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var rep Report
		if err := json.Unmarshal(b, &rep); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		found := false
		for _, r := range rep.Runs {
			if !r.Warmup {
				continue
			}
			found = true
			n := min(len(r.VisorTPS), len(r.RawTPS))
			all.VisorTPS, all.RawTPS = append(all.VisorTPS, r.VisorTPS[:n]...), append(all.RawTPS, r.RawTPS[:n]...)
			all.ServerTPS, all.RawServerTPS = append(all.ServerTPS, r.ServerTPS...), append(all.RawServerTPS, r.RawServerTPS...)
			all.VisorTimings, all.RawTimings = append(all.VisorTimings, r.VisorTimings...), append(all.RawTimings, r.RawTimings...)
			all.GoOpenAITPS = append(all.GoOpenAITPS, r.GoOpenAITPS...)
		}
		if !found {
			return nil, fmt.Errorf("%s: no warm-up run", f)
		}
	}
	if len(all.GoOpenAITPS) != len(all.VisorTPS) {
		all.GoOpenAITPS = nil // measured in some runs only: its rounds no longer line up with the pairs
	}
	return append([]string{fmt.Sprintf("info  pooled %d runs", len(files))}, tpsChecks(&all)...), nil
}

// geoMeanCI is the geometric mean of ratios and its 95% interval (normal approximation on the logs).
func geoMeanCI(rs []float64) (float64, float64, float64) {
	if len(rs) == 0 {
		return 0, 0, 0
	}
	var sum, sq float64
	for _, r := range rs {
		sum += math.Log(r)
	}
	mean := sum / float64(len(rs))
	for _, r := range rs {
		sq += (math.Log(r) - mean) * (math.Log(r) - mean)
	}
	se := 0.0
	if len(rs) > 1 {
		se = math.Sqrt(sq/float64(len(rs)-1)) / math.Sqrt(float64(len(rs)))
	}
	return math.Exp(mean), math.Exp(mean - 1.96*se), math.Exp(mean + 1.96*se)
}

func at(ts []engine.Timings, i int) engine.Timings {
	if i < len(ts) {
		return ts[i]
	}
	return engine.Timings{}
}

func minMax(xs []float64) (float64, float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}

func runKind(r *Run) string {
	if r.Warmup {
		return "with warm-up"
	}
	return "without warm-up"
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

func mib(b uint64) float64 { return float64(b) / vram.MiB }

func copyFile(from, to string) {
	b, err := os.ReadFile(from)
	if err == nil {
		_ = os.WriteFile(to, b, 0o644)
	}
}

func grepFile(path, pattern string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	re := regexp.MustCompile(pattern)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if re.MatchString(l) {
			out = append(out, l)
		}
	}
	return out
}

// monitor samples device 0's free memory (NVML v2) every 25 ms, so the minimum during a turn is seen.
type monitor struct {
	name  string
	total uint64
	dev   nvml.Device
	lib   nvml.Interface
	mu    sync.Mutex
	seq   []sample
	done  chan struct{}
}

type sample struct {
	t    time.Time
	free uint64
}

func newMonitor() (*monitor, error) {
	if dryRun {
		m := &monitor{name: "dry run (no GPU)", done: make(chan struct{})}
		return m, nil
	}
	lib := nvml.New()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML: %s", lib.ErrorString(ret))
	}
	dev, ret := lib.DeviceGetHandleByIndex(0)
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML device 0: %s", lib.ErrorString(ret))
	}
	m := &monitor{dev: dev, lib: lib, done: make(chan struct{})}
	m.name, _ = dev.GetName()
	if mi, ret := dev.GetMemoryInfo_v2(); ret == nvml.SUCCESS {
		m.total = mi.Total
	}
	go func() {
		tk := time.NewTicker(25 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-m.done:
				return
			case <-tk.C:
				f := m.read()
				m.mu.Lock()
				m.seq = append(m.seq, sample{time.Now(), f})
				m.mu.Unlock()
			}
		}
	}()
	return m, nil
}

func (m *monitor) read() uint64 {
	if m.lib == nil {
		return 0
	}
	if mi, ret := m.dev.GetMemoryInfo_v2(); ret == nvml.SUCCESS {
		return mi.Free
	}
	mi, _ := m.dev.GetMemoryInfo()
	return mi.Free
}

func (m *monitor) free() uint64 { return m.read() }

func (m *monitor) mark() time.Time { return time.Now() }

func (m *monitor) minSince(t time.Time) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	lo := m.read()
	for _, s := range m.seq {
		if !s.t.Before(t) && s.free < lo {
			lo = s.free
		}
	}
	return lo
}

func (m *monitor) stop() {
	close(m.done)
	if m.lib != nil {
		m.lib.Shutdown()
	}
}

// stopServe interrupts visor serve's process group as Ctrl-C would, so that it stops its engine itself, and
// kills the group if it has not exited 30 s later.
func stopServe(cmd *exec.Cmd) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// waitServing reads visor serve's output, each line to onLine, until it says where it serves; the reading goes
// on after that, so the server never blocks on a full pipe.
func waitServing(stdout io.Reader, onLine func(string)) (string, error) {
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			onLine(sc.Text())
			if m := servingRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case urlc <- m[1]:
				default: // told once
				}
			}
		}
		close(urlc)
	}()
	select {
	case u, ok := <-urlc:
		if !ok {
			return "", fmt.Errorf("visor serve exited before serving")
		}
		return u, nil
	case <-time.After(8 * time.Minute):
		return "", fmt.Errorf("visor serve not serving after 8 minutes")
	}
}
