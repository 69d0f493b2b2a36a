// Package term is the line-mode terminal front end's renderer: a turn's answer streamed on stdout, tool activity,
// explanations and the turn's numbers on stderr, all of it cleaned so that nothing a model, tool or MCP server
// wrote drives the terminal. ask, run, demo and the line chat print through it.
package term

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/internal/termtext"
	"github.com/visorhq/visor/internal/textcut"
	"github.com/visorhq/visor/session"
)

// Printer renders a turn's events: answer text on stdout, tool activity and the turn's numbers on stderr. Everything it
// writes passes termtext: the answer, the reasoning, tool calls and results come from the model, tools and MCP
// servers, and must not drive the terminal.
type Printer struct {
	stdout        *termtext.Writer // the streamed answer
	thinking      *termtext.Writer // the streamed reasoning, on stderr
	stderr        io.Writer
	showReasoning bool
	// Explain prints the ahead-of-time actions (agent.Explain) as they happen.
	Explain bool
	thought int
	midLine bool
}

// NewPrinter renders on stdout and stderr; showReasoning streams the model's thinking too.
func NewPrinter(stdout, stderr io.Writer, showReasoning bool) *Printer {
	return &Printer{stdout: termtext.NewWriter(stdout), thinking: termtext.NewWriter(stderr), stderr: stderr,
		showReasoning: showReasoning}
}

// line writes one line on stderr, cleaned; the reasoning streamed before it is flushed first.
func (p *Printer) line(format string, args ...any) {
	_ = p.thinking.Flush()
	fmt.Fprintln(p.stderr, termtext.Clean(fmt.Sprintf(format, args...)))
}

// endAnswer ends the answer's line and shows what its stream held back (an unfinished escape, a link's target).
func (p *Printer) endAnswer() {
	_ = p.stdout.Flush()
	if p.midLine {
		fmt.Fprintln(p.stdout)
		p.midLine = false
	}
}

// Event renders one event of the turn.
func (p *Printer) Event(ev agent.Event) {
	switch e := ev.(type) {
	case agent.Token:
		io.WriteString(p.stdout, e.Text)
		p.midLine = !strings.HasSuffix(e.Text, "\n")
	case agent.ReasoningToken:
		p.thought += len(e.Text)
		if p.showReasoning {
			io.WriteString(p.thinking, e.Text)
		}
	case agent.Notice:
		p.line("%s", e.Text)
	case agent.Explain:
		if p.Explain {
			p.endAnswer()
			p.line("explain: %s", e.Text)
		}
	case agent.ToolCallStarted:
		p.endAnswer()
		p.line("→ %s %s", e.Call.Name, e.Call.Arguments)
	case agent.ToolCallFinished:
		mark := "←"
		if e.Result.IsError {
			mark = "← error:"
		}
		p.line("%s %s (%s)", mark, textcut.Line(e.Result.Text, 200), e.Duration.Round(time.Millisecond))
	case agent.ParseError:
		p.line("! %s", textcut.Line(e.Text, 200))
	}
}

// Finish ends a turn's output with the session service's numbers for it; a turn the model never answered in has
// none to show (its error says what happened).
func (p *Printer) Finish(res session.Result) {
	p.endAnswer()
	thinking := ""
	if p.thought > 0 && !p.showReasoning {
		thinking = fmt.Sprintf(", %d bytes of reasoning hidden (--show-reasoning)", p.thought)
	}
	p.thought = 0
	st := res.Stats
	if !st.Answered {
		_ = p.thinking.Flush()
		return
	}
	steps := "steps"
	if st.Steps == 1 {
		steps = "step" // every tiny-model and most real answers: "[1 steps, …" was the first line a newcomer read
	}
	p.line("[%d %s, %d tokens generated, %.1f tokens/s, first token %s, total %s%s]", st.Steps, steps,
		st.Generated, st.Rate, st.FirstToken.Round(time.Millisecond), st.Took.Round(time.Millisecond), thinking)
}
