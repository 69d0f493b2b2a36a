package main

import (
	"context"
	"io"

	"github.com/visorhq/visor/internal/cliflag"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/session/report"
)

// cmdSessions is `visor sessions …`; --db may appear anywhere in args.
func cmdSessions(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	for _, a := range args {
		if a == "-h" || a == "--help" || a == "-help" || (a == "help" && args[0] == "help") {
			_, err := io.WriteString(stdout, report.SessionsUsage) // before the store opens: help creates no database
			return err
		}
	}
	db, rest, err := cliflag.Take(args, "db", "a file path")
	if err != nil {
		return err
	}
	store, err := memory.OpenExisting(ctx, db)
	if err != nil {
		return err
	}
	defer store.Close()
	return report.RunSessions(ctx, store, rest, stdout, parseFlagsUsage)
}

// openStore is memory.OpenPath (the commands that store; the gateway's --store).
func openStore(ctx context.Context, path string) (*memory.Store, error) {
	st, _, err := memory.OpenPath(ctx, path)
	return st, err
}
