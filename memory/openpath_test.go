package memory

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenExistingCreatesNothing: a read command on a missing database is told so and leaves no file or folder;
// OpenPath refuses a folder instead of failing inside SQLite, and creates a missing database.
func TestOpenExistingCreatesNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	missing := filepath.Join(dir, "sub", "v.db")
	if _, err := OpenExisting(ctx, missing); err == nil || !strings.Contains(err.Error(), "--db "+missing+": no such database") {
		t.Errorf("OpenExisting(missing) = %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sub")); !os.IsNotExist(err) {
		t.Errorf("OpenExisting created %s: %v", filepath.Join(dir, "sub"), err)
	}
	if _, _, err := OpenPath(ctx, dir); err == nil || !strings.HasPrefix(err.Error(), "--db: ") {
		t.Errorf("OpenPath(a folder) = %v", err)
	}
	st, made, err := OpenPath(ctx, missing)
	if err != nil || made != missing {
		t.Fatalf("OpenPath(missing) made %q: %v", made, err)
	}
	st.Close()
	// Left empty by a command that stored nothing, it is still new to the next one; with a session it is not.
	if st, made, err = OpenPath(ctx, missing); err != nil || made != missing {
		t.Fatalf("OpenPath(existing, empty) made %q: %v", made, err)
	}
	if _, err := st.CreateSession(ctx, Session{Title: "t"}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if st, made, err = OpenPath(ctx, missing); err != nil || made != "" {
		t.Fatalf("OpenPath(existing, with a session) made %q: %v", made, err)
	}
	st.Close()
	st, err = OpenExisting(ctx, missing)
	if err != nil {
		t.Fatalf("OpenExisting after OpenPath created it: %v", err)
	}
	st.Close()
}

// TestNotADatabaseByResultCode: a file that is no database is told so, whether opened for writing or read-only
// (known by SQLite's result code, SQLITE_NOTADB, not the words of its message), and a write to a store opened
// read-only is ErrReadOnly.
func TestNotADatabaseByResultCode(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	notes := filepath.Join(dir, "notes.db")
	if err := os.WriteFile(notes, []byte(strings.Repeat("my notes, not a database\n", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{false, true} {
		_, err := OpenWithOptions(ctx, notes, Options{ReadOnly: ro})
		if err == nil || !strings.Contains(err.Error(), notes+" is not a visor database") || !notADatabase(err) {
			t.Errorf("read-only %v: %v, want it named not a visor database", ro, err)
		}
	}
	path := filepath.Join(dir, "v.db")
	st, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	st, err = OpenWithOptions(ctx, path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.CreateSession(ctx, Session{Title: "t"}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("a write to a read-only store: %v, want ErrReadOnly", err)
	}
}
