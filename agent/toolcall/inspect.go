package toolcall

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/tidwall/gjson"
)

// Report is what Inspect found in one assistant message: its content and reasoning, the calls (those the server
// already returned in tool_calls included) and every problem, in words. Its JSON form is the stable output of
// `visor toolcalls parse`.
type Report struct {
	Content   string       `json:"content"`
	Reasoning string       `json:"reasoning"`
	Calls     []ReportCall `json:"calls"`
	Errors    []string     `json:"errors"`
}

// ReportCall is one call in a Report.
type ReportCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// Inspect reads one assistant message as raw text, a chat-completion response (JSON) or a streamed response
// (SSE "data:" lines) — for the latter two, content and reasoning_content are parsed and calls the server
// already returned in tool_calls are included — and parses it with the format's parser, typed by ts (nil: no
// schemas) exactly as the agent loop does. With ts, each call is also checked against its tool's schema.
// Problems in the message are in Report.Errors; the error is for input that is not a message at all.
func Inspect(data []byte, f Format, ts *ToolSet) (Report, error) {
	msg, err := readMessage(data)
	if err != nil {
		return Report{}, err
	}
	p := New(f)
	p.Init(ts) // the same schema typing as the agent loop
	var events []Event
	if len(msg.chunks) == 0 {
		p.StartInThinking = p.d.opensInThinking(string(data))
		events = p.Feed(string(data))
	}
	var content strings.Builder
	for _, c := range msg.chunks {
		if !c.reasoning {
			content.WriteString(c.text)
		}
	}
	if len(msg.chunks) > 0 {
		p.StartInThinking = p.d.opensInThinking(content.String())
	}
	for _, c := range msg.chunks {
		if c.reasoning {
			events = append(events, p.FeedReasoning(c.text)...)
		} else {
			events = append(events, p.Feed(c.text)...)
		}
	}
	r := Collect(append(events, p.Close()...))
	r.Calls = append(r.Calls, msg.native...)
	r.Errors = append(r.Errors, msg.errs...)
	out := Report{Content: r.Content, Reasoning: r.Reasoning, Calls: []ReportCall{}, Errors: []string{}}
	out.Errors = append(out.Errors, r.Errors...)
	for _, c := range r.ReasoningCalls {
		out.Errors = append(out.Errors, fmt.Sprintf("call to %q inside reasoning, not executed", c.Name))
	}
	for i := range r.Calls {
		c := &r.Calls[i]
		if ts != nil {
			if err := ts.Check(c); err != nil {
				out.Errors = append(out.Errors, fmt.Sprintf("call %d: %v", i, err))
			}
		}
		out.Calls = append(out.Calls, ReportCall{Name: c.Name, Arguments: c.Arguments})
	}
	return out, nil
}

type chunk struct {
	text      string
	reasoning bool
}

// message is what the command read: text chunks in arrival order and calls the server had already parsed.
type message struct {
	chunks []chunk
	native []Call
	errs   []string // server-side calls whose arguments are unreadable (e.g. cut at max_tokens)
}

type wireMessage struct {
	Content          *string `json:"content"`
	ReasoningContent *string `json:"reasoning_content"`
	ToolCalls        []struct {
		Index    int `json:"index"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// readMessage recognises SSE and chat-completion JSON; anything else is raw text (no chunks).
func readMessage(data []byte) (message, error) {
	t := bytes.TrimSpace(data)
	switch {
	case bytes.HasPrefix(t, []byte("data:")):
		return readSSE(t)
	case len(t) > 0 && t[0] == '{':
		// gjson reads what it can from a response cut short (captures get truncated), where encoding/json would
		// reject the whole document.
		m := gjson.GetBytes(t, "choices.0.message")
		if !m.IsObject() {
			return message{}, nil // a bare JSON call, or other text
		}
		var msg message
		if r := m.Get("reasoning_content"); r.Type == gjson.String {
			msg.chunks = append(msg.chunks, chunk{r.String(), true})
		}
		if c := m.Get("content"); c.Type == gjson.String {
			msg.chunks = append(msg.chunks, chunk{c.String(), false})
		}
		if len(msg.chunks) == 0 {
			msg.chunks = []chunk{{"", false}}
		}
		m.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
			msg.addNative(tc.Get("function.name").String(), tc.Get("function.arguments").String())
			return true
		})
		return msg, nil
	}
	return message{}, nil
}

// readSSE reads an OpenAI streaming response: each "data:" line holds a chunk whose delta carries content,
// reasoning_content or pieces of tool_calls (name first, arguments in fragments, keyed by index).
func readSSE(data []byte) (message, error) {
	var msg message
	type acc struct {
		name string
		args strings.Builder
	}
	calls := map[int]*acc{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), len(data)+1)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		payload, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue
		}
		payload = strings.TrimSpace(payload)
		if payload == "[DONE]" {
			break
		}
		var ev struct {
			Choices []struct {
				Delta wireMessage `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(payload), &ev); err != nil {
			return msg, fmt.Errorf("read SSE chunk %q: %w", payload, err)
		}
		for _, ch := range ev.Choices {
			d := ch.Delta
			if d.ReasoningContent != nil && *d.ReasoningContent != "" {
				msg.chunks = append(msg.chunks, chunk{*d.ReasoningContent, true})
			}
			if d.Content != nil && *d.Content != "" {
				msg.chunks = append(msg.chunks, chunk{*d.Content, false})
			}
			for _, tc := range d.ToolCalls {
				a := calls[tc.Index]
				if a == nil {
					a = &acc{}
					calls[tc.Index] = a
				}
				a.name += tc.Function.Name
				a.args.WriteString(tc.Function.Arguments)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return msg, fmt.Errorf("read SSE: %w", err)
	}
	if len(msg.chunks) == 0 {
		msg.chunks = []chunk{{"", false}}
	}
	idx := make([]int, 0, len(calls))
	for i := range calls {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		msg.addNative(calls[i].name, calls[i].args.String())
	}
	return msg, nil
}

func (m *message) addNative(name, args string) {
	obj, note, err := argumentsObject(jsonString(args))
	if err != nil {
		m.errs = append(m.errs, fmt.Sprintf("%v: tool_calls[%d] %q: arguments %s: %v", ErrMalformed, len(m.native)+len(m.errs), name, clip(args), err))
		return
	}
	m.native = append(m.native, Call{Name: name, Arguments: obj, Raw: args, Repaired: note})
}
