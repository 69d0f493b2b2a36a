package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/visorhq/visor/memory"
)

// cmdSessions is `visor sessions …`; --db may appear anywhere in args.
func cmdSessions(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	for _, a := range args {
		if a == "-h" || a == "--help" || a == "-help" || (a == "help" && args[0] == "help") {
			_, err := io.WriteString(stdout, sessionsUsage) // before the store opens: help creates no database
			return err
		}
	}
	db, rest, err := takeDB(args)
	if err != nil {
		return err
	}
	store, err := openStore(ctx, db)
	if err != nil {
		return err
	}
	defer store.Close()
	return runSessionsCommand(ctx, store, rest, stdout)
}

// takeDB removes --db PATH (or --db=PATH) from args.
func takeDB(args []string) (string, []string, error) {
	var db string
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--db" || a == "-db":
			if i+1 >= len(args) {
				return "", nil, fmt.Errorf("--db needs a file path")
			}
			db = args[i+1]
			i++
		case strings.HasPrefix(a, "--db=") || strings.HasPrefix(a, "-db="):
			db = a[strings.Index(a, "=")+1:]
		default:
			rest = append(rest, a)
		}
	}
	return db, rest, nil
}

// openStore opens the conversation database, at path or the default location.
func openStore(ctx context.Context, path string) (*memory.Store, error) {
	if path == "" {
		p, err := memory.DefaultPath()
		if err != nil {
			return nil, err
		}
		path = p
	}
	return memory.Open(ctx, path)
}
