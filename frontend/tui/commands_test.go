package tui

import (
	"context"
	"strings"
	"testing"

	"github.com/visorhq/visor/agent"
)

// recordingBackend stands in for the session service in tests of the TUI's own input handling, where no model
// is involved: it records what would have been sent.
type recordingBackend struct{ sent []string }

func (b *recordingBackend) Send(_ context.Context, text string, _ func(agent.Event)) agent.Finished {
	b.sent = append(b.sent, text)
	return agent.Finished{}
}
func (b *recordingBackend) Attach(context.Context, string) (string, error)          { return "", nil }
func (b *recordingBackend) Detach()                                                 {}
func (b *recordingBackend) Sessions(context.Context) ([]SessionInfo, error)         { return nil, nil }
func (b *recordingBackend) Resume(context.Context, string) ([]agent.Message, error) { return nil, nil }
func (b *recordingBackend) Status() Status                                          { return Status{} }

// TestMistypedCommandGetsASuggestion: a slash command one typo away from a real one is not sent to the model; the
// notice names the command meant, as the command line does for its flags. A word near no command gets the plain
// notice.
func TestMistypedCommandGetsASuggestion(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"/imag shot.png", "unknown command /imag: did you mean /image? (/help lists them)"},
		{"/sesions", "unknown command /sesions: did you mean /sessions? (/help lists them)"},
		{"/qiut", "unknown command /qiut: did you mean /quit? (/help lists them)"},
		{"/frobnicate", "unknown command /frobnicate: /help lists them"},
	} {
		b := &recordingBackend{}
		m := newModel(context.Background(), b, Options{})
		m.input.SetValue(c.in)
		if cmd := m.submit(); cmd != nil {
			t.Errorf("%q: submit returned a command to run; want only a notice", c.in)
		}
		if len(m.entries) == 0 {
			t.Fatalf("%q: no notice", c.in)
		}
		last := m.entries[len(m.entries)-1]
		if last.kind != errorEntry || last.text != c.want {
			t.Errorf("%q: notice %v %q, want the error %q", c.in, last.kind, last.text, c.want)
		}
		if len(b.sent) > 0 {
			t.Errorf("%q was sent to the model: %q", c.in, b.sent)
		}
	}
	// The hint comes from the same rule as the flags': a word far from every command gets none.
	if got := unknownCommand("/x"); strings.Contains(got, "did you mean") {
		t.Errorf("unknownCommand(/x) = %q", got)
	}
}
