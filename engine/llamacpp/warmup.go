package llamacpp

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/visorhq/visor/engine"
)

// WarmupImageSide is the side of the square image Warmup sends: 1024 px is 1,024 tokens (4,096 patches) for a
// Qwen-VL encoder, enough rows for the GPU's large matrix kernels, which a tiny image would not reach, and an
// encode of well under a second on a GPU.
const WarmupImageSide = 1024

// warmupPromptChars is the text Warmup sends: long enough that prompt processing runs full ubatches (the batched
// kernels a first long prompt needs), short enough for any context.
const warmupPromptChars = 6000

// Warmup sends the server, right after start, a request with an image (when it has vision) and one with a
// long-ish prompt, so that the GPU backend compiles its pipelines now and not on the user's first screenshot or
// first long prompt: on Vulkan the first image after an install waited 56 s for its first token, every later one
// about 2 s (docs/engine-notes.md §9). report hears what is being warmed and how long it took; it may be nil. Warmup
// changes nothing the user sees later: its requests are not cached for reuse and generate a few tokens each.
func Warmup(ctx context.Context, c *engine.Client, props Props, report func(string)) (WarmupStats, error) {
	var st WarmupStats
	if report == nil {
		report = func(string) {}
	}
	start := time.Now()
	if props.Vision {
		report("warming up the GPU: first image encode (compiles the encoder's pipelines once) …")
		t := time.Now()
		img, err := warmupImage()
		if err != nil {
			return st, fmt.Errorf("llamacpp: warm-up image: %w", err)
		}
		msg := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, MultiContent: []openai.ChatMessagePart{
			engine.ImagePart("image/png", img), {Type: openai.ChatMessagePartTypeText, Text: WarmupImageQuestion}}}
		if st.ImagePromptTokens, err = warmupRequest(ctx, c, msg); err != nil {
			return st, fmt.Errorf("llamacpp: warm-up image request: %w", err)
		}
		st.Image = time.Since(t)
		report(fmt.Sprintf("warming up the GPU: image done in %s", st.Image.Round(100*time.Millisecond)))
	}
	report("warming up the GPU: first long prompt and turns of every size …")
	t := time.Now()
	limit := warmupPromptChars
	if props.NCtx > 0 {
		// A token is at least one character for any tokenizer visor meets; keep the prompt within half the window.
		limit = min(limit, props.NCtx/2)
	}
	// The GPU backend picks kernels by batch size (matrix-vector up to 8 columns, then small, medium and large
	// tiles, each with its own MoE variant), and a server with a hybrid model cuts a prompt at message
	// boundaries, so a first turn with a system prompt and some history runs batches of sizes no single long
	// prompt does: on the H200 a first turn after a warm-up of one image and one long prompt still spent 13 s
	// compiling in its first text batches. So the warm-up sends a conversation shaped like a turn and prompts
	// whose lengths double from a few tokens to the long one, each generating a few tokens, which also compiles
	// decoding and speculative drafting.
	convo := []openai.ChatCompletionMessage{
		{Role: openai.ChatMessageRoleSystem, Content: "You are a helpful assistant."},
		{Role: openai.ChatMessageRoleUser, Content: "hello"},
		{Role: openai.ChatMessageRoleAssistant, Content: "Hi! How can I help?"},
		{Role: openai.ChatMessageRoleUser, Content: warmupText(min(limit, 96))},
	}
	if _, err := warmupRequest(ctx, c, convo...); err != nil {
		return st, fmt.Errorf("llamacpp: warm-up turn: %w", err)
	}
	for n := 12; ; n *= 2 {
		n = min(n, limit)
		tokens, err := warmupRequest(ctx, c, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: warmupText(n)})
		if err != nil {
			return st, fmt.Errorf("llamacpp: warm-up prompt of %d characters: %w", n, err)
		}
		st.PromptTokens = tokens
		if n == limit {
			break
		}
	}
	st.Prompt = time.Since(t)
	report(fmt.Sprintf("warming up the GPU: prompts done in %s; ready after %s", st.Prompt.Round(100*time.Millisecond),
		time.Since(start).Round(100*time.Millisecond)))
	return st, nil
}

// WarmupImageQuestion is the text sent with the warm-up image.
const WarmupImageQuestion = "What is in this picture?"

// WarmupStats says what the warm-up sent and how long each part took.
type WarmupStats struct {
	Image, Prompt time.Duration
	// ImagePromptTokens is the image request's prompt size as the server counted it (image tokens included);
	// PromptTokens the long prompt's.
	ImagePromptTokens, PromptTokens int
}

// warmupTokens is what each warm-up request generates: enough for decoding and a speculative draft to run.
const warmupTokens = 4

func warmupRequest(ctx context.Context, c *engine.Client, msgs ...openai.ChatCompletionMessage) (int, error) {
	noCache, n := false, warmupTokens
	r, err := c.Chat(ctx, engine.Request{
		ChatCompletionRequest: openai.ChatCompletionRequest{Messages: msgs, MaxTokens: n},
		Extra:                 engine.Extra{CachePrompt: &noCache, NPredict: &n},
	})
	return r.Usage.PromptTokens, err
}

// warmupImage draws a screenshot-like picture (bars, panels, gradients): PNG-encoded, a few tens of KB.
func warmupImage() ([]byte, error) {
	const s = WarmupImageSide
	img := image.NewRGBA(image.Rect(0, 0, s, s))
	for y := range s {
		for x := range s {
			c := color.RGBA{uint8(240 - y/8), uint8(240 - x/8), 230, 255}
			switch {
			case y < 40:
				c = color.RGBA{40, 44, 52, 255} // title bar
			case x < 200:
				c = color.RGBA{30, 30, 36, 255} // side panel
			case (y/24)%2 == 0 && x > 240 && x < 960 && (x/7+y/24)%9 != 0:
				c = color.RGBA{20, 20, 20, 255} // "text" lines
			}
			img.SetRGBA(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func warmupText(n int) string {
	const words = "the engine compiles its kernels once so that the first screenshot and the first long prompt " +
		"of a session are answered as fast as every later one "
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(words)
	}
	return b.String()[:n]
}
