package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testmodel"
)

// TestGatewayRefusesImageURLs: llama-server downloads an http(s) image_url itself, so a client could make this
// machine fetch any address it reaches. A loopback web server stands for such an address: the same body sent
// straight to a real llama-server makes it fetch (the control, which shows the server would), and through the
// gateway it is a 400 that says why, and the web server sees no request.
func TestGatewayRefusesImageURLs(t *testing.T) {
	f := sharedFixture(t)
	var hits atomic.Int64
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(pngBytes(t))
	}))
	defer web.Close()
	body := func(part string) string {
		return `{"model":"tiny","max_tokens":3,"messages":[{"role":"user","content":[{"type":"text","text":"what is this?"},` + part + `]}]}`
	}
	imgURL := web.URL + "/ok.png"

	// Control: the engine itself fetches the URL.
	dir := t.TempDir()
	chat, proj, err := testmodel.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := llamacpp.Start(context.Background(), llamacpp.Config{Binary: enginetest.Binary(t), Model: chat, MMProj: proj,
		Ctx: 4096, Threads: 2, LogFile: filepath.Join(dir, "llama-server.log")})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop(context.Background())
	resp, err := http.Post(strings.TrimSuffix(srv.URL(), "/v1")+"/v1/chat/completions", "application/json",
		strings.NewReader(body(`{"type":"image_url","image_url":{"url":"`+imgURL+`"}}`)))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if hits.Load() == 0 {
		t.Fatal("control: llama-server did not fetch the image URL, so this test could not see the gateway let one through")
	}
	hits.Store(0)

	for _, tc := range []struct{ name, part string }{
		{"http", `{"type":"image_url","image_url":{"url":"` + imgURL + `"}}`},
		{"https", `{"type":"image_url","image_url":{"url":"` + strings.Replace(imgURL, "http:", "https:", 1) + `"}}`},
		{"upper case scheme", `{"type":"image_url","image_url":{"url":"` + strings.Replace(imgURL, "http:", "HTTP:", 1) + `"}}`},
		{"url as a string", `{"type":"image_url","image_url":"` + imgURL + `"}`},
		{"file", `{"type":"image_url","image_url":{"url":"file:///etc/passwd"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(f.url+"/v1/chat/completions", "application/json", strings.NewReader(body(tc.part)))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e struct {
				Error struct {
					Message, Type string
					Param         *string
					Code          any
				}
			}
			b, _ := io.ReadAll(resp.Body)
			if err := json.Unmarshal(b, &e); err != nil || resp.StatusCode != 400 || e.Error.Type != "invalid_request_error" ||
				!strings.Contains(e.Error.Message, "not a data URL") && !strings.Contains(e.Error.Message, "no image URL") ||
				e.Error.Param == nil || *e.Error.Param != "messages[0].content[1].image_url.url" {
				t.Fatalf("HTTP %d %s: want a 400 in OpenAI's shape saying only data URLs are taken, naming the part", resp.StatusCode, b)
			}
		})
	}
	// go-openai reads it as an API error with the message.
	_, err = f.client().CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{Model: "tiny", Messages: []openai.ChatCompletionMessage{{
		Role: "user", MultiContent: []openai.ChatMessagePart{{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{URL: imgURL}}}}}})
	var ae *openai.APIError
	if !errors.As(err, &ae) || ae.HTTPStatusCode != 400 || !strings.Contains(ae.Message, "data URL") {
		t.Fatalf("go-openai: %v, want a 400 API error saying data URL", err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the web server saw %d requests through the gateway, want none", n)
	}
}

// TestGatewayRefusesMalformedMessages: a body whose messages are not a list of messages is a 400 naming the
// field, not an engine error.
func TestGatewayRefusesMalformedMessages(t *testing.T) {
	f := sharedFixture(t)
	for _, tc := range []struct{ body, param, want string }{
		{`{"model":"tiny","messages":"hello"}`, "messages", "is a string, not a list"},
		{`{"model":"tiny"}`, "messages", `no "messages"`},
		{`{"model":"tiny","messages":{"role":"user"}}`, "messages", "is an object, not a list"},
		{`{"model":"tiny","messages":["hi"]}`, "messages[0]", "is a string, not a message"},
		{`{"model":"tiny","messages":[{"role":"user","content":5}]}`, "messages[0].content", "is a number"},
		{`{"model":"tiny","messages":[{"role":"user","content":["hi"]}]}`, "messages[0].content[0]", "not a content part"},
	} {
		resp, err := http.Post(f.url+"/v1/chat/completions", "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct {
			Error struct{ Message, Param string }
		}
		_ = json.Unmarshal(b, &e)
		if resp.StatusCode != 400 || e.Error.Param != tc.param || !strings.Contains(e.Error.Message, tc.want) {
			t.Errorf("%s: HTTP %d %s, want 400 param %s saying %q", tc.body, resp.StatusCode, b, tc.param, tc.want)
		}
	}
}
