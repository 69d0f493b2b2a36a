package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"github.com/visorhq/visor/engine"
)

// ContextUsed estimates how many tokens the conversation occupies in the server's context, from the last
// assistant turn's timings (its prompt, cached or not, plus what it generated). Zero when nothing was measured.
func ContextUsed(msgs []Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if t := msgs[i].Timings; msgs[i].Role == "assistant" && t != nil {
			return t.PromptN + t.CacheN + t.PredictedN
		}
	}
	return 0
}

// NeedsCompaction reports whether a conversation should be compacted before the next turn: when it fills more
// than fraction of nCtx, the next turn and its tool results would soon fail with "exceeds the available context
// size".
func NeedsCompaction(msgs []Message, nCtx int, fraction float64) bool {
	return nCtx > 0 && float64(ContextUsed(msgs)) > fraction*float64(nCtx)
}

// SplitForCompaction picks where to cut: the last keepTurns user turns stay verbatim, everything before is
// summarized. The cut always falls on a user message, so no tool result is separated from its call. When there
// are not enough turns to leave something to summarize, fewer are kept, down to none: a single huge turn is
// summarized whole rather than left to overflow the context.
func SplitForCompaction(msgs []Message, keepTurns int) (old, recent []Message) {
	for k := keepTurns; k > 0; k-- {
		if old, recent = splitTurns(msgs, k); len(old) > 0 {
			return old, recent
		}
	}
	return msgs, nil
}

func splitTurns(msgs []Message, keepTurns int) (old, recent []Message) {
	seen := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" && !msgs[i].IsError {
			seen++
			if seen == keepTurns {
				return msgs[:i], msgs[i:]
			}
		}
	}
	return nil, msgs
}

const summaryPrompt = `Summarize the conversation so far for your own later use. Keep every fact, decision, file name, ` +
	`number and open task; drop pleasantries. Write plain prose and lists, no tool calls.`

// Summarize asks the model for a summary of msgs (images are described by the model, not kept), the text a
// compacted session starts from.
func Summarize(ctx context.Context, model Streamer, msgs []Message, maxTokens int) (string, error) {
	if len(msgs) == 0 {
		return "", errors.New("summarize: nothing to summarize")
	}
	var b strings.Builder
	for _, m := range msgs {
		switch m.Role {
		case "tool":
			fmt.Fprintf(&b, "[tool %s result]\n%s\n\n", m.ToolName, truncate(m.Content, 2000))
		case "assistant":
			fmt.Fprintf(&b, "[assistant]\n%s\n", m.Content)
			for _, c := range m.ToolCalls {
				fmt.Fprintf(&b, "(called %s %s)\n", c.Name, c.Arguments)
			}
			b.WriteString("\n")
		default:
			fmt.Fprintf(&b, "[%s]\n%s\n", m.Role, m.Content)
			if len(m.Images) > 0 {
				fmt.Fprintf(&b, "(%d image(s) attached)\n", len(m.Images))
			}
			b.WriteString("\n")
		}
	}
	transcript := b.String()
	// The part to summarize may itself not fit the context (one huge message): the server says so, and the
	// transcript is cut in half around its middle until it does — any tokenizer, no guessing of token counts.
	for attempt := 0; ; attempt++ {
		s, err := summarizeOnce(ctx, model, transcript, maxTokens)
		if err == nil || attempt == 6 || engine.StatusCode(err) != 400 || !strings.Contains(err.Error(), "context") {
			return s, err
		}
		transcript = shorten(transcript)
	}
}

// shorten keeps the first and last quarters of s, marking the cut.
func shorten(s string) string {
	q := len(s) / 4
	return s[:q] + fmt.Sprintf("\n[… %d characters left out …]\n", len(s)-2*q) + s[len(s)-q:]
}

func summarizeOnce(ctx context.Context, model Streamer, transcript string, maxTokens int) (string, error) {
	req := engine.Request{ChatCompletionRequest: openai.ChatCompletionRequest{MaxTokens: maxTokens,
		Messages: []openai.ChatCompletionMessage{
			{Role: "system", Content: summaryPrompt},
			{Role: "user", Content: "Conversation to summarize:\n\n" + transcript},
		}}}
	st, err := model.ChatStream(ctx, req)
	if err != nil {
		return "", fmt.Errorf("summarize: %w", err)
	}
	defer st.Close()
	var out strings.Builder
	for {
		ch, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("summarize: %w", err)
		}
		for _, c := range ch.Choices {
			out.WriteString(c.Delta.Content)
		}
	}
	s := strings.TrimSpace(out.String())
	if s == "" {
		return "", errors.New("summarize: the model returned an empty summary")
	}
	return s, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("… [%d more bytes]", len(s)-n)
}
