// Package cliflag parses a command's flags the way every visor command does: errors in one line with the fix (an
// unknown flag names the nearest defined one), -h printing the command's synopsis and flags on the flag set's
// output, and flags allowed after positional arguments.
package cliflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/visorhq/visor/internal/typo"
)

// UsageError is a command line that cannot run: the command exits 2 with one line naming the fix, not the whole
// usage. Err, when set, is the kind of mistake for errors.Is (memory.ErrInvalidInput), kept out of the line.
type UsageError struct {
	Msg string
	Err error
}

func (e *UsageError) Error() string { return e.Msg }
func (e *UsageError) Unwrap() error { return e.Err }

// Parse parses args into fs. On -h it prints usage, or without one "usage: visor SYNOPSIS" and the flags (the
// synopsis defaults to the flag set's name and [flags]), and returns flag.ErrHelp, which exits 0.
func Parse(fs *flag.FlagSet, args []string, synopsis string, usage func()) error {
	out := fs.Output()
	fs.SetOutput(io.Discard) // the flag package would print the error and every flag (45 lines) to stderr
	err := fs.Parse(args)
	fs.SetOutput(out)
	if err == nil {
		return nil
	}
	if errors.Is(err, flag.ErrHelp) {
		if usage != nil {
			usage()
			return flag.ErrHelp
		}
		if synopsis == "" {
			synopsis = fs.Name() + " [flags]"
		}
		fmt.Fprintf(out, "usage: visor %s\n\nflags:\n", synopsis)
		fs.PrintDefaults()
		return flag.ErrHelp
	}
	return flagError(fs, err)
}

// Interleaved lets flags follow positional arguments (visor ask "q" --image x.png), which the flag package
// alone does not; parse parses one run of flags. It returns the positional arguments.
func Interleaved(fs *flag.FlagSet, args []string, parse func(*flag.FlagSet, []string) error) ([]string, error) {
	var pos []string
	for {
		if err := parse(fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// flagError turns the flag package's error into one line with the fix.
func flagError(fs *flag.FlagSet, err error) error {
	msg := err.Error()
	cmd := strings.TrimPrefix(fs.Name(), "visor ")
	const undefined = "flag provided but not defined: -"
	if name, ok := strings.CutPrefix(msg, undefined); ok {
		if near := nearestFlag(fs, name); near != "" {
			return &UsageError{Msg: fmt.Sprintf("unknown flag --%s (did you mean --%s?)", name, near)}
		}
		return &UsageError{Msg: fmt.Sprintf("unknown flag --%s (visor %s -h lists the flags)", name, cmd)}
	}
	return &UsageError{Msg: fmt.Sprintf("%s: %s (visor %s -h lists the flags)", cmd, msg, cmd)}
}

// IsHelp says whether arg asks for help.
func IsHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help" || arg == "help"
}

// nearestFlag is the defined flag closest to name by edit distance, if it is close enough to be a typo; a
// prefix either way counts as one edit (--mod for --model).
func nearestFlag(fs *flag.FlagSet, name string) string {
	best, bestD := "", 1<<30
	fs.VisitAll(func(f *flag.Flag) {
		d := typo.Distance(name, f.Name)
		if strings.HasPrefix(f.Name, name) || strings.HasPrefix(name, f.Name) {
			d = min(d, 1)
		}
		if d < bestD || (d == bestD && f.Name < best) {
			best, bestD = f.Name, d
		}
	})
	if bestD <= max(2, len(name)/3) {
		return best
	}
	return ""
}

// List collects a repeatable flag.
type List []string

func (l *List) String() string { return strings.Join(*l, ",") }
func (l *List) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// Comma is a flag whose value is a comma-separated list (--tools a,b): blanks around and between commas are
// dropped, and a second use replaces the first.
type Comma []string

func (c *Comma) String() string { return strings.Join(*c, ",") }
func (c *Comma) Set(v string) error {
	*c = nil
	for s := range strings.SplitSeq(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*c = append(*c, s)
		}
	}
	return nil
}

// Take removes --NAME VALUE (or --NAME=VALUE, one dash or two) from args, for a command that hands the rest to
// its subcommands' own flags; a --NAME without a value is an error saying it needs what.
func Take(args []string, name, what string) (value string, rest []string, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--"+name || a == "-"+name:
			if i+1 >= len(args) {
				return "", nil, fmt.Errorf("--%s needs %s", name, what)
			}
			value = args[i+1]
			i++
		case strings.HasPrefix(a, "--"+name+"=") || strings.HasPrefix(a, "-"+name+"="):
			value = a[strings.Index(a, "=")+1:]
		default:
			rest = append(rest, a)
		}
	}
	return value, rest, nil
}

// UnknownCommand is the usage error for a first argument that names no command: the nearest command for a typo,
// and for a flag given before the command (visor --model m.gguf ask), that flags follow the command; the
// nearest command to "--model" is "models", which is not what was meant.
func UnknownCommand(arg string, commands []string) error {
	if strings.HasPrefix(arg, "-") {
		if near := typo.Nearest(strings.TrimLeft(arg, "-"), []string{"help", "version"}); near != "" {
			return &UsageError{Msg: fmt.Sprintf("unknown flag %s (did you mean --%s?)", arg, near)}
		}
		return &UsageError{Msg: fmt.Sprintf("%s before the command: flags follow it (visor ask \"question\" %s …; visor help lists the commands)", arg, arg)}
	}
	if near := typo.Nearest(arg, commands); near != "" {
		return &UsageError{Msg: fmt.Sprintf("unknown command %q (did you mean %q? visor help lists the commands)", arg, near)}
	}
	return &UsageError{Msg: fmt.Sprintf("unknown command %q (visor help lists the commands)", arg)}
}
