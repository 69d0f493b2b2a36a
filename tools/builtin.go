package tools

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/visorhq/visor/internal/typo"
)

// BuiltinConfig chooses which built-in tools exist and how far they may reach.
type BuiltinConfig struct {
	// Root is the workspace the file tools are confined to; empty means the current directory.
	Root string
	// AllowFetch enables fetch_url.
	AllowFetch bool
	// FetchAllowPrivate lets fetch_url reach loopback, private and link-local addresses. Off by default so a
	// page the model read cannot steer it into llama-server's admin API or a cloud metadata endpoint.
	FetchAllowPrivate bool
	// FetchTimeout bounds one fetch; zero means 20s.
	FetchTimeout time.Duration
	// Shell is the allowlist of command names run_shell may start; empty disables run_shell. Names only: they
	// are looked up in PATH without the workspace. A launcher (env, xargs, sh, python…: shell_policy.go) listed
	// here is refused unless ShellLaunchers lists it too.
	Shell []string
	// ShellLaunchers are programs that run other programs, allowed on purpose: with them the model can run
	// anything the user can. They may run with the options refused to other programs (find -exec, git -c).
	ShellLaunchers []string
	// ShellEnv names more environment variables commands inherit, beyond HOME, USER, LANG, LC_*, TERM, TMPDIR
	// and TZ (and PATH without the workspace). visor's own VISOR_* variables are never passed.
	ShellEnv []string
	// ShellTimeout bounds one command; zero means 60s.
	ShellTimeout time.Duration
	// AllowProtected lists protected names (ProtectedNames: .git, .vscode, .envrc, …) that write_file may write
	// and run_shell may name anyway; "*" allows them all. Off by default: a file there can run a program at the
	// user's next `git status`, commit, or shell.
	AllowProtected []string
}

// Names of the built-in tools.
const (
	ReadFileName    = "read_file"
	WriteFileName   = "write_file"
	ListDirName     = "list_dir"
	SearchFilesName = "search_files"
	FetchURLName    = "fetch_url"
	RunShellName    = "run_shell"
	ViewImageName   = "view_image"
)

// Builtins returns the built-in tools that cfg enables, sorted by name. fetch_url and run_shell are left
// out unless enabled, so a model never sees a tool it may not use.
func Builtins(cfg BuiltinConfig) []Tool {
	out := []Tool{
		readFileTool(cfg.Root),
		writeFileTool(cfg.Root, cfg.AllowProtected),
		listDirTool(cfg.Root),
		searchFilesTool(cfg.Root),
		viewImageTool(cfg.Root),
	}
	if cfg.AllowFetch {
		out = append(out, fetchURLTool(cfg))
	}
	if len(cfg.Shell) > 0 || len(cfg.ShellLaunchers) > 0 {
		out = append(out, runShellTool(cfg))
	}
	slices.SortFunc(out, func(a, b Tool) int { return strings.Compare(a.Spec().Name, b.Spec().Name) })
	return out
}

// Select picks tools by name, as given to the CLI flag --tools read_file,list_dir. Each name may itself be a
// comma-separated list. An unknown name is an error listing what is available; a built-in that exists but
// is switched off in the config says so.
func Select(all []Tool, names ...string) ([]Tool, error) {
	byName := make(map[string]Tool, len(all))
	avail := make([]string, 0, len(all))
	for _, t := range all {
		byName[t.Spec().Name] = t
		avail = append(avail, t.Spec().Name)
	}
	var out []Tool
	seen := map[string]bool{}
	for _, group := range names {
		for n := range strings.SplitSeq(group, ",") {
			n = strings.TrimSpace(n)
			if n == "" || seen[n] {
				continue
			}
			seen[n] = true
			t, ok := byName[n]
			switch {
			case ok:
				out = append(out, t)
			case n == FetchURLName:
				return nil, fmt.Errorf("tool %s is disabled; enable fetching in the config first", n)
			case n == RunShellName:
				return nil, fmt.Errorf("tool %s is disabled; give it an allowlist of commands in the config first", n)
			default:
				hint := ""
				if near := typo.Nearest(n, avail); near != "" {
					hint = fmt.Sprintf(" (did you mean %s?)", near) // as toolset and a mistyped flag say
				}
				return nil, fmt.Errorf("unknown tool %q%s (available: %s)", n, hint, strings.Join(avail, ", "))
			}
		}
	}
	return out, nil
}

// describe turns an embedded Markdown description into what the model reads: hard-wrapped lines joined into
// paragraphs, because line breaks inside a sentence cost tokens and carry no meaning.
func describe(md string) string {
	paras := strings.Split(strings.TrimSpace(md), "\n\n")
	for i, p := range paras {
		paras[i] = strings.Join(strings.Fields(p), " ")
	}
	return strings.Join(paras, "\n\n")
}

// Check validates cfg's settings the user gave, with errors naming the value and the fix. Builtins does not
// call it (it cannot fail); front ends call it before, so a bad setting fails at start, not at the first call.
func (c BuiltinConfig) Check() error {
	if err := checkAllowProtected(c.AllowProtected); err != nil {
		return err
	}
	if err := checkShellNames(c.Shell, c.ShellLaunchers); err != nil {
		return err
	}
	return checkShellEnv(c.ShellEnv)
}
