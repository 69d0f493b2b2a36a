package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/agent/toolcall"
	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/launch"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/engine/vram"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/tools"
	"github.com/visorhq/visor/tools/mcp"
)

// engineFlags are the flags every command that talks to a model shares.
type engineFlags struct {
	model, mmproj, endpoint, apiKey, server string
	ctx, parallel                           int
	extra                                   listFlag
	plan, gpu, cacheType                    string
	warmup                                  bool
}

func (e *engineFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&e.model, "model", os.Getenv("VISOR_MODEL"), "GGUF model file to serve with llama-server (env VISOR_MODEL)")
	fs.StringVar(&e.mmproj, "mmproj", os.Getenv("VISOR_MMPROJ"), "vision projector GGUF for --model (env VISOR_MMPROJ)")
	fs.StringVar(&e.endpoint, "endpoint", os.Getenv("VISOR_ENDPOINT"), "use a running OpenAI-compatible server instead (URL)")
	fs.StringVar(&e.apiKey, "api-key", os.Getenv("VISOR_API_KEY"), "API key for --endpoint")
	fs.StringVar(&e.server, "server", "", "llama-server binary (default: $VISOR_LLAMA_SERVER, $PATH, then the installed engine)")
	fs.IntVar(&e.ctx, "ctx", 0, "context size for llama-server (0: the model's default)")
	fs.IntVar(&e.parallel, "parallel", 1, "llama-server slots")
	fs.Var(&e.extra, "server-arg", "extra llama-server argument (repeatable)")
	fs.StringVar(&e.plan, "plan", "auto", "auto: place the model by the VRAM plan, falling back to the next mode on out-of-memory; off: llama-server's own defaults")
	fs.StringVar(&e.gpu, "gpu", "auto", "GPU the plan is for: auto (NVML), a device index, or a size such as 24GiB")
	fs.StringVar(&e.cacheType, "cache-type", "", "KV cache type for the plan (f16, q8_0, q4_0)")
	fs.BoolVar(&e.warmup, "warmup", true, "after a GPU start, send a small image and a long prompt so the GPU compiles its kernels before your first request")
}

// engineConn is a model server ready for requests, started by visor or not.
type engineConn struct {
	client *engine.Client
	props  llamacpp.Props
	server *llamacpp.Server // nil for --endpoint
	load   time.Duration    // how long the server took to become ready
	model  string
}

// recordEvents stores the engine's start now and its stop or crash when done is called, so a session shows what
// the server did while it ran.
func (c *engineConn) recordEvents(ctx context.Context, store *memory.Store, sessionID string) (done func()) {
	if c.server == nil {
		return func() {}
	}
	detail := func(m map[string]any) json.RawMessage { b, _ := json.Marshal(m); return b }
	_, _ = store.RecordEngineEvent(ctx, memory.EngineEvent{SessionID: sessionID, Kind: memory.EngineStart,
		Duration: c.load, Detail: detail(map[string]any{"url": c.server.URL(), "model": c.model, "pid": c.server.PID(),
			"n_ctx": c.props.NCtx, "vision": c.props.Vision, "build": c.props.Build})})
	return func() {
		ctx := context.WithoutCancel(ctx)
		if err := c.server.Err(); err != nil {
			_, _ = store.RecordEngineEvent(ctx, memory.EngineEvent{SessionID: sessionID, Kind: memory.EngineCrash,
				Detail: detail(map[string]any{"error": err.Error()})})
			return
		}
		_, _ = store.RecordEngineEvent(ctx, memory.EngineEvent{SessionID: sessionID, Kind: memory.EngineStop})
	}
}

