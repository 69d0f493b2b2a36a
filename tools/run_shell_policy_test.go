//go:build unix

package tools

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Not parallel: it sets the process environment the child would inherit.
func TestRunShellCleanEnvironment(t *testing.T) {
	root := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(root, "bin"), 0o755))
	t.Setenv("VISOR_API_KEY", "sk-visor-secret")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
	t.Setenv("LD_PRELOAD", "/tmp/evil.so")
	t.Setenv("LC_ALL", "C")
	t.Setenv("PATH", filepath.Join(root, "bin")+":.::bin:"+os.Getenv("PATH"))
	r := builtinRegistry(t, BuiltinConfig{Root: root, Shell: []string{"printenv"}})
	res := mustOK(t, call(t, r, RunShellName, map[string]any{"command": "printenv"}))
	for _, secret := range []string{"sk-visor-secret", "aws-secret", "evil.so"} {
		if strings.Contains(res.Text, secret) {
			t.Errorf("the command saw %s:\n%s", secret, res.Text)
		}
	}
	if !strings.Contains(res.Text, "LC_ALL=C\n") || !strings.Contains(res.Text, "HOME=") || !strings.Contains(res.Text, "PWD="+root) {
		t.Errorf("allowlisted variables missing:\n%s", res.Text)
	}
	for _, line := range strings.Split(res.Text, "\n") {
		if path, ok := strings.CutPrefix(line, "PATH="); ok {
			for _, d := range filepath.SplitList(path) {
				if d == "" || !filepath.IsAbs(d) || strings.HasPrefix(d, root) {
					t.Errorf("PATH keeps %q: %s", d, path)
				}
			}
		}
	}
	// A variable the user passes on purpose arrives; visor's own never do.
	t.Setenv("GOFLAGS", "-count=1")
	r = builtinRegistry(t, BuiltinConfig{Root: root, Shell: []string{"printenv"}, ShellEnv: []string{"GOFLAGS"}})
	if res := mustOK(t, call(t, r, RunShellName, map[string]any{"command": "printenv GOFLAGS"})); !strings.Contains(res.Text, "-count=1") {
		t.Errorf("ShellEnv: %s", res.Text)
	}
	if err := (BuiltinConfig{Shell: []string{"ls"}, ShellEnv: []string{"VISOR_API_KEY"}}).Check(); err == nil || !strings.Contains(err.Error(), "VISOR_API_KEY") {
		t.Errorf("passing VISOR_API_KEY: %v", err)
	}
}

// Not parallel: it puts the workspace on PATH.
func TestRunShellNeverRunsAPlantedProgram(t *testing.T) {
	root := t.TempDir()
	marker := filepath.Join(t.TempDir(), "ran")
	script := "#!/bin/sh\ntouch " + marker + "\n"
	writeFiles(t, root, map[string]string{"bin/ls": script, "bin/planted": script, "ls": script, "file.txt": "x"})
	for _, p := range []string{"bin/ls", "bin/planted", "ls"} {
		must(t, os.Chmod(filepath.Join(root, p), 0o755))
	}
	t.Setenv("PATH", filepath.Join(root, "bin")+":.:"+os.Getenv("PATH"))
	r := builtinRegistry(t, BuiltinConfig{Root: root, Shell: []string{"ls", "planted"}})
	res := mustOK(t, call(t, r, RunShellName, map[string]any{"command": "ls"}))
	if !strings.Contains(res.Text, "file.txt") {
		t.Errorf("ls did not run the system's ls: %s", res.Text)
	}
	mustFail(t, call(t, r, RunShellName, map[string]any{"command": "planted"}), "not installed")
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a program planted in the workspace ran")
	}
}

