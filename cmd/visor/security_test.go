package main

import (
	"strings"
	"testing"
)

// A bad tool flag is refused before any engine starts, with the value and the fix, and without the panic the
// store's cleanup used to hit on this early error path.
func TestBadToolFlagsAreClearErrors(t *testing.T) {
	db := t.TempDir() + "/v.db"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tools", "run_shell", "--allow-shell", "/bin/ls"}, `"/bin/ls" is a path, not a program name: allow "ls" instead`},
		{[]string{"--tools", "run_shell", "--allow-shell", "ls,env"}, "--allow-shell-launcher env"},
		{[]string{"--tools", "write_file", "--allow-protected", ".gti"}, `".gti": not a protected name`},
		{[]string{"--tools", "nosuch"}, `--tools: no built-in tool "nosuch"`},
	} {
		args := append([]string{"ask", "hi", "--endpoint", "http://127.0.0.1:1", "--db", db}, c.args...)
		_, _, err := visor(t, args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}

func TestToolcallsToolsFileRefusesDevices(t *testing.T) {
	_, _, err := visor(t, "toolcalls", "parse", "--tools", "/dev/zero")
	if err == nil || !strings.Contains(err.Error(), "--tools: /dev/zero is a character device") {
		t.Fatalf("--tools /dev/zero: %v", err)
	}
}
