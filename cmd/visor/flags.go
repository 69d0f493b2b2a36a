package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/visorhq/visor/frontend/term"
	"github.com/visorhq/visor/internal/typo"
)

// usageError is a command line visor cannot run: it exits 2 with one line naming the fix, not the whole usage.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

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
	"gateway":         "gateway [--config models.yaml | --model M.gguf | --endpoint URL] [--addr 127.0.0.1:8080] [flags]",
	"toolcalls parse": "toolcalls parse [--format auto|hermes|qwen-xml|gemma4|glm|mistral] [--tools tools.json] < output.txt",
	"stats":           "stats [SESSION] [--trace | --json | --costs] [flags]",
	"plan":            "plan --model M.gguf [--mmproj P.gguf] [flags]",
	"engine":          "engine [--server llama-server] [--json]",
	"simulate":        "simulate --trace FILE… [--costs seed|h200|stored|FILE] [flags]",
}

// parseFlagsUsage is parseFlags for a command with its own usage text, which -h prints instead of the flags.
func parseFlagsUsage(fs *flag.FlagSet, args []string, usage func()) error {
	out := fs.Output()
	fs.SetOutput(io.Discard) // the flag package would print the error and every flag (45 lines) to stderr
	err := fs.Parse(args)
	fs.SetOutput(out)
	if err == nil {
		return nil
	}
	if errors.Is(err, flag.ErrHelp) {
		if usage != nil {
			usage()
			return flag.ErrHelp
		}
		syn, ok := synopses[fs.Name()]
		if !ok {
			syn = fs.Name() + " [flags]"
		}
		fmt.Fprintf(out, "usage: visor %s\n\nflags:\n", syn)
		fs.PrintDefaults()
		return flag.ErrHelp
	}
	return flagError(fs, err)
}

// flagError turns the flag package's error into one line with the fix.
func flagError(fs *flag.FlagSet, err error) error {
	msg := err.Error()
	cmd := strings.TrimPrefix(fs.Name(), "visor ")
	const undefined = "flag provided but not defined: -"
	if name, ok := strings.CutPrefix(msg, undefined); ok {
		if near := nearestFlag(fs, name); near != "" {
			return &usageError{fmt.Sprintf("unknown flag --%s (did you mean --%s?)", name, near)}
		}
		return &usageError{fmt.Sprintf("unknown flag --%s (visor %s -h lists the flags)", name, cmd)}
	}
	return &usageError{fmt.Sprintf("%s: %s (visor %s -h lists the flags)", cmd, msg, cmd)}
}

// isHelp says whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help" || arg == "help"
}

// nearestFlag is the defined flag closest to name by edit distance, if it is close enough to be a typo.
func nearestFlag(fs *flag.FlagSet, name string) string {
	best, bestD := "", 1<<30
	fs.VisitAll(func(f *flag.Flag) {
		d := typo.Distance(name, f.Name)
		if strings.HasPrefix(f.Name, name) || strings.HasPrefix(name, f.Name) {
			d = min(d, 1)
		}
		if d < bestD || (d == bestD && f.Name < best) {
			best, bestD = f.Name, d
		}
	})
	if bestD <= max(2, len(name)/3) {
		return best
	}
	return ""
}

// version is visor's module version and, for a build from a checkout, the commit.
func version() string {
	v := "(devel)"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if bi.Main.Version != "" {
		v = bi.Main.Version
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev != "" {
		v += " " + term.ShortID(rev) + dirty
	}
	return v + " " + bi.GoVersion
}
