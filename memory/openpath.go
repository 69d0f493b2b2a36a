package memory

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/visorhq/visor/internal/safefile"
)

// OpenPath opens the conversation database at path (DefaultPath when it is empty), creating it when missing: the
// commands that store conversations (--db). made is the path when it holds no session yet (this call created
// it, or a command that stored nothing did), which the command says once it stores the first (a mistyped --db
// would otherwise make a new folder and database without a word). A path naming anything but a regular file
// (a FIFO, a device, a folder) is refused with what it is.
func OpenPath(ctx context.Context, path string) (st *Store, made string, err error) {
	path, err = pathOrDefault(path)
	if err != nil {
		return nil, "", err
	}
	_, err = safefile.Check(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("--db: %w", err)
	}
	if err != nil {
		made = path
	}
	if st, err = Open(ctx, path); err != nil {
		return nil, "", err
	}
	if has, err := st.HasSessions(ctx); err == nil && !has {
		made = path
	}
	return st, made, nil
}

// OpenExisting opens the database for a command that reads what is stored (sessions, stats): a missing database
// is an error naming the path, so a mistyped --db says so instead of creating folders and an empty database
// that then lists nothing.
func OpenExisting(ctx context.Context, path string) (*Store, error) {
	given := path != ""
	path, err := pathOrDefault(path)
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
	st, err := Open(ctx, path)
	if errors.Is(err, ErrReadOnly) {
		// A database this user may read but not write (issue 22: it failed even sessions list) is read as it is.
		return OpenWithOptions(ctx, path, Options{ReadOnly: true})
	}
	return st, err
}

// pathOrDefault is the database path: path, or DefaultPath when it is empty.
func pathOrDefault(path string) (string, error) {
	if path != "" {
		return path, nil
	}
	return DefaultPath()
}
