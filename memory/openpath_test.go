package memory

import (
	"context"
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
