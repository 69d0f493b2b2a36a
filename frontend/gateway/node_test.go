package gateway_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// nodeSDK finds node and the openai package scripts/test.sh installs (VISOR_NODE_MODULES, default
// ~/.cache/visor/npm/node_modules). Outside CI a missing one skips; in CI the test must run.
func nodeSDK(t *testing.T) (node, modules string) {
	t.Helper()
	fail := t.Skipf
	if os.Getenv("CI") != "" {
		fail = t.Fatalf
	}
	node, err := exec.LookPath("node")
	if err != nil {
		fail("the OpenAI Node SDK test needs node: install nodejs and npm, then scripts/test.sh installs the SDK")
		return "", ""
	}
	modules = os.Getenv("VISOR_NODE_MODULES")
	if modules == "" {
		if c, err := os.UserCacheDir(); err == nil {
			modules = filepath.Join(c, "visor", "npm", "node_modules")
		}
	}
	if _, err := os.Stat(filepath.Join(modules, "openai", "package.json")); err != nil {
		fail("the OpenAI Node SDK is not installed in %s: run scripts/test.sh (it runs npm install openai there)", modules)
		return "", ""
	}
	return node, modules
}

func TestGatewayWithOpenAINodeSDK(t *testing.T) {
	node, modules := nodeSDK(t)
	f := sharedFixture(t)
	img := filepath.Join(t.TempDir(), "img.png")
	if err := os.WriteFile(img, pngBytes(t), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "testdata/sdk.cjs", f.url, img)
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	var got struct {
		Chat, Stream, AfterResult, Image string
		StreamChunks, ImagePromptTokens  int
		Call, TextCall, TextStreamCall   [][]string
		TextFinish                       string
		TextContent                      *string
		Unknown                          []any
		Models                           []string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node printed %q: %v", out, err)
	}
	want := [][]string{{"list_dir", `{"path":"."}`}}
	switch {
	case got.Chat != "Hi!" || got.Stream != "Hi!" || got.StreamChunks < 3:
		t.Errorf("chat %q, stream %q in %d chunks", got.Chat, got.Stream, got.StreamChunks)
	case !reflect.DeepEqual(got.Call, want) || got.AfterResult != "Hi!":
		t.Errorf("tool round trip: call %v, then %q", got.Call, got.AfterResult)
	case got.Image != "Hi!" || got.ImagePromptTokens < 16:
		t.Errorf("image: %q with %d prompt tokens", got.Image, got.ImagePromptTokens)
	case !reflect.DeepEqual(got.TextCall, want) || got.TextFinish != "tool_calls" || (got.TextContent != nil && *got.TextContent != ""):
		t.Errorf("call left in content: %v finish %q content %v", got.TextCall, got.TextFinish, got.TextContent)
	case !reflect.DeepEqual(got.TextStreamCall, want):
		t.Errorf("streamed call left in content: %v", got.TextStreamCall)
	case len(got.Unknown) != 2 || got.Unknown[0] != float64(404) || !strings.Contains(got.Unknown[1].(string), "tiny, tiny-text, second"):
		t.Errorf("unknown model: %v", got.Unknown)
	case !reflect.DeepEqual(got.Models, []string{"tiny", "tiny-text", "second"}):
		t.Errorf("models %v", got.Models)
	}
}