// recover restarts a server visor started that has crashed, at the same address, and records the crash. It is a
// no-op for a healthy server or an --endpoint, which visor does not own.
func (c *engineConn) recover(ctx context.Context, store *memory.Store, sessionID string, stderr io.Writer) error {
	if c.server == nil {
		return nil
	}
	if c.server.Err() == nil {
		// The process may be dead before its exit is noticed (the exit is seen once its output is drained): a
		// server that does not answer /health gets a moment to show whether it is gone.
		var h struct{}
		if c.client.Get(ctx, "/health", &h) == nil {
			return nil
		}
		select {
		case <-c.server.Done():
		case <-time.After(5 * time.Second):
		case <-ctx.Done():
			return ctx.Err()
		}
		if c.server.Err() == nil {
			return nil
		}
	}
	crash := c.server.Err()
	if store != nil {
		b, _ := json.Marshal(map[string]string{"error": crash.Error()})
		_, _ = store.RecordEngineEvent(context.WithoutCancel(ctx), memory.EngineEvent{SessionID: sessionID,
			Kind: memory.EngineCrash, Detail: b})
	}
	fmt.Fprintf(stderr, "the engine crashed: %v\nrestarting it …\n", crash)
	start := time.Now()
	srv, err := c.server.Restart(ctx)
	if err != nil {
		return fmt.Errorf("restart after a crash: %w", err)
	}
	c.server, c.load = srv, time.Since(start)
	if store != nil {
		b, _ := json.Marshal(map[string]any{"url": srv.URL(), "pid": srv.PID(), "after": "crash"})
		_, _ = store.RecordEngineEvent(context.WithoutCancel(ctx), memory.EngineEvent{SessionID: sessionID,
			Kind: memory.EngineStart, Duration: c.load, Detail: b})
	}
	fmt.Fprintf(stderr, "engine restarted in %s\n", c.load.Round(time.Millisecond))
	return nil
}

func (c *engineConn) close() {
	if c.server != nil {
		_ = c.server.Stop(context.Background())
	}
}

// openEngine connects to --endpoint or starts llama-server for --model, showing load progress on stderr.
func openEngine(ctx context.Context, e engineFlags, stderr io.Writer, logger *slog.Logger) (*engineConn, error) {
	if e.endpoint != "" {
		c := engine.NewClient(e.endpoint, e.apiKey)
		p, err := llamacpp.ReadProps(ctx, c)
		if err != nil {
			// Not every OpenAI-compatible server has /props; assume native tools and no vision facts.
			logger.Debug("endpoint has no /props", "err", err)
			p = llamacpp.Props{TemplateCaps: map[string]bool{"supports_tools": true, "supports_tool_calls": true}}
		}
		return &engineConn{client: c, props: p}, nil
	}
	if e.model == "" {
		return nil, errors.New("no model: pass --model FILE.gguf (with --mmproj FILE for images) or --endpoint URL; " +
			"`visor demo` runs without a model of your own")
	}
	if c, st, ok := findServed(ctx, e); ok {
		p, err := llamacpp.ReadProps(ctx, c)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(stderr, "reusing the engine `visor serve` (pid %d) runs at %s\n", st.VisorPID, st.URL)
		return &engineConn{client: c, props: p, model: e.model}, nil
	}
	logDir := filepath.Join(llamacpp.InstallDir(), "logs")
	_ = os.MkdirAll(logDir, 0o755)
	start := time.Now()
	cfg := llamacpp.Config{
		Binary: e.server, ExtraArgs: e.extra, LogFile: filepath.Join(logDir, "llama-server.log"), Logger: logger,
		OnState: func(s llamacpp.State) {
			if s == llamacpp.StateLoading {
				fmt.Fprintf(stderr, "loading %s …\n", filepath.Base(e.model))
			}
		},
	}
	srv, onGPU, err := startEngine(ctx, e, cfg, stderr, logger)
	if err != nil {
		return nil, err
	}
	logger.Debug("engine ready", "url", srv.URL(), "took", time.Since(start))
	c := srv.Client()
	p, err := llamacpp.ReadProps(ctx, c)
	if err != nil {
		_ = srv.Stop(context.Background())
		return nil, err
	}
	if onGPU && e.warmup {
		// The first image and long prompt after a GPU start compile kernels (56 s once on Vulkan): pay it now,
		// with progress on screen, rather than silently on the user's first screenshot.
		if _, err := llamacpp.Warmup(ctx, c, p, func(m string) { fmt.Fprintln(stderr, m) }); err != nil {
			_ = srv.Stop(context.Background())
			return nil, fmt.Errorf("engine warm-up (skip it with --warmup=false): %w", err)
		}
	}
	return &engineConn{client: c, props: p, server: srv, load: time.Since(start), model: e.model}, nil
}

