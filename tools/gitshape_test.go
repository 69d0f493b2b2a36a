//go:build unix

package tools

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// realGit runs the user's git (no global or system config) in dir, as the user would after the model's turn; it
// reports nothing, since only what git ran matters.
func realGit(t *testing.T, dir string, args ...string) {
	t.Helper()
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	cmd := exec.Command(gitBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_CEILING_DIRECTORIES="+filepath.Dir(dir))
	_ = cmd.Run()
}

// plantedRepo is a folder that git takes for a repository although it is not named .git: HEAD, objects/, refs/
// and a config whose core.fsmonitor touches marker. Written in order, file by file, as a model would.
func plantedRepo(marker string) [][2]string {
	return [][2]string{
		{"config", "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = ..\n\tfsmonitor = touch " + marker + "\n"},
		{"objects/info/packs", "\n"},
		{"refs/heads/.keep", ""},
		{"HEAD", "ref: refs/heads/main\n"},
	}
}

// Issue 24, finding 2: write_file made a subfolder (or the workspace root) into a git directory by shape, and the
// user's next `git status` there ran the model's core.fsmonitor command. Every order of the files is tried; the
// write that completes the shape, and every write into the shape, is refused.
func TestWriteFileCannotPlantAGitDirectory(t *testing.T) {
	t.Parallel()
	for _, folder := range []string{"evil", "."} {
		for _, order := range [][]int{{0, 1, 2, 3}, {3, 0, 2, 1}, {1, 2, 3, 0}} {
			base := t.TempDir()
			root, marker := filepath.Join(base, "ws"), filepath.Join(base, "pwned")
			must(t, os.Mkdir(root, 0o755))
			r := builtinRegistry(t, BuiltinConfig{Root: root})
			files := plantedRepo(marker)
			refused := 0
			for _, i := range order {
				res := call(t, r, WriteFileName, map[string]any{"path": path.Join(folder, files[i][0]), "content": files[i][1]})
				if res.IsError {
					refused++
					if !strings.Contains(res.Text, "look like a git directory") || !strings.Contains(res.Text, "allows .git") {
						t.Errorf("%s in %s: the refusal does not say why: %s", files[i][0], folder, res.Text)
					}
				}
			}
			if refused == 0 {
				t.Errorf("folder %s, order %v: every write of a git directory was accepted", folder, order)
			}
			realGit(t, filepath.Join(root, folder), "status")
			if _, err := os.Stat(marker); err == nil {
				t.Fatalf("folder %s, order %v: git status ran the model's core.fsmonitor command", folder, order)
			}
		}
	}

	// The premise: the same files, allowed, make git run the command. Without it the test could not fail.
	base := t.TempDir()
	root, marker := filepath.Join(base, "ws"), filepath.Join(base, "pwned")
	must(t, os.Mkdir(root, 0o755))
	allowed := builtinRegistry(t, BuiltinConfig{Root: root, AllowProtected: []string{".git"}})
	for _, f := range plantedRepo(marker) {
		mustOK(t, call(t, allowed, WriteFileName, map[string]any{"path": "evil/" + f[0], "content": f[1]}))
	}
	realGit(t, filepath.Join(root, "evil"), "status")
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("premise broken: git status in the planted folder did not run core.fsmonitor (%v)", err)
	}
}

// The shape is judged, not the names: files called HEAD, config, objects or refs alone are ordinary, and a real
// repository's work tree stays writable.
func TestGitShapeLeavesOrdinaryFilesAlone(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	realGit(t, root, "init", "-q")
	r := builtinRegistry(t, BuiltinConfig{Root: root})
	for _, p := range []string{"HEAD", "docs/config", "objects.go", "pkg/refs/refs.go", "src/main.go", "a/HEAD.md"} {
		mustOK(t, call(t, r, WriteFileName, map[string]any{"path": p, "content": "x"}))
	}
	// HEAD is now at the root; objects/ beside it completes the shape.
	mustFail(t, call(t, r, WriteFileName, map[string]any{"path": "objects/ab/cd", "content": "x"}), "would make the workspace root look like a git directory")
}

