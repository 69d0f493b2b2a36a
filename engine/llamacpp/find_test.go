package llamacpp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFindNamesWhereAWrongPathCameFrom: a missing or non-executable llama-server is reported by the setting
// that named it (--server, VISOR_LLAMA_SERVER) with the fix, not as stat's words under a doubled "llama-server".
func TestFindNamesWhereAWrongPathCameFrom(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "llama-server")
	if err := os.WriteFile(text, []byte("not a program"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "nope")
	for _, c := range []struct {
		explicit, env, want string
	}{
		{missing, "", "--server " + missing + ": no such file: give the path of a llama-server binary"},
		{text, "", "--server " + text + ": not an executable file: give the path"},
		{dir, "", "--server " + dir + ": not an executable file"},
		{"", missing, "VISOR_LLAMA_SERVER=" + missing + ": no such file: give the path of a llama-server binary, or leave it unset"},
	} {
		t.Setenv("VISOR_LLAMA_SERVER", c.env)
		_, err := Find(c.explicit)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("Find(%q) with VISOR_LLAMA_SERVER=%q: %v\nwant %q", c.explicit, c.env, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "stat ") {
			t.Errorf("stat's words: %v", err)
		}
	}
}
