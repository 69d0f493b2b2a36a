package agentfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/visorhq/visor/agent/agentfile"
)

func TestLoadResolvesPathsAgainstTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "coder.yaml")
	src := `
name: coder
description: reads code
model:
  path: models/m.gguf
  mmproj: models/p.gguf
  ctx: 8192
  cache_type: q8_0
system: |
  You read code.
tools: [list_dir, read_file]
workspace: ../repo
mcp:
  - name: fs
    command: [mcp-fs, --root, .]
max_steps: 5
temperature: 0.2
`
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := agentfile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.Model.Path != filepath.Join(dir, "models/m.gguf") || s.Model.MMProj != filepath.Join(dir, "models/p.gguf") ||
		s.Workspace != filepath.Join(filepath.Dir(dir), "repo") {
		t.Fatalf("paths not resolved against the file: %+v", s)
	}
	if s.System != "You read code.\n" || len(s.Tools) != 2 || s.MaxSteps != 5 || *s.Temperature != 0.2 ||
		s.Model.Ctx != 8192 || s.MCP[0].Command[0] != "mcp-fs" {
		t.Fatalf("fields: %+v", s)
	}
}

func TestInvalidFilesNameTheProblem(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"unknown key with line", "name: a\nmodel: {endpoint: http://x}\nmax_stpes: 3\n", "line 3: field max_stpes not found"},
		{"no name", "model: {endpoint: http://x}\n", "name is missing"},
		{"bad name", "name: 'my agent'\nmodel: {endpoint: http://x}\n", "letters, digits"},
		{"no model", "name: a\n", "give `path: model.gguf`"},
		{"both", "name: a\nmodel: {path: m.gguf, endpoint: http://x}\n", "keep one"},
		{"endpoint with ctx", "name: a\nmodel: {endpoint: http://x, ctx: 4096}\n", "no effect"},
		{"bad tool mode", "name: a\nmodel: {endpoint: http://x}\ntool_mode: magic\n", "tool_mode \"magic\": use one of"},
		{"bad temperature", "name: a\nmodel: {endpoint: http://x}\ntemperature: 9\n", "from 0 to 2"},
		{"mcp without transport", "name: a\nmodel: {endpoint: http://x}\nmcp: [{name: fs}]\n", "command:"},
		{"mcp twice", "name: a\nmodel: {endpoint: http://x}\nmcp: [{name: fs, url: http://a}, {name: fs, url: http://b}]\n", "used twice"},
		{"api key env empty", "name: a\nmodel: {endpoint: http://x, api_key_env: VISOR_TEST_SURELY_UNSET}\n", "export it"},
		{"wrong type", "name: a\nmodel: {endpoint: http://x}\nmax_steps: many\n", "line 3"},
		{"not yaml", "name: [\n", "invalid agent file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := agentfile.Parse([]byte(tc.src), "agents/a.yaml")
			if !errors.Is(err, agentfile.ErrInvalid) || !strings.Contains(err.Error(), tc.want) ||
				!strings.Contains(err.Error(), "agents/a.yaml") {
				t.Fatalf("err %v, want ErrInvalid naming the file and %q", err, tc.want)
			}
		})
	}
}
