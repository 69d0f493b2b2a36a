package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/visorhq/visor/engine"
)

func getJSON(t *testing.T, method, url string, v any) int {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s %s: %q: %v", method, url, b, err)
		}
	}
	return resp.StatusCode
}

type modelEntry struct {
	ID           string
	Object       string
	ContextLen   *int `json:"context_length"`
	Capabilities []string
	State        string
	Aliases      []string
}

// TestGatewayModels: /v1/models and /v1/models/{id} say each model's context length, capabilities and state;
// the management API lists running models, loads and unloads one; answers carry the name (or alias) the request
// used, never the GGUF path; an image for a model without a projector is a 400 before any engine starts.
func TestGatewayModels(t *testing.T) {
	f := sharedFixture(t)
	c := f.client()
	ctx := context.Background()

	var one modelEntry
	if st := getJSON(t, "GET", f.url+"/v1/models/tiny", &one); st != 200 || one.ID != "tiny" || one.Object != "model" ||
		one.ContextLen == nil || *one.ContextLen != 4096 || strings.Join(one.Capabilities, ",") != "chat,completion,tools,vision" ||
		strings.Join(one.Aliases, ",") != "gpt-4o-mini" {
		t.Fatalf("/v1/models/tiny: %d %+v", st, one)
	}
	if st := getJSON(t, "GET", f.url+"/v1/models/gpt-4o-mini", &one); st != 200 || one.ID != "tiny" {
		t.Fatalf("/v1/models/ALIAS: %d %+v", st, one)
	}
	var e struct {
		Error struct{ Message, Code string }
	}
	if st := getJSON(t, "GET", f.url+"/v1/models/nope", &e); st != 404 || e.Error.Code != "model_not_found" || !strings.Contains(e.Error.Message, "tiny, tiny-text, second") {
		t.Fatalf("/v1/models/nope: %d %+v", st, e)
	}
	m, err := c.GetModel(ctx, "tiny-text")
	if err != nil || m.ID != "tiny-text" {
		t.Fatalf("go-openai GetModel: %+v %v", m, err)
	}

	t.Run("answers carry the requested name", func(t *testing.T) {
		for _, name := range []string{"tiny", "gpt-4o-mini"} {
			r, err := c.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: name, Messages: []openai.ChatCompletionMessage{user("hello")}})
			if err != nil || r.Model != name {
				t.Fatalf("%s: model %q %v", name, r.Model, err)
			}
			for _, tools := range [][]openai.Tool{nil, {listDir}} {
				s, err := c.CreateChatCompletionStream(ctx, openai.ChatCompletionRequest{Model: name, Tools: tools, Messages: []openai.ChatCompletionMessage{user("hello")}})
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for {
					ch, err := s.Recv()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					n++
					if ch.Model != name {
						t.Fatalf("%s (tools %d): a chunk says model %q", name, len(tools), ch.Model)
					}
				}
				s.Close()
				if n == 0 {
					t.Fatalf("%s: no chunks", name)
				}
			}
		}
	})

	t.Run("image for a model without a projector", func(t *testing.T) {
		starts := f.started("second")
		msg := openai.ChatCompletionMessage{Role: "user", MultiContent: []openai.ChatMessagePart{
			{Type: openai.ChatMessagePartTypeText, Text: "what is this?"}, engine.ImagePart("image/png", pngBytes(t))}}
		_, err := c.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "second", Messages: []openai.ChatCompletionMessage{msg}})
		var ae *openai.APIError
		if !errors.As(err, &ae) || ae.HTTPStatusCode != 400 || !strings.Contains(ae.Message, "no vision projector") {
			t.Fatalf("image to second: %v, want a 400 saying it has no projector", err)
		}
		if f.started("second") != starts {
			t.Fatal("the refused request started the engine")
		}
	})

	t.Run("management", func(t *testing.T) {
		var r modelEntry
		if st := getJSON(t, "POST", f.url+"/v1/visor/models/second/load", &r); st != 200 || r.State != "loaded" {
			t.Fatalf("load second: %d %+v", st, r)
		}
		var running struct{ Data []modelEntry }
		getJSON(t, "GET", f.url+"/v1/visor/running", &running)
		if len(running.Data) != 1 || running.Data[0].ID != "second" {
			t.Fatalf("running after loading second (which swaps tiny out): %+v", running.Data)
		}
		var all struct{ Data []modelEntry }
		getJSON(t, "GET", f.url+"/v1/models", &all)
		states := map[string]string{}
		for _, d := range all.Data {
			states[d.ID] = d.State
		}
		if states["second"] != "loaded" || states["tiny"] != "unloaded" {
			t.Fatalf("states %v", states)
		}
		if st := getJSON(t, "POST", f.url+"/v1/visor/models/second/unload", &r); st != 200 || r.State != "unloaded" {
			t.Fatalf("unload second: %d %+v", st, r)
		}
		getJSON(t, "GET", f.url+"/v1/visor/running", &running)
		if len(running.Data) != 0 {
			t.Fatalf("running after unloading: %+v", running.Data)
		}
		if st := getJSON(t, "POST", f.url+"/v1/visor/models/nope/load", &e); st != 404 {
			t.Fatalf("load nope: %d", st)
		}
	})
}
