package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/visorhq/visor/agent/toolcall"
	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/swap"
	"github.com/visorhq/visor/tools"
)

// Streamer is the one thing the loop needs from a model server. *engine.Client implements it.
type Streamer interface {
	ChatStream(ctx context.Context, req engine.Request) (engine.ChunkStream, error)
}

// ToolMode says who renders tools into the prompt.
type ToolMode int

const (
	// Native sends `tools` and lets the server's chat template render them; the server returns tool_calls.
	Native ToolMode = iota
	// Raw renders the Hermes (or Qwen XML) tool prompt in visor and parses calls from the text, for servers whose
	// template has no tool support or for raw completion endpoints.
	Raw
)

// Config is an agent's fixed setup. The zero value of each optional field is a sensible default.
type Config struct {
	Model    Streamer
	ModelID  string // the "model" field of requests; llama-server ignores it
	Tools    *tools.Registry
	System   string
	Mode     ToolMode
	Format   toolcall.Format // call syntax for Raw mode and for calls left in text
	MaxSteps int             // default 8
	// MaxTokens bounds each model turn; 0 leaves the server's default.
	MaxTokens   int
	Temperature *float32
	// ToolChoice is "auto" (default), "required" or "none". llama-server accepts only these strings.
	ToolChoice        string
	ParallelToolCalls bool
	// MaxRepeatedFailures stops the loop when the same failing call comes back this many times in a row
	// (default 3), instead of burning steps on a model stuck in a loop.
	MaxRepeatedFailures int
	Extra               engine.Extra
	Logger              *slog.Logger
	// OnImagesReady is called with the conversation so far when a tool returns images while other tools of the
	// same step still run, so the images can be encoded meanwhile (Agent.PrefillHistory does that). It runs in its
	// own goroutine, one call at a time in the order the images arrived, and the loop waits for it before the
	// step's next request. Setting it (or PrefillToolImages) also makes each tool result's images follow that
	// result in the prompt rather than the whole run of results, which strict OpenAI servers refuse: it is for
	// llama-server.
	//
	// expect is how many more images the step's request is expected to add (the results still outstanding):
	// the prefill renders the conversation with them counted (Agent.PrefillHistoryExpecting), so it matches that
	// request when they move the image window's cut. The loop also calls it with no new images, before the
	// tools run, when PlanCut says to evaluate a cut's shortened prefix ahead.
	OnImagesReady func(ctx context.Context, history []Message, expect int)
	// PrefillToolImages makes the loop call Agent.PrefillHistoryExpecting itself where OnImagesReady would be
	// called, when OnImagesReady is nil.
	PrefillToolImages bool
	// PlanCut decides whether a step whose tools are expected to return images that move the image window's
	// cut has the shortened prefix evaluated while the tools run (one screenshot tool leaves nothing else to hide
	// it in). The session passes swap.PlanCut with its engine's costs; nil is swap.PlanCut with no costs: ahead
	// whenever the images are more likely than not. Only with OnImagesReady or PrefillToolImages.
	PlanCut func(swap.CutNeeds) swap.CutPlan
	// ImageWindow bounds the images each request carries (the stored conversation keeps them all); the zero
	// value sends every image every time.
	ImageWindow ImageWindow
	// Images keeps each image's encoded data URL between requests; share one across the agents of a
	// conversation (a session builds one per turn). Nil: the agent makes its own.
	Images *engine.ImageCache
	// ToolImages is the policy every image a tool returns passes before it joins the conversation.
	ToolImages ToolImages
}

// Agent runs the loop. It holds no per-run state, so one Agent may serve several runs at once.
type Agent struct{ cfg Config }

