package gateway

import (
	"context"
	"testing"
)

type ctxRecorder struct {
	ctxErr error
	x      Exchange
	n      int
}

func (r *ctxRecorder) Record(ctx context.Context, x Exchange) { r.ctxErr, r.x = ctx.Err(), x; r.n++ }

// TestRecordOutlivesTheClient: an answer is recorded after it was sent, when the client may already have hung
// up; the Recorder must not be handed the request's cancelled context, or a store honouring it would drop it.
func TestRecordOutlivesTheClient(t *testing.T) {
	rec := &ctxRecorder{}
	g := &Gateway{cfg: Config{Recorder: rec}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the client hung up
	g.record(ctx, request{model: "m", body: []byte(`{"messages":[]}`)},
		[]byte(`{"choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`))
	if rec.n != 1 || rec.x.Content != "hi" || rec.x.Finish != "stop" || rec.x.Model != "m" {
		t.Fatalf("recorded %d: %+v", rec.n, rec.x)
	}
	if rec.ctxErr != nil {
		t.Fatalf("the Recorder got a context that is done (%v): a store honouring it would lose the exchange", rec.ctxErr)
	}
}
