package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"sync"
	"testing"

	"github.com/visorhq/visor/engine"

	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/internal/enginetest"
)

// TestScreenshot: the generated screenshots decode at their size, and two seeds give different images (the
// server caches images by content, so a "later image" must not be the first one again).
func TestScreenshot(t *testing.T) {
	t.Parallel()
	a, err := screenshot(2560, 1440, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := screenshot(2560, 1440, 2)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(a))
	if err != nil || img.Bounds().Dx() != 2560 || img.Bounds().Dy() != 1440 {
		t.Fatalf("decode: %v %v", err, img.Bounds())
	}
	if bytes.Equal(a, b) {
		t.Error("two seeds drew the same screenshot")
	}
	if p := os.Getenv("SEEDCHECK_SHOT"); p != "" {
		_ = os.WriteFile(p, a, 0o644)
	}
}

// TestClientsAgainstRealServer: the three measuring clients work against a real (CPU) llama-server, so a GPU
// run does not fail on a parsing slip.
func TestClientsAgainstRealServer(t *testing.T) {
	s := enginetest.Tiny(t, true, llamacpp.Config{Ctx: 2048})
	ctx := context.Background()
	tpsTokens = 64
	v, vt, err := streamVisor(ctx, s.Client())
	if err != nil || v <= 0 || vt.PredictedPerSecond <= 0 || vt.PredictedN != tpsTokens {
		t.Fatalf("visor stream: %v %+v %v", v, vt, err)
	}
	raw, rt, err := streamRaw(ctx, s.URL())
	if err != nil || raw <= 0 || rt.PredictedPerSecond <= 0 || rt.PredictedN != tpsTokens {
		t.Fatalf("raw stream: %v %+v %v", raw, rt, err)
	}
	if g, err := streamGoOpenAI(ctx, s.URL()); err != nil || g <= 0 {
		t.Fatalf("go-openai stream: %v %v", g, err)
	}
	png, err := screenshot(320, 200, 3)
	if err != nil {
		t.Fatal(err)
	}
	turn := imageTurn(ctx, s.Client(), &shot{Name: "small", W: 320, H: 200, png: png})
	if turn.Err != "" || turn.TTFTSeconds <= 0 || turn.PromptN <= 0 {
		t.Fatalf("image turn: %+v", turn)
	}
	t.Logf("visor %.0f t/s, raw %.0f t/s, server %.0f t/s; image turn %+v", v, raw, vt.PredictedPerSecond, turn)
	if os.Getenv("SEEDCHECK_REPS") != "" {
		for range 4 {
			v, vt, _ := streamVisor(ctx, s.Client())
			raw, _, rerr := streamRaw(ctx, s.URL())
			if rerr != nil {
				t.Errorf("raw stream: %v", rerr)
			}
			t.Logf("visor %.0f (server %.0f), raw %.0f", v, vt.PredictedPerSecond, raw)
		}
	}
}

// TestClientsSendTheSameRequest: visor's client and the raw read send the same JSON (greedy, fixed seed), so the
// server does the same work for both. A recorder stands in for llama-server: only the request bodies matter here.
func TestClientsSendTheSameRequest(t *testing.T) {
	var mu sync.Mutex
	var bodies [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"choices":[{"index":0,"delta":{"content":"a"}}]}`+"\n\n"+
			`data: {"choices":[{"index":0,"delta":{"content":"b"}}]}`+"\n\n"+
			`data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}],"timings":{"predicted_n":2,"predicted_ms":10,"predicted_per_second":200,"draft_n":1,"draft_n_accepted":1}}`+"\n\n"+
			"data: [DONE]\n\n")
	}))
	defer srv.Close()
	ctx := context.Background()
	_, vt, err := streamVisor(ctx, engine.NewClient(srv.URL, ""))
	if err != nil {
		t.Fatal(err)
	}
	_, rt, err := streamRaw(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if vt != rt || rt.DraftNAccepted != 1 || rt.PredictedPerSecond != 200 {
		t.Errorf("timings differ: visor %+v, raw %+v", vt, rt)
	}
	if _, err := streamGoOpenAI(ctx, srv.URL); err != nil {
		t.Fatal(err)
	}
	if len(bodies) != 3 {
		t.Fatalf("%d requests, want 3", len(bodies))
	}
	if !bytes.Equal(bodies[2], bodies[1]) {
		t.Errorf("go-openai's request differs from the raw one:\n%s\n%s", bodies[2], bodies[1])
	}
	var v, raw map[string]any
	if err := json.Unmarshal(bodies[0], &v); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(bodies[1], &raw); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(v, raw) {
		t.Errorf("the clients send different requests:\nvisor %s\nraw   %s", bodies[0], bodies[1])
	}
	if v["temperature"] != 0.0 || v["seed"] != float64(tpsSeed) {
		t.Errorf("not a greedy, seeded request: %s", bodies[0])
	}
}
