package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tidwall/gjson"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/residency"
	"github.com/visorhq/visor/engine/slots"
)

// Engines are the models stateless clients' requests run on (the gateway's): which are loaded, swapped and
// admitted is engine/residency's, one slot allocator pins requests to server slots, and a queued request's
// images are prefilled here, so a front end reaches its engines only through the session service.
type Engines struct {
	pool *residency.Pool
}

type (
	// EngineModel is one model Engines serve; EnginesConfig sets them up.
	EngineModel   = residency.Model
	EnginesConfig = residency.Config
	// ModelEngine is one model's server (a conductor), which Engines also stop.
	ModelEngine = residency.Engine
	// EngineState is a model's state for listings.
	EngineState = residency.State
	// EngineStats are the counters for /metrics.
	EngineStats = residency.Stats
	// Timings is the server's timing block of an evaluation.
	Timings = engine.Timings
)

// DefaultStreamIdle is the longest a started engine stream may send nothing before it is cut off
// (engine.DefaultStreamIdle; VISOR_STREAM_IDLE sets another).
const DefaultStreamIdle = engine.DefaultStreamIdle

// Refusals a client should retry later.
var (
	ErrEnginesBusy  = residency.ErrBusy
	ErrQueueTimeout = residency.ErrQueueTimeout
)

// NewEngines starts the models' pool; nothing loads until a request asks for a model.
func NewEngines(cfg EnginesConfig) (*Engines, error) {
	p, err := residency.New(cfg)
	if err != nil {
		return nil, err
	}
	return &Engines{pool: p}, nil
}

// EngineLease is an admitted request on one model: Ready starts (or finds) its server, Release ends it.
type EngineLease struct {
	l   *residency.Lease
	key slots.Key
}

// Acquire admits a request of conversation key on model name, waiting for a slot or a swap (ErrEnginesBusy
// when the queue is full, ErrQueueTimeout after its bound). reserved is the slot an Ahead of the request holds,
// -1 for none.
func (e *Engines) Acquire(ctx context.Context, name, key string, reserved int) (*EngineLease, error) {
	l, err := e.pool.Acquire(ctx, name, slots.Key(key), reserved)
	if err != nil {
		return nil, err
	}
	return &EngineLease{l: l, key: slots.Key(key)}, nil
}

// Ready returns the URL of the request's server once it answers, starting it if it must.
func (l *EngineLease) Ready(ctx context.Context) (string, error) {
	r, err := l.l.Engine.EnsureReady(ctx)
	if err != nil {
		return "", err
	}
	l.l.MarkReady()
	return r.URL, nil
}

// Recover is Ready after a request failed: the server may have died between requests, and is checked and
// restarted if it must be (the request, never answered, may be sent once more).
func (l *EngineLease) Recover(ctx context.Context) (string, error) {
	r, err := l.l.Engine.Recover(ctx)
	if err != nil {
		return "", err
	}
	return r.URL, nil
}

// Slot is the server slot to send the request to (id_slot); -1 when the model's requests are not pinned.
func (l *EngineLease) Slot() int { return l.l.Slot }

// SwapWait is how long the request waited for its model to be loaded.
func (l *EngineLease) SwapWait() time.Duration { return l.l.SwapWait }

// Release ends the request; its slot now holds its conversation. Safe to call twice.
func (l *EngineLease) Release() { l.l.Release(l.key) }

// State, Loaded, Waits and Stats report on the pool.
func (e *Engines) State(name string) EngineState { return e.pool.State(name) }
func (e *Engines) Loaded() map[string]bool       { return e.pool.Loaded() }
func (e *Engines) Waits(name string) bool        { return e.pool.Waits(name) }
func (e *Engines) Stats() EngineStats            { return e.pool.Stats() }

// Unload stops name's engine once its requests have ended; false when it was not loaded.
func (e *Engines) Unload(ctx context.Context, name string) (bool, error) {
	return e.pool.Unload(ctx, name)
}

// Close stops every engine.
func (e *Engines) Close(ctx context.Context) error { return e.pool.Close(ctx) }

// Ahead is a queued request's prefill in flight: Done closes when it has ended, then Timings or Err and Took
// say how it went.
type Ahead struct {
	Slot    int
	Done    chan struct{}
	Timings *Timings
	Err     error
	Took    time.Duration
}

