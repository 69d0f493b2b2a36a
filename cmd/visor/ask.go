package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/visorhq/visor/agent/agentfile"
	"github.com/visorhq/visor/engine/launch"
	"github.com/visorhq/visor/frontend/term"
	"github.com/visorhq/visor/internal/cliflag"
	"github.com/visorhq/visor/internal/termtext"
	"github.com/visorhq/visor/session"
	"github.com/visorhq/visor/tools"
	"github.com/visorhq/visor/tools/mcp"
	"github.com/visorhq/visor/tools/toolset"
)

// registerEngine adds the engine flags every command that talks to a model shares, into s (from launch.Defaults).
func registerEngine(fs *flag.FlagSet, s *launch.Spec) {
	*s = launch.Defaults()
	fs.StringVar(&s.Model, "model", os.Getenv("VISOR_MODEL"), "GGUF model file to serve with llama-server (env VISOR_MODEL)")
	fs.StringVar(&s.Projector, "mmproj", os.Getenv("VISOR_MMPROJ"), "vision projector GGUF for --model (env VISOR_MMPROJ)")
	fs.StringVar(&s.Endpoint, "endpoint", os.Getenv("VISOR_ENDPOINT"), "use a running OpenAI-compatible server instead (URL)")
	fs.StringVar(&s.APIKey, "api-key", os.Getenv("VISOR_API_KEY"), "API key for --endpoint")
	fs.StringVar(&s.Server, "server", "", "llama-server binary (default: $VISOR_LLAMA_SERVER, $PATH, then the installed engine)")
	fs.IntVar(&s.Ctx, "ctx", 0, "context size for llama-server (0: the model's default)")
	fs.IntVar(&s.Slots, "parallel", 1, "llama-server slots, one turn each (from 2, one is kept for evaluating the images of turns that wait)")
	fs.Var((*listFlag)(&s.ExtraArgs), "server-arg", "extra llama-server argument (repeatable; env VISOR_SERVER_ARGS adds some to every start)")
	fs.StringVar(&s.Plan, "plan", "auto", "auto: place the model by the VRAM plan, falling back to the next mode on out-of-memory; off: llama-server's own defaults")
	fs.StringVar(&s.GPU, "gpu", "auto", "GPUs the plan is for: auto (every GPU NVML lists), a device index, a size such as 24GiB, or a list such as 24GiB,24GiB")
	fs.StringVar(&s.FlashAttn, "flash-attn", "", "flash attention: on, off or auto (default: on by the plan, llama-server's auto without one)")
	fs.StringVar(&s.KVType, "cache-type", "", "KV cache type for the plan (f16, q8_0, q4_0)")
	fs.BoolVar(&s.Warmup, "warmup", true, "after a GPU start, send a small image and a long prompt so the GPU compiles its kernels before your first request")
}

// toolFlags select the tools and how calls are rendered.
type toolFlags struct {
	toolset.Options
	raw    bool
	format string
}

func (t *toolFlags) register(fs *flag.FlagSet) {
	fs.Var((*cliflag.Comma)(&t.Names), "tools", "comma-separated built-in tools to enable (e.g. list_dir,read_file)")
	fs.StringVar(&t.Workspace, "workspace", ".", "folder the file tools are confined to")
	fs.Var((*cliflag.Comma)(&t.Shell), "allow-shell", "comma-separated commands run_shell may run (off when empty)")
	fs.Var((*cliflag.Comma)(&t.ShellLaunchers), "allow-shell-launcher", "comma-separated programs run_shell may run although they run other programs (sh, env, python…): allows anything")
	fs.Var((*cliflag.Comma)(&t.AllowProtected), "allow-protected", "comma-separated protected names the tools may write anyway (.git, .vscode, .envrc…; * for all)")
	fs.BoolVar(&t.AllowFetch, "allow-fetch", false, "let fetch_url reach the network")
	fs.BoolVar(&t.raw, "raw-tools", false, "render the tool prompt in visor and parse calls from text (for servers without tool templates)")
	fs.StringVar(&t.format, "tool-format", "hermes", "tool-call syntax in raw mode: hermes, qwen-xml, glm, gemma4 or mistral")
	fs.Var((*mcp.Servers)(&t.MCP), "mcp", `MCP server whose tools the agent may call: "name=command args…" (stdio) or "name=http://…" (repeatable)`)
}

// toolProblems names the flag each of the tool settings' problems is about.
func toolProblems(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, toolProblems(e)...)
		}
		return out
	}
	var p *toolset.Problem
	if !errors.As(err, &p) {
		return []error{err}
	}
	flag := map[string]string{"tools": "--tools: ", "workspace": "--workspace ",
		"allow_shell": "--allow-shell, --allow-shell-launcher or --allow-protected: "}[p.Setting]
	return []error{fmt.Errorf("%s%w", flag, err)}
}

