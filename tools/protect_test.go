//go:build unix

package tools

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestWriteFileRefusesProtectedPaths(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeFiles(t, root, map[string]string{".git/config": "[core]\n", "sub/.git/HEAD": "ref\n", "ok/readme": "x"})
	must(t, os.Symlink(".git", filepath.Join(root, "g")))
	r := builtinRegistry(t, BuiltinConfig{Root: root})
	for _, p := range []string{
		".git/config", ".git/hooks/pre-commit", "sub/.git/config", ".GIT/config", "g/config",
		".vscode/tasks.json", ".envrc", ".bashrc", "pkg/.npmrc", ".husky/pre-commit", ".devcontainer/devcontainer.json",
	} {
		mustFail(t, call(t, r, WriteFileName, map[string]any{"path": p, "content": "x"}), p, "protected", "ask the user to allow")
	}
	if b, _ := os.ReadFile(filepath.Join(root, ".git/config")); string(b) != "[core]\n" {
		t.Errorf(".git/config changed: %q", b)
	}
	for _, p := range []string{".git/hooks", ".vscode", ".husky", "pkg"} {
		if _, err := os.Stat(filepath.Join(root, p)); err == nil {
			t.Errorf("%s was created by a refused write", p)
		}
	}
	// Reading them stays allowed; ordinary dotfiles stay writable.
	mustOK(t, call(t, r, ReadFileName, map[string]any{"path": ".git/config"}))
	for _, p := range []string{".gitignore", ".gitattributes", ".gitmodules", "ok/.editorconfig", "gitconfig.txt"} {
		mustOK(t, call(t, r, WriteFileName, map[string]any{"path": p, "content": "x"}))
	}

	// The user may allow names one by one, or all at once.
	some := builtinRegistry(t, BuiltinConfig{Root: root, AllowProtected: []string{".vscode"}})
	mustOK(t, call(t, some, WriteFileName, map[string]any{"path": ".vscode/settings.json", "content": "{}"}))
	mustFail(t, call(t, some, WriteFileName, map[string]any{"path": ".git/config", "content": "x"}), "protected")
	all := builtinRegistry(t, BuiltinConfig{Root: root, AllowProtected: []string{"*"}})
	mustOK(t, call(t, all, WriteFileName, map[string]any{"path": ".git/info/exclude", "content": "x"}))
	if err := (BuiltinConfig{Root: root, AllowProtected: []string{".gti"}}).Check(); err == nil ||
		!strings.Contains(err.Error(), `".gti"`) || !strings.Contains(err.Error(), ".git, ") {
		t.Errorf("a typo in AllowProtected: %v", err)
	}
}

// TestGitConfigFsmonitorEscape is the escape the adversarial run found: a core.fsmonitor line written into
// .git/config runs its command, outside the workspace, at the user's next `git status`.
func TestGitConfigFsmonitorEscape(t *testing.T) {
	t.Parallel()
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	base := t.TempDir()
	root, marker := filepath.Join(base, "ws"), filepath.Join(base, "pwned")
	must(t, os.Mkdir(root, 0o755))
	git := func(args ...string) {
		cmd := exec.Command(gitBin, args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		_ = cmd.Run() // git status fails when the monitor misbehaves; only the marker matters
	}
	git("init", "-q")
	cfg, err := os.ReadFile(filepath.Join(root, ".git/config"))
	must(t, err)
	evil := string(cfg) + "[core]\n\tfsmonitor = touch " + marker + "\n"

	r := builtinRegistry(t, BuiltinConfig{Root: root})
	mustFail(t, call(t, r, WriteFileName, map[string]any{"path": ".git/config", "content": evil}), "protected")
	git("status")
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("git status ran the model's fsmonitor command")
	}

	// The premise: were the write allowed, git status would run it. Without this the test could not fail.
	allowed := builtinRegistry(t, BuiltinConfig{Root: root, AllowProtected: []string{".git"}})
	mustOK(t, call(t, allowed, WriteFileName, map[string]any{"path": ".git/config", "content": evil}))
	git("status")
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("premise broken: git status did not run core.fsmonitor (%v)", err)
	}
}

// os.Root confines names, not inodes: a hard link in the workspace to a file outside reads the outside file.
func TestFileToolsRefuseHardLinks(t *testing.T) {
	t.Parallel()
	root := hardLinkedWorkspace(t)
	base := filepath.Dir(root)
	r := builtinRegistry(t, BuiltinConfig{Root: root})
	mustFail(t, call(t, r, ReadFileName, map[string]any{"path": "key"}), "key has 2 hard links")
	mustFail(t, call(t, r, ViewImageName, map[string]any{"path": "key"}), "hard links")
	res := mustOK(t, call(t, r, SearchFilesName, map[string]any{"pattern": "hunter|fine"}))
	if strings.Contains(res.Text, "hunter2") || !strings.Contains(res.Text, "fine") {
		t.Errorf("search read through the hard link: %s", res.Text)
	}
	// Writing replaces the name with a new inode; the outside file keeps its content.
	mustOK(t, call(t, r, WriteFileName, map[string]any{"path": "key", "content": "new\n"}))
	if b, _ := os.ReadFile(filepath.Join(base, "secret/key")); string(b) != "hunter2\n" {
		t.Errorf("write went through the hard link: %q", b)
	}
}

func TestWriteFileRefusesFIFO(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	must(t, syscall.Mkfifo(filepath.Join(root, "pipe"), 0o644))
	r := builtinRegistry(t, BuiltinConfig{Root: root})
	mustFail(t, call(t, r, WriteFileName, map[string]any{"path": "pipe", "content": "x"}), "named pipe")
}