// startEngine launches llama-server: by the VRAM plan when --plan auto finds a GPU (trying the next mode on
// out-of-memory), otherwise with the flags as given. onGPU says the plan put the server on a GPU it found.
func startEngine(ctx context.Context, e engineFlags, cfg llamacpp.Config, stderr io.Writer, logger *slog.Logger) (_ *llamacpp.Server, onGPU bool, _ error) {
	plain := func() (*llamacpp.Server, bool, error) {
		cfg.Model, cfg.MMProj, cfg.Ctx, cfg.Parallel = e.model, e.mmproj, e.ctx, e.parallel
		cfg.CacheTypeK, cfg.CacheTypeV = e.cacheType, e.cacheType
		s, err := llamacpp.Start(ctx, cfg)
		return s, false, err
	}
	switch e.plan {
	case "off":
		return plain()
	case "auto":
	default:
		return nil, false, fmt.Errorf("--plan %q: use auto or off", e.plan)
	}
	o := vram.FileOptions{Model: e.model, MMProj: e.mmproj, GPU: e.gpu,
		Options: vram.Options{Ctx: e.ctx, Parallel: e.parallel, CacheK: e.cacheType, CacheV: e.cacheType}}
	o.SwapSupported = swapSupported(ctx, e.server)
	res, err := vram.PlanFiles(ctx, o)
	if errors.Is(err, vram.ErrNoGPU) {
		// Planning VRAM on a machine without a GPU has nothing to place; run on the CPU as asked.
		logger.Info("no GPU to plan for; starting with the given flags", "err", err)
		return plain()
	}
	if err != nil {
		return nil, false, fmt.Errorf("--plan auto: %w (use --plan off to start without a plan)", err)
	}
	srv, used, err := launch.Start(ctx, cfg, res, launch.Reporter(stderr))
	if err != nil {
		return nil, false, err
	}
	fmt.Fprintf(stderr, "engine started in mode %s on %s\n", used.Name, res.GPU.Name)
	return srv, launch.WantFor(res, used.Args).GPU != "", nil
}

// toolFlags select built-in tools.
type toolFlags struct {
	names, workspace, shell string
	fetch, raw              bool
	format                  string
	mcp                     []mcp.ServerConfig
}

func (t *toolFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&t.names, "tools", "", "comma-separated built-in tools to enable (e.g. list_dir,read_file)")
	fs.StringVar(&t.workspace, "workspace", ".", "folder the file tools are confined to")
	fs.StringVar(&t.shell, "allow-shell", "", "comma-separated commands run_shell may run (off when empty)")
	fs.BoolVar(&t.fetch, "allow-fetch", false, "let fetch_url reach the network")
	fs.BoolVar(&t.raw, "raw-tools", false, "render the tool prompt in visor and parse calls from text (for servers without tool templates)")
	fs.StringVar(&t.format, "tool-format", "hermes", "tool-call syntax in raw mode: hermes or qwen-xml")
	fs.Func("mcp", `MCP server whose tools the agent may call: "name=command args…" (stdio) or "name=http://…" (repeatable)`,
		func(v string) error {
			sc, err := mcp.ParseServer(v)
			if err != nil {
				return err
			}
			t.mcp = append(t.mcp, sc)
			return nil
		})
}

// registry builds the selected tools and connects the MCP servers; close ends those servers. store may be nil
// (no database), which leaves session_search out.
func (t *toolFlags) registry(ctx context.Context, logger *slog.Logger, store memory.Searcher) (reg *tools.Registry, close func(), err error) {
	reg = tools.NewRegistry(tools.WithLogger(logger))
	var clients []*mcp.Client
	close = func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}
	defer func() {
		if err != nil {
			close()
		}
	}()
	for _, sc := range t.mcp {
		sc.Logger = logger
		c, err := mcp.Connect(ctx, sc)
		if err != nil {
			return nil, close, fmt.Errorf("--mcp %s: %w", sc.Name, err)
		}
		clients = append(clients, c)
		if err := c.Register(reg); err != nil {
			return nil, close, fmt.Errorf("--mcp %s: %w", sc.Name, err)
		}
	}
	if t.names == "" {
		return reg, close, nil
	}
	root, err := filepath.Abs(t.workspace)
	if err != nil {
		return nil, close, fmt.Errorf("--workspace: %w", err)
	}
	var shell []string
	if t.shell != "" {
		shell = strings.Split(t.shell, ",")
	}
	cfg := tools.BuiltinConfig{Root: root, AllowFetch: t.fetch, Shell: shell}
	all := tools.Builtins(cfg)
	if store != nil {
		all = append(all, memory.SearchTool(store, ""))
	} else if strings.Contains(","+t.names+",", ","+memory.SearchToolName+",") {
		return nil, close, fmt.Errorf("--tools: %s searches the conversation database, which --no-store turns off", memory.SearchToolName)
	}
	sel, err := tools.Select(all, strings.Split(t.names, ",")...)
	if err != nil {
		return nil, close, fmt.Errorf("--tools: %w", err)
	}
	for _, tl := range sel {
		if err := reg.Register(tl); err != nil {
			return nil, close, err
		}
	}
	return reg, close, nil
}

