package main

import (
	"flag"

	"github.com/visorhq/visor/internal/cliflag"
)

// usageError is a command line visor cannot run: it exits 2 with one line naming the fix, not the whole usage.
type usageError = cliflag.UsageError

// parseFlags parses args into fs with one-line errors: an unknown flag names the nearest defined one, -h prints
// the flags on fs's output (stdout) and returns flag.ErrHelp, which exits 0.
func parseFlags(fs *flag.FlagSet, args []string) error {
	return parseFlagsUsage(fs, args, nil)
}

// synopses name each command's arguments, for its -h (keyed by the flag set's name).
var synopses = map[string]string{
	"ask":             `ask "question" [--image file.png] [flags]   (or: echo "question" | visor ask)`,
	"chat":            "chat [flags]",
	"web":             "web [--addr 127.0.0.1:8765] [flags]",
	"run":             `run agent.yaml ["prompt"] [--image file.png] [--session ID] [flags]`,
	"validate":        "validate FILE…   (agent files; config.yaml as the config; gateway models files)",
	"mcp serve":       "mcp serve [--http 127.0.0.1:PORT] [flags]",
	"demo":            `demo [-q "question"] [flags]`,
	"serve":           "serve --model M.gguf [--mmproj P.gguf] [flags]",
	"gateway":         "gateway [--config models.yaml | --model M.gguf | --endpoint URL] [--addr 127.0.0.1:8080] [flags]\n       visor gateway running | load NAME | unload NAME [--url http://127.0.0.1:8080]   (a running gateway's models)",
	"gateway load":    "gateway load NAME [--url http://127.0.0.1:8080]   (start a model of a running gateway)",
	"gateway unload":  "gateway unload NAME [--url http://127.0.0.1:8080]   (stop a model of a running gateway)",
	"toolcalls parse": "toolcalls parse [--format auto|hermes|qwen-xml|gemma4|glm|mistral] [--tools tools.json] [output.txt | < output.txt]",
	"stats":           "stats [SESSION] [--trace | --json | --costs] [flags]",
	"plan":            "plan --model M.gguf [--mmproj P.gguf] [flags]",
	"engine":          "engine [--server llama-server] [--json]   (visor engine install [DIR] installs llama-server)",
	"simulate":        "simulate --trace FILE… [--costs seed|h200|stored|FILE] [flags]",
}

// parseFlagsUsage is parseFlags for a command with its own usage text, which -h prints instead of the flags.
func parseFlagsUsage(fs *flag.FlagSet, args []string, usage func()) error {
	return cliflag.Parse(fs, args, synopses[fs.Name()], usage)
}

// parseInterleaved lets flags follow positional arguments (visor ask "q" --image x.png).
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	return cliflag.Interleaved(fs, args, parseFlags)
}

// listFlag collects a repeatable flag.
type listFlag = cliflag.List

func isHelp(arg string) bool { return cliflag.IsHelp(arg) }
