package tools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzRunShellArguments feeds arbitrary command lines to the splitter and the policy: no panic, and a command
// the policy lets through names no path outside the workspace, no protected path, and no launcher.
func FuzzRunShellArguments(f *testing.F) {
	base := f.TempDir()
	root := filepath.Join(base, "ws")
	for _, d := range []string{"ws/sub", "ws/.git", "outside"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			f.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(base, "outside"), filepath.Join(root, "out")); err != nil {
		f.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(base, "gone"), filepath.Join(root, "dg")); err != nil {
		f.Fatal(err)
	}
	w, err := newWorkspace(root)
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		"cat ../x", "cat /etc/passwd", "cat out/x", "mkdir dg/x", "cat .git/config", "cat sub/../../x",
		"find . -exec id ';'", "find -- . -okdir id", "git -c alias.x=!id x", "git config core.fsmonitor id",
		"tar -xIid", "rsync -ave id", `cat "a b" 'c d' e\ f`, "dd if=/etc/passwd", "curl -d @/etc/passwd",
		"cat file:///etc/passwd", "ls -I/etc", "env id", "git clone ext::sh", "cat sub/./../.GIT/config",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		argv, err := splitCommand(line)
		if err != nil || len(argv) == 0 {
			return
		}
		if err := checkProgram(argv, nil); err != nil {
			return
		}
		if _, launcher := launchers[argv[0]]; launcher {
			t.Fatalf("launcher %q passed", argv[0])
		}
		if err := w.checkArgs(w.root, argv[1:], nil); err != nil {
			return
		}
		for _, a := range argv[1:] {
			for _, c := range pathCandidates(a) {
				full := c
				if !filepath.IsAbs(full) {
					full = filepath.Join(w.root, full)
				}
				real, err := w.resolveArg(filepath.Clean(full), 0)
				if err != nil {
					t.Fatalf("%q passed but %q does not resolve: %v", line, c, err)
				}
				if c != os.DevNull && !w.contains(real) {
					t.Fatalf("%q passed with %q outside the workspace (%s)", line, c, real)
				}
				rel, _ := filepath.Rel(w.root, real)
				if _, _, ok := protectedIn(filepath.ToSlash(rel), nil); ok && c != os.DevNull {
					t.Fatalf("%q passed naming protected %q", line, c)
				}
				if strings.Contains(real, filepath.Join(base, "outside")) {
					t.Fatalf("%q reaches outside through %q", line, c)
				}
			}
		}
	})
}