// New checks cfg and returns an Agent.
func New(cfg Config) (*Agent, error) {
	if cfg.Model == nil {
		return nil, errors.New("agent: Config.Model is nil: pass an engine client")
	}
	if cfg.Tools == nil {
		cfg.Tools = tools.NewRegistry()
	}
	if cfg.MaxSteps <= 0 {
		cfg.MaxSteps = 8
	}
	if cfg.MaxRepeatedFailures <= 0 {
		cfg.MaxRepeatedFailures = 3
	}
	if cfg.ToolChoice == "" {
		cfg.ToolChoice = "auto"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := cfg.ImageWindow.Validate(); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if cfg.Images == nil {
		cfg.Images = engine.NewImageCache(0)
	}
	cfg.ToolImages = cfg.ToolImages.withDefaults()
	return &Agent{cfg: cfg}, nil
}

// Run continues history with the user's message until the model answers without tool calls, a limit is hit, or
// ctx ends. Every event goes to emit, one at a time even while parallel tool calls run, so consumers need no
// locking (emit must not block for long); the returned Finished is also emitted.
// Errors from the server or ctx end the run with Reason "error"/"canceled"; tool failures never do.
func (a *Agent) Run(ctx context.Context, history []Message, user Message, emit func(Event)) Finished {
	if emit == nil {
		emit = func(Event) {}
	}
	var emitMu sync.Mutex
	consumer := emit
	emit = func(ev Event) {
		emitMu.Lock()
		defer emitMu.Unlock()
		consumer(ev)
	}
	msgs := append(append([]Message(nil), history...), user)
	// The user's turn is stored with the first step so a crash before any answer leaves no dangling question.
	pending := []Message{user}
	var lastFailure string
	repeats := 0
	for step := 1; ; step++ {
		if step > a.cfg.MaxSteps {
			f := Finished{Final: lastAssistant(msgs), Steps: step - 1, Reason: "max_steps",
				Err: fmt.Errorf("agent stopped after max_steps=%d without a final answer", a.cfg.MaxSteps)}
			emit(f)
			return f
		}
		emit(StepStarted{Step: step})
		if n := newImages(msgs); n > 0 {
			emit(ImagesPending{Step: step, Count: n})
		}
		asst, perr, err := a.generate(ctx, step, msgs, emit)
		if err != nil {
			reason := "error"
			if ctx.Err() != nil {
				reason = "canceled"
			}
			// Keep what the user asked and what the model managed to say: a crash or Ctrl-C must not lose the
			// question, and the partial answer is what the user saw. Calls in a cut turn never ran.
			stored := pending
			if asst.Content != "" || asst.Reasoning != "" {
				asst.Interrupted, asst.ToolCalls = true, nil
				stored = append(stored, asst)
			}
			if len(stored) > 0 {
				emit(StepFinished{Step: step, Messages: stored})
			}
			f := Finished{Final: asst, Steps: step, Reason: reason, Err: err}
			emit(f)
			return f
		}
		stepMsgs := append(pending, asst)
		pending = nil
		msgs = append(msgs, asst)
		if len(asst.ToolCalls) == 0 && len(perr) == 0 {
			emit(StepFinished{Step: step, Messages: stepMsgs})
			f := Finished{Final: asst, Steps: step, Reason: "answer"}
			emit(f)
			return f
		}
		results, runs := a.runCalls(ctx, step, msgs, asst, perr, emit)
		stepMsgs = append(stepMsgs, results...)
		msgs = append(msgs, results...)
		emit(StepFinished{Step: step, Messages: stepMsgs, Runs: runs})
		if ctx.Err() != nil {
			f := Finished{Final: asst, Steps: step, Reason: "canceled", Err: ctx.Err()}
			emit(f)
			return f
		}
		sig, failed := failureSignature(asst, results, perr)
		if failed && sig == lastFailure {
			repeats++
		} else if failed {
			lastFailure, repeats = sig, 1
		} else {
			lastFailure, repeats = "", 0
		}
		if repeats >= a.cfg.MaxRepeatedFailures {
			f := Finished{Final: asst, Steps: step, Reason: "repeated_failure",
				Err: fmt.Errorf("agent stopped: the model repeated the same failing tool call %d times: %s", repeats, sig)}
			emit(f)
			return f
		}
	}
}

// generate streams one model turn. It returns the assistant message and the tool-call problems found in text.
func (a *Agent) generate(ctx context.Context, step int, msgs []Message, emit func(Event)) (Message, []string, error) {
	req := a.request(msgs)
	start := time.Now()
	st, err := a.cfg.Model.ChatStream(ctx, req)
	if err != nil {
		return Message{Role: "assistant"}, nil, err
	}
	defer st.Close()

	asst := Message{Role: "assistant"}
	parser := toolcall.New(a.cfg.Format)
	// The parser types each argument from its tool's schema, as `visor toolcalls parse --tools` does: the text
	// "42" for a string field must reach the registry as a string.
	parser.Init(a.toolSet())
	var content, reasoning, raw strings.Builder
	var perr []string
	native := map[int]*Call{}
	handle := func(evs []toolcall.Event) {
		for _, ev := range evs {
			switch ev.Kind {
			case toolcall.KindContent:
				content.WriteString(ev.Text)
				emit(Token{Step: step, Text: ev.Text})
			case toolcall.KindReasoning:
				reasoning.WriteString(ev.Text)
				emit(ReasoningToken{Step: step, Text: ev.Text})
			case toolcall.KindCall:
				// Parser ids restart every turn; the loop assigns ids unique within the conversation below.
				asst.ToolCalls = append(asst.ToolCalls, Call{Name: ev.Call.Name, Arguments: ev.Call.Arguments})
			case toolcall.KindReasoningCall:
				// Thinking about a call is not making it: never executed, not held against the model.
				emit(ParseError{Step: step, Text: "ignored a tool call written inside reasoning: " + ev.Call.Raw})
			case toolcall.KindError:
				if errors.Is(ev.Err, toolcall.ErrLateThinkClose) {
					// Everything so far was thinking (the template opened <think> in the prompt): the calls
					// found in it must not run, and its text is reasoning, not answer.
					asst.ToolCalls = nil
					reasoning.WriteString(content.String())
					content.Reset()
					emit(ParseError{Step: step, Text: ev.Err.Error()})
					continue
				}
				msg := ev.Text
				if ev.Err != nil {
					msg = ev.Err.Error()
				}
				perr = append(perr, msg)
				emit(ParseError{Step: step, Text: msg})
			}
		}
	}
	for {
		ch, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			handle(parser.Close())
			asst.Content, asst.Reasoning = content.String(), reasoning.String()
			return asst, perr, err
		}
		if ch.Timings != nil {
			asst.Timings = ch.Timings
		}
		for _, c := range ch.Choices {
			d := c.Delta
			if asst.TTFT == 0 && (d.Content != "" || d.ReasoningContent != "" || len(d.ToolCalls) > 0) {
				asst.TTFT = time.Since(start)
			}
			if d.ReasoningContent != "" {
				handle(parser.FeedReasoning(d.ReasoningContent))
			}
			if d.Content != "" {
				raw.WriteString(d.Content)
				handle(parser.Feed(d.Content))
			}
			for _, tc := range d.ToolCalls {
				// Servers that omit the index (it is optional in the wire format) start a call with an id and
				// continue it without one.
				idx := len(native)
				switch {
				case tc.Index != nil:
					idx = *tc.Index
				case tc.ID == "" && idx > 0:
					idx--
				}
				nc := native[idx]
				if nc == nil {
					nc = &Call{}
					native[idx] = nc
				}
				if tc.ID != "" {
					nc.ID = tc.ID
				}
				nc.Name += tc.Function.Name
				nc.Arguments = append(nc.Arguments, tc.Function.Arguments...)
			}
			if c.FinishReason != "" {
				asst.FinishReason = string(c.FinishReason)
			}
		}
	}
	handle(parser.Close())
	asst.Content, asst.Reasoning = strings.TrimSpace(content.String()), strings.TrimSpace(reasoning.String())
	asst.Raw = raw.String()
	// Native calls come first: the server saw them in order before any text-parsed leftovers.
	idxs := make([]int, 0, len(native))
	for i := range native {
		idxs = append(idxs, i)
	}
	sort.Ints(idxs)
	var calls []Call
	for _, i := range idxs {
		calls = append(calls, *native[i])
	}
	asst.ToolCalls = append(calls, asst.ToolCalls...)
	for i := range asst.ToolCalls {
		if asst.ToolCalls[i].ID == "" {
			asst.ToolCalls[i].ID = fmt.Sprintf("call_%d_%d", step, i)
		}
		if len(asst.ToolCalls[i].Arguments) == 0 {
			asst.ToolCalls[i].Arguments = json.RawMessage("{}")
		}
	}
	return asst, perr, nil
}

