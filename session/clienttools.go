package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/visorhq/visor/agent/toolcall"
	"github.com/visorhq/visor/prompts"
)

var errNoClientMessages = errors.New("messages must be an array of {role, content} objects")

// promptFormat is the prompt that teaches the syntax f parses; auto gets Hermes.
func promptFormat(f toolcall.Format) prompts.Format {
	if f == toolcall.Auto {
		return prompts.Hermes
	}
	return prompts.Format(f.String())
}

// ToolsAsText rewrites a client's chat body (OpenAI's shape) for a model whose server must not handle tools
// itself: the tools go into the system prompt in format's syntax, past assistant calls become call text, tool
// results become <tool_response> blocks in a user turn, and tools, tool_choice and parallel_tool_calls are
// dropped, so the server sets no grammar and parses nothing. The answer's calls are then in content, and the
// caller's repair (agent/toolcall) turns them into tool_calls.
func ToolsAsText(body []byte, format toolcall.Format) ([]byte, error) {
	f := promptFormat(format)
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("the body is not a JSON object: %w", err)
	}
	var tools []struct {
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	if err := json.Unmarshal(m["tools"], &tools); err != nil {
		return nil, fmt.Errorf("tools: want an array of {\"type\":\"function\",\"function\":{name, description, parameters}}: %w", err)
	}
	specs := make([]prompts.ToolSpec, len(tools))
	for i, t := range tools {
		specs[i] = prompts.ToolSpec{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters}
	}
	var msgs []map[string]json.RawMessage
	if err := json.Unmarshal(m["messages"], &msgs); err != nil {
		return nil, fmt.Errorf("messages: %w", errNoClientMessages)
	}
	str := func(raw json.RawMessage) string {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		_ = json.Unmarshal(raw, &parts)
		var b strings.Builder
		for _, p := range parts {
			if p.Type == "text" {
				b.WriteString(p.Text)
			}
		}
		return b.String()
	}
	role := func(msg map[string]json.RawMessage) string { return str(msg["role"]) }
	base := ""
	if len(msgs) > 0 && role(msgs[0]) == "system" {
		base = str(msgs[0]["content"])
		msgs = msgs[1:]
	}
	sys, err := prompts.ToolSystem(f, base, specs)
	if err != nil {
		return nil, err
	}
	mk := func(role, content string) map[string]json.RawMessage {
		r, _ := json.Marshal(role)
		c, _ := json.Marshal(content)
		return map[string]json.RawMessage{"role": r, "content": c}
	}
	out := []map[string]json.RawMessage{mk("system", sys)}
	names := map[string]string{} // tool_call_id → name, for results that do not name their tool
	var results []string
	flush := func() {
		if len(results) > 0 {
			out = append(out, mk("user", strings.Join(results, "\n")))
			results = nil
		}
	}
	for _, msg := range msgs {
		switch role(msg) {
		case "tool":
			name := str(msg["name"])
			if name == "" {
				name = names[str(msg["tool_call_id"])]
			}
			results = append(results, prompts.ToolResponse(f, name, str(msg["content"])))
			continue
		case "assistant":
			flush()
			var calls []clientCall
			_ = json.Unmarshal(msg["tool_calls"], &calls)
			if len(calls) == 0 {
				out = append(out, msg)
				continue
			}
			var b strings.Builder
			b.WriteString(str(msg["content"]))
			for _, c := range calls {
				names[c.ID] = c.Function.Name
				if b.Len() > 0 {
					b.WriteString("\n")
				}
				args := json.RawMessage(c.Function.Arguments)
				if !json.Valid(args) {
					args = json.RawMessage("{}")
				}
				b.WriteString(prompts.ToolCall(f, c.Function.Name, args))
			}
			a := mk("assistant", b.String())
			if rc, ok := msg["reasoning_content"]; ok {
				a["reasoning_content"] = rc
			}
			out = append(out, a)
			continue
		}
		flush()
		out = append(out, msg)
	}
	flush()
	m["messages"], _ = json.Marshal(out)
	delete(m, "tools")
	delete(m, "tool_choice")
	delete(m, "parallel_tool_calls")
	return json.Marshal(m)
}
