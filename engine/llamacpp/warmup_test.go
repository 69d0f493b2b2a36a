package llamacpp_test

import (
	"context"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/internal/enginetest"
)

// TestWarmup runs the warm-up against a real server with vision and a short context: both requests must be
// served (the image encoded, the prompt kept inside a 1024-token window) and each step reported.
func TestWarmup(t *testing.T) {
	s := enginetest.Tiny(t, true, llamacpp.Config{Ctx: 1024, Parallel: 1})
	ctx := context.Background()
	props, err := llamacpp.ReadProps(ctx, s.Client())
	if err != nil {
		t.Fatal(err)
	}
	if !props.Vision {
		t.Fatal("premise: the tiny server has vision")
	}
	if err := llamacpp.CheckTokenizer(ctx, s.Client(), "tiny"); err != nil {
		t.Errorf("CheckTokenizer on the tiny chat model: %v", err)
	}
	var steps []string
	st, err := llamacpp.Warmup(ctx, s.Client(), props, func(m string) { steps = append(steps, m) })
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(steps, "\n")
	for _, want := range []string{"first image encode", "image done in", "first long prompt", "prompts done in", "ready after"} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	// The image request must have carried image tokens: more prompt than its text alone.
	noCache := false
	text, err := s.Client().Chat(ctx, engine.Request{ChatCompletionRequest: openai.ChatCompletionRequest{MaxTokens: 1,
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: llamacpp.WarmupImageQuestion}}},
		Extra: engine.Extra{CachePrompt: &noCache}})
	if err != nil {
		t.Fatal(err)
	}
	if st.ImagePromptTokens <= text.Usage.PromptTokens {
		t.Errorf("warm-up image request had %d prompt tokens, its text alone %d: the image never reached the encoder",
			st.ImagePromptTokens, text.Usage.PromptTokens)
	}
	if st.PromptTokens < 256 || st.PromptTokens > 1024 {
		t.Errorf("the long prompt had %d tokens: want a few ubatches' worth inside the 1024-token window", st.PromptTokens)
	}
	// Without vision only the prompt is sent.
	props.Vision = false
	steps = nil
	if _, err := llamacpp.Warmup(ctx, s.Client(), props, func(m string) { steps = append(steps, m) }); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.Join(steps, "\n"), "image") {
		t.Errorf("a text-only server got an image: %v", steps)
	}
}
