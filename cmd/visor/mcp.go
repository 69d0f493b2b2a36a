package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/visorhq/visor/frontend/mcpserver"
	"github.com/visorhq/visor/internal/httpguard"
	"github.com/visorhq/visor/internal/termtext"
)

// cmdMCP runs `visor mcp serve`: the agent behind an MCP server, on stdio or streamable HTTP.
func cmdMCP(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, logger *slog.Logger) error {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprint(stdout, mcpserver.Usage)
		return nil
	}
	if len(args) == 0 || args[0] != "serve" {
		return &usageError{Msg: "mcp: say serve: visor mcp serve [--http 127.0.0.1:PORT] (visor mcp -h)"}
	}
	fs := flag.NewFlagSet("mcp serve", flag.ContinueOnError)
	fs.SetOutput(stdout) // -h prints the flags there; errors are returned
	var t turn
	t.register(fs)
	httpAddr := fs.String("http", "", "serve streamable HTTP on this address instead of stdio: loopback "+
		"(127.0.0.1:PORT), or any with "+serveKeyEnv+" set")
	toolName := fs.String("tool-name", "ask", "name of the MCP tool that runs the agent")
	if err := parseFlagsUsage(fs, args[1:], func() { fmt.Fprint(stdout, mcpserver.Usage, "\nflags:\n"); fs.PrintDefaults() }); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("mcp serve: unexpected argument %q: prompts come from the MCP client", fs.Arg(0))
	}
	key := os.Getenv(serveKeyEnv)
	if *httpAddr != "" {
		if err := httpguard.CheckListen("MCP server", *httpAddr, key, serveKeyHint); err != nil {
			return fmt.Errorf("--http: %w", err)
		}
	}

	t.agentName = "mcp"
	a, err := openApp(ctx, t, stderr, logger)
	if err != nil {
		return err
	}
	defer a.close()
	if err := a.ensureEngine(ctx); err != nil {
		return err
	}
	srv, err := mcpserver.New(mcpserver.Config{Sessions: a.svc, ToolName: *toolName, Logger: logger, APIKey: key,
		KeyHint: serveKeyHint})
	if err != nil {
		return err
	}
	if *httpAddr == "" {
		// stdout carries the protocol; everything for people goes to stderr.
		fmt.Fprintln(stderr, mcpserver.StdioBanner(*toolName, termtext.IsTerminal(stdin)))
		return srv.ServeIO(ctx, stdin, stdout)
	}
	return srv.ListenAndServe(ctx, *httpAddr, func(url string) {
		fmt.Fprintf(stderr, "visor MCP server at %s (tool %s)\n", url, *toolName)
	})
}
