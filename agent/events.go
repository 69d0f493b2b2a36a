package agent

import (
	"encoding/json"
	"time"

	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/tools"
)

// Message is one turn of a conversation in visor's own terms: images are exact bytes (never re-encoded, so the
// server's image cache keeps hitting), tool calls are parsed, and the wire form is decided per request.
type Message struct {
	Role         string          `json:"role"` // system, user, assistant, tool
	Content      string          `json:"content,omitempty"`
	Reasoning    string          `json:"reasoning,omitempty"`
	Images       []tools.Image   `json:"images,omitempty"`
	ToolCalls    []Call          `json:"tool_calls,omitempty"`
	ToolCallID   string          `json:"tool_call_id,omitempty"`
	ToolName     string          `json:"tool_name,omitempty"`
	IsError      bool            `json:"is_error,omitempty"`
	FinishReason string          `json:"finish_reason,omitempty"`
	Timings      *engine.Timings `json:"timings,omitempty"`
	// TTFT is the time from sending the request to the first streamed token of this assistant turn.
	TTFT time.Duration `json:"ttft,omitempty"`
	// Raw is the assistant's text exactly as streamed, call markup included. Raw mode sends it back as is, so
	// the next prompt extends the cached one token for token, and a malformed call stays visible to the model.
	Raw string `json:"raw,omitempty"`
	// Interrupted marks an assistant turn cut short (server crash, Ctrl-C): its text is partial.
	Interrupted bool `json:"interrupted,omitempty"`
}

// Call is a tool call the model made.
type Call struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// Event is one thing that happened in the loop. The CLI prints them, memory stores them, the MCP server relays
// them: every consumer reads the same stream.
type Event interface{ isEvent() }

// Notice is news for people from the layers around the loop (a compaction, a restarted engine); the loop itself
// never emits it.
type Notice struct{ Text string }

// Explain is one thing the layers around the loop did ahead of time, or saw the engine do, for the request of
// step Step (0: before the turn's first request): the scheduler's action, why it was taken and what it measured.
// Front ends show it when asked (--explain); the loop itself never emits it.
type Explain struct {
	Step int
	Text string
}

// StepStarted opens step Step (one model request and the tool calls it asked for).
type StepStarted struct{ Step int }

// ImagesPending says the step's request carries Count images the server has not encoded yet (attached by the
// user or returned by tools): the cue for the swap scheduler to bring the vision encoder in, and for a prefill.
type ImagesPending struct {
	Step  int
	Count int
}

// Token is streamed answer text, after tool-call markup was removed.
type Token struct {
	Step int
	Text string
}

// ReasoningToken is streamed thinking text.
type ReasoningToken struct {
	Step int
	Text string
}

// ToolCallStarted is a call about to run.
type ToolCallStarted struct {
	Step int
	Call Call
}

// ToolCallFinished is a call's result.
type ToolCallFinished struct {
	Step     int
	Call     Call
	Result   tools.Result
	Duration time.Duration
}

// ParseError is tool-call text the model wrote that could not be used (malformed, truncated, or inside
// reasoning); the model is told about it in the next turn.
type ParseError struct {
	Step int
	Text string
}

// StepFinished closes a step with every message it added, in order (the assistant turn and its tool results):
// the unit memory stores atomically.
type StepFinished struct {
	Step     int
	Messages []Message
	Runs     []ToolRun
}

// ToolRun records one executed call for memory.
type ToolRun struct {
	Call     Call
	Result   tools.Result
	Duration time.Duration
}

// Finished ends the run. Reason is "answer", "max_steps", "repeated_failure", "canceled" or "error".
type Finished struct {
	Final  Message
	Steps  int
	Reason string
	Err    error
}

func (StepStarted) isEvent()      {}
func (Notice) isEvent()           {}
func (Explain) isEvent()          {}
func (ImagesPending) isEvent()    {}
func (Token) isEvent()            {}
func (ReasoningToken) isEvent()   {}
func (ToolCallStarted) isEvent()  {}
func (ToolCallFinished) isEvent() {}
func (ParseError) isEvent()       {}
func (StepFinished) isEvent()     {}
func (Finished) isEvent()         {}
