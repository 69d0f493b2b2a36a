package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/memory"
)

const chatHelp = `type a message and press Enter; commands:
  /image PATH   attach a screenshot to your next message (visor encodes it while you type)
  /clear        drop the attached images
  /session      show the session id
  /quit         leave (Ctrl-D works too)
`

// cmdChat is `visor chat`: a conversation on the terminal with screenshots. An attached image is prefilled at
// once, so its encode (and, on a swapping engine, the MTP↔vision swap) happens while the question is typed.
func cmdChat(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, logger *slog.Logger) error {
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var t turn
	t.register(fs)
	fs.StringVar(&t.session, "session", "", "continue this stored session (an id or a unique prefix)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rt, closeRT, err := openRuntime(ctx, t, stderr, logger)
	if err != nil {
		return err
	}
	defer closeRT()
	conn, store, o := rt.conn, rt.store, rt.opts
	a, err := o.build(conn, logger)
	if err != nil {
		return err
	}
	c := &chat{ctx: ctx, conn: conn, opts: o, agent: a, store: store, stdout: stdout, stderr: stderr, logger: logger}
	if store != nil {
		sess, history, err := openSession(ctx, store, t.session, "chat", "chat", t.engine)
		if err != nil {
			return err
		}
		c.sessionID, c.history = sess.ID, history
		defer conn.recordEvents(ctx, store, sess.ID)()
	}
	fmt.Fprint(stderr, chatHelp)
	in := bufio.NewScanner(stdin)
	in.Buffer(make([]byte, 64*1024), 1<<20)
	for {
		fmt.Fprint(stderr, "> ")
		if !in.Scan() {
			fmt.Fprintln(stderr)
			return c.finish(in.Err())
		}
		if err := c.line(strings.TrimSpace(in.Text())); err != nil {
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

var errQuit = errors.New("quit")

type chat struct {
	ctx    context.Context
	conn   *engineConn
	opts   agentOptions
	agent  *agent.Agent
	store  *memory.Store
	stdout io.Writer
	stderr io.Writer
	logger *slog.Logger

	sessionID string
	history   []agent.Message
	pending   agent.Message   // images attached for the next message
	prefill   <-chan struct{} // closed when the pending images' prefill is done
}

func (c *chat) line(l string) error {
	switch {
	case l == "":
		return nil
	case l == "/quit" || l == "/exit":
		return errQuit
	case l == "/clear":
		c.pending = agent.Message{}
		fmt.Fprintln(c.stderr, "(attachments dropped)")
		return nil
	case l == "/session":
		fmt.Fprintf(c.stderr, "session %s\n", c.sessionID)
		return nil
	case strings.HasPrefix(l, "/image "):
		return c.attach(strings.TrimSpace(strings.TrimPrefix(l, "/image ")))
	case strings.HasPrefix(l, "/"):
		fmt.Fprintf(c.stderr, "unknown command %s\n%s", strings.Fields(l)[0], chatHelp)
		return nil
	}
	return c.send(l)
}

// attach adds an image and starts encoding it at once, in the background, on the prefix the next request will
// have: history plus this turn's images (images come first in a user message, so the prefix holds).
func (c *chat) attach(path string) error {
	im, err := readImage(path)
	if err != nil {
		fmt.Fprintf(c.stderr, "%v\n", err)
		return nil
	}
	if c.conn.server != nil && !c.conn.props.Vision {
		fmt.Fprintln(c.stderr, "this model has no vision projector: restart with --mmproj FILE.gguf")
		return nil
	}
	c.pending.Images = append(c.pending.Images, im)
	c.waitPrefill() // one prefill at a time: the next one extends the previous prefix
	done := make(chan struct{})
	c.prefill = done
	history, user := append([]agent.Message(nil), c.history...), c.pending
	fmt.Fprintf(c.stderr, "(attached %s, %d bytes; encoding it now)\n", path, len(im.Data))
	go func() {
		defer close(done)
		start := time.Now()
		tm, err := c.agent.Prefill(c.ctx, history, user)
		if err != nil {
			c.logger.Warn("prefill failed; the image will be encoded with the question", "err", err)
			return
		}
		c.logger.Info("prefilled", "took", time.Since(start), "timings", describeTimings(tm))
	}()
	return nil
}

func (c *chat) waitPrefill() {
	if c.prefill != nil {
		<-c.prefill
		c.prefill = nil
	}
}

func (c *chat) send(text string) error {
	c.waitPrefill()
	// A server that died while the user was typing is brought back before the message goes out.
	if err := c.conn.recover(c.ctx, c.store, c.sessionID, c.stderr); err != nil {
		return err
	}
	user := c.pending
	user.Role, user.Content = "user", text
	c.pending = agent.Message{}
	f, added, err := runAgent(c.ctx, c.agent, c.conn, c.opts, turnStore(c.store), c.sessionID, c.history, user, c.stdout, c.stderr)
	c.history = append(c.history, added...)
	if f.Err == nil && err != nil {
		return err // the turn ran but could not be stored
	}
	if err != nil && c.ctx.Err() == nil {
		// A failed turn is reported and the chat goes on; the user can retry or quit.
		fmt.Fprintf(c.stderr, "error: %v\n", err)
		if c.conn.server != nil && c.conn.server.Err() != nil {
			if rerr := c.conn.recover(c.ctx, c.store, c.sessionID, c.stderr); rerr != nil {
				return rerr
			}
			fmt.Fprintln(c.stderr, "send your message again")
		}
	}
	return nil
}

func (c *chat) finish(err error) error {
	c.waitPrefill()
	if c.sessionID != "" {
		fmt.Fprintf(c.stderr, "session %s (continue with: visor chat --session %s)\n", c.sessionID, shortID(c.sessionID))
	}
	return err
}

func describeTimings(t *engine.Timings) string {
	if t == nil {
		return "none"
	}
	return fmt.Sprintf("%d prompt tokens (%d cached) in %.0f ms", t.PromptN+t.CacheN, t.CacheN, t.PromptMS)
}
