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
package tools
