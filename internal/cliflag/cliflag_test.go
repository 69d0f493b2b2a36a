package cliflag

import (
	"errors"
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
)

// TestParseErrorsAreOneLineWithTheFix: an unknown flag names the nearest one (a prefix counts), a far one says
// where the flags are listed, a bad value names the command; flags may follow positional arguments.
func TestParseErrorsAreOneLineWithTheFix(t *testing.T) {
	newFS := func() *flag.FlagSet {
		fs := flag.NewFlagSet("ask", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.String("model", "", "")
		fs.Int("max-steps", 8, "")
		return fs
	}
	parse := func(fs *flag.FlagSet, args []string) error { return Parse(fs, args, "", nil) }
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--mod", "x"}, "unknown flag --mod (did you mean --model?)"},
		{[]string{"--max-step", "2"}, "unknown flag --max-step (did you mean --max-steps?)"},
		{[]string{"--zzzzzzzz"}, "unknown flag --zzzzzzzz (visor ask -h lists the flags)"},
		{[]string{"--max-steps", "many"}, `ask: invalid value "many" for flag -max-steps: parse error (visor ask -h lists the flags)`},
	} {
		_, err := Interleaved(newFS(), c.args, parse)
		var ue *UsageError
		if !errors.As(err, &ue) || err.Error() != c.want {
			t.Errorf("%q: %v, want the usage error %q", c.args, err, c.want)
		}
	}
	pos, err := Interleaved(newFS(), []string{"what", "--model", "m.gguf", "is", "this"}, parse)
	if err != nil || !reflect.DeepEqual(pos, []string{"what", "is", "this"}) {
		t.Errorf("interleaved: %q %v", pos, err)
	}
	var b strings.Builder
	fs := newFS()
	fs.SetOutput(&b)
	if err := Parse(fs, []string{"-h"}, "", nil); !errors.Is(err, flag.ErrHelp) || !strings.HasPrefix(b.String(), "usage: visor ask [flags]\n\nflags:\n") {
		t.Errorf("-h: %v %q", err, b.String())
	}
}

// TestTake: --NAME's value is taken wherever it stands, in either spelling; the rest keeps its order.
func TestTake(t *testing.T) {
	v, rest, err := Take([]string{"show", "--db", "a.db", "x", "-db=b.db", "--dbx"}, "db", "a file path")
	if err != nil || v != "b.db" || !reflect.DeepEqual(rest, []string{"show", "x", "--dbx"}) {
		t.Errorf("Take = %q %q %v", v, rest, err)
	}
	if _, _, err := Take([]string{"list", "--db"}, "db", "a file path"); err == nil || err.Error() != "--db needs a file path" {
		t.Errorf("a --db without a value: %v", err)
	}
}

// TestUnknownCommand: a typo is told the nearest command; a flag put before the command is told that flags
// follow it, not the command nearest its name ("--model" is one letter from "models").
func TestUnknownCommand(t *testing.T) {
	commands := []string{"ask", "chat", "models", "stats", "version", "help"}
	for arg, want := range map[string]string{
		"stat":     `unknown command "stat" (did you mean "stats"? visor help lists the commands)`,
		"frobnik":  `unknown command "frobnik" (visor help lists the commands)`,
		"--model":  `--model before the command: flags follow it (visor ask "question" --model …; visor help lists the commands)`,
		"-tools":   `-tools before the command: flags follow it`,
		"--verson": `unknown flag --verson (did you mean --version?)`,
	} {
		err := UnknownCommand(arg, commands)
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("UnknownCommand(%q) = %v, want a usage error %q", arg, err, want)
		}
	}
}
