package mcpserver_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/frontend/mcpserver"
	"github.com/visorhq/visor/internal/testkit"
	"github.com/visorhq/visor/session"
)

// serveEnv makes the test binary serve MCP on stdio (ServeIO, as `visor mcp serve` does) instead of running
// tests, so a real client can start it as its server command.
const serveEnv = "VISOR_MCPSERVER_TEST_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) == "1" {
		// testkit.FakeService's setup, without the *testing.T a serving process does not have.
		svc, err := session.New(session.Config{
			Engine:   testkit.FixedEngine{R: conductor.Ready{Client: engine.NewClient("http://127.0.0.1:9", ""), Generation: 1}},
			Vision:   session.VisionYes,
			NewAgent: func(conductor.Ready, llamacpp.Props) (session.Agent, error) { return echoRunner{}, nil }})
		var s *mcpserver.Server
		if err == nil {
			s, err = mcpserver.New(mcpserver.Config{Sessions: svc})
		}
		if err == nil {
			err = s.ServeIO(context.Background(), os.Stdin, os.Stdout)
		}
		if err != nil {
			log.Printf("test MCP server: %v", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// inspector returns the MCP Inspector CLI that scripts/install-mcp-inspector.sh installed (scripts/test.sh
// sets VISOR_MCP_INSPECTOR). Outside CI a missing one skips, saying how to get it; in CI it fails.
func inspector(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("VISOR_MCP_INSPECTOR")
	if bin == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("VISOR_MCP_INSPECTOR is not set: CI runs the MCP Inspector tests through scripts/test.sh, which installs it")
		}
		t.Skip("no MCP Inspector CLI: run scripts/install-mcp-inspector.sh and set VISOR_MCP_INSPECTOR to the path it prints")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("VISOR_MCP_INSPECTOR: %v", err)
	}
	return bin
}

// runInspector runs the CLI with args and decodes the JSON result it prints.
func runInspector(t *testing.T, bin string, env []string, args ...string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// The CLI gives a stdio server only a few of its own variables (HOME, PATH…); the rest are passed with -e.
	flags := []string{"--cli"}
	for _, e := range env {
		flags = append(flags, "-e", e)
	}
	cmd := exec.CommandContext(ctx, bin, append(flags, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("inspector %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " ")[:min(200, len(strings.Join(args, " ")))], err, out, stderr.String())
	}
	var res map[string]any
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("inspector printed no JSON result (%v): %s\nstderr: %s", err, out, stderr.String())
	}
	return res
}

func firstText(res map[string]any) string {
	content, _ := res["content"].([]any)
	if len(content) == 0 {
		return ""
	}
	c, _ := content[0].(map[string]any)
	s, _ := c["text"].(string)
	return s
}

// TestInspectorCLI drives visor's MCP server with the MCP Inspector's CLI, a real client from npm, over stdio
// (the test binary as the server command) and streamable HTTP: it lists the tools and calls ask with an image,
// which the client types from the tool's input schema.
func TestInspectorCLI(t *testing.T) {
	bin := inspector(t)
	img := pngBytes(t)
	call := []string{"--method", "tools/call", "--tool-name", "ask", "--tool-arg", "prompt=what is this?",
		"--tool-arg", fmt.Sprintf(`images=[{"data":%q,"mime":"image/png"}]`, base64.StdEncoding.EncodeToString(img))}
	want := fmt.Sprintf("1 images, %d bytes", len(img))

	stdio := []string{os.Args[0], "-test.run=^$"}
	env := []string{serveEnv + "=1"}
	list := runInspector(t, bin, env, append(append([]string{}, stdio...), "--method", "tools/list")...)
	if b, _ := json.Marshal(list); !strings.Contains(string(b), `"name":"ask"`) {
		t.Fatalf("stdio tools/list: %s", b)
	}
	if res := runInspector(t, bin, env, append(append([]string{}, stdio...), call...)...); res["isError"] == true || firstText(res) != want {
		t.Fatalf("stdio ask with an image: %v", res)
	}

	s, err := mcpserver.New(mcpserver.Config{Sessions: testkit.FakeService(t, echoRunner{}, nil)})
	if err != nil {
		t.Fatal(err)
	}
	url := listen(t, s)
	if res := runInspector(t, bin, nil, append([]string{url, "--transport", "http"}, call...)...); res["isError"] == true || firstText(res) != want {
		t.Fatalf("HTTP ask with an image: %v", res)
	}
}
