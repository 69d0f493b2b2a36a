package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFileKind: the three YAML files visor reads are told apart by name first, then by their keys.
func TestFileKind(t *testing.T) {
	for _, c := range []struct{ path, src, want string }{
		{"x/config.yaml", "name: a\n", "config"},
		{"x/models.yml", "name: a\n", "gateway"},
		{"a.yaml", "name: a\nmodel: {path: m.gguf}\n", "agent"},
		{"a.yaml", "addr: 127.0.0.1:8080\n", "gateway"},
		{"a.yaml", "models:\n  q:\n    model: q.gguf\n", "gateway"},
		{"a.yaml", "models:\n  q:\n    path: q.gguf\n", "config"},
		{"a.yaml", ": not yaml [", "agent"},
	} {
		if got := FileKind(c.path, []byte(c.src)); got != c.want {
			t.Errorf("FileKind(%s, %q) = %s, want %s", c.path, c.src, got, c.want)
		}
	}
}

// TestValidateHandsGatewayFilesToTheGateway: a gateway models file is checked by the gateway's parser, and its
// problem names the file when the parser's does not.
func TestValidateHandsGatewayFilesToTheGateway(t *testing.T) {
	p := filepath.Join(t.TempDir(), "models.yaml")
	if err := os.WriteFile(p, []byte("models: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	what, err := Validate(p, func(path string, data []byte) error {
		if path != p || string(data) != "models: {}\n" {
			t.Errorf("gateway parser got %s %q", path, data)
		}
		return errors.New("no models")
	})
	if what != " (gateway models file)" || err == nil || err.Error() != p+" (a gateway models file): no models" {
		t.Errorf("Validate = %q, %v", what, err)
	}
	if _, err := Validate(filepath.Join(t.TempDir(), "missing.yaml"), nil); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("a missing file: %v", err)
	}
}
