package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/visorhq/visor/engine/launch"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/syncbuf"
	"github.com/visorhq/visor/internal/testkit"
	"github.com/visorhq/visor/internal/testmodel"
)

// TestGatewayCommand runs `visor gateway` on a config file: the model starts on the first request, answers an
// OpenAI client, is advertised so `visor ask` reuses it, and the traffic is stored with --store.
func TestGatewayCommand(t *testing.T) {
	enginetest.Binary(t)
	t.Setenv("VISOR_ENGINE_DIR", t.TempDir()) // run files go under the engine dir; keep them private to the test
	t.Setenv("VISOR_LLAMA_SERVER", enginetest.Binary(t))
	dir := t.TempDir()
	chat, _, err := testmodel.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "models.yaml")
	if err := os.WriteFile(cfg, []byte("idle_unload: 10m\npreload: [tiny]\nmodels:\n  tiny:\n    model: "+chat+"\n    ctx: 4096\n    args: [-t, \"2\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "visor.db")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base, done, errb := startGateway(t, ctx, "tiny", "--config", cfg, "--addr", "127.0.0.1:0", "--store", "--db", db)
	// Preloaded: the model answers before any request asked for it.
	if m := regexp.MustCompile(`visor_gateway_model_loaded\{model="tiny"\} 1`).FindString(get(t, base+"/metrics")); m == "" {
		t.Fatalf("tiny is not loaded after start:\n%s", get(t, base+"/metrics"))
	}
	oc := openai.DefaultConfig("")
	oc.BaseURL = base + "/v1"
	r, err := openai.NewClientWithConfig(oc).CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "tiny",
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hello gateway"}}})
	if err != nil || r.Choices[0].Message.Content != "Hi!" {
		t.Fatalf("chat through visor gateway: %+v %v\n%s", r, err, errb.String())
	}
	// The management commands.
	if o, _, err := visor(t, "gateway", "running", "--url", base); err != nil || !strings.Contains(o, "tiny\tloaded") {
		t.Fatalf("gateway running: %v %q", err, o)
	}
	if o, _, err := visor(t, "gateway", "unload", "tiny", "--url", base); err != nil || !strings.Contains(o, "tiny\tunloaded") {
		t.Fatalf("gateway unload: %v %q", err, o)
	}
	if o, _, err := visor(t, "gateway", "running", "--url", base); err != nil || !strings.Contains(o, "no model is loaded") {
		t.Fatalf("gateway running after unload: %v %q", err, o)
	}
	if _, _, err := visor(t, "gateway", "load", "nope", "--url", base); err == nil || !strings.Contains(err.Error(), `"nope" does not exist here`) {
		t.Fatalf("gateway load nope: %v", err)
	}
	if o, _, err := visor(t, "gateway", "load", "tiny", "--url", base); err != nil || !strings.Contains(o, "tiny\tloaded") {
		t.Fatalf("gateway load: %v %q", err, o)
	}
	// A second gateway on the same model starts an engine of its own: it could not unload another's.
	ctx2, cancel2 := context.WithCancel(ctx)
	base2, done2, errb2 := startGateway(t, ctx2, "tiny", "--config", cfg, "--addr", "127.0.0.1:0")
	if strings.Contains(errb2.String(), "reusing") || !strings.Contains(get(t, base2+"/metrics"), `visor_gateway_model_loaded{model="tiny"} 1`) {
		t.Fatalf("the second gateway did not start its own engine:\n%s", errb2.String())
	}
	cancel2()
	if err := <-done2; err != nil {
		t.Fatalf("second gateway: %v", err)
	}
	// The gateway's engine is advertised like a `visor serve` one.
	if o, e, err := visor(t, "ask", "hi", "--model", chat, "--ctx", "4096", "--server-arg", "-t", "--server-arg", "2", "--no-store"); err != nil ||
		!strings.Contains(e, "reusing the engine") || strings.TrimSpace(o) != "Hi!" {
		t.Fatalf("ask did not reuse the gateway's engine: %v\n%s\n%s", err, o, e)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("gateway: %v\n%s", err, errb.String())
	}
	if files, _ := filepath.Glob(filepath.Join(launch.RunDir(), "*.json")); len(files) != 0 {
		t.Fatalf("the gateway left its run file behind: %v", files)
	}
	o, _, err := visor(t, "sessions", "search", "gateway", "--db", db)
	if err != nil || !strings.Contains(o, "hello [gateway]") {
		t.Fatalf("the stored exchange is not searchable: %v\n%s", err, o)
	}
}

// startGateway runs `visor gateway ARGS` until ctx ends and returns its base URL once it serves names.
func startGateway(t *testing.T, ctx context.Context, names string, args ...string) (base string, done chan error, errb *syncbuf.Buffer) {
	t.Helper()
	out := &syncbuf.Buffer{}
	errb = &syncbuf.Buffer{}
	done = make(chan error, 1)
	go func() { done <- run(ctx, append([]string{"gateway"}, args...), strings.NewReader(""), out, errb) }()
	re := regexp.MustCompile(`endpoint at (http://\S+)/v1 serving ` + regexp.QuoteMeta(names))
	waitFor(t, "visor gateway to listen", func() bool {
		select {
		case err := <-done:
			t.Fatalf("gateway exited: %v\n%s", err, errb.String())
		default:
		}
		if m := re.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
		}
		return base != ""
	})
	return base, done, errb
}

