package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeIO serves one client over newline-delimited JSON on r and w (stdin and stdout for `visor mcp serve`)
// until the client closes r or ctx ends.
func (s *Server) ServeIO(ctx context.Context, r io.Reader, w io.Writer) error {
	err := s.srv.Run(ctx, &sdk.IOTransport{Reader: io.NopCloser(r), Writer: nopWriteCloser{w}})
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// Handler serves the streamable HTTP transport. It keeps the SDK's DNS-rebinding protection: requests to a
// loopback listener must name a loopback host.
func (s *Server) Handler() http.Handler {
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.srv },
		&sdk.StreamableHTTPOptions{Logger: s.logger})
}

// ListenAndServe serves streamable HTTP at http://ADDR/mcp until ctx ends. addr must be a loopback address
// (127.0.0.1:PORT, [::1]:PORT or localhost:PORT; port 0 picks a free one): the agent behind it can run tools on
// this machine, so it is never offered to the network. ready, if set, gets the endpoint URL once listening.
func (s *Server) ListenAndServe(ctx context.Context, addr string, ready func(url string)) error {
	if err := CheckAddr(addr); err != nil {
		return err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("MCP address %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", s.Handler())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	url := "http://" + ln.Addr().String() + "/mcp"
	s.logger.Info("MCP server listening", "url", url)
	if ready != nil {
		ready(url)
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("MCP server at %s: %w", url, err)
	case <-ctx.Done():
	}
	// Open SSE streams never finish on their own; give calls in flight a moment, then cut them.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close()
	}
	return nil
}

// CheckAddr reports whether addr is a loopback host:port that ListenAndServe accepts, so a command can refuse a
// bad address before it loads a model.
func CheckAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("MCP address %q: %w (want 127.0.0.1:PORT)", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("MCP address %q is not loopback: visor serves MCP on 127.0.0.1 only, because the agent "+
			"can run tools on this machine; use 127.0.0.1:PORT", addr)
	}
	return nil
}
