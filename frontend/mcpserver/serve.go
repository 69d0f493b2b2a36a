package mcpserver

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Usage is `visor mcp serve -h`: what the server offers and how clients reach it.
const Usage = `usage: visor mcp serve [--http 127.0.0.1:PORT] [--model M.gguf | --endpoint URL] [--tools a,b] [flags]

Serves the agent as an MCP server with one tool, "ask" (prompt, images, session). Without --http it speaks
MCP on stdin and stdout, as MCP clients expect of a command; with --http it serves streamable HTTP at
http://ADDR/mcp, on a loopback address unless VISOR_SERVE_KEY is set (clients then send
Authorization: Bearer KEY).
`

// StdioBanner is the line `visor mcp serve` says on stderr when it serves on stdio. A person who runs it at a
// terminal gets what to do with it, since the server then waits for JSON-RPC on stdin without a word.
func StdioBanner(tool string, terminal bool) string {
	line := "visor MCP server on stdio (tool " + tool + ")"
	if terminal {
		line += ": it waits for an MCP client's JSON-RPC on stdin; let the client start it (command visor, args " +
			"mcp serve and your flags), or serve HTTP with --http 127.0.0.1:PORT; Ctrl-C quits"
	}
	return line
}

// ServeIO serves one client over newline-delimited JSON on r and w (stdin and stdout for `visor mcp serve`)
// until the client closes r or ctx ends. Each line is checked before the SDK reads it: a malformed frame is
// answered with a JSON-RPC error (-32700 or -32600) and the server goes on, where the SDK alone would stop.
func (s *Server) ServeIO(ctx context.Context, r io.Reader, w io.Writer) error {
	lw := &lockedWriter{w: w}
	pr, pw := io.Pipe()
	defer pr.Close() // unblocks the screen's next forward once the server has stopped
	go func() { pw.CloseWithError(screenFrames(r, pw, lw, MaxFrameBytes)) }()
	// The screen already bounds frames; the SDK's cap only has to let a full one through.
	err := s.srv.Run(ctx, &sdk.IOTransport{Reader: pr, Writer: nopWriteCloser{lw}, MaxLineLength: MaxFrameBytes + 2})
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// Handler serves the streamable HTTP transport behind httpguard: without an API key only requests addressed to
// a loopback name are served (DNS rebinding), a browser page of another origin is refused (the MCP spec says
// servers MUST check Origin), bodies must be JSON, and a body may carry up to MaxFrameBytes, room for an image
// of the documented 20 MiB limit.
func (s *Server) Handler() http.Handler {
	return s.guard.Handler(screenIDs(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.srv },
		&sdk.StreamableHTTPOptions{Logger: s.logger, MaxRequestBodyBytes: MaxFrameBytes,
			// Each initialize makes a session the SDK keeps until the client deletes it; clients that just go
			// away must not grow the server for ever.
			SessionTimeout: s.cfg.HTTPSessionIdle,
			// The guard checks Host (for every listener, not only loopback ones) with a message that says what to do.
			DisableLocalhostProtection: true}), s.cfg.HTTPSessionIdle))
}

// ListenAndServe serves streamable HTTP at http://ADDR/mcp until ctx ends. addr must be a loopback address
// (127.0.0.1:PORT, [::1]:PORT or localhost:PORT; port 0 picks a free one) unless Config.APIKey is set: the
// agent behind it can run tools on this machine. ready, if set, gets the endpoint URL once listening.
func (s *Server) ListenAndServe(ctx context.Context, addr string, ready func(url string)) error {
	mux := http.NewServeMux()
	mux.Handle("/mcp", s.Handler())
	return s.guard.ListenAndServe(ctx, addr, mux, func(a net.Addr) {
		url := "http://" + a.String() + "/mcp"
		s.logger.Info("MCP server listening", "url", url)
		if ready != nil {
			ready(url)
		}
	})
}
