package tools

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestListDir(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"b.txt": "", "a.txt": "", "sub/z.go": "", "sub/deep/x.go": "", ".git/HEAD": "",
	})
	must(t, os.Symlink("a.txt", filepath.Join(root, "link")))
	r := builtinRegistry(t, BuiltinConfig{Root: root})

	res := mustOK(t, call(t, r, ListDirName, nil))
	if want := "./\n.git/\na.txt\nb.txt\nlink@\nsub/\n"; res.Text != want {
		t.Errorf("depth 1:\n%s\nwant\n%s", res.Text, want)
	}
	res = mustOK(t, call(t, r, ListDirName, map[string]any{"depth": 3}))
	if want := "./\n.git/\na.txt\nb.txt\nlink@\nsub/\n  deep/\n    x.go\n  z.go\n"; res.Text != want {
		t.Errorf("depth 3:\n%s\nwant\n%s", res.Text, want)
	}
	res = mustOK(t, call(t, r, ListDirName, map[string]any{"path": "sub", "depth": 2}))
	if want := "sub/\ndeep/\n  x.go\nz.go\n"; res.Text != want {
		t.Errorf("sub:\n%s\nwant\n%s", res.Text, want)
	}
	mustFail(t, call(t, r, ListDirName, map[string]any{"path": "a.txt"}), "not a directory")
	mustFail(t, call(t, r, ListDirName, map[string]any{"depth": 7}), `field "depth"`)
}

func TestListDirCapsEntries(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	files := map[string]string{}
	for i := range listDirMaxEntries + 5 {
		files[fmt.Sprintf("f%04d", i)] = ""
	}
	writeFiles(t, root, files)
	r := builtinRegistry(t, BuiltinConfig{Root: root})
	res := mustOK(t, call(t, r, ListDirName, nil))
	if !res.Truncated || strings.Count(res.Text, "\n") != listDirMaxEntries+2 || !strings.Contains(res.Text, "first 1000 entries") {
		t.Errorf("truncated=%v lines=%d", res.Truncated, strings.Count(res.Text, "\n"))
	}
}