// toolSet hands the parser the schemas of the tools offered now (MCP servers add and withdraw tools at runtime).
func (a *Agent) toolSet() *toolcall.ToolSet {
	specs := a.cfg.Tools.Specs()
	defs := make([]toolcall.ToolDef, len(specs))
	for i, s := range specs {
		defs[i] = toolcall.ToolDef{Name: s.Name, Parameters: s.Parameters}
	}
	ts, err := toolcall.NewToolSet(defs)
	if err != nil {
		// The registry compiled every schema when the tool was registered, so this is not expected; typing
		// then falls back to guessing, which the registry's validation still checks.
		a.cfg.Logger.Warn("tool schemas for the call parser", "err", err)
		return nil
	}
	return ts
}

// runCalls executes the turn's calls (or explains why not) and returns the result messages: in call order when
// the calls run one after another, in the order they finish when they run in parallel, so that a fast tool's
// images come before the results still outstanding and can be prefilled while those run. msgs is the conversation
// up to and including asst.
func (a *Agent) runCalls(ctx context.Context, step int, msgs []Message, asst Message, perr []string, emit func(Event)) ([]Message, []ToolRun) {
	results := make([]Message, len(asst.ToolCalls))
	runs := make([]ToolRun, len(asst.ToolCalls))
	refuse := ""
	if asst.FinishReason == string(openai.FinishReasonLength) {
		refuse = "not executed: generation stopped at the length limit, so this call may be incomplete; " +
			"write a shorter call"
	}
	taken := &stepImages{held: imageBytes(msgs)}
	var ahead lookahead
	expect := 0
	if refuse == "" {
		expect = a.cutAhead(ctx, step, msgs, asst, &ahead, emit)
	}
	call := func(i int) (tools.Result, time.Duration) {
		c := asst.ToolCalls[i]
		emit(ToolCallStarted{Step: step, Call: c})
		t0 := time.Now()
		if refuse != "" {
			return tools.Result{Text: refuse, IsError: true}, time.Since(t0)
		}
		return a.cfg.ToolImages.take(a.cfg.Tools.Call(ctx, c.Name, c.Arguments), taken), time.Since(t0)
	}
	finish := func(i int, res tools.Result, d time.Duration) {
		c := asst.ToolCalls[i]
		emit(ToolCallFinished{Step: step, Call: c, Result: res, Duration: d})
		results[i] = Message{Role: "tool", ToolCallID: c.ID, ToolName: c.Name, Content: res.Text, Images: res.Images,
			IsError: res.IsError}
		runs[i] = ToolRun{Call: c, Result: res, Duration: d}
	}
	if a.parallel(asst.ToolCalls) && refuse == "" {
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			finished []int
			arrived  int
		)
		for i := range asst.ToolCalls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, d := call(i)
				// The finish event and the place among the results in one hold of the lock: the results are
				// in the order their events were emitted, which is what a consumer (and a test) can see.
				mu.Lock()
				defer mu.Unlock()
				finish(i, res, d)
				finished = append(finished, i)
				arrived += len(results[i].Images)
				if len(results[i].Images) > 0 && len(finished) < len(asst.ToolCalls) &&
					(a.cfg.OnImagesReady != nil || a.cfg.PrefillToolImages) {
					so := append([]Message(nil), msgs...)
					for _, j := range finished {
						so = append(so, results[j])
					}
					left := max(expect-arrived, 0)
					ahead.run(func() { a.imagesReady(ctx, so, left) })
				}
			}()
		}
		wg.Wait()
		ordered := make([]Message, len(finished))
		orderedRuns := make([]ToolRun, len(finished))
		for k, i := range finished {
			ordered[k], orderedRuns[k] = results[i], runs[i]
		}
		results, runs = ordered, orderedRuns
	} else {
		for i := range asst.ToolCalls {
			if ctx.Err() != nil {
				results[i] = Message{Role: "tool", ToolCallID: asst.ToolCalls[i].ID, ToolName: asst.ToolCalls[i].Name,
					Content: "not executed: the run was canceled", IsError: true}
				runs[i] = ToolRun{Call: asst.ToolCalls[i], Result: tools.Result{Text: results[i].Content, IsError: true}}
				continue
			}
			res, d := call(i)
			finish(i, res, d)
		}
	}
	// The step's next request starts with what the prefills evaluated: it waits for them.
	ahead.wait()
	if len(perr) > 0 {
		// Problems in call text have no call id to answer; tell the model in a user turn so it can retry.
		results = append(results, Message{Role: "user", IsError: true,
			Content: "Your last message had tool-call text that could not be used:\n- " + strings.Join(perr, "\n- ") +
				"\nWrite each call again, complete and valid, or answer without tools."})
	}
	return results, runs
}

