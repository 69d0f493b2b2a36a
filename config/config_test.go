package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/visorhq/visor/config"
)

func TestDefaultPathHonoursXDG(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", "/x/cfg")
	if p, _ := config.DefaultPath(); p != "/x/cfg/visor/config.yaml" {
		t.Errorf("with XDG_CONFIG_HOME: %s", p)
	}
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("HOME", "/home/u")
	if p, _ := config.DefaultPath(); p != "/home/u/.config/visor/config.yaml" {
		t.Errorf("without: %s", p)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	src := `model: small
models:
  small:
    path: models/s.gguf
    mmproj: models/p.gguf
    ctx: 4096
    server_args: [--threads, "2"]
  remote:
    endpoint: http://gpu:8080
tools: [list_dir, read_file]
workspace: ws
`
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	m := c.Models["small"]
	if c.Model != "small" || m.Path != filepath.Join(dir, "models/s.gguf") || m.MMProj != filepath.Join(dir, "models/p.gguf") ||
		m.Ctx != 4096 || len(m.ServerArgs) != 2 || c.Workspace != filepath.Join(dir, "ws") || len(c.Tools) != 2 {
		t.Fatalf("config %+v", c)
	}
	if c, err := config.Load(filepath.Join(dir, "absent.yaml")); err != nil || c.Model != "" {
		t.Fatalf("a missing file is an empty config: %+v %v", c, err)
	}
}

func TestInvalidConfigNamesLineAndFix(t *testing.T) {
	cases := []struct{ src, want string }{
		{"model: big\nmodels:\n  small: {path: s.gguf}\n", "c.yaml:1:1: model \"big\" is not one of the models below — add it under `models:` or use one of: small"},
		{"models:\n  small:\n    pth: s.gguf\n", `c.yaml:3:5: unknown key pth in models.small — did you mean path?`},
		{"models:\n  small: {ctx: 4096}\n", "c.yaml:2:3: model small has neither path nor endpoint"},
		{"tools: list_dir\n", "c.yaml:1:8: tools should be a list"},
	}
	for _, tc := range cases {
		_, err := config.Parse([]byte(tc.src), "c.yaml")
		if !errors.Is(err, config.ErrInvalid) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q:\n got %v\nwant %s", tc.src, err, tc.want)
		}
	}
}

// TestSchemaIsPublished keeps schema/config.schema.json equal to the schema generated from Config
// (VISOR_UPDATE_SCHEMA=1 rewrites it).
func TestSchemaIsPublished(t *testing.T) {
	b, err := config.Schema()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "schema", "config.schema.json")
	if os.Getenv("VISOR_UPDATE_SCHEMA") != "" {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pub, err := os.ReadFile(path)
	if err != nil || string(pub) != string(b) {
		t.Fatalf("%s is not the schema generated from config.Config (err %v): run VISOR_UPDATE_SCHEMA=1 go test ./config ./agent/agentfile", path, err)
	}
}

// TestExampleConfigLoads keeps examples/config.yaml valid.
func TestExampleConfigLoads(t *testing.T) {
	c, err := config.Load(filepath.Join("..", "examples", "config.yaml"))
	if err != nil || c.Model == "" || len(c.Models) < 2 {
		t.Fatalf("examples/config.yaml: %+v %v", c, err)
	}
}
