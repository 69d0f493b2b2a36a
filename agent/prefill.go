package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/visorhq/visor/engine"
)

// Chatter sends a request without streaming. *engine.Client implements it.
type Chatter interface {
	Chat(ctx context.Context, req engine.Request) (engine.Response, error)
}

// ErrNoPrefill means the model client cannot send the non-streamed request a prefill needs.
var ErrNoPrefill = errors.New("agent: the model client cannot prefill (it has no Chat method)")

// Prefill has the server evaluate, without answering, the prompt the next Run will send up to and including the
// images of user, so the images are encoded (and, on an engine that swaps MTP and vision, swapped in and out)
// before the user has finished typing or the last tool has returned. Run must then be called with the same
// history and a user message carrying the same image bytes first: its request then starts with the prefilled
// prefix and llama-server reuses it from its cache. The text of user is left out, since it may still change.
func (a *Agent) Prefill(ctx context.Context, history []Message, user Message) (*engine.Timings, error) {
	c, ok := a.cfg.Model.(Chatter)
	if !ok {
		return nil, ErrNoPrefill
	}
	if len(user.Images) == 0 {
		return nil, errors.New("agent: prefill: the user message has no images; a text prefix is cheap to evaluate in the request itself")
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
