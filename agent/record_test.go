package agent_test

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"path/filepath"
	"testing"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/tools"
)

func testPNG(t testing.TB, seed uint8) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 16, 16))
	for y := 0; y < 16; y++ {
		for x := 0; x < 16; x++ {
			img.Set(x, y, color.RGBA{R: uint8(x*16) + seed, G: uint8(y * 16), B: seed, A: 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

type shotIn struct {
	Path string `json:"path"`
}

// TestStoredSessionResumesWithCacheHit runs a tool-calling conversation with an attached image and a tool that
// returns an image, stores it in a real SQLite file, reopens the file, resumes, and checks that the images come
// back byte-identical and that llama-server reuses the whole cached prefix, images included.
func TestStoredSessionResumesWithCacheHit(t *testing.T) {
	srv := enginetest.Tiny(t, true, llamacpp.Config{Parallel: 1})
	ctx := context.Background()
	dbPath := filepath.Join(t.TempDir(), "visor.db")
	store, err := memory.Open(ctx, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	attached, shot := testPNG(t, 1), testPNG(t, 99)
	reg := tools.NewRegistry()
	register(t, reg, tools.New("screenshot", "Take a screenshot", func(ctx context.Context, in shotIn) (tools.Result, error) {
		return tools.Result{Text: "screenshot taken", Images: []tools.Image{{MIME: "image/png", Data: shot}}}, nil
	}, tools.ReturnsImages()))
	a := newAgent(t, srv, reg, agent.Native)
	sess, err := store.CreateSession(ctx, memory.Session{Title: "resume test", Agent: "test"})
	if err != nil {
		t.Fatal(err)
	}
	user := agent.Message{Role: "user", Content: "What is on screen?", Images: []tools.Image{{MIME: "image/png", Data: attached}}}
	var storeErr error
	record := agent.Recorder(ctx, store, sess.ID, func(err error) { storeErr = err })
	var pending []agent.ImagesPending
	f := a.Run(ctx, nil, user, func(ev agent.Event) {
		if p, ok := ev.(agent.ImagesPending); ok {
			pending = append(pending, p)
		}
		record(ev)
	})
	if f.Err != nil || storeErr != nil || f.Steps != 2 {
		t.Fatalf("first run: %+v, store: %v", f, storeErr)
	}
	// Step 1 sends the attached image, step 2 the screenshot the tool returned; each is announced before its request.
	if len(pending) != 2 || pending[0] != (agent.ImagesPending{Step: 1, Count: 1}) || pending[1] != (agent.ImagesPending{Step: 2, Count: 1}) {
		t.Fatalf("images pending %+v", pending)
	}
	firstPrompt := f.Final.Timings.PromptN + f.Final.Timings.CacheN
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	store, err = memory.Open(ctx, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	stored, err := store.Messages(ctx, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	history := agent.Resumable(stored)
	if len(history) != 4 { // user, assistant call, tool result, answer
		t.Fatalf("resumed %d messages: %+v", len(history), history)
	}
	if !bytes.Equal(history[0].Images[0].Data, attached) || !bytes.Equal(history[2].Images[0].Data, shot) {
		t.Fatal("images are not byte-identical after resume")
	}
	if history[1].ToolCalls[0].Name != "screenshot" || history[2].ToolCallID != history[1].ToolCalls[0].ID {
		t.Fatalf("tool call and result not linked after resume: %+v %+v", history[1], history[2])
	}

	f2 := a.Run(ctx, history, agent.Message{Role: "user", Content: "And now?"}, agent.Recorder(ctx, store, sess.ID, nil))
	if f2.Err != nil {
		t.Fatal(f2.Err)
	}
	// The first request of the resumed run carries the whole stored conversation: the server must find all of
	// it (both images included) in its cache and evaluate only the new turn.
	var firstStep *agent.Message
	msgs, _ := store.Messages(ctx, sess.ID)
	for i := len(stored); i < len(msgs); i++ {
		if msgs[i].Role == "assistant" {
			m := agent.FromMemory(msgs[i])
			firstStep = &m
			break
		}
	}
	if firstStep == nil || firstStep.Timings == nil {
		t.Fatalf("resumed run stored no timed assistant turn")
	}
	tm := firstStep.Timings
	t.Logf("first run prompt %d tokens; resumed request: cache_n %d, prompt_n %d", firstPrompt, tm.CacheN, tm.PromptN)
	if tm.CacheN < firstPrompt-4 {
		t.Fatalf("resumed request reused %d cached tokens, want about the %d of the stored prompt", tm.CacheN, firstPrompt)
	}
	if tm.PromptN > 40 {
		t.Fatalf("resumed request evaluated %d new tokens: the prefix (images included) was re-processed", tm.PromptN)
	}
}

// TestPrefillEncodesImagesAhead prefills a screenshot before the question exists, then asks: the real request must
// find the image already in llama-server's cache. The baseline is the same question with another image of the
// same size that was not prefilled, on the same server.
func TestPrefillEncodesImagesAhead(t *testing.T) {
	srv := enginetest.Tiny(t, true, llamacpp.Config{Parallel: 1})
	ctx := context.Background()
	a := newAgent(t, srv, tools.NewRegistry(), agent.Native)
	ask := func(seed uint8, prefill bool) int {
		im := []tools.Image{{MIME: "image/png", Data: testPNG(t, seed)}}
		if prefill {
			tm, err := a.Prefill(ctx, nil, agent.Message{Role: "user", Images: im})
			if err != nil || tm == nil || tm.PromptN == 0 {
				t.Fatalf("prefill: %+v %v", tm, err)
			}
		}
		f := a.Run(ctx, nil, agent.Message{Role: "user", Content: "What is on screen?", Images: im}, nil)
		if f.Err != nil || f.Final.Timings == nil {
			t.Fatalf("run: %+v", f)
		}
		return f.Final.Timings.CacheN
	}
	baseline := ask(40, false)
	prefilled := ask(80, true)
	t.Logf("cached tokens: %d without prefill, %d with", baseline, prefilled)
	// The tiny projector turns a 16×16 PNG into 16 image tokens.
	if prefilled-baseline < 16 {
		t.Fatalf("prefill did not leave the image in the cache: %d vs %d cached tokens", prefilled, baseline)
	}
}
