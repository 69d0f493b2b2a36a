// Package toolset builds the tools an agent runs with from one set of options, whichever front end, agent file
// or config file they came from. What `visor validate` accepts, what each command checks before it starts and
// what the model is offered are all decided here, from the same options: a check that built its own list (the
// built-ins without their allow settings) once refused `--tools run_shell --allow-shell ls` that the tools
// themselves would have run.
package toolset

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/visorhq/visor/internal/typo"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/tools"
	"github.com/visorhq/visor/tools/mcp"
)

// Options select and configure the tools. The zero value offers none.
type Options struct {
	// Names are the built-in tools to enable (session_search included); entries may be comma-separated lists.
	Names []string
	// Workspace is the folder the file tools are confined to ("" is the current folder).
	Workspace string
	// AllowFetch enables fetch_url; Shell, ShellLaunchers and AllowProtected are tools.BuiltinConfig's.
	AllowFetch     bool
	Shell          []string
	ShellLaunchers []string
	AllowProtected []string
	// MCP servers whose tools are added.
	MCP []mcp.ServerConfig
}

// Split turns a comma-separated flag value into a list ("" is none).
func Split(v string) []string {
	var out []string
	for s := range strings.SplitSeq(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// names is Names with lists split, blanks and repeats dropped, in order.
func (o Options) names() []string {
	var out []string
	for _, n := range o.Names {
		for _, s := range Split(n) {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// Builtin is the built-in tools' configuration these options give, with the file tools under root.
func (o Options) Builtin(root string) tools.BuiltinConfig {
	return tools.BuiltinConfig{Root: root, AllowFetch: o.AllowFetch, Shell: o.Shell, ShellLaunchers: o.ShellLaunchers,
		AllowProtected: o.AllowProtected}
}

// Problem is a mistake in the options, named by the setting it is about so a caller can say it its own way
// (--tools on the command line, `tools:` in an agent file).
type Problem struct {
	// Setting is one of "tools", "workspace", "allow_shell" (which covers the launchers and protected names).
	Setting string
	Err     error
}

func (p *Problem) Error() string { return p.Err.Error() }
func (p *Problem) Unwrap() error { return p.Err }

// NeedsStore says whether the built-in tool named n works only with a conversation database, so that a list
// shared by every command (a config file's tools) can leave it out under --no-store.
func NeedsStore(n string) bool { return n == memory.SearchToolName }

// Check reports every mistake in the settings themselves that Open would stop at, reading nothing from disk:
// each is a *Problem. store says whether a conversation database is open (session_search needs one).
func (o Options) Check(store bool) error {
	var errs []error
	if err := o.Builtin(".").Check(); err != nil {
		errs = append(errs, &Problem{"allow_shell", err})
	}
	names := o.names()
	known := o.available(store)
	for _, n := range names {
		switch {
		case slices.Contains(known, n):
		case n == tools.RunShellName:
			errs = append(errs, &Problem{"tools", fmt.Errorf("%s runs only the commands it is allowed: "+
				"list them (--allow-shell ls,git, or allow_shell: [ls, git] in an agent or config file)", n)})
		case n == tools.FetchURLName:
			errs = append(errs, &Problem{"tools", fmt.Errorf("%s reaches the network only when allowed: "+
				"add --allow-fetch (allow_fetch: true in an agent or config file)", n)})
		case n == memory.SearchToolName && !store:
			errs = append(errs, &Problem{"tools", fmt.Errorf("%s searches the conversation database, which --no-store turns off", n)})
		default:
			all := append(o.allBuiltins(), memory.SearchToolName)
			slices.Sort(all)
			hint := ""
			if near := typo.Nearest(n, all); near != "" {
				hint = fmt.Sprintf(" (did you mean %s?)", near) // as a mistyped flag or command is told
			}
			errs = append(errs, &Problem{"tools", fmt.Errorf("no built-in tool %q%s: choose from %s", n, hint, strings.Join(all, ", "))})
		}
	}
	return errors.Join(errs...)
}

// CheckWorkspace refuses a workspace that is not a folder, when any built-in tool is selected.
func (o Options) CheckWorkspace() error {
	if len(o.names()) == 0 {
		return nil
	}
	ws := o.workspace()
	if st, err := os.Stat(ws); err != nil || !st.IsDir() {
		return &Problem{"workspace", fmt.Errorf("%s: not a folder: give the folder the file tools may use", ws)}
	}
	return nil
}

func (o Options) workspace() string {
	if o.Workspace == "" {
		return "."
	}
	return o.Workspace
}

// available is every name these options can enable.
func (o Options) available(store bool) []string {
	var out []string
	for _, t := range tools.Builtins(o.Builtin(".")) {
		out = append(out, t.Spec().Name)
	}
	if store {
		out = append(out, memory.SearchToolName)
	}
	return out
}

// allBuiltins is every built-in name, whatever is allowed.
func (o Options) allBuiltins() []string {
	var out []string
	for _, t := range tools.Builtins(tools.BuiltinConfig{Root: ".", AllowFetch: true, Shell: []string{"ls"}}) {
		out = append(out, t.Spec().Name)
	}
	return out
}

// Open checks the options, connects the MCP servers and registers their tools and the selected built-ins; close
// ends the servers. store may be nil (no database), which makes session_search a mistake.
func Open(ctx context.Context, o Options, store memory.Searcher, logger *slog.Logger) (reg *tools.Registry, close func(), err error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := errors.Join(o.Check(store != nil), o.CheckWorkspace()); err != nil {
		return nil, func() {}, err
	}
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
	for _, sc := range o.MCP {
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
	names := o.names()
	if len(names) == 0 {
		return reg, close, nil
	}
	root, err := filepath.Abs(o.workspace())
	if err != nil {
		return nil, close, &Problem{"workspace", err}
	}
	all := tools.Builtins(o.Builtin(root))
	if store != nil {
		all = append(all, memory.SearchTool(store, ""))
	}
	sel, err := tools.Select(all, names...)
	if err != nil {
		return nil, close, &Problem{"tools", err}
	}
	for _, tl := range sel {
		if err := reg.Register(tl); err != nil {
			return nil, close, err
		}
	}
	return reg, close, nil
}
