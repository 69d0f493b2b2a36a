package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"

	"github.com/visorhq/visor/engine/launch"
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
	return launch.Serve(ctx, spec, stdout, stderr, logger)
}
