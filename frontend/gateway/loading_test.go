package gateway_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/frontend/gateway"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testmodel"
)

// gatedEngine is a real conductor whose first EnsureReady waits for the test to open the gate: the tiny model
// loads in a second, too fast to watch a load by the clock, so the test holds it there.
type gatedEngine struct {
	*conductor.Conductor
	gate chan struct{}
}

func (g gatedEngine) EnsureReady(ctx context.Context) (conductor.Ready, error) {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return conductor.Ready{}, ctx.Err()
	}
	return g.Conductor.EnsureReady(ctx)
}

// TestGatewayShowsLoading: a streamed request for a model that is loading gets its headers at once and an SSE
// comment while it waits, /metrics and /v1/models show the load while it runs, and the answer follows once the model is ready;
// a model that fails to load ends the stream with an error event the SDK raises.
func TestGatewayShowsLoading(t *testing.T) {
	enginetest.Binary(t)
	dir := t.TempDir()
	chat, _, err := testmodel.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	open := func(model string) func() gateway.Engine { // its first EnsureReady waits for the gate
		return func() gateway.Engine {
			c := conductor.New(conductor.Config{Launch: func(ctx context.Context, _ string) (conductor.Process, error) {
				return llamacpp.Start(ctx, llamacpp.Config{Binary: enginetest.Binary(t), Model: model, Ctx: 4096, Threads: 2,
					LogFile: filepath.Join(dir, "llama-server.log")})
			}})
			return gatedEngine{c, gate}
		}
	}
	broken := func() gateway.Engine {
		return conductor.New(conductor.Config{Launch: func(context.Context, string) (conductor.Process, error) {
			return nil, errors.New("llama-server exited: failed to load model")
		}})
	}
	gw, err := gateway.New(gateway.Config{Models: []gateway.Model{{Name: "slow", Group: "g", Open: open(chat)},
		{Name: "broken", Group: "g", Open: broken}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	defer func() {
		srv.Close()
		_ = gw.Close(context.Background())
	}()
	req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"slow","stream":true,"messages":[{"role":"user","content":"hello"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "OpenAI/JS 5.23.2") // Go's own gets empty lines (TestGatewayFailedLoadAfterNotices)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	if err != nil || resp.StatusCode != 200 || !strings.HasPrefix(first, ": loading model slow (") {
		t.Fatalf("first line %q (HTTP %d, %v), want the loading comment", first, resp.StatusCode, err)
	}
	if v := metric(t, srv.URL, `visor_gateway_model_loading_seconds{model="slow"}`); v <= 0 {
		t.Errorf("loading seconds %v while the model loads", v)
	}
	var one modelEntry
	if getJSON(t, "GET", srv.URL+"/v1/models/slow", &one); one.State != "loading" {
		t.Errorf("state %q while loading", one.State)
	}
	close(gate)
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), `"content":"Hi!"`) && !(strings.Contains(string(rest), `"content":"H"`) && strings.Contains(string(rest), `"content":"i"`)) ||
		!strings.HasSuffix(strings.TrimSpace(string(rest)), "data: [DONE]") {
		t.Fatalf("after the load: %s", rest)
	}
	if v := metric(t, srv.URL, `visor_gateway_model_loading_seconds{model="slow"}`); v != 0 {
		t.Errorf("loading seconds %v after the load", v)
	}
	if getJSON(t, "GET", srv.URL+"/v1/models/slow", &one); one.State != "loaded" {
		t.Errorf("state %q after the load", one.State)
	}

	err = firstStreamEvent(srv.URL, "broken")
	var ae *openai.APIError
	if !errors.As(err, &ae) || !strings.Contains(ae.Message, `"broken" is not available`) {
		t.Fatalf("a model that cannot load: %v, want the stream's error event naming it", err)
	}
}

// firstStreamEvent opens a streamed chat with model at base through go-openai and reads its first event; the
// error is where either failed.
func firstStreamEvent(base, model string) error {
	oc := openai.DefaultConfig("")
	oc.BaseURL = base + "/v1"
	s, err := openai.NewClientWithConfig(oc).CreateChatCompletionStream(context.Background(), openai.ChatCompletionRequest{Model: model,
		Messages: []openai.ChatCompletionMessage{user("hello")}})
	if err != nil {
		return err
	}
	defer s.Close()
	_, err = s.Recv()
	return err
}

// noticed signals once the handler writes the first bytes of a body: the loading notice of a stream whose
// model is still loading.
type noticed struct {
	http.ResponseWriter
	once *sync.Once
	ch   chan struct{}
}

func (n noticed) Write(b []byte) (int, error) {
	if len(b) > 0 {
		n.once.Do(func() { close(n.ch) })
	}
	return n.ResponseWriter.Write(b)
}

func (n noticed) Flush() { n.ResponseWriter.(http.Flusher).Flush() }

// TestGatewayFailedLoadAfterNotices: a load that fails after the client was told the model is loading ends the
// stream with an error that go-openai raises as the gateway's clean OpenAI error (go-openai reads every line
// that is not data into the error it parses, so a comment there left it "unexpected end of JSON input"), and a
// client of another SDK still sees the loading comment before the same error event.
func TestGatewayFailedLoadAfterNotices(t *testing.T) {
	// serve is a gateway whose one model fails to load only once the loading notice went out, so the test shows
	// the stream after a notice without a clock.
	serve := func(t *testing.T) string {
		seen := make(chan struct{})
		broken := func() gateway.Engine {
			return conductor.New(conductor.Config{Launch: func(ctx context.Context, _ string) (conductor.Process, error) {
				select {
				case <-seen:
				case <-ctx.Done():
				}
				return nil, errors.New("llama-server exited: failed to load model")
			}})
		}
		gw, err := gateway.New(gateway.Config{Models: []gateway.Model{{Name: "broken", Open: broken}}})
		if err != nil {
			t.Fatal(err)
		}
		once := &sync.Once{}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			gw.Handler().ServeHTTP(noticed{w, once, seen}, r)
		}))
		t.Cleanup(func() {
			srv.Close()
			_ = gw.Close(context.Background())
		})
		return srv.URL
	}

	err := firstStreamEvent(serve(t), "broken")
	var ae *openai.APIError
	if !errors.As(err, &ae) || !strings.Contains(ae.Message, `the model "broken" is not available`) || ae.Type != "server_error" {
		t.Fatalf("go-openai after a failed load: %v, want the gateway's error naming the model", err)
	}

	req, _ := http.NewRequest("POST", serve(t)+"/v1/chat/completions",
		strings.NewReader(`{"model":"broken","stream":true,"messages":[{"role":"user","content":"hello"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "OpenAI/JS 5.23.2")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if !strings.HasPrefix(string(b), ": loading model broken (") || !strings.Contains(string(b), `data: {"error":`) ||
		!strings.Contains(string(b), `the model \"broken\" is not available`) {
		t.Fatalf("another SDK's stream: %q, want the loading comment, then the error event", b)
	}
}
