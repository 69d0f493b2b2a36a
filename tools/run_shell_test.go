//go:build unix

package tools

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRunShell(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"sub/f.txt": "x"})
	r := builtinRegistry(t, BuiltinConfig{Root: root, Shell: []string{"echo", "pwd"}, ShellLaunchers: []string{"sh"}})

	res := mustOK(t, call(t, r, RunShellName, map[string]any{"command": `sh -c 'echo out; echo "err" >&2; exit 3'`}))
	if !strings.HasPrefix(res.Text, "Exit code: 3 (") || !strings.Contains(res.Text, "--- stdout ---\nout\n--- stderr ---\nerr\n") {
		t.Errorf("got %q", res.Text)
	}
	res = mustOK(t, call(t, r, RunShellName, map[string]any{"command": `echo "a  b" c\ d 'e"f'`}))
	if !strings.Contains(res.Text, "--- stdout ---\na  b c d e\"f\n") {
		t.Errorf("quoting: %q", res.Text)
	}
	res = mustOK(t, call(t, r, RunShellName, map[string]any{"command": "pwd", "dir": "sub"}))
	if !strings.Contains(res.Text, filepath.Join("sub")+"\n--- stderr") {
		t.Errorf("dir: %q", res.Text)
	}
	res = mustOK(t, call(t, r, RunShellName, map[string]any{"command": `sh -c 'kill -TERM $$'`}))
	if !strings.HasPrefix(res.Text, "Terminated: signal: terminated") {
		t.Errorf("signal: %q", res.Text)
	}
	mustFail(t, call(t, r, RunShellName, map[string]any{"command": "rm -rf ."}), `"rm" is not allowed`, "echo, pwd, sh")
	mustFail(t, call(t, r, RunShellName, map[string]any{"command": "/bin/echo hi"}), "not allowed")
	mustFail(t, call(t, r, RunShellName, map[string]any{"command": "echo hi; rm -rf ."}), "shell syntax")
	mustFail(t, call(t, r, RunShellName, map[string]any{"command": "echo $HOME"}), "shell syntax")
	mustFail(t, call(t, r, RunShellName, map[string]any{"command": "pwd", "dir": "../"}), "outside the workspace")
	mustFail(t, call(t, r, RunShellName, map[string]any{"command": `echo "unterminated`}), "unterminated")
}

func TestRunShellCapsOutput(t *testing.T) {
	t.Parallel()
	r := builtinRegistry(t, BuiltinConfig{Root: t.TempDir(), ShellLaunchers: []string{"sh"}})
	res := mustOK(t, call(t, r, RunShellName, map[string]any{"command": `sh -c 'head -c 100000 /dev/zero | tr "\0" x; echo tail >&2'`}))
	if !strings.Contains(res.Text, "[output truncated: 24576 of 100000 bytes shown]") || !strings.Contains(res.Text, "--- stderr ---\ntail\n") {
		t.Errorf("got %q", res.Text[len(res.Text)-200:])
	}
}

// TestRunShellTimeoutKillsProcessGroup checks that a timeout kills the grandchildren too, not only the
// direct child, and that output written before the kill still reaches the model. The shell writes the
// grandchild's pid only after "started", so a pid in the file means "started" was written before the kill. On a
// loaded machine the shell may not get that far in 300 ms: then the timeout is quadrupled and the run repeated,
// since a kill before the setup shows nothing.
func TestRunShellTimeoutKillsProcessGroup(t *testing.T) {
	t.Parallel()
	for timeout := 300 * time.Millisecond; ; timeout *= 4 {
		root := t.TempDir()
		r := builtinRegistry(t, BuiltinConfig{Root: root, ShellLaunchers: []string{"sh"}, ShellTimeout: timeout})
		res := call(t, r, RunShellName, map[string]any{"command": `sh -c 'sleep 60 & echo started; echo $! > pid; wait'`})
		mustFail(t, res, "killed after timeout of "+timeout.String())
		b, err := os.ReadFile(filepath.Join(root, "pid"))
		pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
		if (err != nil || perr != nil) && timeout < time.Minute {
			t.Logf("the shell had not started its child within %s; again with a longer timeout", timeout)
			continue
		}
		must(t, err)
		must(t, perr)
		mustFail(t, res, "started")
		// SIGKILL needs the process to be scheduled to take effect: wait as long as a loaded machine may take.
		deadline := time.Now().Add(30 * time.Second)
		for alive(pid) {
			if time.Now().After(deadline) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("grandchild %d survived the timeout", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
		return
	}
}

func TestSplitCommand(t *testing.T) {
	t.Parallel()
	got, err := splitCommand(`go test -run 'TestA|TestB' ./... "x y" a\"b`)
	want := []string{"go", "test", "-run", "TestA|TestB", "./...", "x y", `a"b`}
	if err != nil || strings.Join(got, "\x00") != strings.Join(want, "\x00") {
		t.Errorf("got %q, %v", got, err)
	}
	for _, bad := range []string{"a | b", "a && b", "a > f", "echo `id`", `echo "$(id)"`, "ls *.go"} {
		if _, err := splitCommand(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// alive reports whether pid runs; a zombie waiting for a non-reaping init (common in containers) counts as dead.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // no procfs: trust kill(2)
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) == 0 || fields[0] != "Z"
}
