package launch

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/engine/vram"
)

// Options are how a Launcher reports and what it may reuse.
type Options struct {
	// Out hears the load's progress, the plan's reports and where the server runs; nil discards them.
	Out    io.Writer
	Logger *slog.Logger
	// Reuse lets the first launch use a running engine advertised for the same spec (`visor serve`, a gateway).
	Reuse bool
	// OnStart hears what each launch started (and, after a warm-up, the same with its measurements), for the
	// engine's cost model.
	OnStart func(Started)
	// Advertise writes the served-engine file for every server started, so other visor commands reuse it; the
	// file is removed by Close.
	Advertise bool
}

// Launcher starts the engine a Spec describes for a conductor: an endpoint is used as it is, a running engine
// for the same spec is reused, a model is started by the plan, and a restart after a crash comes back at the same
// address. Its state (the last server) belongs to the conductor's goroutine, which calls Launch one at a time.
type Launcher struct {
	spec Spec
	o    Options

	last *llamacpp.Server

	mu              sync.Mutex
	started         Started
	advertised, url string
}

// New is the Launcher for spec.
func New(spec Spec, o Options) *Launcher {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Launcher{spec: spec, o: o}
}

// Configure gives a conductor this launcher: its Launch, its warm-up and the endpoint's key.
func (l *Launcher) Configure(c *conductor.Config) {
	c.Launch = l.Launch
	c.APIKey = l.spec.APIKey
	if l.spec.Warmup && l.spec.Endpoint == "" {
		c.Warmup = l.Warmup
	}
}

// Close removes the served-engine file, if this launcher wrote it and it still names its server.
func (l *Launcher) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.advertised != "" && servedURL(l.advertised) == l.url {
		_ = os.Remove(l.advertised)
	}
	l.advertised = ""
}

// Launch implements conductor.Launch.
func (l *Launcher) Launch(ctx context.Context, mode string) (conductor.Process, error) {
	s := l.spec
	act := decideLaunch(s.Endpoint != "", l.last != nil, mode, l.o.Reuse)
	if act == actReuse {
		if st, ok := FindServed(ctx, s.Key()); ok {
			fmt.Fprintf(l.o.Out, "reusing the engine `visor serve` (pid %d) runs at %s\n", st.VisorPID, st.URL)
			l.record(Started{Spec: s, Remote: "visor serve " + filepath.Base(s.Model)})
			return conductor.Remote{Addr: st.URL}, nil
		}
		act = actStart
	}
	switch act {
	case actRemote:
		l.record(Started{Spec: s, Remote: engine.RedactURL(s.Endpoint)})
		return conductor.Remote{Addr: s.Endpoint}, nil
	case actRestart:
		srv, err := l.last.Restart(ctx)
		if err != nil {
			return nil, err
		}
		l.last = srv
		st := l.lastStarted()
		st.Args, st.Warmup = srv.Args(), llamacpp.WarmupStats{}
		l.record(st)
		l.advertise(ctx, srv)
		return srv, nil
	}
	// A relaunch into another mode: the conductor stopped the last server; start by the plan.
	l.last = nil
	logDir := filepath.Join(llamacpp.InstallDir(), "logs")
	_ = os.MkdirAll(logDir, 0o755)
	// The load shows the server's own log lines as its progress, from the first second on.
	prog := startProgress(l.o.Out, "loading "+filepath.Base(s.Model))
	cfg := llamacpp.Config{Binary: s.Server, ExtraArgs: s.ExtraArgs, Env: s.Env, Port: s.Port, LogFile: filepath.Join(logDir, "llama-server.log"),
		Logger: l.o.Logger,
		OnLog: func(line string) {
			if phase, ok := serverPhase(line); ok {
				prog.Phase(phase)
			}
		}}
	srv, st, err := l.start(ctx, mode, cfg)
	if err == nil && s.Projector != "" {
		if err = llamacpp.CheckTokenizer(ctx, srv.Client(), filepath.Base(s.Model)); err != nil {
			_ = srv.Stop(context.Background())
		}
	}
	if err != nil {
		prog.Done("failed")
		return nil, fmt.Errorf("start llama-server for --model %s: %w", s.Model, err)
	}
	prog.Done("ready")
	l.last = srv
	l.record(st)
	l.advertise(ctx, srv)
	return srv, nil
}

func (l *Launcher) advertise(ctx context.Context, srv *llamacpp.Server) {
	if !l.o.Advertise {
		return
	}
	// Another process's live engine for the same spec stays the advertised one.
	if st, taken := FindServed(ctx, l.spec.Key()); taken && st.URL != srv.URL() {
		return
	}
	p, err := Advertise(l.spec, srv)
	if err != nil {
		l.o.Logger.Warn("the engine runs, but other visor commands will not find it to reuse", "url", srv.URL(), "err", err)
	}
	l.mu.Lock()
	l.advertised, l.url = p, srv.URL()
	l.mu.Unlock()
}

