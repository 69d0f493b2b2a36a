package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/visorhq/visor/frontend/term"
	"io"
	"log/slog"
	"strings"

	"github.com/visorhq/visor/frontend/tui"
	"github.com/visorhq/visor/internal/termtext"
	"github.com/visorhq/visor/internal/userpath"
	"github.com/visorhq/visor/session"
)

const chatHelp = `type a message and press Enter; commands:
  /image PATH   attach a screenshot to your next message (visor encodes it while you type)
  /clear        drop the attached images
  /session      show the session id
  /quit         leave (Ctrl-D works too)
`

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
		b := tui.NewSessionBackend(a.svc, sess, a.limits, t.explain)
		err := tui.Run(ctx, b, tui.Options{History: sess.History()})
		a.sayContinue(stderr, b.Session(), "visor chat ")
		b.Close()
		return err
	}
	defer sess.Close()
	c := &chat{ctx: ctx, app: a, sess: sess, stdout: stdout, stderr: stderr, showReasoning: t.showReasoning, explain: t.explain}
	fmt.Fprint(stderr, chatHelp)
	in := bufio.NewReader(stdin)
	for {
		fmt.Fprint(stderr, "> ")
		line, err := readLine(in, 1<<20)
		if errors.Is(err, errLineTooLong) {
			fmt.Fprintln(stderr, "that line is longer than 1 MiB and was dropped: put long text in a file and ask about it")
			continue
		}
		if err != nil {
			fmt.Fprintln(stderr)
			return c.finish(nil)
		}
		if err := c.line(strings.TrimSpace(line)); err != nil {
			if errors.Is(err, errQuit) {
				return c.finish(nil)
			}
			return errors.Join(err, c.finish(nil))
		}
		if ctx.Err() != nil {
			return c.finish(nil)
		}
	}
}

var (
	errQuit        = errors.New("quit")
	errLineTooLong = errors.New("line too long")
)

// readLine reads one line of at most max bytes; a longer one is consumed and reported, not fatal.
func readLine(r *bufio.Reader, max int) (string, error) {
	var b []byte
	for {
		part, isPrefix, err := r.ReadLine()
		if err != nil {
			if len(b) > 0 && errors.Is(err, io.EOF) {
				return string(b), nil
			}
			return "", err
		}
		if len(b)+len(part) <= max {
			b = append(b, part...)
		} else {
			for isPrefix {
				if _, isPrefix, err = r.ReadLine(); err != nil {
					return "", err
				}
			}
			return "", errLineTooLong
		}
		if !isPrefix {
			return string(b), nil
		}
	}
}

type chat struct {
	ctx            context.Context
	app            *app
	sess           *session.Session
	stdout, stderr io.Writer
	showReasoning  bool
	explain        bool
}

func (c *chat) line(l string) error {
	switch {
	case l == "":
		return nil
	case l == "/quit" || l == "/exit":
		return errQuit
	case l == "/clear":
		c.sess.ClearAttachments()
		fmt.Fprintln(c.stderr, "(attachments dropped)")
		return nil
	case l == "/session":
		fmt.Fprintf(c.stderr, "session %s\n", c.sess.ID())
		return nil
	case l == "/help":
		fmt.Fprint(c.stderr, chatHelp)
		return nil
	case strings.HasPrefix(l, "/image "):
		return c.attach(strings.TrimSpace(strings.TrimPrefix(l, "/image ")))
	case strings.HasPrefix(l, "/"):
		fmt.Fprintf(c.stderr, "unknown command %s\n%s", termtext.Clean(strings.Fields(l)[0]), chatHelp)
		return nil
	}
	return c.send(l)
}

// attach takes an image in and has the session encode it at once, in the background.
func (c *chat) attach(path string) error {
	data, err := c.app.limits.Read(userpath.Expand(path))
	if err != nil {
		fmt.Fprintln(c.stderr, termtext.Clean(fmt.Sprintf("/image %s: %v", path, err)))
		return nil
	}
	im, err := c.sess.Attach(c.ctx, data)
	if err != nil {
		fmt.Fprintln(c.stderr, termtext.Clean(fmt.Sprintf("/image %s: %v", path, err)))
		return nil
	}
	fmt.Fprintf(c.stderr, "(attached %s, %d bytes; encoding it now)\n", termtext.Clean(path), len(im.Data))
	return nil
}

func (c *chat) send(text string) error {
	p := term.NewPrinter(c.stdout, c.stderr, c.showReasoning)
	p.Explain = c.explain
	res, err := c.sess.Turn(c.ctx, text, nil, p.Event)
	p.Finish(res)
	if err != nil && c.ctx.Err() == nil {
		// A failed turn is reported and the chat goes on; the user can retry or quit.
		fmt.Fprintln(c.stderr, "error:", termtext.Clean(err.Error()))
	}
	return nil
}

func (c *chat) finish(err error) error {
	c.app.sayContinue(c.stderr, c.sess, "visor chat ")
	return err
}
