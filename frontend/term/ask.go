package term

import (
	"context"
	"fmt"
	"io"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/internal/textcut"
	"github.com/visorhq/visor/session"
	"github.com/visorhq/visor/tools"
)

// Show is what a turn prints beside the answer: the model's reasoning streamed (otherwise only its length), and
// each ahead-of-time action with why it was taken.
type Show struct{ Reasoning, Explain bool }

func (s Show) printer(stdout, stderr io.Writer) *Printer {
	p := NewPrinter(stdout, stderr, s.Reasoning)
	p.Explain = s.Explain
	return p
}

// Ask runs one turn of sess (visor ask, an agent file's prompt, the demo): the answer on stdout, the rest and
// then how to continue the session on stderr.
func Ask(ctx context.Context, sess *session.Session, text string, imgs []tools.Image, stdout, stderr io.Writer, show Show) error {
	p := show.printer(stdout, stderr)
	res, err := sess.Turn(ctx, text, imgs, p.Event)
	p.Finish(res)
	SayContinue(stderr, sess, "")
	return err
}

// Steps runs an agent file's steps in sess one after another, each under a "step i/n" line; the session
// evaluates each next step's images ahead.
func Steps(ctx context.Context, sess *session.Session, steps []session.Step, stdout, stderr io.Writer, show Show) error {
	p := show.printer(stdout, stderr)
	shown := -1
	_, err := sess.Steps(ctx, steps, func(i int, ev agent.Event) {
		if i != shown {
			shown = i
			fmt.Fprintf(stderr, "step %d/%d: %s\n", i+1, len(steps), textcut.Line(steps[i].Text, 100))
		}
		p.Event(ev)
	}, func(_ int, res session.Result) { p.Finish(res) })
	SayContinue(stderr, sess, "")
	return err
}
