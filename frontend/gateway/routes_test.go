package gateway_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/frontend/gateway"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testmodel"
)

// TestGatewayCompletions: /v1/completions reaches the real llama-server and answers with the requested name.
func TestGatewayCompletions(t *testing.T) {
	f := sharedFixture(t)
	c := f.client()
	r, err := c.CreateCompletion(context.Background(), openai.CompletionRequest{Model: "tiny", Prompt: "Hi", MaxTokens: 3})
	if err != nil || len(r.Choices) != 1 || r.Choices[0].Text == "" || r.Model != "tiny" || r.Usage.CompletionTokens == 0 {
		t.Fatalf("completion: %+v %v", r, err)
	}
	if st, b := postJSON(t, f.url+"/v1/completions", `{"model":"tiny"}`); st != 400 || !strings.Contains(string(b), `\"prompt\" must be text`) {
		t.Fatalf("no prompt: %d %s, want a 400 naming prompt", st, b)
	}
}

// TestGatewayEmbeddings: a model configured for embeddings (its real llama-server runs with --embeddings) answers
// /v1/embeddings with a vector per input; one that is not is a 400 that says how to configure it, before any
// engine starts.
func TestGatewayEmbeddings(t *testing.T) {
	enginetest.Binary(t)
	dir := t.TempDir()
	chat, _, err := testmodel.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	starts := map[string]int{}
	model := func(name string, embeddings bool) gateway.Model {
		cfg := llamacpp.Config{Binary: enginetest.Binary(t), Model: chat, Ctx: 4096, Threads: 2, LogFile: filepath.Join(dir, name+".log")}
		if embeddings {
			cfg.ExtraArgs = []string{"--embeddings", "--pooling", "mean"} // as visor gateway starts embeddings: true
		}
		return gateway.Model{Name: name, Group: "g", Embeddings: embeddings, Open: func() gateway.Engine {
			return conductor.New(conductor.Config{Launch: func(ctx context.Context, _ string) (conductor.Process, error) {
				starts[name]++
				return llamacpp.Start(ctx, cfg)
			}})
		}}
	}
	gw, err := gateway.New(gateway.Config{Models: []gateway.Model{model("embed", true), model("chat", false)}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	defer func() {
		srv.Close()
		_ = gw.Close(context.Background())
		_ = os.RemoveAll(dir)
	}()
	oc := openai.DefaultConfig("")
	oc.BaseURL = srv.URL + "/v1"
	c := openai.NewClientWithConfig(oc)
	r, err := c.CreateEmbeddings(context.Background(), openai.EmbeddingRequest{Model: "embed", Input: []string{"hello", "world"}})
	if err != nil || len(r.Data) != 2 || len(r.Data[0].Embedding) == 0 || string(r.Model) != "embed" {
		t.Fatalf("embeddings: %+v %v", r, err)
	}
	_, err = c.CreateEmbeddings(context.Background(), openai.EmbeddingRequest{Model: "chat", Input: "hello"})
	var ae *openai.APIError
	if !errors.As(err, &ae) || ae.HTTPStatusCode != 400 || !strings.Contains(ae.Message, "embeddings: true") || starts["chat"] != 0 {
		t.Fatalf("embeddings from a chat model: %v (started %d), want a 400 naming embeddings: true before any start", err, starts["chat"])
	}
}
