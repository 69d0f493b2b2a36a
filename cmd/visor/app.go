package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/visorhq/visor/agent/toolcall"
	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/gguf"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/engine/swap"
	"github.com/visorhq/visor/engine/vram"
	"github.com/visorhq/visor/images"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/session"
	"github.com/visorhq/visor/tools"
	"github.com/visorhq/visor/tools/toolset"
)

// app is what a command needs to run agents: the session service over the engine conductor, the store (nil with
// --no-store) and the tools. close releases whatever was opened, also after a failed openApp.
type app struct {
	svc     *session.Service
	cond    *conductor.Conductor
	store   *memory.Store
	limits  images.Limits
	closers []func()
	// turn is the request as run: the config file and a resumed session's model applied.
	turn turn
}

func (a *app) close() {
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
	a.closers = nil
}

// openApp checks every flag, then opens the store, builds the tools (connecting MCP servers) and sets up the
// engine conductor and session service, in that order, so a mistake is reported before anything loads. The
// engine itself starts on the first request (or ensureEngine).
func openApp(ctx context.Context, t turn, stderr io.Writer, logger *slog.Logger) (a *app, err error) {
	// The config file fills what the flags left unset; a resumed session brings its own model (so the store
	// opens first); the config's default model comes last.
	cfg, err := loadConfig(t.configPath)
	if err != nil {
		return nil, err
	}
	if err := t.applyConfig(cfg); err != nil {
		return nil, err
	}
	a = &app{}
	defer func() {
		if err != nil {
			a.close()
			a = nil
		}
	}()
	if !t.noStore {
		if a.store, err = openStore(ctx, t.db); err != nil {
			return a, err
		}
		st := a.store
		a.closers = append(a.closers, func() { _ = st.Close() })
		if err := t.resumeModel(ctx, st); err != nil {
			return a, err
		}
	}
	t.defaultModel(cfg)
	if err := t.validate(); err != nil {
		return a, err
	}
	a.turn = t
	vision := session.VisionUnknown
	var proj *vram.Projector
	if t.engine.endpoint == "" {
		vision = session.VisionNo
		if t.engine.mmproj != "" {
			vision = session.VisionYes
			proj = readProjector(t.engine.mmproj, logger)
			a.limits.Fit = intakeFit(proj)
		}
	}
	var searcher memory.Searcher
	if a.store != nil {
		searcher = a.store
	}
	reg, closeTools, err := toolset.Open(ctx, t.toolFlags.options(), searcher, logger)
	if err != nil {
		return a, errors.Join(toolProblems(err)...)
	}
	a.closers = append(a.closers, closeTools)
	format, err := toolcall.ParseFormat(t.toolFlags.format)
	if err != nil {
		return a, fmt.Errorf("--tool-format: %w", err)
	}
	var svc *session.Service
	restarting := false
	seen := &launchedEngine{}
	a.cond = conductor.New(conductor.Config{Launch: launcher(t.engine, stderr, logger, seen), APIKey: t.engine.apiKey,
		Logger: logger, OnEvent: func(ev conductor.Event) {
			switch ev.Kind {
			case conductor.EventCrashed:
				fmt.Fprintf(stderr, "the engine crashed: %v\n", ev.Err)
			case conductor.EventRestarting:
				restarting = true
				fmt.Fprintln(stderr, "restarting it …")
			case conductor.EventReady:
				if restarting {
					fmt.Fprintf(stderr, "engine restarted in %s\n", ev.Duration.Round(time.Millisecond))
				}
				restarting = false
			}
			if svc != nil {
				svc.RecordEngineEvent(ev)
			}
		}})
	cond := a.cond
	a.closers = append(a.closers, func() { _ = cond.Close(context.Background()) })
	// The scheduler decides ahead of each request from the lookahead: with the engine's stored measurements,
	// or the seed's (§9's on an H200) until it has some.
	sched := &swap.Scheduler{Costs: swap.SeedCosts()}
	scfg := session.Config{Engine: a.cond, Vision: vision, AgentName: t.agentName, Model: sessionLabel(t),
		EngineProfile: t.engine.profile(t.modelName),
		Logger:        logger, Images: a.limits, Scheduler: sched,
		EngineCosts: seen.costs, ImageTokens: projectorTokens(proj), Relauncher: a.cond,
		Agent: session.AgentConfig{Tools: reg, System: t.system, MaxSteps: t.maxSteps, MaxTokens: t.maxTokens,
			ToolChoice: t.choice, Temperature: t.temperature, Raw: t.toolFlags.raw, Format: format,
			ImageWindow: sessionWindow(t.imageWindow)}}
	if a.store != nil {
		scfg.Store = a.store // only a real store: a nil *memory.Store in the interface would look like one
		scfg.Costs = session.StoredCosts{Rows: a.store}
	}
	if t.engine.endpoint == "" {
		// Each turn takes one slot of visor's llama-server, so sessions do not evict each other's cache; with
		// --parallel 2 or more one slot is kept for turns that wait, whose images are evaluated there ahead.
		scfg.Slots, scfg.ServerSlots = max(1, t.engine.parallel-1), t.engine.parallel
	}
	if svc, err = session.New(scfg); err != nil {
		return a, err
	}
	a.svc = svc
	return a, nil
}

