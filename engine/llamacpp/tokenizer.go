package llamacpp

import (
	"context"
	"fmt"
	"net/http"

	"github.com/visorhq/visor/engine"
)

// tokenizerProbe is ordinary text that every working vocabulary turns into tokens.
const tokenizerProbe = "What is in this picture?"

// CheckTokenizer asks the server to tokenize a short English question and returns an error naming the model
// when that gives no tokens. llama.cpp drops the bytes a vocabulary has no token for, so a broken vocabulary
// (one of only multi-character tokens and no merges, as header-only test models once had) turns all text into
// nothing; a request with an image is then a prompt of only the image, and llama-server b11669 aborts on it
// (GGML_ASSERT(batch.size() > 0) in pre_decode), taking every session with it. Checking at start turns that
// crash into an error before any request; a server started with a projector should be checked. A server without /tokenize passes: the check is not known there.
func CheckTokenizer(ctx context.Context, c *engine.Client, model string) error {
	toks, err := c.Tokenize(ctx, tokenizerProbe)
	if err != nil {
		if engine.StatusCode(err) == http.StatusNotFound {
			return nil
		}
		return fmt.Errorf("llamacpp: check the tokenizer of %s: %w", model, err)
	}
	if len(toks) == 0 {
		return fmt.Errorf("llamacpp: the tokenizer of %s turns text into no tokens (%q gives none): every request "+
			"with an image would be only the image, on which llama-server aborts (GGML_ASSERT(batch.size() > 0)); "+
			"use a model file whose vocabulary covers text", model, tokenizerProbe)
	}
	return nil
}
