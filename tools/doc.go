// Package tools provides the tool registry (typed Go functions with JSON Schema generated from their input types,
// validated arguments, timeouts, panic recovery, output caps) and visor's built-in tools. It knows nothing of the
// model or the agent loop.
//
// A tool is a function func(ctx, In) (Out, error) wrapped by New. The schema the model sees is reflected from
// In's struct tags; the Registry validates every call against it before the function runs, fills in defaults,
// and turns every failure (bad arguments, unknown tool, timeout, panic, oversized output) into a Result the
// model can read. Go errors are for programming mistakes found at Register time, never for the model.
//
// Any type with Spec and Call is a Tool, so MCP tools (package tools/mcp, to come) register next to the
// built-ins and get the same validation and limits.
//
// The built-ins (Builtins) are read_file, write_file, list_dir, search_files and view_image, confined to a
// workspace root, plus fetch_url and run_shell, which exist only when BuiltinConfig enables them.
// session_search, over the memory package's full-text index, will be added by the memory work; it belongs
// in memory (or a small subpackage here) so that tools keeps no dependency on SQLite.
//
// Every argument from the model is untrusted. The file tools open only regular files and never in a way that
// can block (internal/safefile); they refuse to read a file with more than one hard link, since os.Root confines
// names and not inodes (a write replaces the name with a new inode, so it never reaches another link); and
// write_file refuses protected paths (protected.go: VCS metadata, git hooks, editor and shell configuration,
// which run programs at the user's next git status, commit or shell) unless BuiltinConfig.AllowProtected
// names them. run_shell's rule (names only, PATH without the workspace, launchers only on purpose, no options
// that run programs, path arguments confined, a clean environment) is stated in shell_policy.go. fetch_url
// refuses every non-public address, including the IPv6 forms that carry a private IPv4 one.
package tools