// ensureEngine starts the engine now, for commands that serve many requests (chat, web, mcp serve), so a model
// that cannot load fails at start instead of at the first message.
func (a *app) ensureEngine(ctx context.Context) error {
	if err := a.svc.EnsureReady(ctx); err != nil {
		return fmt.Errorf("the engine: %w", err)
	}
	return nil
}

// readProjector reads the projector's image facts once, for intake's sizing and the cost model's token counts. A
// header that cannot be read gives nil, and images then go at their own size with estimated tokens: the engine's
// load reports the file.
func readProjector(mmproj string, logger *slog.Logger) *vram.Projector {
	p, err := vram.ProjectorFromFile(expandHome(mmproj))
	if err != nil {
		logger.Debug("the projector's image facts are unknown", "mmproj", mmproj, "err", err)
		return nil
	}
	return p
}

// intakeFit sizes images at intake to what the projector's encoder uses (vram.Projector.IntakeSize).
func intakeFit(p *vram.Projector) func(w, h int) (int, int) {
	if p == nil {
		return nil
	}
	return func(w, h int) (int, int) { return p.IntakeSize(w, h, 0) }
}

// readImage takes an image file in under the one intake policy, naming it (as what, e.g. "--image x.png") in
// every refusal. It needs no session, so images are refused before one is opened (a resumed one starts the
// engine to evaluate its history).
func (a *app) readImage(what, path string) (tools.Image, error) {
	data, err := a.limits.Read(expandHome(path))
	if err != nil {
		return tools.Image{}, fmt.Errorf("%s: %w", what, err)
	}
	img, err := a.svc.CheckImage(data)
	if err != nil {
		return tools.Image{}, fmt.Errorf("%s: %w", what, err)
	}
	return img, nil
}

func expandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if h, err := os.UserHomeDir(); err == nil {
			return filepath.Join(h, strings.TrimPrefix(p, "~"))
		}
	}
	return p
}

