package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/visorhq/visor/agent/toolcall"
	"github.com/visorhq/visor/config"
	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/launch"
	"github.com/visorhq/visor/engine/swap"
	"github.com/visorhq/visor/frontend/term"
	"github.com/visorhq/visor/images"
	"github.com/visorhq/visor/internal/userpath"
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
	cfg, err := config.Resolve(t.configPath)
	if err != nil {
		return nil, err
	}
	set := config.FlagsSet(t.fs)
	cfg.Fill(t.settings(), set, t.fromSpec)
	if err := cfg.UnknownModel(t.engine.Model, set); err != nil {
		return nil, err
	}
	if t.imageWindow == nil {
		t.imageWindow = cfg.ImageWindow // an agent file's own wins
	}
	a = &app{}
	defer func() {
		if err != nil {
			a.close()
			a = nil
		}
	}()
	if !t.noStore {
		var made string
		if a.store, made, err = memory.OpenPath(ctx, t.db); err != nil {
			return a, err
		}
		st := a.store
		a.closers = append(a.closers, func() { _ = st.Close() })
		if made != "" { // runs before the store closes (closers run last first)
			a.closers = append(a.closers, func() { term.SayNewDatabase(context.Background(), stderr, st, made) })
		}
		prof, err := session.ResumeProfile(ctx, st, t.session, set["model"] || set["endpoint"])
		if err != nil {
			return a, fmt.Errorf("--session %s: %w", t.session, err)
		}
		if name, m, ok := config.ParseProfile(prof); ok {
			t.modelName = name // a resumed session brings its own model
			config.ApplyModel(&t.engine, m, set)
		}
	}
	t.modelFrom = cfg.FillDefaultModel(t.settings(), set)
	if m, ok := cfg.Models[t.modelName]; ok && t.modelName != "" {
		if err := config.UnsetKey(t.modelName, m, set); err != nil {
			return a, err
		}
	}
	if err := t.validate(); err != nil {
		return a, err
	}
	a.turn = t
	vision := session.VisionOf(t.engine.Endpoint != "", t.engine.Projector != "")
	var sizing launch.ImageSizing
	if vision == session.VisionYes {
		sizing = launch.ProjectorSizing(t.engine.Projector, logger)
	}
	var searcher memory.Searcher
	if a.store != nil {
		searcher = a.store
	}
	reg, closeTools, err := toolset.Open(ctx, t.toolFlags.Options, searcher, logger)
	if err != nil {
		return a, errors.Join(toolProblems(err)...)
	}
	a.closers = append(a.closers, closeTools)
	format, _ := toolcall.ParseFormat(t.toolFlags.format) // validate refused a bad one
	// The conductor's goroutine may report an event before session.New below has returned the service.
	var events atomic.Pointer[session.Service]
	seen := &session.LastLaunch{}
	l := launch.New(t.engine, launch.Options{Out: stderr, Logger: logger, Reuse: true, OnStart: seen.Started})
	report := launch.CrashReporter(stderr)
	ccfg := conductor.Config{Logger: logger, OnEvent: func(ev conductor.Event) {
		report(ev)
		if svc := events.Load(); svc != nil {
			svc.RecordEngineEvent(ev)
		}
	}}
	l.Configure(&ccfg)
	if ccfg.StreamIdle, err = streamIdle(); err != nil {
		return a, err
	}
	a.cond = conductor.New(ccfg)
	cond := a.cond
	a.closers = append(a.closers, func() { _ = cond.Close(context.Background()) })
	// The scheduler decides ahead of each request from the lookahead: with the engine's stored measurements,
	// or the seed's (§9's on an H200) until it has some.
	sched := &swap.Scheduler{Costs: swap.SeedCosts()}
	scfg := session.Config{Engine: a.cond, Vision: vision, AgentName: t.agentName, Model: config.Label(t.modelName, t.engine),
		EngineProfile: config.Profile(t.modelName, t.engine),
		Logger:        logger, Images: images.Limits{Fit: sizing.Fit}, Scheduler: sched,
		EngineCosts: seen.Costs, ImageTokens: sizing.Tokens, Relauncher: a.cond,
		Agent: session.AgentConfig{Tools: reg, System: t.system, MaxSteps: t.maxSteps, MaxTokens: t.maxTokens,
			ToolChoice: t.choice, Temperature: t.temperature, Raw: t.toolFlags.raw, Format: format,
			ImageWindow: session.WindowOf(t.imageWindow)}}
	if a.store != nil {
		scfg.Store = a.store // only a real store: a nil *memory.Store in the interface would look like one
		scfg.Costs = session.StoredCosts{Rows: a.store}
	}
	if t.engine.Endpoint == "" {
		// Each turn takes one slot of visor's llama-server, so sessions do not evict each other's cache; with
		// --parallel 2 or more one slot is kept for turns that wait, whose images are evaluated there ahead.
		scfg.Slots, scfg.ServerSlots = max(1, t.engine.Slots-1), t.engine.Slots
	}
	if a.svc, err = session.New(scfg); err != nil {
		return a, err
	}
	events.Store(a.svc)
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

// readImage takes an image file in under the one intake policy, naming it (as what, e.g. "--image x.png") in
// every refusal. It needs no session, so images are refused before one is opened (a resumed one starts the
// engine to evaluate its history).
func (a *app) readImage(what, path string) (tools.Image, error) {
	img, err := a.svc.ReadImage(path)
	if err != nil {
		return tools.Image{}, fmt.Errorf("%s: %w", what, err)
	}
	return img, nil
}

// validate checks every value before anything is opened, naming the flag and the fix.
func (t turn) validate() error {
	var errs []error
	if err := t.engine.ValidateFrom(t.modelFrom); err != nil {
		errs = append(errs, err)
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
	opts := t.toolFlags.Options
	errs = append(errs, toolProblems(errors.Join(opts.Check(!t.noStore), opts.CheckWorkspace()))...)
	for _, p := range t.images {
		if _, err := (images.Limits{}).ReadFile(userpath.Expand(p)); err != nil {
			errs = append(errs, fmt.Errorf("--image %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// settings are what the config file may fill of t.
func (t *turn) settings() config.Settings {
	return config.Settings{Engine: &t.engine, ModelName: &t.modelName, Tools: &t.toolFlags.Options, DB: &t.db, NoStore: t.noStore}
}

// streamIdle is VISOR_STREAM_IDLE's bound on a silent stream (engine.ParseStreamIdle), for the conductor and the
// gateway.
func streamIdle() (time.Duration, error) {
	return engine.ParseStreamIdle(os.Getenv("VISOR_STREAM_IDLE"))
}
