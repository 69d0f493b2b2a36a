package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testmodel"
)

// exampleFiles are the agent files in examples/ (config.yaml is the config file, models.yaml a gateway file).
func exampleFiles(t *testing.T) (agents []string, config, gateway string) {
	t.Helper()
	all, err := filepath.Glob(filepath.Join("..", "..", "examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range all {
		switch filepath.Base(f) {
		case "config.yaml":
			config = f
		case "models.yaml":
			gateway = f
		default:
			agents = append(agents, f)
		}
	}
	if len(agents) < 5 || config == "" || gateway == "" {
		t.Fatalf("examples/ should hold at least five agents, config.yaml and models.yaml: %v", all)
	}
	return agents, config, gateway
}

// TestExamplesValidateAndRunOnTheTinyModel: every example agent validates and runs as shipped on the tiny
// models (--model and --mmproj replace its model section), the screenshot ones with their screenshots and the MCP
// one with its real MCP server; a broken copy gets file:line:col and the fix.
func TestExamplesValidateAndRunOnTheTinyModel(t *testing.T) {
	agents, config, gateway := exampleFiles(t)
	out, _, err := visor(t, append([]string{"validate", config, gateway}, agents...)...)
	if err != nil || strings.Count(out, ": ok\n") != len(agents)+1 || !strings.Contains(out, gateway+": ok (gateway models file)") {
		t.Fatalf("validate examples: %v\n%s", err, out)
	}
	for _, ex := range append(agents, config) {
		b, _ := os.ReadFile(ex)
		if !strings.HasPrefix(string(b), "# yaml-language-server: $schema=../schema/") {
			t.Errorf("%s does not start with the yaml-language-server $schema header", ex)
		}
	}

	enginetest.Binary(t)
	dir := t.TempDir()
	chat, proj, err := testmodel.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range agents {
		b, _ := os.ReadFile(ex)
		if strings.Contains(string(b), "npx") {
			if _, err := exec.LookPath("npx"); err != nil {
				if os.Getenv("CI") != "" {
					t.Fatalf("%s runs an MCP server with npx, and npx is missing: apt-get install npm", ex)
				}
				t.Logf("skipping %s: no npx (apt-get install npm)", ex)
				continue
			}
		}
		t.Run(filepath.Base(ex), func(t *testing.T) {
			out, errOut, err := visor(t, "run", ex, "--model", chat, "--mmproj", proj, "--db", filepath.Join(dir, "v.db"))
			if err != nil || strings.TrimSpace(out) == "" {
				t.Errorf("visor run %s --model tiny: %v\nstdout %q\nstderr %s", ex, err, out, errOut)
			}
			// What a newcomer who copies an example sees: a run that went well logs no warning (every
			// screenshot example logged "prefill failed" for an image window cut that had nothing to do).
			if strings.Contains(errOut, "level=WARN") || strings.Contains(errOut, "level=ERROR") {
				t.Errorf("visor run %s logs a warning on a good run:\n%s", ex, errOut)
			}
		})
	}

	// examples/config.yaml as its comments say to use it: its tiny model, where visor models write (and visor
	// demo) put it, named with --model tiny; its tools answer from the folder visor runs in.
	t.Run("config.yaml", func(t *testing.T) {
		home := t.TempDir()
		if _, _, err := testmodel.Files(filepath.Join(home, ".cache", "visor", "models")); err != nil {
			t.Fatal(err)
		}
		t.Setenv("HOME", home)
		t.Setenv("VISOR_LLAMA_SERVER", enginetest.Binary(t))
		// --no-store with the config's session_search: the tool is left out, not the whole command refused.
		out, errOut, err := visor(t, "ask", "What is here?", "--config", config, "--model", "tiny", "--no-store")
		if err != nil || strings.TrimSpace(out) != "Hi!" || !strings.Contains(errOut, "→ list_dir") {
			t.Errorf("visor ask --config %s --model tiny: %v\nstdout %q\nstderr %s", config, err, out, errOut)
		}
	})

	src, _ := os.ReadFile(filepath.Join("..", "..", "examples", "reader.yaml"))
	broken := filepath.Join(dir, "reader.yaml")
	_ = os.WriteFile(broken, []byte(strings.Replace(string(src), "max_steps: 12", "max_step: twelve", 1)), 0o644)
	code, out, _ := visorExit(t, "", "validate", broken)
	line := 1 + strings.Count(string(src[:strings.Index(string(src), "max_steps")]), "\n")
	want := fmt.Sprintf(`%s:%d:1: unknown key max_step — did you mean max_steps?`, broken, line)
	if code != 1 || !strings.Contains(out, want) {
		t.Fatalf("validate a broken file: exit %d\n%s\nwant %s", code, out, want)
	}
}

// TestExampleGatewayFileServesItsModels runs `visor gateway` on examples/models.yaml as shipped, with the tiny
// models standing in for the files it names under a private home folder, and asks each model by name.
func TestExampleGatewayFileServesItsModels(t *testing.T) {
	_, _, gatewayFile := exampleFiles(t)
	bin := enginetest.Binary(t)
	home := t.TempDir()
	chat, proj, err := testmodel.Files(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// The paths examples/models.yaml names under ~, filled with the tiny models.
	src, err := os.ReadFile(gatewayFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range regexp.MustCompile(`~/(\S+\.gguf)`).FindAllStringSubmatch(string(src), -1) {
		file := chat
		if strings.Contains(p[1], "mmproj") {
			file = proj
		}
		dst := filepath.Join(home, p[1])
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(file, dst); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", home)
	t.Setenv("VISOR_ENGINE_DIR", t.TempDir())
	t.Setenv("VISOR_LLAMA_SERVER", bin)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base, done, errb := startGateway(t, ctx, "", "--config", gatewayFile, "--addr", "127.0.0.1:0")
	oc := openai.DefaultConfig("")
	oc.BaseURL = base + "/v1"
	client := openai.NewClientWithConfig(oc)
	for _, model := range []string{"tiny", "qwen"} {
		resp, err := client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: model,
			Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hello"}}})
		if err != nil || len(resp.Choices) == 0 || resp.Choices[0].Message.Content == "" {
			t.Fatalf("model %s through examples/models.yaml: %v %+v\n%s", model, err, resp, errb.String())
		}
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("gateway ended with %v", err)
	}
}

// TestDemoRunsTheLoopAndSaysSo: `visor demo` (what `make demo` runs) writes the tiny model, makes a real tool
// call on a real llama-server, and then says what the call was, since the tiny model's "Hi!" says nothing.
func TestDemoRunsTheLoopAndSaysSo(t *testing.T) {
	t.Setenv("VISOR_LLAMA_SERVER", enginetest.Binary(t))
	t.Setenv("VISOR_ENGINE_DIR", filepath.Join(t.TempDir(), "engine"))
	out, errOut, err := visor(t, "demo")
	if err != nil {
		t.Fatalf("visor demo: %v\n%s", err, errOut)
	}
	// The answer is stdout; the tool call and its result are shown on stderr, beside the progress lines.
	if !strings.Contains(out, "Hi!") {
		t.Errorf("demo answer missing from stdout:\n%s", out)
	}
	for _, want := range []string{"→ list_dir {\"path\":\".\"}", "notes.txt plan.md src/"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("demo lacks %q:\n%s", want, errOut)
		}
	}
	if !strings.Contains(errOut, "that loop is the point") || !strings.Contains(errOut, "VISOR_MODEL=") {
		t.Errorf("demo does not say what happened or how to go on:\n%s", errOut)
	}
}
