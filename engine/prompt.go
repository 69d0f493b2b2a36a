package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// llama-server's own endpoints for evaluating an exact prompt. A chat request renders the conversation and then
// the generation prompt ("<|im_start|>assistant\n"); a later request that adds to the conversation differs from it
// right there. An attention-only model drops the differing tail from its KV cache and goes on, but a recurrent
// or hybrid model (Qwen3.5/3.6's Gated DeltaNet layers, Mamba) keeps a state that cannot be cut back: the server
// then reuses only what a context checkpoint covers, usually not the images. Evaluating exactly the prefix the
// next request will share leaves the cached sequence ending where that request continues it.

// ApplyTemplate renders req with the server's chat template (POST /apply-template) and returns the prompt text.
// Images appear in it as the server's media marker (see MediaMarker).
func (c *Client) ApplyTemplate(ctx context.Context, req Request) (string, error) {
	body, err := requestJSON(req)
	if err != nil {
		return "", err
	}
	return c.ApplyTemplateRaw(ctx, body)
}

// ApplyTemplateRaw renders a chat-completions body as the server would (POST /apply-template), for callers that
// pass OpenAI bodies through as they came.
func (c *Client) ApplyTemplateRaw(ctx context.Context, body []byte) (string, error) {
	var out struct {
		Prompt *string `json:"prompt"`
	}
	if err := c.post(ctx, "/apply-template", body, &out); err != nil {
		return "", err
	}
	if out.Prompt == nil {
		return "", fmt.Errorf("POST %s/apply-template: the answer has no prompt", c.shown)
	}
	return *out.Prompt, nil
}

// MediaMarker returns the text that stands for one image in the server's prompts (/props media_marker). This
// build randomises it per start, so callers must ask the server they talk to.
func (c *Client) MediaMarker(ctx context.Context) (string, error) {
	var props struct {
		MediaMarker string `json:"media_marker"`
	}
	if err := c.Get(ctx, "/props", &props); err != nil {
		return "", err
	}
	if props.MediaMarker == "" {
		return "", fmt.Errorf("GET %s/props: no media_marker (the server was started without a projector, or is "+
			"not llama-server)", c.shown)
	}
	return props.MediaMarker, nil
}

// Evaluate has the server evaluate prompt into its cache without answering (POST /completion, n_predict 0):
// prompt is exact text, with one media marker per image; images are the base64-encoded image files in the
// order of their markers. extra's slot and cache settings are sent along; its n_predict is replaced by 0.
//
// The prompt must not end with a marker: llama-server b11669 aborts (GGML_ASSERT batch.size() > 0) on a prompt
// whose last chunk is an image, so a caller must end the prompt with text.
func (c *Client) Evaluate(ctx context.Context, prompt string, images []string, extra Extra) (*Timings, error) {
	if prompt == "" {
		return nil, fmt.Errorf("evaluate at %s: empty prompt", c.shown)
	}
	m := extra.fields()
	m["n_predict"] = 0
	if len(images) > 0 {
		m["prompt"] = map[string]any{"prompt_string": prompt, "multimodal_data": images}
	} else {
		m["prompt"] = prompt
	}
	body, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("evaluate at %s: %w", c.shown, err)
	}
	var out struct {
		Timings *Timings `json:"timings"`
	}
	if err := c.post(ctx, "/completion", body, &out); err != nil {
		return nil, err
	}
	return out.Timings, nil
}

// requestJSON is the body Chat would send for req, extras merged.
func requestJSON(req Request) ([]byte, error) { return chatBody(req) }

func (c *Client) post(ctx context.Context, path string, body []byte, out any) error {
	return c.exchange(ctx, http.MethodPost, path, body, out)
}

// Tokenize returns the token ids the server's tokenizer gives text (POST /tokenize, special tokens parsed as
// text, no BOS added).
func (c *Client) Tokenize(ctx context.Context, text string) ([]int, error) {
	body, err := json.Marshal(map[string]any{"content": text})
	if err != nil {
		return nil, fmt.Errorf("tokenize at %s: %w", c.shown, err)
	}
	var out struct {
		Tokens *[]int `json:"tokens"`
	}
	if err := c.post(ctx, "/tokenize", body, &out); err != nil {
		return nil, err
	}
	if out.Tokens == nil {
		return nil, fmt.Errorf("POST %s/tokenize: the answer has no tokens", c.shown)
	}
	return *out.Tokens, nil
}
