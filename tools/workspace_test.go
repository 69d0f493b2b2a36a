package tools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfinement attacks every file tool with the usual ways out of a directory.
func TestConfinement(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	root := filepath.Join(base, "ws")
	outside := filepath.Join(base, "secret")
	writeFiles(t, base, map[string]string{"ws/ok.txt": "inside\n", "secret/key.txt": "hunter2\n"})
	must(t, os.Symlink(outside, filepath.Join(root, "out")))                          // dir link out
	must(t, os.Symlink(filepath.Join(outside, "key.txt"), filepath.Join(root, "k")))  // file link out
	must(t, os.Symlink(filepath.Join(outside, "new.txt"), filepath.Join(root, "dg"))) // dangling, out
	must(t, os.Symlink("loop2", filepath.Join(root, "loop1")))
	must(t, os.Symlink("loop1", filepath.Join(root, "loop2")))
	r := builtinRegistry(t, BuiltinConfig{Root: root})

	attacks := []struct{ path, want string }{
		{"../secret/key.txt", "outside the workspace"},
		{"sub/../../secret/key.txt", "outside the workspace"},
		{filepath.Join(outside, "key.txt"), "outside the workspace"},
		{"/etc/passwd", "outside the workspace"},
		{"out/key.txt", "symlink"},
		{"k", "symlink"},
		{"loop1", "cannot be resolved"},
	}
	for _, a := range attacks {
		mustFail(t, call(t, r, ReadFileName, map[string]any{"path": a.path}), a.want)
		mustFail(t, call(t, r, ViewImageName, map[string]any{"path": a.path}), a.want)
		mustFail(t, call(t, r, WriteFileName, map[string]any{"path": a.path, "content": "pwned"}), a.want)
	}
	for _, p := range []string{"..", "out", "/"} {
		mustFail(t, call(t, r, ListDirName, map[string]any{"path": p}), "outside the workspace")
		mustFail(t, call(t, r, SearchFilesName, map[string]any{"pattern": "hunter", "path": p}), "outside the workspace")
	}
	// Writing through a dangling link or a linked directory must not create anything outside.
	mustFail(t, call(t, r, WriteFileName, map[string]any{"path": "dg", "content": "x"}), "dangling")
	mustFail(t, call(t, r, WriteFileName, map[string]any{"path": "out/new2.txt", "content": "x"}), "outside")
	for _, f := range []string{"new.txt", "new2.txt"} {
		if _, err := os.Stat(filepath.Join(outside, f)); !os.IsNotExist(err) {
			t.Errorf("%s was created outside the workspace", f)
		}
	}
	// A search from the root must not follow the link out either.
	res := mustOK(t, call(t, r, SearchFilesName, map[string]any{"pattern": "hunter"}))
	if contains(res.Text, "hunter2") {
		t.Errorf("search followed a symlink out: %s", res.Text)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "key.txt")); string(b) != "hunter2\n" {
		t.Error("outside file was modified")
	}
}

func TestConfinementAllowsInsidePaths(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a/b.txt": "bee\n"})
	must(t, os.Symlink("a", filepath.Join(root, "alias")))                      // relative link, inside
	must(t, os.Symlink(filepath.Join(root, "a"), filepath.Join(root, "absln"))) // absolute link, inside
	r := builtinRegistry(t, BuiltinConfig{Root: root})
	for _, p := range []string{"a/b.txt", "./a/../a/b.txt", filepath.Join(root, "a/b.txt"), "alias/b.txt", "absln/b.txt"} {
		if res := mustOK(t, call(t, r, ReadFileName, map[string]any{"path": p})); !contains(res.Text, "bee") {
			t.Errorf("%s: %s", p, res.Text)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