// cutAhead is the step's plan for the image window: when its calls are expected to return images that move the
// window's cut and PlanCut says so, the shortened prefix (the conversation up to asst, rendered as the step's
// next request will render it) is evaluated on ahead while the tools run. It returns the images the prefills of
// this step count as still to come (0: none planned, the prefills render the conversation as it is).
func (a *Agent) cutAhead(ctx context.Context, step int, msgs []Message, asst Message, ahead *lookahead, emit func(Event)) int {
	if !a.cfg.ImageWindow.On() || (a.cfg.OnImagesReady == nil && !a.cfg.PrefillToolImages) {
		return 0
	}
	expected, sure := expectedImages(a.cfg.Tools, msgs, asst.ToolCalls)
	if expected == 0 {
		return 0
	}
	plan := a.cfg.PlanCut
	if plan == nil {
		plan = func(n swap.CutNeeds) swap.CutPlan { return swap.PlanCut(swap.Costs{}, n) }
	}
	w := a.cfg.ImageWindow
	p := plan(swap.CutNeeds{Window: swap.Window{Keep: w.Keep, Batch: w.Batch}, Images: countImages(msgs),
		Expected: expected, Sure: sure})
	if !p.Cut {
		return 0
	}
	emit(Explain{Step: step, Text: "image window: " + p.Reason})
	if !p.Ahead {
		return 0
	}
	so := append([]Message(nil), msgs...)
	ahead.run(func() { a.imagesReady(ctx, so, expected) })
	return expected
}

