package launch

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/llamacpp"
)

// Serve runs the engine spec describes in the foreground, advertised so other visor commands reuse it, until
// ctx ends or the engine keeps crashing: `visor serve`. A spec already served is refused. Where it serves goes
// to stdout, crashes and restarts to stderr.
func Serve(ctx context.Context, spec Spec, stdout, stderr io.Writer, logger *slog.Logger) error {
	if st, ok := FindServed(ctx, spec.Key()); ok {
		return fmt.Errorf("serve: %s is already served at %s by visor pid %d", spec.Model, st.URL, st.VisorPID)
	}
	if err := spec.Validate(); err != nil {
		return err
	}
	failed := make(chan error, 1)
	// The conductor restarts a crash at the same address, so clients keep their URL, and gives up on a server
	// that keeps crashing rather than restarting it forever. Each start is advertised.
	l := New(spec, Options{Out: stderr, Logger: logger, Advertise: true})
	defer l.Close()
	report := serveReporter(stderr)
	cfg := conductor.Config{Logger: logger, OnEvent: func(ev conductor.Event) {
		report(ev)
		if ev.Kind == conductor.EventFailed {
			select {
			case failed <- ev.Err:
			default:
			}
		}
	}}
	l.Configure(&cfg)
	cond := conductor.New(cfg)
	defer cond.Close(context.Background())
	r, err := cond.EnsureReady(ctx)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	props, _ := llamacpp.ReadProps(ctx, r.Client)
	fmt.Fprintln(stdout, servingLine(filepath.Base(spec.Model), r.URL, props, needsWarmup(l.lastStarted())))
	gen := r.Generation
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-failed:
			return fmt.Errorf("serve: %w", err)
		case <-tick.C:
			if cond.State() != conductor.StateReady {
				continue
			}
			if r, err := cond.EnsureReady(ctx); err == nil && r.Generation != gen {
				gen = r.Generation
				fmt.Fprintf(stderr, "engine restarted at %s\n", r.URL)
			}
		}
	}
}

// servingLine is serve's address line. After a GPU start the conductor warms the engine up in the background
// (about a minute after an install, on the H200), and with one slot a request sent meanwhile waits for it: 80 s
// for a first 1440p screenshot sent at once, against 2 s after the warm-up. The line says so, and
// serveReporter says when the warm-up ends.
func servingLine(model, url string, props llamacpp.Props, warming bool) string {
	state := ""
	if warming {
		state = ", warming up the GPU: requests wait for it"
	}
	return fmt.Sprintf("serving %s at %s (n_ctx %d, vision %v%s); visor commands with the same --model reuse it; Ctrl-C stops it",
		model, url, props.NCtx, props.Vision, state)
}

// serveReporter tells a person on w what visor serve's conductor does: a crash and its restart, and the end of
// each warm-up. It is a conductor.Config.OnEvent (one event at a time, from the conductor's goroutine).
func serveReporter(w io.Writer) func(conductor.Event) {
	return func(ev conductor.Event) {
		switch ev.Kind {
		case conductor.EventCrashed:
			fmt.Fprintf(w, "the engine crashed: %v\nrestarting it …\n", ev.Err)
		case conductor.EventWarmedUp:
			fmt.Fprintf(w, "engine warmed up in %s: requests no longer wait for the GPU's one-time compiles\n",
				ev.Duration.Round(100*time.Millisecond))
		}
	}
}

// CrashReporter tells a person on w what the conductor does about crashes: the crash, the restart and, once it
// is ready again, how long the restart took. It is a conductor.Config.OnEvent, called from the conductor's
// goroutine one event at a time, which is what keeps its state unguarded.
func CrashReporter(w io.Writer) func(conductor.Event) {
	restarting := false
	return func(ev conductor.Event) {
		switch ev.Kind {
		case conductor.EventCrashed:
			fmt.Fprintf(w, "the engine crashed: %v\n", ev.Err)
		case conductor.EventRestarting:
			restarting = true
			fmt.Fprintln(w, "restarting it …")
		case conductor.EventReady:
			if restarting {
				fmt.Fprintf(w, "engine restarted in %s\n", ev.Duration.Round(time.Millisecond))
			}
			restarting = false
		}
	}
}
