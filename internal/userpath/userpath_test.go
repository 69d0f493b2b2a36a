package userpath

import (
	"path/filepath"
	"testing"
)

func TestExpandAndResolve(t *testing.T) {
	t.Setenv("HOME", "/home/ada")
	for in, want := range map[string]string{"~": "/home/ada", "~/m/q.gguf": "/home/ada/m/q.gguf", "~ada/x": "~ada/x", "/abs": "/abs", "rel": "rel"} {
		if got := Expand(in); got != want {
			t.Errorf("Expand(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"": "", "~/m.gguf": "/home/ada/m.gguf", "m.gguf": "/etc/visor/m.gguf",
		"../m.gguf": "/etc/m.gguf", "/abs/./m.gguf": "/abs/m.gguf"} {
		if got := Resolve("/etc/visor", in); got != filepath.Clean(want) && !(in == "" && got == "") {
			t.Errorf("Resolve(/etc/visor, %q) = %q, want %q", in, got, want)
		}
	}
}