// PrefillAhead reserves a spare server slot of model name for a client request that has to wait, and evaluates
// its images there while it waits (ctx ending stops it); the request is then sent to that slot (Acquire with
// Ahead.Slot); ended, when set, is called with the outcome before Done closes. Without a slot the policy allows
// (slots.QueuedPrefill) or a loaded model, it returns nil and why.
func (e *Engines) PrefillAhead(ctx context.Context, name, key, apiKey string, body []byte, ended func(*Ahead)) (*Ahead, string) {
	eng, slot, why := e.pool.Reserve(name, slots.Key(key))
	if slot < 0 {
		return nil, why
	}
	a := &Ahead{Slot: slot, Done: make(chan struct{})}
	go func() {
		defer close(a.Done)
		t0 := time.Now()
		r, err := eng.EnsureReady(ctx)
		if err == nil {
			a.Timings, err = prefillBody(ctx, engine.NewClient(r.URL, apiKey), body, slot)
		}
		a.Err, a.Took = err, time.Since(t0)
		if ended != nil {
			ended(a)
		}
	}()
	return a, why
}

// errNoImagePrefix: the part of the prompt a prefill can evaluate holds no image.
var errNoImagePrefix = errors.New("the prompt's shared prefix holds no image")

// prefillBody has the server evaluate, on server slot slot, the prompt of a chat body up to the end of its
// last message, images included, leaving only the generation prompt. The request is known whole while it waits,
// so the prefix comes from the server's own template: the longest part shared by the request and the request
// followed by one more user message, which ends after the last message's end of turn. The request later sent to
// the same slot then extends the cached sequence exactly, which recurrent models need (agent.PrefillHistory
// does the same for visor's own turns).
func prefillBody(ctx context.Context, c *engine.Client, body []byte, slot int) (*engine.Timings, error) {
	x, y, err := renderPair(body)
	if err != nil {
		return nil, err
	}
	px, err := c.ApplyTemplateRaw(ctx, x)
	if err != nil {
		return nil, err
	}
	py, err := c.ApplyTemplateRaw(ctx, y)
	if err != nil {
		return nil, err
	}
	marker, err := c.MediaMarker(ctx)
	if err != nil {
		return nil, err
	}
	prefix, n := agent.SharedImagePrefix(px, py, marker)
	if n == 0 {
		return nil, errNoImagePrefix
	}
	var imgs []string
	gjson.GetBytes(body, "messages.#.content").ForEach(func(_, parts gjson.Result) bool {
		parts.ForEach(func(_, p gjson.Result) bool {
			if p.Get("type").String() == "image_url" {
				if payload, ok := base64Payload(p.Get("image_url.url").String()); ok {
					imgs = append(imgs, payload)
				}
			}
			return true
		})
		return true
	})
	if len(imgs) < n {
		return nil, fmt.Errorf("the rendered prefix holds %d images but the request only %d data-URL ones", n, len(imgs))
	}
	return c.Evaluate(ctx, prefix, imgs[:n], engine.Extra{IDSlot: &slot})
}

// base64Payload is the base64 data of a data:…;base64, URL; ok is false for any other URL.
func base64Payload(u string) (string, bool) {
	const tag = ";base64,"
	if len(u) < 5 || u[:5] != "data:" {
		return "", false
	}
	for i := 5; i+len(tag) <= len(u); i++ {
		if u[i:i+len(tag)] == tag {
			return u[i+len(tag):], true
		}
	}
	return "", false
}

// renderPair is body, and body with one more user message, for rendering only.
func renderPair(body []byte) (x, y []byte, err error) {
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, nil, err
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(req["messages"], &msgs); err != nil {
		return nil, nil, fmt.Errorf("messages: %w", err)
	}
	delete(req, "stream")
	if x, err = json.Marshal(req); err != nil {
		return nil, nil, err
	}
	if req["messages"], err = json.Marshal(append(msgs, json.RawMessage(`{"role":"user","content":"A"}`))); err != nil {
		return nil, nil, err
	}
	y, err = json.Marshal(req)
	return x, y, err
}