// run_shell's git: --git-dir, --work-tree and -C at a folder shaped like a git directory, or a working directory
// inside one, would run its config; each is refused, and git never runs the planted fsmonitor.
func TestRunShellGitCannotUseAPlantedGitDirectory(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	root, marker := filepath.Join(base, "ws"), filepath.Join(base, "pwned")
	must(t, os.Mkdir(root, 0o755))
	realGit(t, root, "init", "-q")
	// Planted some way the tools do not see (an archive extracted, a checkout): the shape is there already.
	files := map[string]string{}
	for _, f := range plantedRepo(marker) {
		files["evil/"+f[0]] = f[1]
	}
	files["sub/readme"] = "x"
	writeFiles(t, root, files)
	r := builtinRegistry(t, BuiltinConfig{Root: root, Shell: []string{"git", "touch", "mkdir"}})
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"command": "git --git-dir=evil status"}, "--git-dir"},
		{map[string]any{"command": "git --git-dir evil status"}, "--git-dir"},
		{map[string]any{"command": "git --work-tree=. --git-dir=evil status"}, "--work-tree"},
		{map[string]any{"command": "git -C evil status"}, `argument "evil" is evil, which looks like a git directory`},
		{map[string]any{"command": "git -C evil/refs status"}, "is inside evil, which looks like a git directory"},
		{map[string]any{"command": "git status", "dir": "evil"}, "looks like a git directory"},
		{map[string]any{"command": "git status", "dir": "evil/objects"}, "looks like a git directory"},
		{map[string]any{"command": "touch sub/HEAD"}, ""}, // no shape: allowed
		{map[string]any{"command": "mkdir sub/refs"}, "would make sub look like a git directory"},
	} {
		res := call(t, r, RunShellName, c.args)
		if c.want == "" {
			mustOK(t, res)
			continue
		}
		mustFail(t, res, c.want)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("run_shell's git ran the planted core.fsmonitor command")
	}
	// The workspace's own repository works as before.
	mustOK(t, call(t, r, RunShellName, map[string]any{"command": "git status"}))

	// Where the user allows .git, the policy lets -C through; git still neither takes the folder for a bare
	// repository nor runs an fsmonitor (the environment run_shell gives it).
	open := builtinRegistry(t, BuiltinConfig{Root: root, Shell: []string{"git"}, AllowProtected: []string{".git"}})
	call(t, open, RunShellName, map[string]any{"command": "git -C evil status"})
	call(t, open, RunShellName, map[string]any{"command": "git status", "dir": "evil"})
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("run_shell's git ran the planted core.fsmonitor command with .git allowed")
	}
	// The premise: the user's own git there runs it.
	realGit(t, filepath.Join(root, "evil"), "status")
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("premise broken: git status in the planted folder did not run core.fsmonitor (%v)", err)
	}
}

// os.Root confines names, not inodes: run_shell's path arguments are held to read_file's rule, so cat cannot read
// an outside file through a hard link in the workspace.
func TestRunShellRefusesHardLinkedArguments(t *testing.T) {
	t.Parallel()
	root := hardLinkedWorkspace(t)
	r := builtinRegistry(t, BuiltinConfig{Root: root, Shell: []string{"cat", "cp"}})
	for _, cmd := range []string{"cat key", "cat ./key", "cp key copy.txt"} {
		res := call(t, r, RunShellName, map[string]any{"command": cmd})
		if strings.Contains(res.Text, "hunter2") {
			t.Errorf("%s read the outside file through the hard link: %s", cmd, res.Text)
		}
		mustFail(t, res, "2 hard links")
	}
	if res := mustOK(t, call(t, r, RunShellName, map[string]any{"command": "cat ok.txt"})); !strings.Contains(res.Text, "fine") {
		t.Errorf("cat ok.txt: %s", res.Text)
	}
}
