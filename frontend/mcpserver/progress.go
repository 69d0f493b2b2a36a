package mcpserver

import (
	"context"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/internal/textcut"
)

// progress relays the run's steps and tool calls to a client that asked for progress (sent a progressToken),
// so a long run is visibly alive and the caller can see what the agent did. Streamed tokens are not relayed:
// one notification per token would cost more than the answer.
type progress struct {
	ctx   context.Context
	sess  *sdk.ServerSession
	token any
	n     float64
}

func newProgress(ctx context.Context, req *sdk.CallToolRequest) *progress {
	p := &progress{ctx: ctx}
	if req != nil && req.Params != nil && req.Session != nil {
		p.sess, p.token = req.Session, req.Params.GetProgressToken()
	}
	return p
}

// event is called under the run's emit lock.
func (p *progress) event(ev agent.Event) {
	if p.token == nil {
		return
	}
	var msg string
	switch e := ev.(type) {
	case agent.StepStarted:
		msg = fmt.Sprintf("step %d", e.Step)
	case agent.Notice:
		msg = e.Text
	case agent.ToolCallStarted:
		msg = fmt.Sprintf("calling %s %s", e.Call.Name, textcut.Line(string(e.Call.Arguments), 300))
	case agent.ToolCallFinished:
		verb := "returned"
		if e.Result.IsError {
			verb = "failed"
		}
		msg = fmt.Sprintf("%s %s: %s", e.Call.Name, verb, textcut.Line(e.Result.Text, 300))
		if n := len(e.Result.Images); n > 0 {
			msg += fmt.Sprintf(" [%d image(s)]", n)
		}
	default:
		return
	}
	p.n++
	// A client that went away must not stop the run; its answer is stored if there is a store.
	_ = p.sess.NotifyProgress(p.ctx, &sdk.ProgressNotificationParams{ProgressToken: p.token, Progress: p.n, Message: msg})
}