// launcher starts the engine for the conductor: an --endpoint or a `visor serve` engine is used as it is, a
// model is started by the plan, and a restart after a crash comes back at the same address.
// seen, when not nil, hears what each launch started, for the engine's cost model.
func launcher(e engineFlags, stderr io.Writer, logger *slog.Logger, seen *launchedEngine) conductor.Launch {
	var last *llamacpp.Server
	return func(ctx context.Context, mode string) (conductor.Process, error) {
		if e.endpoint != "" {
			seen.remote(engine.RedactURL(e.endpoint))
			return conductor.Remote{Addr: e.endpoint}, nil
		}
		if last == nil && !e.own {
			if _, st, ok := findServed(ctx, e); ok {
				fmt.Fprintf(stderr, "reusing the engine `visor serve` (pid %d) runs at %s\n", st.VisorPID, st.URL)
				seen.remote("visor serve " + filepath.Base(e.model))
				return conductor.Remote{Addr: st.URL}, nil
			}
		}
		if last != nil && mode != "" {
			// A relaunch into another mode: stop this one (the conductor already did) and start by the plan.
			last = nil
		}
		if last != nil {
			srv, err := last.Restart(ctx)
			if err != nil {
				return nil, err
			}
			last = srv
			seen.started(e, srv, seen.placed(), llamacpp.WarmupStats{})
			return srv, nil
		}
		logDir := filepath.Join(llamacpp.InstallDir(), "logs")
		_ = os.MkdirAll(logDir, 0o755)
		// The load shows the server's own log lines as its progress, from the first second on.
		prog := startProgress(stderr, "loading "+filepath.Base(e.model))
		cfg := llamacpp.Config{
			Binary: e.server, ExtraArgs: e.extra, Env: e.env, LogFile: filepath.Join(logDir, "llama-server.log"), Logger: logger,
			OnLog: func(line string) {
				if phase, ok := serverPhase(line); ok {
					prog.Phase(phase)
				}
			},
		}
		srv, on, err := startEngine(ctx, e, mode, cfg, stderr, logger)
		if err != nil {
			prog.Done("failed")
			return nil, fmt.Errorf("start llama-server for --model %s: %w", e.model, err)
		}
		if e.mmproj != "" {
			if err := llamacpp.CheckTokenizer(ctx, srv.Client(), filepath.Base(e.model)); err != nil {
				prog.Done("failed")
				_ = srv.Stop(context.Background())
				return nil, fmt.Errorf("start llama-server for --model %s: %w", e.model, err)
			}
		}
		prog.Done("ready")
		var warm llamacpp.WarmupStats
		if on.GPU != "" && e.warmup {
			// The first image and long prompt after a GPU start compile kernels (56 s once on Vulkan): pay it
			// now, with progress on screen, rather than silently on the user's first screenshot.
			c := srv.Client()
			p, err := llamacpp.ReadProps(ctx, c)
			if err == nil {
				warm, err = llamacpp.Warmup(ctx, c, p, func(m string) { fmt.Fprintln(stderr, m) })
			}
			if err != nil {
				_ = srv.Stop(context.Background())
				return nil, fmt.Errorf("engine warm-up (skip it with --warmup=false): %w", err)
			}
		}
		last = srv
		seen.started(e, srv, on, warm)
		return srv, nil
	}
}

// modelLabel is what stored sessions record as their model.
func modelLabel(ef engineFlags) string {
	if ef.model != "" {
		return filepath.Base(ef.model)
	}
	return engine.RedactURL(ef.endpoint)
}

