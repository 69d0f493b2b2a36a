package main

import (
	"context"
	"flag"
	"io"
	"log/slog"

	"github.com/visorhq/visor/frontend/term"

	"github.com/visorhq/visor/frontend/tui"
	"github.com/visorhq/visor/internal/termtext"
)

// cmdChat is `visor chat`: a conversation on the terminal with screenshots. An attached image is prefilled at
// once, so its encode (and, on a swapping engine, the MTP↔vision swap) happens while the question is typed. On
// a terminal it is the full-screen chat (frontend/tui); with stdin or stdout not a terminal it reads one
// message or command per line, so scripts can drive it.
func cmdChat(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, logger *slog.Logger) error {
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	fs.SetOutput(stdout) // -h prints the flags there; errors are returned
	var t turn
	t.register(fs)
	fs.StringVar(&t.session, "session", "", "continue this stored session (an id or a unique prefix)")
	t.registerExplain(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	t.agentName = "chat"
	a, err := openApp(ctx, t, stderr, logger)
	if err != nil {
		return err
	}
	defer a.close()
	tty := termtext.IsTerminal(stdin) && termtext.IsTerminal(stdout)
	title := "chat"
	if tty {
		title = "" // the first message names it, so the session picker tells chats apart
	}
	sess, err := a.openSession(ctx, title)
	if err != nil {
		return err
	}
	if err := a.ensureEngine(ctx); err != nil {
		sess.Close()
		return err
	}
	if tty {
		// A person at a terminal gets the full-screen chat; pipes keep the line protocol below.
		b := tui.NewSessionBackend(a.svc, sess, t.explain)
		err := tui.Run(ctx, b, tui.Options{History: sess.History()})
		term.SayContinue(stderr, b.Session(), "visor chat ")
		b.Close()
		return err
	}
	defer sess.Close()
	return term.Chat(ctx, sess, stdin, stdout, stderr, t.show())
}
