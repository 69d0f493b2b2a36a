package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"github.com/visorhq/visor/engine"
)

// Chatter sends a request without streaming. *engine.Client implements it.
type Chatter interface {
	Chat(ctx context.Context, req engine.Request) (engine.Response, error)
}

// PromptEvaluator evaluates an exact prompt prefix into the server's cache. *engine.Client implements it for
// llama-server.
type PromptEvaluator interface {
	ApplyTemplate(ctx context.Context, req engine.Request) (string, error)
	MediaMarker(ctx context.Context) (string, error)
	Evaluate(ctx context.Context, prompt string, images []string, extra engine.Extra) (*engine.Timings, error)
}

// ErrNoPrefill means the model client cannot send the non-streamed request a prefill needs.
var ErrNoPrefill = errors.New("agent: the model client cannot prefill (it has no Chat method)")

// ErrNothingToPrefill means the prefix the next request will share holds no image: it is cheap to evaluate in
// that request itself.
var ErrNothingToPrefill = errors.New("agent: prefill: the shared prefix holds no image")

// Prefill has the server evaluate, without answering, the prompt the next Run will send up to and including the
// images of user, so the images are encoded (and, on an engine that swaps MTP and vision, swapped in and out)
// before the user has finished typing or the last tool has returned. Run must then be called with the same
// history and a user message carrying the same image bytes first: its request then starts with the prefilled
// prefix and llama-server reuses it from its cache. The text of user is left out, since it may still change.
//
// Against llama-server (a PromptEvaluator) the prefix is rendered by the server's own template and evaluated
// exactly, up to the newline that follows the images, so the cached sequence ends where the real request
// continues it: that works for recurrent and hybrid models too (Qwen3.5/3.6), whose cache can be extended but
// not cut back. Other servers get a chat request with n_predict 0 (images, end of turn, generation prompt), which
// helps only attention-only models.
func (a *Agent) Prefill(ctx context.Context, history []Message, user Message) (*engine.Timings, error) {
	if len(user.Images) == 0 {
		return nil, errors.New("agent: prefill: the user message has no images; a text prefix is cheap to evaluate in the request itself")
	}
	if _, ok := a.cfg.Model.(PromptEvaluator); ok {
		// Two drafts whose texts differ in their first byte: the rendered prompts agree exactly up to where the
		// user's text will go.
		probe := func(text string) []Message {
			return append(append([]Message(nil), history...), Message{Role: "user", Images: user.Images, Content: text})
		}
		t, err := a.prefillShared(ctx, probe("A"), probe("B"), 0)
		if !errors.Is(err, errNoExactPrompt) {
			return t, err
		}
	}
	c, ok := a.cfg.Model.(Chatter)
	if !ok {
		return nil, ErrNoPrefill
	}
	draft := Message{Role: "user", Images: user.Images}
	req := a.request(append(append([]Message(nil), history...), draft))
	zero := 0
	// n_predict 0 evaluates the prompt into the slot's cache; llama-server still samples one token, which is
	// discarded.
	req.Extra.NPredict = &zero
	resp, err := c.Chat(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("agent: prefill: %w", err)
	}
	return resp.Timings, nil
}

// PrefillHistory has the server evaluate the part of history's prompt that every continuation shares (it ends
// after the last message's end of turn), when that part holds an image: the loop calls it when a tool has
// returned an image while other tools of the same step still run, so the image is encoded while they do. It
// needs a PromptEvaluator that is llama-server; otherwise it returns ErrNoPrefill.
func (a *Agent) PrefillHistory(ctx context.Context, history []Message) (*engine.Timings, error) {
	return a.PrefillHistoryExpecting(ctx, history, 0)
}

