package session_test

import (
	"context"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testkit"
	"github.com/visorhq/visor/internal/testmodel"
	"github.com/visorhq/visor/session"
)

// TestWarmUpEndPrefillsAgain: an attachment is prefilled, then other requests take the server's one slot (as the
// engine's background warm-up does right after a start) and push the prefilled prompt out. When the conductor
// reports the warm-up's end the session evaluates the attachment again, so the question's request evaluates
// only its text; without that report (the baseline, same server) the request evaluates the image again. The
// server runs without its host-memory prompt cache (--cache-ram 0), so a pushed-out prompt is gone and the
// difference shows in the evaluated tokens (with the cache it shows as a restore on the critical path).
func TestWarmUpEndPrefillsAgain(t *testing.T) {
	srv := enginetest.TinyHybrid(t, true, testmodel.ProjectorOptions{ImageSize: 64},
		llamacpp.Config{Parallel: 1, ExtraArgs: []string{"--cache-ram", "0"}})
	ctx := context.Background()
	const imageTokens = 64
	evaluated := map[bool]int{}
	for i, report := range []bool{false, true} {
		svc := testkit.Service(t, srv, nil, func(cfg *session.Config) { cfg.Vision = session.VisionYes })
		sess, err := svc.Open(ctx, session.OpenOptions{Title: "warm-up"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sess.Attach(ctx, testkit.PNG(t, 80+i, 20)); err != nil {
			t.Fatal(err)
		}
		if err := sess.WaitAhead(ctx); err != nil {
			t.Fatal(err)
		}
		// The warm-up's kind of request: another prompt in the slot, not kept for reuse.
		noCache, n := false, 2
		if _, err := srv.Client().Chat(ctx, engine.Request{
			ChatCompletionRequest: openai.ChatCompletionRequest{MaxTokens: n, Messages: []openai.ChatCompletionMessage{
				{Role: openai.ChatMessageRoleUser, Content: strings.Repeat("warm up the kernels ", 20)}}},
			Extra: engine.Extra{CachePrompt: &noCache, NPredict: &n}}); err != nil {
			t.Fatal(err)
		}
		if report {
			svc.RecordEngineEvent(conductor.Event{Kind: conductor.EventWarmedUp})
			if err := sess.WaitAhead(ctx); err != nil {
				t.Fatal(err)
			}
		}
		res, err := sess.Turn(ctx, "what is on screen?", nil, nil)
		if err != nil || res.Final.Timings == nil {
			t.Fatalf("report %v: %+v %v", report, res.Final, err)
		}
		evaluated[report] = res.Final.Timings.PromptN
		sess.Close()
	}
	t.Logf("the question's request evaluated %d tokens without the warm-up's end reported, %d with", evaluated[false], evaluated[true])
	if evaluated[true]+imageTokens > evaluated[false] {
		t.Errorf("with the warm-up's end reported the question evaluated %d tokens, without %d: the image's %d tokens "+
			"should have been evaluated again before it", evaluated[true], evaluated[false], imageTokens)
	}
}
