// Package tui is visor's terminal chat: a Bubble Tea program with line editing and history, answers streamed as
// markdown, tool calls and results that fold to one line (ctrl+o unfolds them), images attached by path (with
// completion, ~ expanded) or by dropping a file on the terminal, a session picker, Ctrl-C that cancels the
// running turn, and a status line (model, context used, tokens/s, draft acceptance, what is resident and what is
// being encoded ahead). It talks to the conversation only through Backend; it does not start engines, open
// stores or run the agent loop, and it is used only when the terminal is interactive (cmd/visor keeps a plain
// line protocol otherwise).
package tui

import (
	"context"
	"time"

	"github.com/visorhq/visor/agent"
)

// Backend is what the terminal chat needs from a conversation. Calls other than Status may block (they run off
// the UI goroutine); Status must be cheap, it is polled for the status line.
type Backend interface {
	// Send runs one turn: text plus the images attached since the last turn. It calls emit for every event,
	// one at a time, and returns when the turn ends; canceling ctx cancels the turn.
	Send(ctx context.Context, text string, emit func(agent.Event)) agent.Finished
	// Attach reads an image file for the next message and starts encoding it ahead, returning a short
	// description with the sizes it was given and is sent at (images.Describe). Errors are meant for the user (not an image, no projector).
	Attach(ctx context.Context, path string) (string, error)
	// Detach drops the images attached for the next message.
	Detach()
	// Sessions lists stored conversations, newest first.
	Sessions(ctx context.Context) ([]SessionInfo, error)
	// Resume switches to the stored session id and returns its history.
	Resume(ctx context.Context, id string) ([]agent.Message, error)
	// Status describes the conversation and the engine now.
	Status() Status
}

// SessionInfo is one row of the session picker.
type SessionInfo struct {
	ID       string
	Title    string
	Model    string
	Updated  time.Time
	Messages int
}

// Status is what the status line shows.
type Status struct {
	Session string
	Model   string
	// ContextUsed of ContextSize tokens: the last request's prompt plus its answer (0 size: unknown).
	ContextUsed, ContextSize int
	TokensPerSecond          float64
	// DraftAccepted of Drafted speculative (MTP or draft-model) tokens, over the session.
	DraftAccepted, Drafted int
	// Resident lists what is loaded beside the model weights ("projector", "MTP").
	Resident []string
	// Ahead says what is being encoded or prefilled before the next message is sent ("encoding 1 image").
	Ahead string
}