// PrefillHistoryExpecting is PrefillHistory for a next request that will add expect more images (a screenshot
// tool's result, an attachment): the image window counts them, so when they move its cut the prefix evaluated
// now is the shortened one that request will start with, and its re-evaluation is done here rather than on the
// request's critical path.
func (a *Agent) PrefillHistoryExpecting(ctx context.Context, history []Message, expect int) (*engine.Timings, error) {
	if _, ok := a.cfg.Model.(PromptEvaluator); !ok {
		return nil, ErrNoPrefill
	}
	// The next request adds more tool results (or a user turn); the generation prompt and a user turn are two
	// different continuations, so the prompts agree up to the start of whatever comes next.
	x, y := history, append(append([]Message(nil), history...), Message{Role: "user", Content: "A"})
	if n := len(history); n > 0 && history[n-1].Role == "assistant" && len(history[n-1].ToolCalls) > 0 {
		// Before the tools answer (a window cut evaluated while they run): the template will not render a
		// conversation that ends in calls, so the two continuations are results of the first call that differ in
		// their first byte.
		c := history[n-1].ToolCalls[0]
		probe := func(text string) []Message {
			return append(append([]Message(nil), history...), Message{Role: "tool", ToolCallID: c.ID, ToolName: c.Name, Content: text})
		}
		x, y = probe("A"), probe("B")
	}
	t, err := a.prefillShared(ctx, x, y, expect)
	if errors.Is(err, errNoExactPrompt) {
		return nil, fmt.Errorf("%w: %w", ErrNoPrefill, err)
	}
	return t, err
}

// errNoExactPrompt means the server has no /apply-template: it is not llama-server.
var errNoExactPrompt = errors.New("agent: prefill: the server cannot render prompts (no /apply-template)")

// prefillShared renders both conversations with the server's template and evaluates the longest prefix they
// share, cut back to the newline after its last image; expect is passed to requestExpecting.
func (a *Agent) prefillShared(ctx context.Context, x, y []Message, expect int) (*engine.Timings, error) {
	ev := a.cfg.Model.(PromptEvaluator)
	rx, ry := a.requestExpecting(x, expect), a.requestExpecting(y, expect)
	px, err := ev.ApplyTemplate(ctx, rx)
	var he *engine.HTTPError
	if errors.As(err, &he) && (he.Status == http.StatusNotFound || he.Status == http.StatusNotImplemented) {
		return nil, errNoExactPrompt
	}
	if err != nil {
		return nil, fmt.Errorf("agent: prefill: %w", err)
	}
	py, err := ev.ApplyTemplate(ctx, ry)
	if err != nil {
		return nil, fmt.Errorf("agent: prefill: %w", err)
	}
	marker, err := ev.MediaMarker(ctx)
	if err != nil {
		return nil, fmt.Errorf("agent: prefill: %w", err)
	}
	prefix, n := SharedImagePrefix(px, py, marker)
	if n == 0 {
		return nil, ErrNothingToPrefill
	}
	images := requestImages(rx)
	if len(images) < n {
		return nil, fmt.Errorf("agent: prefill: the rendered prefix holds %d images but the request only %d", n, len(images))
	}
	extra := rx.Extra
	extra.NPredict = nil
	t, err := ev.Evaluate(ctx, prefix, images[:n], extra)
	if err != nil {
		return nil, fmt.Errorf("agent: prefill: %w", err)
	}
	return t, nil
}

// SharedImagePrefix returns the longest common prefix of two rendered prompts, cut back to just after the last
// newline that follows its last media marker, and the number of markers in it; "", 0 when no image ends up in
// it. The cut keeps the prefix on a token boundary (a prefix cut inside a word would tokenize differently from the
// same text inside the full prompt) and ends it with text, which llama-server needs after an image.
func SharedImagePrefix(x, y, marker string) (string, int) {
	n := 0
	for n < len(x) && n < len(y) && x[n] == y[n] {
		n++
	}
	common := x[:n]
	last := strings.LastIndex(common, marker)
	if marker == "" || last < 0 {
		return "", 0
	}
	nl := strings.LastIndexByte(common[last+len(marker):], '\n')
	if nl < 0 {
		return "", 0
	}
	prefix := common[:last+len(marker)+nl+1]
	return prefix, strings.Count(prefix, marker)
}

// requestImages returns the base64 data of every data-URI image in req, in message and part order: the order
// the template renders their markers in.
func requestImages(req engine.Request) []string {
	var out []string
	for _, m := range req.Messages {
		for _, p := range m.MultiContent {
			if p.Type != openai.ChatMessagePartTypeImageURL || p.ImageURL == nil {
				continue
			}
			url := p.ImageURL.URL
			if i := strings.Index(url, ";base64,"); strings.HasPrefix(url, "data:") && i >= 0 {
				out = append(out, url[i+len(";base64,"):])
			}
		}
	}
	return out
}
