// Command visor is the agent runtime's command line: it parses flags and wires the packages together.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/visorhq/visor/internal/buildinfo"
	"github.com/visorhq/visor/internal/cliflag"
	"github.com/visorhq/visor/internal/sigstop"
	"github.com/visorhq/visor/internal/termtext"
)

const usage = `visor — an agent runtime for local models on llama-server

usage:
  visor ask "question" [--image file.png] [--model M.gguf [--mmproj P.gguf] | --endpoint URL] [--tools a,b]
  visor chat [--model M.gguf --mmproj P.gguf | --endpoint URL] [--tools a,b]   chat on the terminal; /image PATH attaches a screenshot
  visor web [--addr 127.0.0.1:8765] [engine and tool flags]   the chat with screenshots in a browser
  visor run agent.yaml ["prompt"] [--model M.gguf|NAME] [--image file.png] [--session ID]   run an agent defined in YAML
  visor validate FILE…               check agent files (and config.yaml) without running them: file:line:col: problem — fix
  visor schema agent|config          print the JSON Schema of agent files or the config file
  visor mcp serve [--http 127.0.0.1:PORT] [--model M.gguf] [--tools a,b]   serve the agent as an MCP tool
  visor demo                         run the demo agent on visor's tiny generated model
  visor serve --model M.gguf [--mmproj P.gguf]   keep an engine running; other commands reuse it
  visor gateway [--config models.yaml | --model M.gguf] [--addr 127.0.0.1:8080] [--store]   an OpenAI-compatible endpoint for any agent (… running|load NAME|unload NAME)
  visor toolcalls parse [--format auto|hermes|qwen-xml|gemma4|glm|mistral] [--tools tools.json] < output.txt
  visor stats [SESSION] [--trace]    per-step tokens/s, cache, draft acceptance, prefill ahead; --trace for visor simulate
  visor stats --costs                each engine's measured cost model and the samples behind each number
  visor sessions list|show ID|search QUERY|export ID --format md|json|fork ID|rm ID
  visor plan --model M.gguf [--mmproj P.gguf] [--gpu auto|0|24GiB|24GiB,24GiB] [--devices Vulkan0,Vulkan1] [--ctx N] [--cache-type q4_0] [--json]
  visor models write DIR             write the tiny test models (chat + vision projector)
  visor engine [install [DIR]]       show the llama-server visor would use; install puts Debian's in ~/.cache/visor/engine
  visor simulate --trace FILE [--costs seed|h200|stored|FILE] [--json] [--explain]   replay an agent trace: swap schedule vs baselines
  visor version                      print visor's version (also --version)

Run "visor COMMAND -h" for a command's flags. Defaults (model, tools, workspace) come from
$XDG_CONFIG_HOME/visor/config.yaml (~/.config/visor/config.yaml; see examples/config.yaml); flags override it.
`

func main() {
	ctx, stop := sigstop.OnSignal()
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.As(err, &ue):
		fmt.Fprintln(os.Stderr, "visor:", termtext.Clean(ue.Error()))
		os.Exit(2)
	default:
		// An error may quote a file name, a server's answer or a model's text: it must not drive the terminal.
		fmt.Fprintln(os.Stderr, "visor:", termtext.Clean(err.Error()))
		os.Exit(1)
	}
}

var commands = []string{"ask", "chat", "web", "run", "validate", "mcp", "demo", "serve", "gateway", "toolcalls",
	"stats", "sessions", "plan", "models", "engine", "simulate", "help", "version", "schema"}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return &usageError{Msg: "no command given (visor help lists the commands)"}
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: logLevel()}))
	switch args[0] {
	case "ask":
		return cmdAsk(ctx, args[1:], stdin, stdout, stderr, logger)
	case "serve":
		return cmdServe(ctx, args[1:], stdout, stderr, logger)
	case "gateway":
		return cmdGateway(ctx, args[1:], stdout, stderr, logger)
	case "mcp":
		return cmdMCP(ctx, args[1:], stdin, stdout, stderr, logger)
	case "web":
		return cmdWeb(ctx, args[1:], stdout, stderr, logger)
	case "chat":
		return cmdChat(ctx, args[1:], stdin, stdout, stderr, logger)
	case "run":
		return cmdRun(ctx, args[1:], stdout, stderr, logger)
	case "validate":
		return cmdValidate(args[1:], stdout, stderr)
	case "schema":
		return cmdSchema(args[1:], stdout)
	case "demo":
		return cmdDemo(ctx, args[1:], stdout, stderr, logger)
	case "toolcalls":
		return cmdToolcalls(args[1:], stdin, stdout, stderr)
	case "stats":
		return cmdStats(ctx, args[1:], stdout, stderr)
	case "sessions":
		return cmdSessions(ctx, args[1:], stdout, stderr)
	case "plan":
		return cmdPlan(ctx, args[1:], stdout, stderr)
	case "models":
		return cmdModels(args[1:], stdout, stderr)
	case "engine":
		return cmdEngine(ctx, args[1:], stdout, stderr)
	case "simulate":
		return cmdSimulate(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		if len(args) > 1 && args[0] == "help" && args[1] != "help" { // visor help ask: ask's own usage
			return run(ctx, []string{args[1], "-h"}, stdin, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return nil
	case "version", "--version", "-version", "-v":
		fmt.Fprintln(stdout, "visor", buildinfo.Version())
		return nil
	}
	return cliflag.UnknownCommand(args[0], commands)
}

func logLevel() slog.Level {
	if os.Getenv("VISOR_DEBUG") != "" {
		return slog.LevelDebug
	}
	return slog.LevelWarn
}
