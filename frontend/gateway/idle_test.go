package gateway_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/frontend/gateway"
)

// TestUpstreamStreamThatStopsSendingEnds: a FAKE engine (a real llama-server cannot be made to hang at will)
// starts a streamed answer, sends one chunk and then nothing, keeping the connection open. The gateway's idle
// bound ends the client's stream with an error saying what happened and which setting bounds it, rather than
// holding the client (and the model's slot) until the client gives up; with tools offered (the repair path) and
// without (the plain copy).
func TestUpstreamStreamThatStopsSendingEnds(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"partial "}}]}`+"\n\n")
		w.(http.Flusher).Flush()
		select { // never sends again
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	gw, err := gateway.New(gateway.Config{StreamIdle: 200 * time.Millisecond, Models: []gateway.Model{{Name: "fake",
		Remote: true, Open: func() gateway.Engine {
			return conductor.New(conductor.Config{Launch: func(context.Context, string) (conductor.Process, error) {
				return conductor.Remote{Addr: srv.URL}, nil
			}})
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(gw.Handler())
	defer front.Close()
	defer gw.Close(context.Background())
	cfg := openai.DefaultConfig("")
	cfg.BaseURL = front.URL + "/v1"
	client := openai.NewClientWithConfig(cfg)
	for _, tools := range []bool{false, true} {
		req := openai.ChatCompletionRequest{Model: "fake", Stream: true,
			Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}}
		if tools {
			req.Tools = []openai.Tool{readFile}
		}
		// The client's own bound is far away: only the gateway's idle bound can end this read.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		st, err := client.CreateChatCompletionStream(ctx, req)
		if err != nil {
			cancel()
			t.Fatalf("tools %v: %v", tools, err)
		}
		var text strings.Builder
		for {
			c, err := st.Recv()
			if err != nil {
				var api *openai.APIError
				if !errors.As(err, &api) || !strings.Contains(api.Message, "stopped sending") ||
					!strings.Contains(api.Message, "200ms") || !strings.Contains(api.Message, "VISOR_STREAM_IDLE") {
					t.Errorf("tools %v: the stream ended with %v; want the gateway's error naming the idle bound", tools, err)
				}
				if ctx.Err() != nil {
					t.Errorf("tools %v: the client's context ended first", tools)
				}
				break
			}
			if len(c.Choices) > 0 {
				text.WriteString(c.Choices[0].Delta.Content)
			}
		}
		st.Close()
		cancel()
		if text.String() != "partial " {
			t.Errorf("tools %v: the client read %q before the error; want the chunk that arrived", tools, text.String())
		}
	}
}