func cmdAsk(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, logger *slog.Logger) error {
	fs := flag.NewFlagSet("ask", flag.ContinueOnError)
	fs.SetOutput(stdout) // -h prints the flags there; errors are returned
	var t turn
	var images listFlag
	t.register(fs)
	fs.Var(&images, "image", "image file to attach (repeatable)")
	fs.StringVar(&t.session, "session", "", "continue this stored session (an id or a unique prefix)")
	t.registerExplain(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	question := strings.Join(pos, " ")
	if len(pos) == 0 || question == "-" {
		// `echo q | visor ask`: the question comes from a pipe or file; a terminal is never read, so a
		// forgotten question fails at once instead of waiting for input nobody knows is wanted.
		if question != "-" && termtext.IsTerminal(stdin) {
			return &usageError{Msg: `ask: no question: visor ask "your question" (or pipe it: echo "your question" | visor ask)`}
		}
		if question, err = term.ReadPrompt(ctx, stdin); errors.Is(err, term.ErrNoPrompt) {
			return &usageError{Msg: err.Error()}
		} else if err != nil {
			return err
		}
	}
	t.agentName = "ask"
	t.question = question
	t.images = images
	return runTurn(ctx, t, stdout, stderr, logger)
}

// turn is one user request to an agent, from `visor ask` flags or an agent file.
type turn struct {
	fs         *flag.FlagSet // the parsed flags, to tell given flags from defaults the config may fill
	configPath string
	modelName  string // the config's name for the model, when it came from there
	modelFrom  string // where the model was named when no flag named it ("the default model qwen in FILE"), for errors
	fromSpec   bool   // the settings come from an agent file, which the config file does not override
	engine     launch.Spec
	toolFlags  toolFlags
	agentOptions
	agentName string
	question  string
	images    []string
	db        string
	session   string
	noStore   bool
}

// register adds the flags every agent-running command shares: engine, tools, prompt, limits and storage.
func (t *turn) register(fs *flag.FlagSet) {
	t.fs = fs
	fs.StringVar(&t.configPath, "config", "", "config file (default $XDG_CONFIG_HOME/visor/config.yaml or ~/.config/visor/config.yaml)")
	registerEngine(fs, &t.engine)
	t.toolFlags.register(fs)
	fs.StringVar(&t.system, "system", "", "system prompt")
	fs.IntVar(&t.maxSteps, "max-steps", 8, "most model turns per message")
	fs.IntVar(&t.maxTokens, "max-tokens", 0, "most tokens per model turn (0: server default)")
	fs.StringVar(&t.db, "db", "", "conversation database (default ~/.local/share/visor/visor.db)")
	fs.BoolVar(&t.noStore, "no-store", false, "do not store conversations")
	fs.BoolVar(&t.showReasoning, "show-reasoning", false, "stream the model's thinking to stderr")
}

// runTurn runs one user turn through the session service: images are taken in (and refused) before any model
// loads, the engine is started or reused, and the conversation is stored.
func runTurn(ctx context.Context, t turn, stdout, stderr io.Writer, logger *slog.Logger) error {
	a, err := openApp(ctx, t, stderr, logger)
	if err != nil {
		return err
	}
	defer a.close()
	var imgs []tools.Image
	for _, p := range t.images {
		im, err := a.readImage("--image "+p, p)
		if err != nil {
			return err
		}
		imgs = append(imgs, im)
	}
	sess, err := a.openSession(ctx, t.question)
	if err != nil {
		return err
	}
	defer sess.Close()
	return term.Ask(ctx, sess, t.question, imgs, stdout, stderr, t.show())
}

type agentOptions struct {
	system      string
	maxSteps    int
	maxTokens   int
	choice      string
	temperature *float32
	// showReasoning streams the model's thinking to stderr; otherwise only its length is reported.
	showReasoning bool
	// explain prints, on stderr as the turn goes, what was done ahead of time, why, and what it took.
	explain bool
	// imageWindow is the agent file's or the config's image_window (nil: the cost model chooses).
	imageWindow *agentfile.ImageWindow
}

// registerExplain adds --explain, for the commands that print a turn as it goes (ask, chat, run).
func (o *agentOptions) registerExplain(fs *flag.FlagSet) {
	fs.BoolVar(&o.explain, "explain", false, "print each ahead-of-time action (prefill, relaunch), why it was taken and its measured duration, and what each request did with its images")
}

// openSession opens the session --session names (a new one titled title without it).
func (a *app) openSession(ctx context.Context, title string) (*session.Session, error) {
	sess, err := a.svc.Open(ctx, session.OpenOptions{Resume: a.turn.session, Title: title})
	if err != nil {
		return nil, fmt.Errorf("--session: %w", err)
	}
	return sess, nil
}

// show is what the turn prints beside the answer, as its flags set it.
func (t turn) show() term.Show { return term.Show{Reasoning: t.showReasoning, Explain: t.explain} }