func cmdAsk(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	fs := flag.NewFlagSet("ask", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var t turn
	var images listFlag
	t.register(fs)
	fs.Var(&images, "image", "image file to attach (repeatable)")
	fs.StringVar(&t.session, "session", "", "continue this stored session (an id or a unique prefix)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return errors.New(`ask: no question: visor ask "your question"`)
	}
	t.agentName = "ask"
	t.user = agent.Message{Role: "user", Content: strings.Join(pos, " ")}
	if err := t.attach(images); err != nil {
		return err
	}
	return runTurn(ctx, t, stdout, stderr, logger)
}

// turn is one user request to an agent, from `visor ask` flags or an agent file.
type turn struct {
	engine    engineFlags
	toolFlags toolFlags
	agentOptions
	agentName string
	user      agent.Message
	db        string
	session   string
	noStore   bool
}

// register adds the flags every agent-running command shares: engine, tools, prompt, limits and storage.
func (t *turn) register(fs *flag.FlagSet) {
	t.engine.register(fs)
	t.toolFlags.register(fs)
	fs.StringVar(&t.system, "system", "", "system prompt")
	fs.IntVar(&t.maxSteps, "max-steps", 8, "most model turns per message")
	fs.IntVar(&t.maxTokens, "max-tokens", 0, "most tokens per model turn (0: server default)")
	fs.StringVar(&t.db, "db", "", "conversation database (default ~/.local/share/visor/visor.db)")
	fs.BoolVar(&t.noStore, "no-store", false, "do not store conversations")
	fs.BoolVar(&t.showReasoning, "show-reasoning", false, "stream the model's thinking to stderr")
}

func (t *turn) attach(paths []string) error {
	for _, p := range paths {
		im, err := readImage(p)
		if err != nil {
			return err
		}
		t.user.Images = append(t.user.Images, im)
	}
	return nil
}

// runtime is what a command needs to run agents: the conversation store (nil with --no-store), the tools and a
// ready engine.
type runtime struct {
	store *memory.Store
	conn  *engineConn
	opts  agentOptions
}

// openRuntime opens the store, builds the tools (connecting MCP servers) and starts or reuses the engine, in
// that order so a bad flag fails before a model loads. close releases all of it.
func openRuntime(ctx context.Context, t turn, stderr io.Writer, logger *slog.Logger) (rt *runtime, close func(), err error) {
	rt = &runtime{opts: t.agentOptions}
	var closers []func()
	close = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if err != nil {
			close()
		}
	}()
	var searcher memory.Searcher
	if !t.noStore {
		if rt.store, err = openStore(ctx, t.db); err != nil {
			return nil, close, err
		}
		closers = append(closers, func() { _ = rt.store.Close() })
		searcher = rt.store
	}
	reg, closeTools, err := t.toolFlags.registry(ctx, logger, searcher)
	if err != nil {
		return nil, close, err
	}
	closers = append(closers, closeTools)
	if rt.conn, err = openEngine(ctx, t.engine, stderr, logger); err != nil {
		return nil, close, err
	}
	closers = append(closers, rt.conn.close)
	rt.opts.tools, rt.opts.toolFlags = reg, t.toolFlags
	return rt, close, nil
}

