package gateway_test

import (
	"encoding/json"
	"fmt"
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

// nodeModule skips (fails in CI) when scripts/test.sh has not installed pkg beside the OpenAI SDK.
func nodeModule(t *testing.T, modules, pkg string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(modules, pkg, "package.json")); err != nil {
		fail := t.Skipf
		if os.Getenv("CI") != "" {
			fail = t.Fatalf
		}
		fail("%s is not installed in %s: run scripts/test.sh (it runs npm install there)", pkg, modules)
	}
}

// TestGatewayWithAgentSDKs: the Vercel AI SDK (its default Responses provider and its chat provider, generate
// and stream), LangChain JS (chat completions and useResponsesApi) and the OpenAI Node SDK's Responses API each
// run a conversation whose first message carries an image: the model calls list_dir, the SDK sends the result
// back, and the model answers.
func TestGatewayWithAgentSDKs(t *testing.T) {
	node, modules := nodeSDK(t)
	for _, p := range []string{"ai", "@ai-sdk/openai", "@langchain/openai", "@langchain/core"} {
		nodeModule(t, modules, p)
	}
	f := sharedFixture(t)
	img := filepath.Join(t.TempDir(), "img.png")
	if err := os.WriteFile(img, pngBytes(t), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "testdata/sdks.mjs", f.url, img, modules)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	type run struct {
		Text  string
		Steps int
		Calls []any
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node printed %q: %v", out, err)
	}
	for k, v := range got {
		if strings.HasSuffix(k, "Error") {
			t.Errorf("%s: %s", k, v)
		}
	}
	for _, name := range []string{"vercelResponses", "vercelResponsesStream", "vercelChat", "vercelChatStream"} {
		var r run
		_ = json.Unmarshal(got[name], &r)
		if r.Text != "Hi!" || r.Steps != 2 || len(r.Calls) != 1 || r.Calls[0] != `{"path":"."}` {
			t.Errorf("%s: %s: want list_dir {\"path\":\".\"} called once, then Hi! in 2 steps", name, got[name])
		}
	}
	for _, name := range []string{"langchainChat", "langchainResponses", "openaiResponses"} {
		var r struct {
			Text, StreamText, Model string
			Calls                   [][]string
		}
		_ = json.Unmarshal(got[name], &r)
		if r.Text != "Hi!" || !reflect.DeepEqual(r.Calls, [][]string{{"list_dir", `{"path":"."}`}}) ||
			name == "openaiResponses" && (r.StreamText != "Hi!" || r.Model != "tiny") {
			t.Errorf("%s: %s: want list_dir {\"path\":\".\"}, then Hi!", name, got[name])
		}
	}
	var unknown []any
	_ = json.Unmarshal(got["openaiResponsesUnknown"], &unknown)
	if len(unknown) != 2 || unknown[0] != float64(404) || !strings.Contains(fmt.Sprint(unknown[1]), `"nope" does not exist`) {
		t.Errorf("unknown model through responses: %s", got["openaiResponsesUnknown"])
	}
}
