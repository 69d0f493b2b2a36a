package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/visorhq/visor/internal/safefile"
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
	db, rest, err := takeDB(args)
	if err != nil {
		return err
	}
	store, err := openExistingStore(ctx, db)
	if err != nil {
		return err
	}
	defer store.Close()
	if store.ReadOnly() && len(rest) > 0 && (rest[0] == "rm" || rest[0] == "delete" || rest[0] == "fork") {
		return fmt.Errorf("visor sessions %s: %s is read-only here (its file or folder is not writable): give yourself write access to it first: %w",
			rest[0], store.Path(), memory.ErrReadOnly)
	}
	return report.RunSessions(ctx, store, rest, stdout, parseFlagsUsage)
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

// openStore opens the conversation database, at path or the default location, creating it when missing (the
// commands that store conversations). A path naming anything but a regular file (a FIFO, a device, a folder) is
// refused with what it is.
func openStore(ctx context.Context, path string) (*memory.Store, error) {
	path, err := storePath(path)
	if err != nil {
		return nil, err
	}
	if _, err := safefile.Check(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("--db: %w", err)
	}
	return memory.Open(ctx, path)
}

// openExistingStore opens the database for a command that reads what is stored (sessions, stats): a missing
// database is an error naming the path, so a mistyped --db says so instead of creating folders and an empty
// database that then lists nothing.
func openExistingStore(ctx context.Context, path string) (*memory.Store, error) {
	given := path != ""
	path, err := storePath(path)
	if err != nil {
		return nil, err
	}
	if _, err := safefile.Check(path); errors.Is(err, fs.ErrNotExist) {
		if given {
			return nil, fmt.Errorf("--db %s: no such database: check the path (visor ask, chat, web and the gateway's --store create one when they first store a conversation)", path)
		}
		return nil, fmt.Errorf("no conversations stored yet: %s does not exist (visor ask, chat and web create it; --db names another)", path)
	} else if err != nil {
		return nil, fmt.Errorf("--db: %w", err)
	}
	st, err := memory.Open(ctx, path)
	if errors.Is(err, memory.ErrReadOnly) {
		// A database this user may read but not write (issue 22: it failed even sessions list) is read as it is.
		return memory.OpenWithOptions(ctx, path, memory.Options{ReadOnly: true})
	}
	return st, err
}

// storePath is the database path: path, or the default location when it is empty.
func storePath(path string) (string, error) {
	if path != "" {
		return path, nil
	}
	return memory.DefaultPath()
}
