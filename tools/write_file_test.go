package tools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteFile(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	r := builtinRegistry(t, BuiltinConfig{Root: root})

	res := mustOK(t, call(t, r, WriteFileName, map[string]any{"path": "a/b/c.txt", "content": "hello\n"}))
	if res.Text != "created a/b/c.txt (6 bytes)." {
		t.Errorf("got %q", res.Text)
	}
	if b, err := os.ReadFile(filepath.Join(root, "a/b/c.txt")); err != nil || string(b) != "hello\n" {
		t.Fatalf("content = %q, %v", b, err)
	}
	// Replacing keeps the file's mode: an executable script stays executable.
	must(t, os.Chmod(filepath.Join(root, "a/b/c.txt"), 0o750))
	res = mustOK(t, call(t, r, WriteFileName, map[string]any{"path": "a/b/c.txt", "content": ""}))
	if !strings.HasPrefix(res.Text, "replaced") {
		t.Errorf("got %q", res.Text)
	}
	st, err := os.Stat(filepath.Join(root, "a/b/c.txt"))
	if err != nil || st.Size() != 0 || st.Mode().Perm() != 0o750 {
		t.Errorf("after replace: %v %v", st, err)
	}
	ents, _ := os.ReadDir(filepath.Join(root, "a/b"))
	if len(ents) != 1 {
		t.Errorf("temporary files left behind: %v", ents)
	}
	mustFail(t, call(t, r, WriteFileName, map[string]any{"path": "a", "content": "x"}), "directory")
	mustFail(t, call(t, r, WriteFileName, map[string]any{"path": ".", "content": "x"}), "root")
	mustFail(t, call(t, r, WriteFileName, map[string]any{"path": "x.txt"}), `missing required field "content"`)
}