// expectedImages is how many images calls are expected to return, and how likely: a tool that may return
// images (tools.ReturnsImages) is expected to return as many as its last result in msgs did, one if it has not
// been called yet; the likelihood is the share of its earlier results that had images (3 in 4 before any).
func expectedImages(reg *tools.Registry, msgs []Message, calls []Call) (int, float64) {
	n, sure := 0, 1.0
	for _, c := range calls {
		t, ok := reg.Get(c.Name)
		if !ok || !t.Spec().ReturnsImages {
			continue
		}
		last, seen, with := 1, 0, 0
		for _, m := range msgs {
			if m.Role == "tool" && m.ToolName == c.Name {
				seen++
				last = len(m.Images)
				if last > 0 {
					with++
				}
			}
		}
		p := 0.75
		if seen > 0 {
			p = float64(with) / float64(seen)
		}
		if last == 0 {
			continue
		}
		n += last
		sure = min(sure, p)
	}
	if n == 0 {
		return 0, 0
	}
	return n, sure
}

func countImages(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		n += len(m.Images)
	}
	return n
}

// imagesReady hands the conversation so far to the configured lookahead; expect as for OnImagesReady.
func (a *Agent) imagesReady(ctx context.Context, history []Message, expect int) {
	switch {
	case a.cfg.OnImagesReady != nil:
		a.cfg.OnImagesReady(ctx, history, expect)
	case a.cfg.PrefillToolImages:
		if _, err := a.PrefillHistoryExpecting(ctx, history, expect); err != nil && !errors.Is(err, ErrNothingToPrefill) {
			// A failed prefill costs nothing but the time it would have saved: the next request encodes the
			// images itself.
			a.cfg.Logger.Warn("prefill tool images", "err", err)
		}
	}
}

// lookahead runs prefills one at a time, in the order they were started, off the caller's goroutine: each
// extends the prefix the previous one left in the server's cache.
type lookahead struct {
	last chan struct{}
	all  sync.WaitGroup
}

func (l *lookahead) run(f func()) {
	prev, done := l.last, make(chan struct{})
	l.last = done
	l.all.Add(1)
	go func() {
		defer l.all.Done()
		defer close(done)
		if prev != nil {
			<-prev
		}
		f()
	}()
}

func (l *lookahead) wait() { l.all.Wait() }

func (a *Agent) parallel(calls []Call) bool {
	if len(calls) < 2 {
		return false
	}
	for _, c := range calls {
		t, ok := a.cfg.Tools.Get(c.Name)
		if !ok || !t.Spec().Parallel {
			return false
		}
	}
	return true
}

// failureSignature identifies a turn whose every call failed, so identical retries can be counted.
func failureSignature(asst Message, results []Message, perr []string) (string, bool) {
	var b strings.Builder
	failed := len(perr) > 0 || len(asst.ToolCalls) > 0
	for i, c := range asst.ToolCalls {
		if i < len(results) && !results[i].IsError {
			failed = false
		}
		fmt.Fprintf(&b, "%s(%s) ", c.Name, compactJSON(c.Arguments))
	}
	for _, p := range perr {
		b.WriteString(p)
	}
	return strings.TrimSpace(b.String()), failed
}

func compactJSON(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// newImages counts the images added since the model last answered: the ones the next request makes the server
// encode (earlier ones are in its cache).
func newImages(msgs []Message) int {
	n := 0
	for i := len(msgs) - 1; i >= 0 && msgs[i].Role != "assistant"; i-- {
		n += len(msgs[i].Images)
	}
	return n
}

func lastAssistant(msgs []Message) Message {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "assistant" {
			return msgs[i]
		}
	}
	return Message{Role: "assistant"}
}