func TestRunShellConfinesPathArguments(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	root := filepath.Join(base, "ws")
	writeFiles(t, base, map[string]string{"secret/key": "hunter2\n", "ws/ok.txt": "fine\n", "ws/.git/config": "[core]\n"})
	must(t, os.Symlink(filepath.Join(base, "secret"), filepath.Join(root, "out")))
	must(t, os.Symlink(filepath.Join(base, "nothing"), filepath.Join(root, "dg")))
	r := builtinRegistry(t, BuiltinConfig{Root: root, Shell: []string{"cat", "mkdir", "cp", "ls", "head", "dd", "find", "grep"}})
	for _, c := range []struct{ cmd, want string }{
		{"cat " + filepath.Join(base, "secret/key"), "outside the workspace"},
		{"cat ../secret/key", "outside the workspace"},
		{"cat out/key", "symlink"},
		{"ls /", "outside the workspace"},
		{"head --lines=1 " + "-- ../secret/key", "outside the workspace"},
		{"dd if=../secret/key", "outside the workspace"},
		{"head -qn1../secret/key", "outside the workspace"},
		{"cat file://" + filepath.Join(base, "secret/key"), "outside the workspace"},
		{"mkdir dg/x", "outside the workspace"},
		{"cp ok.txt .git/hooks/pre-commit", "protected"},
		{"cat .git/config", "protected"},
		{"find -L . -name key -delete", "follows symlinks"}, // through out/ it would delete secret/key
		{"grep -R hunter2 .", "follows symlinks"},
	} {
		mustFail(t, call(t, r, RunShellName, map[string]any{"command": c.cmd}), c.want)
	}
	mustFail(t, call(t, r, RunShellName, map[string]any{"command": "ls", "dir": ".git"}), "protected")
	if b, err := os.ReadFile(filepath.Join(base, "secret/key")); err != nil || string(b) != "hunter2\n" {
		t.Error("a command reached the file outside through the link")
	}
	if res := mustOK(t, call(t, r, RunShellName, map[string]any{"command": "grep -r hunter2 ."})); strings.Contains(res.Text, "hunter2\n") {
		t.Errorf("grep -r followed the link out: %s", res.Text)
	}
	if _, err := os.Stat(filepath.Join(base, "nothing")); err == nil {
		t.Error("mkdir created a directory outside through a dangling link")
	}
	res := mustOK(t, call(t, r, RunShellName, map[string]any{"command": "cat ok.txt ./ok.txt /dev/null"}))
	if !strings.Contains(res.Text, "fine\nfine\n") {
		t.Errorf("inside paths: %s", res.Text)
	}
	mustOK(t, call(t, r, RunShellName, map[string]any{"command": "mkdir -p sub/dir"}))
}