// start launches llama-server: by the VRAM plan when the plan finds a GPU (trying the next mode on
// out-of-memory), otherwise with the spec as given; it says where the server runs.
func (l *Launcher) start(ctx context.Context, mode string, cfg llamacpp.Config) (*llamacpp.Server, Started, error) {
	s := l.spec
	st := Started{Spec: s}
	var res vram.Result
	var planErr error
	if s.Plan == "auto" {
		o := vram.FileOptions{Model: s.Model, MMProj: s.Projector, GPU: s.GPU,
			Options: vram.Options{Ctx: s.Ctx, Parallel: s.Slots, CacheK: s.KVType, CacheV: s.KVType, NoFlashAttn: s.FlashAttn == "off"}}
		o.SwapSupported = SwapSupported(ctx, s.Server)
		o.DeviceNames = DeviceNames(ctx, s.Server, s.GPU, vram.NVML{})
		res, planErr = vram.PlanFiles(ctx, o)
	}
	planned, err := decidePlan(s.Plan, planErr)
	if err != nil {
		return nil, st, err
	}
	if !planned {
		if planErr != nil {
			l.o.Logger.Info("no GPU to plan for; starting with the given flags", "err", planErr)
		}
		srv, err := llamacpp.Start(ctx, s.plainConfig(cfg))
		if err == nil {
			st.Args = srv.Args()
		}
		return srv, st, err
	}
	res.Prefer = vram.Mode(mode)
	srv, used, placed, err := StartChecked(ctx, cfg, res, Reporter(l.o.Out))
	if err != nil {
		return nil, st, err
	}
	fmt.Fprintf(l.o.Out, "engine started in mode %s on %s\n", used.Name, res.GPU.Name)
	reportPlacement(l.o.Out, placed)
	st.Mode, st.Args = string(used.Name), srv.Args()
	if want := WantFor(res, used.Args); want.GPU != "" {
		st.GPU = res.GPU.Name
		// The encoder runs on the GPU unless the plan's mode keeps it off (a swapping mode brings it there per
		// run of images) or llama.cpp put it on the CPU anyway.
		st.ProjectorOnGPU = s.Projector != "" && !slices.Contains(st.Args, "--no-mmproj-offload") &&
			!srv.Placement().ProjectorOnCPU()
	}
	return srv, st, nil
}

// Warmup is the conductor's warm-up: after a GPU start the first image and long prompt compile kernels (56 s
// once on Vulkan), paid now rather than on the user's first screenshot. Other starts need none
// (conductor.ErrNoWarmup).
func (l *Launcher) Warmup(ctx context.Context, r conductor.Ready) error {
	st := l.lastStarted()
	if !needsWarmup(st) {
		return conductor.ErrNoWarmup
	}
	p, err := llamacpp.ReadProps(ctx, r.Client)
	if err != nil {
		return fmt.Errorf("engine warm-up: %w", err)
	}
	warm, err := llamacpp.Warmup(ctx, r.Client, p, func(m string) { l.o.Logger.Info(m) })
	if err != nil {
		return fmt.Errorf("engine warm-up (skip it with --warmup=false): %w", err)
	}
	st.Warmup = warm
	l.record(st)
	return nil
}

func (l *Launcher) record(st Started) {
	l.mu.Lock()
	l.started = st
	l.mu.Unlock()
	if l.o.OnStart != nil {
		l.o.OnStart(st)
	}
}

func (l *Launcher) lastStarted() Started {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.started
}

// ServerFlags reads what the llama-server binary accepts, through the --help cache on disk.
func ServerFlags(ctx context.Context, server string) (llamacpp.Flags, error) {
	bin, err := llamacpp.Find(server)
	if err != nil {
		return llamacpp.Flags{}, err
	}
	return (&llamacpp.HelpCache{Dir: filepath.Join(llamacpp.InstallDir(), "caps")}).Flags(ctx, bin)
}

// SwapSupported says whether the engine has the fork's --mmproj-gpu-swap, which the plan's swap mode needs; an
// engine that cannot be found or asked counts as not having it.
func SwapSupported(ctx context.Context, server string) bool {
	f, err := ServerFlags(ctx, server)
	return err == nil && f.MMProjGPUSwap()
}

// DeviceNames asks the engine for its GPU names (`llama-server --list-devices`: Vulkan0, CUDA1, …) so a
// multi-GPU plan's --device flags name what this build calls them. Only for --gpu auto, where NVML lists the
// GPUs; nil (the planner's Vulkan0, Vulkan1, … default) when the engine cannot be asked, or lists a different
// number of devices than NVML does, or for one GPU, where no flag names a device.
func DeviceNames(ctx context.Context, server, gpu string, src vram.GPUSource) []string {
	if g := strings.TrimSpace(gpu); g != "" && g != "auto" {
		return nil
	}
	gpus, err := src.GPUs(ctx)
	if err != nil || len(gpus) < 2 {
		return nil
	}
	bin, err := llamacpp.Find(server)
	if err != nil {
		return nil
	}
	listed, err := llamacpp.ListDevices(ctx, bin)
	if err != nil || len(listed) != len(gpus) {
		return nil
	}
	names := make([]string, len(listed))
	for i, d := range listed {
		names[i] = d.Name
	}
	return names
}

// reportPlacement tells the user where a multi-device placement's buffers went: one line per check, and a
// warning when one is not where the plan put it (the server keeps running; the plan's headroom is then
// uncertain).
func reportPlacement(w io.Writer, p Placement) {
	if p.Mode == "" {
		return
	}
	fmt.Fprintf(w, "placement %s, per the load log:\n", p.Mode)
	for _, c := range p.Checks {
		fmt.Fprintf(w, "  %s\n", c)
	}
	if p.Err != nil {
		fmt.Fprintf(w, "visor: warning: %v\n", p.Err)
	}
}