// runTurn starts (or reuses) the engine, runs the agent for the user's message and stores the conversation.
func runTurn(ctx context.Context, t turn, stdout, stderr io.Writer, logger *slog.Logger) error {
	rt, closeRT, err := openRuntime(ctx, t, stderr, logger)
	if err != nil {
		return err
	}
	defer closeRT()
	conn, store, o := rt.conn, rt.store, rt.opts
	if len(t.user.Images) > 0 && conn.server != nil && !conn.props.Vision {
		return fmt.Errorf("an image is attached but the model has no vision projector: add --mmproj FILE.gguf")
	}
	a, err := o.build(conn, logger)
	if err != nil {
		return err
	}
	if store == nil {
		_, _, err = runAgent(ctx, a, conn, o, nil, "", nil, t.user, stdout, stderr)
		return err
	}
	sess, history, err := openSession(ctx, store, t.session, t.user.Content, t.agentName, t.engine)
	if err != nil {
		return err
	}
	if sess, history, err = compactIfFull(ctx, conn, store, sess, history, stderr); err != nil {
		return err
	}
	defer conn.recordEvents(ctx, store, sess.ID)()
	_, _, err = runAgent(ctx, a, conn, o, store, sess.ID, history, t.user, stdout, stderr)
	fmt.Fprintf(stderr, "session %s (continue with: --session %s)\n", sess.ID, shortID(sess.ID))
	return err
}

// openSession continues a stored session or creates one titled after the question.
func openSession(ctx context.Context, store *memory.Store, id, question, agentName string, ef engineFlags) (memory.Session, []agent.Message, error) {
	if id == "" {
		model := ef.endpoint
		if ef.model != "" {
			model = filepath.Base(ef.model)
		}
		sess, err := store.CreateSession(ctx, memory.Session{Title: oneLine(question, 60), Agent: agentName, Model: model})
		return sess, nil, err
	}
	full, err := store.ResolveSessionID(ctx, id)
	if err != nil {
		return memory.Session{}, nil, fmt.Errorf("--session %s: %w", id, err)
	}
	sess, err := store.Session(ctx, full)
	if err != nil {
		return memory.Session{}, nil, err
	}
	msgs, err := store.Messages(ctx, full)
	if err != nil {
		return memory.Session{}, nil, err
	}
	return sess, agent.Resumable(msgs), nil
}

