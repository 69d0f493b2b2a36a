package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/tools"
)

// Store is what the recorder needs from memory.
type Store interface {
	AppendStep(ctx context.Context, sessionID string, step memory.Step) error
}

// Recorder returns an event consumer that writes each finished step to store in one transaction, so a crash
// loses at most the step in flight. Write failures are reported through onErr (never dropped silently) and do
// not stop the run: the user still gets the answer, and the error says the session is incomplete.
func Recorder(ctx context.Context, store Store, sessionID string, onErr func(error)) func(Event) {
	if onErr == nil {
		onErr = func(err error) { slog.Error("store step", "session", sessionID, "err", err) }
	}
	return func(ev Event) {
		sf, ok := ev.(StepFinished)
		if !ok {
			return
		}
		step := memory.Step{}
		for _, m := range sf.Messages {
			step.Messages = append(step.Messages, ToMemory(m))
		}
		now := time.Now()
		for _, r := range sf.Runs {
			tr := memory.ToolRun{CallID: r.Call.ID, Name: r.Call.Name, Arguments: r.Call.Arguments, Result: r.Result.Text,
				Duration: r.Duration, StartedAt: now.Add(-r.Duration)}
			if r.Result.IsError {
				tr.Error = r.Result.Text
			}
			step.ToolRuns = append(step.ToolRuns, tr)
		}
		// Ctrl-C cancels ctx, and the step that was interrupted is exactly the one worth keeping: write it on a
		// context that outlives the cancel (the store's busy timeout still bounds the write).
		if err := store.AppendStep(context.WithoutCancel(ctx), sessionID, step); err != nil {
			onErr(err)
		}
	}
}

// TurnStore is what a stored turn needs; *memory.Store implements it.
type TurnStore interface {
	Store
	BeginTurn(ctx context.Context, sessionID string) (recovered int, err error)
	EndTurn(ctx context.Context, sessionID string) error
	MarkInterrupted(ctx context.Context, sessionID string) error
}

// Runner runs one user turn; *Agent implements it.
type Runner interface {
	Run(ctx context.Context, history []Message, user Message, emit func(Event)) Finished
}

// RunStored runs one user turn with r and keeps it in store under sessionID: the turn is opened first, each step
// is written as it finishes (Recorder), and the turn is closed as complete, or as interrupted after an error or a
// cancel, on a context that outlives the cancel. A nil store only runs the turn. It returns what Run returned, the
// messages the turn added to the conversation, and any storage error (which never stops the run).
func RunStored(ctx context.Context, r Runner, store TurnStore, sessionID string, history []Message, user Message,
	emit func(Event)) (Finished, []Message, error) {
	if emit == nil {
		emit = func(Event) {}
	}
	var added []Message
	var storeErr error
	record := func(Event) {}
	if store != nil {
		if _, err := store.BeginTurn(ctx, sessionID); err != nil {
			return Finished{Reason: "error", Err: err}, nil, fmt.Errorf("session %s: begin turn: %w", sessionID, err)
		}
		record = Recorder(ctx, store, sessionID, func(err error) { storeErr = errors.Join(storeErr, err) })
	}
	f := r.Run(ctx, history, user, func(ev Event) {
		if s, ok := ev.(StepFinished); ok {
			added = append(added, s.Messages...)
		}
		record(ev)
		emit(ev)
	})
	if store != nil {
		end := store.EndTurn
		if f.Reason == "canceled" || f.Reason == "error" {
			end = store.MarkInterrupted
		}
		if err := end(context.WithoutCancel(ctx), sessionID); err != nil {
			storeErr = errors.Join(storeErr, err)
		}
	}
	return f, added, storeErr
}

// ToMemory converts a loop message to its stored form.
func ToMemory(m Message) memory.Message {
	out := memory.Message{Role: m.Role, Content: m.Content, Reasoning: m.Reasoning, ToolCallID: m.ToolCallID,
		ToolName: m.ToolName, FinishReason: m.FinishReason, Interrupted: m.Interrupted}
	for _, c := range m.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, memory.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
	}
	for _, im := range m.Images {
		out.Images = append(out.Images, memory.Image{MIME: im.MIME, Data: im.Data})
	}
	if t := m.Timings; t != nil || m.TTFT > 0 {
		mt := &memory.Timings{TimeToFirstToken: m.TTFT}
		if t != nil {
			mt.PromptTokens, mt.CachedTokens, mt.GeneratedTokens = t.PromptN, t.CacheN, t.PredictedN
			mt.PromptPerSecond, mt.TokensPerSecond = t.PromptPerSecond, t.PredictedPerSecond
			mt.DraftTokens, mt.DraftAccepted = t.DraftN, t.DraftNAccepted
			mt.Duration = time.Duration((t.PromptMS + t.PredictedMS) * float64(time.Millisecond))
		}
		out.Timings = mt
	}
	return out
}

// FromMemory converts a stored message back for the loop; images come back with their exact bytes.
func FromMemory(m memory.Message) Message {
	out := Message{Role: m.Role, Content: m.Content, Reasoning: m.Reasoning, ToolCallID: m.ToolCallID,
		ToolName: m.ToolName, FinishReason: m.FinishReason, Interrupted: m.Interrupted}
	for _, c := range m.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, Call{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
	}
	for _, im := range m.Images {
		out.Images = append(out.Images, tools.Image{MIME: im.MIME, Data: im.Data})
	}
	if t := m.Timings; t != nil {
		out.TTFT = t.TimeToFirstToken
		out.Timings = &engine.Timings{PromptN: t.PromptTokens, CacheN: t.CachedTokens, PredictedN: t.GeneratedTokens,
			PromptPerSecond: t.PromptPerSecond, PredictedPerSecond: t.TokensPerSecond, DraftN: t.DraftTokens,
			DraftNAccepted: t.DraftAccepted}
	}
	return out
}

// Resumable converts a stored history for the loop, dropping what cannot be sent again, so a history cut by a
// crash or Ctrl-C is always well formed. Steps are stored whole, so only the tail can be incomplete.
func Resumable(msgs []memory.Message) []Message {
	out := make([]Message, 0, len(msgs))
	for _, m := range msgs {
		if m.Rejected {
			// The engine refused this turn for its content (MarkRejected): sending it again would fail again.
			continue
		}
		out = append(out, FromMemory(m))
	}
	// An assistant turn whose calls have no results (the process died between the two) cannot be replayed:
	// servers reject tool calls without answers. Drop it; the user's question before it stays.
	for len(out) > 0 && out[len(out)-1].Role == "assistant" && len(out[len(out)-1].ToolCalls) > 0 {
		out = out[:len(out)-1]
	}
	return out
}
