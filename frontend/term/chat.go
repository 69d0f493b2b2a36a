package term

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/visorhq/visor/images"
	"github.com/visorhq/visor/internal/termtext"
	"github.com/visorhq/visor/internal/typo"
	"github.com/visorhq/visor/session"
)

// ChatHelp is what the line chat prints when it starts and on /help.
const ChatHelp = `type a message and press Enter; commands:
  /image PATH   attach a screenshot to your next message (visor encodes it while you type)
  /clear        drop the attached images
  /session      show the session id
  /help         this list
  /quit         leave (Ctrl-D works too)
`

// Chat is the line chat: one message or command per line from in, for scripts and pipes (a person at a terminal
// gets frontend/tui). It ends at the end of in, on /quit or when ctx ends, and then says how to continue sess. A
// failed turn is reported and the chat goes on.
func Chat(ctx context.Context, sess *session.Session, in io.Reader, stdout, stderr io.Writer, show Show) error {
	c := &chat{ctx: ctx, sess: sess, stdout: stdout, stderr: stderr, show: show}
	fmt.Fprint(stderr, ChatHelp)
	r := bufio.NewReader(in)
	for {
		fmt.Fprint(stderr, "> ")
		line, err := ReadLine(r, 1<<20)
		if errors.Is(err, ErrLineTooLong) {
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
	errQuit = errors.New("quit")
	// ErrLineTooLong: ReadLine consumed a line longer than its bound.
	ErrLineTooLong = errors.New("line too long")
)

// ReadLine reads one line of at most max bytes; a longer one is consumed and reported, not fatal.
func ReadLine(r *bufio.Reader, max int) (string, error) {
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
			return "", ErrLineTooLong
		}
		if !isPrefix {
			return string(b), nil
		}
	}
}

type chat struct {
	ctx            context.Context
	sess           *session.Session
	stdout, stderr io.Writer
	show           Show
}

// chatCommands are the line chat's slash commands, for the hint a typo of one gets.
var chatCommands = []string{"/quit", "/exit", "/clear", "/session", "/help", "/image"}

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
		fmt.Fprint(c.stderr, ChatHelp)
		return nil
	case strings.HasPrefix(l, "/image "):
		return c.attach(strings.TrimSpace(strings.TrimPrefix(l, "/image ")))
	case strings.HasPrefix(l, "/"):
		word := strings.Fields(l)[0]
		if near := typo.Nearest(word, chatCommands); near != "" {
			// As the terminal chat does (issue 22: /imag got the help text and no hint).
			fmt.Fprintf(c.stderr, "unknown command %s: did you mean %s?\n", termtext.Clean(word), near)
			return nil
		}
		fmt.Fprintf(c.stderr, "unknown command %s\n%s", termtext.Clean(word), ChatHelp)
		return nil
	}
	return c.send(l)
}

// attach takes an image in and has the session encode it at once, in the background.
func (c *chat) attach(path string) error {
	data, err := c.sess.ReadImageFile(path)
	if err != nil {
		fmt.Fprintln(c.stderr, termtext.Clean(fmt.Sprintf("/image %s: %v", path, err)))
		return nil
	}
	im, err := c.sess.Attach(c.ctx, data)
	if err != nil {
		fmt.Fprintln(c.stderr, termtext.Clean(fmt.Sprintf("/image %s: %v", path, err)))
		return nil
	}
	fmt.Fprintf(c.stderr, "(attached %s; encoding it now)\n", images.Describe(termtext.Clean(path), data, im.Data))
	return nil
}

func (c *chat) send(text string) error {
	p := c.show.printer(c.stdout, c.stderr)
	res, err := c.sess.Turn(c.ctx, text, nil, p.Event)
	p.Finish(res)
	if err != nil && c.ctx.Err() == nil {
		// A failed turn is reported and the chat goes on; the user can retry or quit.
		fmt.Fprintln(c.stderr, "error:", termtext.Clean(err.Error()))
	}
	return nil
}

func (c *chat) finish(err error) error {
	SayContinue(c.stderr, c.sess, "visor chat ")
	return err
}

// SayContinue tells how to continue sess once it is stored (cmd is the command to repeat, "" for the same one);
// a session the engine never answered in is not one to continue.
func SayContinue(stderr io.Writer, sess *session.Session, cmd string) {
	if st := sess.Status(); st.Stored {
		fmt.Fprintf(stderr, "session %s (continue with: %s--session %s)\n", st.ID, cmd, ShortID(st.ID))
	}
}

// SayNewDatabase names the database at path once it holds its first session, and how to choose another: said
// when the first conversation is stored, not when the file is made, since a newcomer's first command often fails
// before anything is stored, and the one after it would find the file made and say nothing.
func SayNewDatabase(ctx context.Context, stderr io.Writer, st interface {
	HasSessions(context.Context) (bool, error)
}, path string) {
	if has, err := st.HasSessions(ctx); err == nil && has {
		fmt.Fprintf(stderr, "(the first conversation stored in %s; --db names another, --no-store keeps none)\n", path)
	}
}

// ShortID is the prefix of a session id (or a commit) people type: 12 characters are unique in practice.
func ShortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
