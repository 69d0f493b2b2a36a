package llamacpp

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Attempt is one way to start the server: a placement mode's name and its llama-server arguments (Config.Args).
type Attempt struct {
	Name string   // shown to the user, e.g. "vision-cpu (ctx 262144)"
	Args []string // llama-server arguments as they are; --host/--port are added
}

// String is the attempt as the user reads it: name and command line.
func (a Attempt) String() string { return a.Name + ": llama-server " + strings.Join(a.Args, " ") }

// AttemptError is one attempt that did not start, and why.
type AttemptError struct {
	Attempt Attempt
	Err     error
}

func (e *AttemptError) Error() string { return fmt.Sprintf("%s: %v", e.Attempt.Name, e.Err) }
func (e *AttemptError) Unwrap() error { return e.Err }

// OOMError says every attempt ran out of memory. It unwraps to each attempt's error, so IsOOM and
// errors.As(err, &*ExitError) see them.
type OOMError struct {
	Tried []*AttemptError
}

func (e *OOMError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "llama-server ran out of memory in all %d planned modes:", len(e.Tried))
	for _, t := range e.Tried {
		fmt.Fprintf(&b, "\n  %s (llama-server %s)", t.Attempt.Name, strings.Join(t.Attempt.Args, " "))
		for _, l := range OOMLines(t.Err) {
			b.WriteString("\n    " + l)
		}
	}
	b.WriteString("\nfree GPU memory (close other programs using it), lower the context (-c), quantise the KV cache " +
		"(-ctk/-ctv q8_0), or use a smaller model file; `visor plan` shows the budget")
	return b.String()
}

func (e *OOMError) Unwrap() []error {
	errs := make([]error, len(e.Tried))
	for i, t := range e.Tried {
		errs[i] = t
	}
	return errs
}

// StartPlanned starts llama-server with the first attempt that does not run out of memory. base supplies
// everything but the arguments (binary, alias, threads, ExtraArgs, log file, observers); its Args and the typed
// fields Args would duplicate must be empty. Attempts are tried in order: when one exits with an out-of-memory
// error (IsOOM), report is called with it and that error, and the next is tried, because the plan's estimate
// can be short by what the driver or another process holds. Any other failure (a bad flag, a corrupt model, a
// timeout, ctx ending) stops at once and is returned wrapped with the attempt's name: a different placement
// would fail the same way. If every attempt runs out of memory the error is an *OOMError listing each.
// It returns the attempt that started the server, or on a non-OOM failure the one that failed. report may be nil;
// it runs on the caller's goroutine, between attempts.
func StartPlanned(ctx context.Context, base Config, attempts []Attempt, report func(Attempt, error)) (*Server, Attempt, error) {
	if len(attempts) == 0 {
		return nil, Attempt{}, errors.New("llamacpp: no launch attempts: the plan found no mode that fits; " +
			"run `visor plan` to see the budget, then lower the context or free GPU memory")
	}
	if len(base.Args) > 0 {
		return nil, Attempt{}, fmt.Errorf("llamacpp: StartPlanned's base config already has Args (%s): "+
			"leave them empty, each attempt supplies its own", strings.Join(base.Args, " "))
	}
	var tried []*AttemptError
	for _, a := range attempts {
		if err := ctx.Err(); err != nil {
			return nil, Attempt{}, fmt.Errorf("llamacpp: starting llama-server in mode %s: %w", a.Name, err)
		}
		cfg := base
		cfg.Args = a.Args
		s, err := Start(ctx, cfg)
		if err == nil {
			return s, a, nil
		}
		if !IsOOM(err) {
			return nil, a, fmt.Errorf("llamacpp: starting llama-server in mode %s: %w", a.Name, err)
		}
		tried = append(tried, &AttemptError{Attempt: a, Err: err})
		if report != nil {
			report(a, err)
		}
	}
	return nil, Attempt{}, &OOMError{Tried: tried}
}
