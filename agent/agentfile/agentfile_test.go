package agentfile_test

import (
	"bytes"
	"errors"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/visorhq/visor/agent/agentfile"
	"github.com/visorhq/visor/internal/testkit"
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
	// Load checks what the file names on disk.
	for _, f := range []string{"models/m.gguf", "models/p.gguf"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte("GGUF"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(filepath.Dir(dir), "repo"), 0o755); err != nil {
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
		{"unknown key with line", "name: a\nmodel: {endpoint: http://x}\nmax_stpes: 3\n", "a.yaml:3:1: unknown key max_stpes — did you mean max_steps?"},
		{"unknown nested key", "name: a\nmodel:\n  endpoint: http://x\n  colour: red\n", "a.yaml:4:3: unknown key colour — use one of path, mmproj"},
		{"no name", "model: {endpoint: http://x}\n", "name is missing"},
		{"bad name", "name: 'my agent'\nmodel: {endpoint: http://x}\n", "letters, digits"},
		{"both", "name: a\nmodel: {path: m.gguf, endpoint: http://x}\n", "keep one"},
		{"endpoint with ctx", "name: a\nmodel: {endpoint: http://x, ctx: 4096}\n", "no effect"},
		{"bad tool mode", "name: a\nmodel: {endpoint: http://x}\ntool_mode: magic\n", "a.yaml:3:1: tool_mode \"magic\" — use one of auto, native, raw"},
		{"bad temperature", "name: a\nmodel: {endpoint: http://x}\ntemperature: 9\n", "a.yaml:3:1: temperature 9 — use a number from 0 to 2"},
		{"mcp without transport", "name: a\nmodel: {endpoint: http://x}\nmcp: [{name: fs}]\n", "command:"},
		{"mcp twice", "name: a\nmodel: {endpoint: http://x}\nmcp: [{name: fs, url: http://a}, {name: fs, url: http://b}]\n", "used twice"},
		{"api key env empty", "name: a\nmodel: {endpoint: http://x, api_key_env: VISOR_TEST_SURELY_UNSET}\n", "export it"},
		{"wrong type", "name: a\nmodel: {endpoint: http://x}\nmax_steps: many\n", "a.yaml:3:1: max_steps is `many` — write a whole number"},
		{"list for a string", "name: a\nmodel: {endpoint: http://x}\nsystem: [a, b]\n", "a.yaml:3:1: system is a list — write text"},
		{"empty", "", "a.yaml:1:1: the file is empty — an agent file needs at least `name: my-agent`"},
		{"only comments", "# nothing yet\n\n", "a.yaml:1:1: the file is empty"},
		{"bare document marker", "---\n", "a.yaml:1:1: the file is empty"},
		{"second document", "name: a\nmodel: {endpoint: http://x}\n---\nname: b\n", "a.yaml:3:1: a second YAML document starts here"},
		{"second document broken", "name: a\nmodel: {endpoint: http://x}\n---\nname: [\n", "a.yaml:4:"},
		{"temperature nan", "name: a\nmodel: {endpoint: http://x}\ntemperature: .nan\n", "a.yaml:3:1: temperature .nan — use a number from 0 to 2"},
		{"temperature inf", "name: a\nmodel: {endpoint: http://x}\ntemperature: .inf\n", "a.yaml:3:1: temperature .inf — use a number from 0 to 2"},
		{"temperature -inf", "name: a\nmodel: {endpoint: http://x}\ntemperature: -.Inf\n", "a.yaml:3:1: temperature -.Inf — use a number from 0 to 2"},
		{"temperature negative", "name: a\nmodel: {endpoint: http://x}\ntemperature: -0.5\n", "a.yaml:3:1: temperature -0.5 — use a number from 0 to 2"},
		{"max_steps zero", "name: a\nmodel: {endpoint: http://x}\nmax_steps: 0\n", "a.yaml:3:1: max_steps 0 — the agent needs at least 1 step"},
		{"max_steps negative", "name: a\nmodel: {endpoint: http://x}\nmax_steps: -1\n", "a.yaml:3:1: max_steps -1 — "},
		{"max_tokens negative", "name: a\nmodel: {endpoint: http://x}\nmax_tokens: -5\n", "a.yaml:3:1: max_tokens -5 cannot be negative — "},
		{"ctx negative", "name: a\nmodel:\n  path: m.gguf\n  ctx: -1\n", "a.yaml:4:3: model.ctx -1 cannot be negative — "},
		{"parallel negative", "name: a\nmodel:\n  path: m.gguf\n  parallel: -2\n", "a.yaml:4:3: model.parallel -2 cannot be negative — "},
		{"endpoint without scheme", "name: a\nmodel:\n  endpoint: localhost:8080\n", "a.yaml:3:3: model.endpoint \"localhost:8080\" — give the server's http:// or https:// URL"},
		{"allow_shell path", "name: a\nmodel: {endpoint: http://x}\nallow_shell: [ls, /bin/cat]\n", `a.yaml:3:1: run_shell: "/bin/cat" is a path, not a program name — allow "cat" instead`},
		{"allow_shell launcher", "name: a\nmodel: {endpoint: http://x}\nallow_shell: [ls, env]\n", "a.yaml:3:1: run_shell — env runs the program its arguments name"},
		{"allow_protected typo", "name: a\nmodel: {endpoint: http://x}\nallow_protected: [.gti]\n", `a.yaml:3:1: allow protected ".gti" — not a protected name`},
		{"mcp url not http", "name: a\nmodel: {endpoint: http://x}\nmcp:\n  - {name: fs, url: 'ftp://h'}\n", "a.yaml:4:5: mcp fs: url \"ftp://h\" is not http(s) — give"},
		{"tool typo", "name: a\nmodel: {endpoint: http://x}\ntools: [list_dir, read_fiel]\n", `a.yaml:3:1: no built-in tool "read_fiel" (did you mean read_file?) — choose from`},
		{"run_shell not allowed", "name: a\nmodel: {endpoint: http://x}\ntools: [run_shell]\n", "a.yaml:3:1: run_shell runs only the commands it is allowed"},
		{"fetch_url not allowed", "name: a\nmodel: {endpoint: http://x}\ntools: [fetch_url]\n", "a.yaml:3:1: fetch_url reaches the network only when allowed"},
		{"not yaml", "name: [\n", "a.yaml:1:1: not valid YAML: did not find expected node content — check the indentation"},
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

func TestValidFilesPass(t *testing.T) {
	for _, src := range []string{
		"name: a\nmodel: {endpoint: http://x}\n",
		"---\nname: a\nmodel: {endpoint: http://x}\n",
		"name: a\nmodel: {endpoint: http://x}\n---\n", // an empty trailing document holds nothing to ignore
		"name: a\nmodel: {endpoint: http://x}\ntemperature: 0\nmax_steps: 1\nmax_tokens: 0\n",
		"name: a\nmodel: {endpoint: http://x}\nallow_shell: [ls, sh]\nallow_shell_launchers: [sh]\nallow_protected: [.vscode]\n",
		"name: a\nmodel: {endpoint: http://x}\ntools: [run_shell, fetch_url, session_search]\nallow_shell: [ls]\nallow_fetch: true\n",
	} {
		if _, err := agentfile.Parse([]byte(src), "a.yaml"); err != nil {
			t.Errorf("%q: %v", src, err)
		}
	}
}

func TestEndpointCredentialsStayOutOfErrors(t *testing.T) {
	_, err := agentfile.Parse([]byte("name: a\nmodel:\n  endpoint: 'alice:s3cret@host:8080'\n"), "a.yaml")
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("err %v", err)
	}
}

func TestLoadChecksTheDisk(t *testing.T) {
	dir := t.TempDir()
	testkit.WriteFile(t, dir, "m.gguf", "GGUF")
	for _, c := range []struct{ src, want string }{
		{"name: a\nmodel: {endpoint: http://x}\nworkspace: nowhere\n", ":3:1: workspace " + filepath.Join(dir, "nowhere") + " does not exist — create the folder"},
		{"name: a\nmodel: {endpoint: http://x}\nworkspace: m.gguf\n", ":3:1: workspace " + filepath.Join(dir, "m.gguf") + " is not a folder — "},
		{"name: a\nmodel:\n  path: missing.gguf\n", ":3:3: model.path " + filepath.Join(dir, "missing.gguf") + " does not exist — fix the path"},
		{"name: a\nmodel:\n  path: m.gguf\n  mmproj: /dev/zero\n", ":4:3: model.mmproj: /dev/zero is a character device"},
	} {
		_, err := agentfile.Load(testkit.WriteFile(t, dir, "a.yaml", c.src))
		if !errors.Is(err, agentfile.ErrInvalid) || !strings.Contains(err.Error(), filepath.Join(dir, "a.yaml")+c.want) {
			t.Errorf("%q: %v, want %q", c.src, err, c.want)
		}
	}
}

// TestModelMayComeFromTheCommandLine: a file without a model is valid; `visor run --model` or the config file
// names one.
func TestModelMayComeFromTheCommandLine(t *testing.T) {
	s, err := agentfile.Parse([]byte("name: a\n"), "a.yaml")
	if err != nil || s.Model.Path != "" || s.Model.Endpoint != "" {
		t.Fatalf("spec %+v, err %v", s, err)
	}
}

// TestSchemaIsPublished keeps schema/agent.schema.json equal to the schema generated from Spec
// (VISOR_UPDATE_SCHEMA=1 rewrites it).
func TestSchemaIsPublished(t *testing.T) {
	b, err := agentfile.Schema()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", "schema", "agent.schema.json")
	if os.Getenv("VISOR_UPDATE_SCHEMA") != "" {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pub, err := os.ReadFile(path)
	if err != nil || string(pub) != string(b) {
		t.Fatalf("%s is not the schema generated from agentfile.Spec (err %v): run VISOR_UPDATE_SCHEMA=1 go test ./config ./agent/agentfile", path, err)
	}
}

// TestStepsAreValidatedAndTheirImagesTakenIn: steps resolve their images against the file, and every mistake in
// them — a missing prompt, a typo, a missing or truncated image — is refused at load with its line, its step and
// the fix, before anything starts.
func TestStepsAreValidatedAndTheirImagesTakenIn(t *testing.T) {
	dir := t.TempDir()
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) string { return testkit.WriteFile(t, dir, name, content) }
	write("shots/a.png", b.String())
	write("shots/cut.png", b.String()[:b.Len()/2])
	write("notes.txt", "not an image")
	head := "name: a\nmodel: {endpoint: http://x}\n"
	s, err := agentfile.Load(write("ok.yaml", head+"steps:\n  - prompt: look\n    images: [shots/a.png]\n  - prompt: and now?\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Steps) != 2 || s.Steps[0].Images[0] != filepath.Join(dir, "shots", "a.png") || s.Steps[1].Prompt != "and now?" {
		t.Fatalf("steps %+v", s.Steps)
	}
	for _, c := range []struct{ name, src, want string }{
		{"no prompt", "steps:\n  - images: [shots/a.png]\n", ":4:5: step 1 has no prompt — give each step `prompt: …`"},
		{"prompt and steps", "prompt: hi\nsteps:\n  - prompt: look\n", ":3:1: prompt and steps are both set — keep steps"},
		{"typo", "steps:\n  - prompt: look\n    imgaes: [a.png]\n", ":5:5: unknown key imgaes — did you mean images?"},
		{"wrong type", "steps: look\n", ":3:1: steps is `look` — write a list of steps"},
		{"missing image", "steps:\n  - prompt: one\n  - prompt: two\n    images: [shots/a.png, shots/b.png]\n",
			":6:27: step 2: image " + filepath.Join(dir, "shots", "b.png") + " does not exist — fix the path"},
		{"truncated image", "steps:\n  - prompt: look\n    images:\n      - shots/cut.png\n",
			":6:9: step 1: image " + filepath.Join(dir, "shots", "cut.png") + ": image is corrupt or truncated"},
		{"not an image", "steps:\n  - prompt: look\n    images: [notes.txt]\n", ":5:14: step 1: image " + filepath.Join(dir, "notes.txt") + ": not an image visor accepts"},
	} {
		path := write("bad.yaml", head+c.src)
		_, err := agentfile.Load(path)
		if !errors.Is(err, agentfile.ErrInvalid) || !strings.Contains(err.Error(), path+c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if c.name == "truncated image" && (err == nil || !strings.Contains(err.Error(), "re-export")) {
			t.Errorf("the truncated image's error does not say what to do: %v", err)
		}
	}
}

// An MCP server's environment reaches the server in the order the file writes it, the same on every run (Env is
// a map, whose iteration order Go varies from run to run); keys YAML merges in from an anchor follow, sorted.
func TestMCPEnvKeepsTheFileOrder(t *testing.T) {
	src := `name: a
model: {endpoint: http://x}
mcp:
  - name: web
    command: [mcp-web]
    env: &base {B_MERGED: "1", A_MERGED: "2"}
  - name: fs
    command: [mcp-fs]
    env:
      <<: *base
      ZETA: z
      ALPHA: a
      MIKE: "m=1"
      BRAVO: b
      YANKEE: "y"
      CHARLIE: c
      XRAY: x
      DELTA: d
`
	want := []string{"ZETA=z", "ALPHA=a", "MIKE=m=1", "BRAVO=b", "YANKEE=y", "CHARLIE=c", "XRAY=x", "DELTA=d", "A_MERGED=2", "B_MERGED=1"}
	for range 5 {
		s, err := agentfile.Parse([]byte(src), "a.yaml")
		if err != nil {
			t.Fatal(err)
		}
		o := s.ToolOptions()
		if len(o.MCP) != 2 || !slices.Equal(o.MCP[1].Env, want) {
			t.Fatalf("MCP servers %+v: want fs's env in the file's order %q", o.MCP, want)
		}
	}
}
