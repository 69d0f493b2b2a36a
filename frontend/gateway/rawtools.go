package gateway

import (
	"context"
	"encoding/json"
)

// record hands a complete answer to the Recorder. The answer has been sent, so a client that hangs up now must
// not cancel its storage: the Recorder gets the request's values without its cancellation.
func (g *Gateway) record(ctx context.Context, req request, b []byte) {
	var resp struct {
		Choices []struct {
			Message      wireMessage `json:"message"`
			FinishReason string      `json:"finish_reason"`
		} `json:"choices"`
	}
	if json.Unmarshal(b, &resp) != nil || len(resp.Choices) == 0 {
		return
	}
	c := resp.Choices[0]
	x := Exchange{Model: req.model, Request: req.body, Content: deref(c.Message.Content),
		Reasoning: deref(c.Message.ReasoningContent), Finish: c.FinishReason}
	var calls []wireCall
	_ = json.Unmarshal(c.Message.ToolCalls, &calls)
	for _, wc := range calls {
		x.ToolCalls = append(x.ToolCalls, ToolCall{ID: wc.ID, Name: wc.Function.Name, Arguments: wc.Function.Arguments})
	}
	g.cfg.Recorder.Record(context.WithoutCancel(ctx), x)
}