// compactIfFull starts a linked session from a summary when the stored conversation fills most of the server's
// context, keeping the last two user turns verbatim, so long sessions keep working instead of failing with
// "exceeds the available context size". The parent session stays whole for search and export.
func compactIfFull(ctx context.Context, conn *engineConn, store *memory.Store, sess memory.Session,
	history []agent.Message, stderr io.Writer) (memory.Session, []agent.Message, error) {
	if !agent.NeedsCompaction(history, conn.props.NCtx, 0.75) {
		return sess, history, nil
	}
	old, recent := agent.SplitForCompaction(history, 2)
	if len(old) == 0 {
		return sess, history, nil
	}
	fmt.Fprintf(stderr, "compacting: the session uses %d of %d context tokens; summarizing %d older messages …\n",
		agent.ContextUsed(history), conn.props.NCtx, len(old))
	summary, err := agent.Summarize(ctx, conn.client, old, 1024)
	if err != nil {
		return sess, nil, fmt.Errorf("compact session %s: %w", sess.ID, err)
	}
	stored, err := store.Messages(ctx, sess.ID)
	if err != nil {
		return sess, nil, err
	}
	// Stored and resumable histories line up one to one (Resumable only trims the tail).
	var keepFrom int64
	if len(recent) > 0 {
		keepFrom = stored[len(old)].ID
	}
	linked, err := store.CreateLinkedSession(ctx, sess.ID, memory.Message{Role: "user",
		Content: "Summary of the earlier conversation:\n" + summary}, keepFrom)
	if err != nil {
		return sess, nil, err
	}
	fmt.Fprintf(stderr, "compacted into session %s\n", shortID(linked.ID))
	history = append([]agent.Message{{Role: "user", Content: "Summary of the earlier conversation:\n" + summary}}, recent...)
	return linked, history, nil
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

type agentOptions struct {
	tools       *tools.Registry
	toolFlags   toolFlags
	system      string
	maxSteps    int
	maxTokens   int
	choice      string
	temperature *float32
	// showReasoning streams the model's thinking to stderr; otherwise only its length is reported.
	showReasoning bool
}

// build makes the agent: native tools when the server's template renders them, raw mode otherwise or when asked.
func (o agentOptions) build(conn *engineConn, logger *slog.Logger) (*agent.Agent, error) {
	format, err := toolcall.ParseFormat(o.toolFlags.format)
	if err != nil {
		return nil, fmt.Errorf("--tool-format: %w", err)
	}
	mode := agent.Native
	if o.toolFlags.raw || !conn.props.ToolsInTemplate() {
		mode = agent.Raw
	}
	return agent.New(agent.Config{Model: conn.client, Tools: o.tools, System: o.system, Mode: mode, Format: format,
		MaxSteps: o.maxSteps, MaxTokens: o.maxTokens, ToolChoice: o.choice, Temperature: o.temperature, Logger: logger})
}

// runAgent runs one user turn with a, keeps it in store under sessionID (a nil store keeps nothing), and prints
// it: answer text on stdout, tool activity and speed on stderr. It returns the messages the turn added.
func runAgent(ctx context.Context, a agent.Runner, conn *engineConn, o agentOptions, store agent.TurnStore,
	sessionID string, history []agent.Message, user agent.Message, stdout, stderr io.Writer) (agent.Finished, []agent.Message, error) {
	start := time.Now()
	var generated int
	var lastTPS float64
	var ttft time.Duration
	thought := 0 // bytes of reasoning
	midLine := false
	f, added, storeErr := agent.RunStored(ctx, a, store, sessionID, history, user, func(ev agent.Event) {
		switch e := ev.(type) {
		case agent.Token:
			fmt.Fprint(stdout, e.Text)
			midLine = !strings.HasSuffix(e.Text, "\n")
		case agent.ReasoningToken:
			thought += len(e.Text)
			if o.showReasoning {
				fmt.Fprint(stderr, e.Text)
			}
		case agent.ToolCallStarted:
			if midLine {
				fmt.Fprintln(stdout)
				midLine = false
			}
			fmt.Fprintf(stderr, "→ %s %s\n", e.Call.Name, e.Call.Arguments)
		case agent.ToolCallFinished:
			mark := "←"
			if e.Result.IsError {
				mark = "← error:"
			}
			fmt.Fprintf(stderr, "%s %s (%s)\n", mark, oneLine(e.Result.Text, 200), e.Duration.Round(time.Millisecond))
		case agent.ParseError:
			fmt.Fprintf(stderr, "! %s\n", oneLine(e.Text, 200))
		case agent.StepFinished:
			for _, m := range e.Messages {
				if m.Role == "assistant" && m.Timings != nil {
					generated += m.Timings.PredictedN
					lastTPS = m.Timings.PredictedPerSecond
				}
				if m.Role == "assistant" && ttft == 0 {
					ttft = m.TTFT
				}
			}
		}
	})
	if midLine {
		fmt.Fprintln(stdout)
	}
	thinking := ""
	if thought > 0 && !o.showReasoning {
		thinking = fmt.Sprintf(", %d bytes of reasoning hidden (--show-reasoning)", thought)
	}
	fmt.Fprintf(stderr, "[%d steps, %d tokens generated, %.1f tokens/s, first token %s, total %s%s]\n", f.Steps,
		generated, lastTPS, ttft.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), thinking)
	runErr := f.Err
	if runErr != nil && conn.server != nil && conn.server.Err() != nil {
		runErr = fmt.Errorf("%w\n%v", f.Err, conn.server.Err())
	}
	return f, added, errors.Join(runErr, storeErr)
}

// turnStore passes a store on only when there is one: a nil *memory.Store in the interface would look like one.
func turnStore(s *memory.Store) agent.TurnStore {
	if s == nil {
		return nil
	}
	return s
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// readImage loads an image file exactly as it is on disk; the bytes are never re-encoded so later turns send
// the same bytes and hit the server's cache.
func readImage(path string) (tools.Image, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return tools.Image{}, fmt.Errorf("--image: %w", err)
	}
	mime := http.DetectContentType(data)
	switch mime {
	case "image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp":
	default:
		return tools.Image{}, fmt.Errorf("--image %s: not an image (detected %s); give a PNG, JPEG, GIF, WebP or BMP file", path, mime)
	}
	return tools.Image{MIME: mime, Data: data}, nil
}
