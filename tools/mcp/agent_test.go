package mcp_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/tools"
)

// TestAgentCallsMCPToolOnRealModel runs the whole path: the tiny model on a real llama-server calls the MCP
// tool (its arguments constrained by the server's schema through the grammar), the call goes over stdio to a
// real subprocess, and the model answers after the result.
func TestAgentCallsMCPToolOnRealModel(t *testing.T) {
	srv := enginetest.Tiny(t, false, llamacpp.Config{})
	c := connect(t, stdioConfig())
	reg := tools.NewRegistry()
	// Only echo: the tiny model calls the lowest-sorting tool, and sub__crash would sort first.
	for _, tl := range c.Tools() {
		if tl.Spec().Name == "sub__echo" {
			if err := reg.Register(tl); err != nil {
				t.Fatal(err)
			}
		}
	}
	a, err := agent.New(agent.Config{Model: srv.Client(), Tools: reg, MaxSteps: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var finished []agent.ToolCallFinished
	f := a.Run(ctx, nil, agent.Message{Role: "user", Content: "Echo something."}, func(ev agent.Event) {
		if e, ok := ev.(agent.ToolCallFinished); ok {
			finished = append(finished, e)
		}
	})
	if f.Err != nil || f.Reason != "answer" {
		t.Fatalf("run: %+v", f)
	}
	if len(finished) != 1 || finished[0].Call.Name != "sub__echo" || finished[0].Result.IsError ||
		!strings.HasPrefix(finished[0].Result.Text, "echo: ") {
		t.Fatalf("tool calls: %+v", finished)
	}
	if strings.TrimSpace(f.Final.Content) != "Hi!" {
		t.Fatalf("final answer %q, want Hi!", f.Final.Content)
	}
	t.Logf("model called %s(%s) -> %q", finished[0].Call.Name, finished[0].Call.Arguments, finished[0].Result.Text)
}
