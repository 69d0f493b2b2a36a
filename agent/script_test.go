package agent_test

import (
	"context"
	"encoding/json"
	"io"
	"sync"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/tools"
)

// script is a model that answers each request with the next scripted list of chunks: the loop tested without
// HTTP or a server, through the engine.ChunkStream interface.
type script struct {
	mu    sync.Mutex
	turns [][]engine.Chunk
	reqs  []engine.Request
}

func (s *script) ChatStream(_ context.Context, req engine.Request) (engine.ChunkStream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, req)
	next := s.turns[0]
	s.turns = s.turns[1:]
	return &chunks{list: next}, nil
}

type chunks struct{ list []engine.Chunk }

func (c *chunks) Recv() (engine.Chunk, error) {
	if len(c.list) == 0 {
		return engine.Chunk{}, io.EOF
	}
	ch := c.list[0]
	c.list = c.list[1:]
	return ch, nil
}
func (c *chunks) Close() error { return nil }

func delta(d openai.ChatCompletionStreamChoiceDelta, finish openai.FinishReason) engine.Chunk {
	return engine.Chunk{ChatCompletionStreamResponse: openai.ChatCompletionStreamResponse{
		Choices: []openai.ChatCompletionStreamChoice{{Delta: d, FinishReason: finish}}}}
}

func TestLoopOverAScriptedStream(t *testing.T) {
	idx := 0
	m := &script{turns: [][]engine.Chunk{
		{
			delta(openai.ChatCompletionStreamChoiceDelta{ToolCalls: []openai.ToolCall{{Index: &idx, ID: "c1", Type: "function",
				Function: openai.FunctionCall{Name: "add", Arguments: `{"a": 2, `}}}}, ""),
			delta(openai.ChatCompletionStreamChoiceDelta{ToolCalls: []openai.ToolCall{{Index: &idx,
				Function: openai.FunctionCall{Arguments: `"b": 40}`}}}}, openai.FinishReasonToolCalls),
		},
		{
			delta(openai.ChatCompletionStreamChoiceDelta{Content: "It is "}, ""),
			delta(openai.ChatCompletionStreamChoiceDelta{Content: "42."}, openai.FinishReasonStop),
		},
	}}
	type in struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	reg := tools.NewRegistry()
	if err := reg.Register(tools.New("add", "adds two numbers", func(_ context.Context, x in) (tools.Result, error) {
		b, _ := json.Marshal(x.A + x.B)
		return tools.Result{Text: string(b)}, nil
	})); err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{Model: m, Tools: reg})
	if err != nil {
		t.Fatal(err)
	}
	f := a.Run(context.Background(), nil, agent.Message{Role: "user", Content: "2+40?"}, nil)
	if f.Err != nil || f.Final.Content != "It is 42." || f.Steps != 2 {
		t.Fatalf("%+v", f)
	}
	last := m.reqs[1].Messages
	if got := last[len(last)-1]; got.Role != "tool" || got.Content != "42" || got.ToolCallID != "c1" {
		t.Fatalf("the tool result sent back: %+v", got)
	}
}
