package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/launch"
	"github.com/visorhq/visor/engine/llamacpp"
)

// cmdServe runs llama-server in the foreground for a model and advertises it to other visor commands until
// Ctrl-C or a crash.
func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stdout) // -h prints the flags there; errors are returned
	var spec launch.Spec
	registerEngine(fs, &spec)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if spec.Endpoint != "" {
		return errors.New("serve: --endpoint makes no sense here: serve starts a llama-server for --model")
	}
	if st, ok := launch.FindServed(ctx, spec.Key()); ok {
		return fmt.Errorf("serve: %s is already served at %s by visor pid %d", spec.Model, st.URL, st.VisorPID)
	}
	if err := spec.Validate(); err != nil {
		return err
	}
	failed := make(chan error, 1)
	// The conductor restarts a crash at the same address, so clients keep their URL, and gives up on a server
	// that keeps crashing rather than restarting it forever. Each start is advertised.
	l := launch.New(spec, launch.Options{Out: stderr, Logger: logger, Advertise: true})
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
