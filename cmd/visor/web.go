package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"

	"github.com/visorhq/visor/frontend/web"
	"github.com/visorhq/visor/internal/httpguard"
)

// serveKeyEnv names the variable holding the API key that visor's HTTP servers require off loopback. It is
// read from the environment, not a flag, so the key does not show in the process list.
const serveKeyEnv = "VISOR_SERVE_KEY"

const serveKeyHint = "export " + serveKeyEnv + "=KEY"

// cmdWeb is `visor web`: the chat with screenshots in a browser, on a loopback address.
func cmdWeb(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	fs := flag.NewFlagSet("web", flag.ContinueOnError)
	fs.SetOutput(stdout) // -h prints the flags there; errors are returned
	var t turn
	t.register(fs)
	addr := fs.String("addr", "127.0.0.1:8765", "address to serve the chat on: loopback, or any with "+serveKeyEnv+" set")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	key := os.Getenv(serveKeyEnv)
	if err := httpguard.CheckListen("web chat", *addr, key, serveKeyHint); err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	t.agentName = "web"
	a, err := openApp(ctx, t, stderr, logger)
	if err != nil {
		return err
	}
	defer a.close()
	if err := a.ensureEngine(ctx); err != nil {
		return err
	}
	ui, err := web.New(web.Config{Sessions: a.svc, Logger: logger, APIKey: key, KeyHint: serveKeyHint})
	if err != nil {
		return err
	}
	return ui.ListenAndServe(ctx, *addr, func(a net.Addr) {
		fmt.Fprintf(stdout, "chat at http://%s (Ctrl-C stops it)\n", a)
	})
}