// TestGatewayEndpointSendsTheKey: `visor gateway --endpoint URL --api-key KEY` sends the key to a real
// llama-server that requires a key (LLAMA_API_KEY; without it the server answers 401).
func TestGatewayEndpointSendsTheKey(t *testing.T) {
	srv := enginetest.Tiny(t, false, llamacpp.Config{Env: []string{"LLAMA_API_KEY=s3cret"}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base, done, errb := startGateway(t, ctx, "remote", "--endpoint", srv.URL(), "--api-key", "s3cret", "--addr", "127.0.0.1:0")
	oc := openai.DefaultConfig("")
	oc.BaseURL = base + "/v1"
	r, err := openai.NewClientWithConfig(oc).CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "remote",
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hello"}}})
	if err != nil || r.Choices[0].Message.Content != "Hi!" {
		t.Fatalf("chat through the gateway to a keyed server: %+v %v\n%s", r, err, errb.String())
	}
	cancel()
	<-done
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestGatewayCommandErrorsNameTheFix(t *testing.T) {
	enginetest.Binary(t)
	t.Setenv("VISOR_LLAMA_SERVER", enginetest.Binary(t))
	dir := t.TempDir()
	write := func(name, body string) string { return testkit.WriteFile(t, dir, name, body) }
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"gateway"}, []string{"--config models.yaml", "--model FILE.gguf"}},
		{[]string{"gateway", "--config", write("typo.yaml", "models:\n  a:\n    modle: x.gguf\n")}, []string{"typo.yaml", "modle"}},
		{[]string{"gateway", "--config", write("both.yaml", "models:\n  a:\n    model: x.gguf\n    endpoint: http://h:1\n  b: {}\n")},
			[]string{`model "a": both model and endpoint`, `model "b": give model: FILE.gguf, or endpoint`}},
		{[]string{"gateway", "--config", write("missing.yaml", "models:\n  a:\n    model: "+filepath.Join(dir, "nope.gguf")+"\n")},
			[]string{`model "a"`, "nope.gguf: no such file"}},
		{[]string{"gateway", "--config", write("key.yaml", "models:\n  a:\n    endpoint: http://127.0.0.1:9/v1\n    api_key_env: VISOR_TEST_UNSET_KEY\n")},
			[]string{"api_key_env VISOR_TEST_UNSET_KEY is not set"}},
		{[]string{"gateway", "--model", filepath.Join(dir, "x.gguf"), "--addr", "0.0.0.0:8080"}, []string{"--addr", "API key", "VISOR_SERVE_KEY"}},
		{[]string{"gateway", "--config", write("idle.yaml", "idle_unload: soon\nmodels:\n  a:\n    endpoint: http://127.0.0.1:9/v1\n")},
			[]string{"idle.yaml", `"soon" is not a duration: write it as 90s, 15m or 2h`}},
		{[]string{"gateway", "--config", write("two.yaml", "models:\n  a:\n    endpoint: http://127.0.0.1:9/v1\n---\naddr: 0.0.0.0:8080\n")},
			[]string{"two.yaml", "line 4: a second YAML document"}},
		{[]string{"gateway", "--config", write("open.yaml", "addr: 0.0.0.0:8080\nmodels:\n  a:\n    endpoint: http://127.0.0.1:9/v1\n")},
			[]string{"0.0.0.0:8080", "API key", "VISOR_SERVE_KEY"}},
		{[]string{"gateway", "--config", write("noport.yaml", "addr: 0.0.0.0\nmodels:\n  a:\n    endpoint: http://127.0.0.1:9/v1\n")},
			[]string{`"0.0.0.0"`, "HOST:PORT"}},
		{[]string{"gateway", "--config", write("empty.yaml", "")}, []string{"empty.yaml is empty"}},
		{[]string{"gateway", "--config", write("preload.yaml", "preload: [b]\nmodels:\n  a:\n    endpoint: http://127.0.0.1:9/v1\n")},
			[]string{`preload: no model "b": name one of a`}},
	} {
		_, _, err := visor(t, tc.args...)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("visor %v: %v, want it to say %q", tc.args, err, w)
			}
		}
	}
}