// validate checks every value before anything is opened, naming the flag and the fix.
func (t turn) validate() error {
	e := t.engine
	var errs []error
	switch {
	case e.endpoint != "" && e.model != "":
		errs = append(errs, errors.New("--model and --endpoint both given: use --model to start llama-server, or --endpoint for a server already running"))
	case e.endpoint == "" && e.model == "":
		errs = append(errs, errors.New("no model: pass --model FILE.gguf (with --mmproj FILE.gguf for images) or --endpoint URL; `visor demo` runs without a model of your own"))
	}
	// A model the config file named was never typed as --model: the error names the file and the model instead.
	modelFlag, mmprojFlag, fix := "--model", "--mmproj", ""
	if t.modelFrom != "" {
		modelFlag, mmprojFlag = t.modelFrom+": path", t.modelFrom+": mmproj"
		fix = ", or name another model with --model NAME (`visor demo` runs without a model of your own)"
	}
	if e.model != "" {
		if err := checkFile(modelFlag, e.model, "the path of a GGUF model file"+fix); err != nil {
			errs = append(errs, err)
		} else if err := checkModel(e.model, e.ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if e.mmproj != "" {
		if e.endpoint != "" {
			errs = append(errs, errors.New("--mmproj with --endpoint: the running server has its own projector; drop --mmproj"))
		} else if err := checkFile(mmprojFlag, e.mmproj, "the path of the model's vision projector GGUF (mmproj-*.gguf)"+fix); err != nil {
			errs = append(errs, err)
		}
	}
	if e.endpoint != "" {
		if err := checkEndpoint(e.endpoint); err != nil {
			errs = append(errs, err)
		}
	} else if _, err := llamacpp.Find(e.server); err != nil {
		errs = append(errs, fmt.Errorf("llama-server: %w", err))
	}
	if e.ctx < 0 {
		errs = append(errs, fmt.Errorf("--ctx %d: give a context size in tokens, or 0 for the model's default", e.ctx))
	}
	if e.parallel < 1 {
		errs = append(errs, fmt.Errorf("--parallel %d: give 1 or more slots", e.parallel))
	}
	if e.plan != "auto" && e.plan != "off" {
		errs = append(errs, fmt.Errorf("--plan %q: use auto or off", e.plan))
	}
	switch e.cacheType {
	case "", "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1":
	default:
		errs = append(errs, fmt.Errorf("--cache-type %q: use f16, q8_0 or q4_0 (or f32, bf16, q4_1, iq4_nl, q5_0, q5_1)", e.cacheType))
	}
	if t.maxSteps < 1 {
		errs = append(errs, fmt.Errorf("--max-steps %d: give 1 or more model turns per message", t.maxSteps))
	}
	if t.maxTokens < 0 {
		errs = append(errs, fmt.Errorf("--max-tokens %d: give a positive number of tokens, or 0 for the server's default", t.maxTokens))
	}
	if _, err := toolcall.ParseFormat(t.toolFlags.format); err != nil {
		errs = append(errs, fmt.Errorf("--tool-format: %w", err))
	}
	opts := t.toolFlags.options()
	errs = append(errs, toolProblems(errors.Join(opts.Check(!t.noStore), opts.CheckWorkspace()))...)
	for _, p := range t.images {
		if _, err := (images.Limits{}).ReadFile(expandHome(p)); err != nil {
			errs = append(errs, fmt.Errorf("--image %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// checkModel reads the model's header (milliseconds, even for a big model): a file that is no GGUF model, or a
// context far past what the model was trained for (which llama-server would try to allocate for minutes before
// failing with std::bad_alloc), is refused at once.
func checkModel(path string, ctx int) error {
	f, err := gguf.Open(path)
	if err != nil {
		return fmt.Errorf("--model %s: not a GGUF model file (%v): give the path of a .gguf model", path, err)
	}
	train, ok := f.Uint(f.Arch() + ".context_length")
	if ok && train > 0 && ctx > 0 && uint64(ctx) > 4*train {
		return fmt.Errorf("--ctx %d: the model was trained for %d tokens; give at most %d (or 0 for the model's default)",
			ctx, train, 4*train)
	}
	return nil
}

// checkFile refuses a missing file, a folder, or a FIFO or device (which would block the load) at once.
func checkFile(flagName, path, what string) error {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%s %s: no such file: give %s", flagName, path, what)
	case err != nil:
		return fmt.Errorf("%s %s: %w", flagName, path, err)
	case st.IsDir():
		return fmt.Errorf("%s %s: is a folder: give %s", flagName, path, what)
	case !st.Mode().IsRegular():
		return fmt.Errorf("%s %s: not a regular file (%s): give %s", flagName, path, st.Mode().Type(), what)
	}
	return nil
}

func checkEndpoint(raw string) error {
	if !strings.HasPrefix(raw, "http://") && !strings.HasPrefix(raw, "https://") {
		return fmt.Errorf("--endpoint %s: give an http:// or https:// URL such as http://127.0.0.1:8080", engine.RedactURL(raw))
	}
	return nil
}
