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
	cfg := conductor.Config{Logger: logger, OnEvent: func(ev conductor.Event) {
		switch ev.Kind {
		case conductor.EventCrashed:
			fmt.Fprintf(stderr, "the engine crashed: %v\nrestarting it …\n", ev.Err)
		case conductor.EventFailed:
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
	fmt.Fprintf(stdout, "serving %s at %s (n_ctx %d, vision %v); visor commands with the same --model reuse it; Ctrl-C stops it\n",
		filepath.Base(spec.Model), r.URL, props.NCtx, props.Vision)
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
