package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"

	"github.com/visorhq/visor/agent/webui"
)

// cmdWeb is `visor web`: the chat with screenshots in a browser, on a loopback address.
func cmdWeb(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	fs := flag.NewFlagSet("web", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var t turn
	t.register(fs)
	addr := fs.String("addr", "127.0.0.1:8765", "loopback address to serve the chat on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rt, closeRT, err := openRuntime(ctx, t, stderr, logger)
	if err != nil {
		return err
	}
	defer closeRT()
	a, err := rt.opts.build(rt.conn, logger)
	if err != nil {
		return err
	}
	cfg := webui.Config{Agent: a, Logger: logger}
	if rt.store != nil {
		cfg.Store = rt.store // only a real store: a nil *memory.Store in the interface would look like one
	}
	ui, err := webui.New(cfg)
	if err != nil {
		return err
	}
	return ui.ListenAndServe(ctx, *addr, func(a net.Addr) {
		fmt.Fprintf(stdout, "chat at http://%s (Ctrl-C stops it)\n", a)
	})
}