func TestRunShellRefusesProgramsThatRunPrograms(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a.txt": "x"})
	r := builtinRegistry(t, BuiltinConfig{Root: root,
		Shell: []string{"env", "timeout", "xargs", "sh", "python3", "find", "git", "tar", "rsync", "rg", "go", "grep",
			"wget", "gcc", "man", "ldd", "cp"}})
	for _, c := range []struct{ cmd, want string }{
		{"env cat a.txt", "launcher"},
		{"timeout 5 rm a.txt", "launcher"},
		{"xargs rm", "launcher"},
		{"sh -c id", "launcher"},
		{"python3 -c 'import os'", "launcher"},
		{`find . -exec rm '{}' ';'`, "find -exec"},
		{`find . -execdir rm '{}' +`, "find -execdir"},
		{`find . -ok rm '{}' ';'`, "find -ok"},
		{`find -- . -okdir rm '{}' ';'`, "find -okdir"},
		{"git -c alias.x=!id x", "git -c"},
		{"git -c core.fsmonitor=id status", "git -c"},
		{"git --config-env=core.pager=X log", "git --config-env"},
		{"git config core.fsmonitor id", "git config may only read"},
		{"git config --global alias.x !id", "git config may only read"},
		{"git clone --upload-pack=id x y", "git clone --upload-pack"},
		{"git clone -u id x y", "git clone -u"},
		{"git fetch --upload-pack id origin", "--upload-pack"},
		{"git clone ext::id x", "ext::"},
		{"git submodule foreach id", "foreach"},
		{"git bisect run id", "bisect run"},
		{"git rebase -x id main", "git rebase -x"},
		{"git grep -O id x", "git grep -O"},
		{"git difftool", "diff program"},
		{"tar -xIid -f a.tar", "tar -I"},
		{"tar --to-command=id -xf a.tar", "--to-command"},
		{"rsync -ave id a.txt b", "rsync -e"},
		{"rg --pre id x", "rg --pre"},
		{"go test -exec id ./...", "go -exec"},
		{"go env -w GOFLAGS=-toolexec=id", "go env -w"},
		{"go test --exec=id ./...", "go -exec"},
		{"go vet -vettool=id ./...", "go -vettool"},
		{"go clean -modcache", "delete the user's caches"},
		{"tar --to-comm=id -xf a.tar", "tar --to-command"},
		{"git clone --upload=id x y", "git clone --upload-pack"},
		{"git maintenance start", "background jobs"},
		{"wget -e use_askpass=id http://x", "wget -e"},
		{"gcc -wrapper id a.c", "gcc -wrapper"},
		{"gcc -fplugin=./p.so a.c", "gcc -fplugin"},
		{"man -P id ls", "man -P"},
		{"ldd a.txt", "launcher"},
		{"find -L . -name a.txt", "follows symlinks"},
		{"grep -R x .", "follows symlinks"},
		{"grep -iR x .", "follows symlinks"},
		{"rg --follow x", "follows symlinks"},
		{"cp -L a.txt b", "follows symlinks"},
		{"rsync -avL a.txt b", "follows symlinks"},
	} {
		mustFail(t, call(t, r, RunShellName, map[string]any{"command": c.cmd}), c.want)
	}
	if _, err := os.Stat(filepath.Join(root, "a.txt")); err != nil {
		t.Fatal("a refused command ran")
	}
	mustOK(t, call(t, r, RunShellName, map[string]any{"command": "find . -name a.txt"}))
	mustOK(t, call(t, r, RunShellName, map[string]any{"command": "grep -rn x ."}))
	if _, err := exec.LookPath("git"); err == nil {
		mustOK(t, call(t, r, RunShellName, map[string]any{"command": "git init -q"}))
		mustOK(t, call(t, r, RunShellName, map[string]any{"command": "git status --short"}))
		mustOK(t, call(t, r, RunShellName, map[string]any{"command": "git config --get core.bare"}))
	}

	// Named on purpose as a launcher, a program may run others.
	on := builtinRegistry(t, BuiltinConfig{Root: root, ShellLaunchers: []string{"find"}})
	res := mustOK(t, call(t, on, RunShellName, map[string]any{"command": `find . -name a.txt -exec echo found '{}' ';'`}))
	if !strings.Contains(res.Text, "found ./a.txt") {
		t.Errorf("find as a launcher: %s", res.Text)
	}
}

func TestShellAllowlistIsChecked(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg  BuiltinConfig
		want string
	}{
		{BuiltinConfig{Shell: []string{"/bin/ls"}}, `"/bin/ls" is a path, not a program name: allow "ls" instead`},
		{BuiltinConfig{Shell: []string{"ls -la"}}, "without arguments"},
		{BuiltinConfig{Shell: []string{"ls", ""}}, "empty program name"},
		{BuiltinConfig{Shell: []string{"ls", "env"}}, "--allow-shell-launcher env"},
		{BuiltinConfig{ShellLaunchers: []string{"./sh"}}, "is a path"},
	} {
		if err := c.cfg.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
	if err := (BuiltinConfig{Shell: []string{"ls", "sh"}, ShellLaunchers: []string{"sh"}}).Check(); err != nil {
		t.Errorf("a launcher named on purpose: %v", err)
	}
}
