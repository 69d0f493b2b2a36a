package gateway

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/visorhq/visor/agent/toolcall"
)

// repairer turns tool calls a server left in text into OpenAI tool_calls, for one response.
type repairer struct {
	g      *Gateway
	model  string
	format toolcall.Format
	req    request
	tools  bool // tools were rendered as text: every call is in content by design
	ts     *toolcall.ToolSet
	tsDone bool
	prefix string
}

func (rp *repairer) toolSet() *toolcall.ToolSet {
	if !rp.tsDone {
		rp.tsDone = true
		// A schema that does not compile leaves the calls untyped, not the response broken.
		rp.ts, _ = toolcall.ParseTools(rp.req.body)
	}
	return rp.ts
}

// callID makes ids unique across responses (the parser numbers calls within one message).
func (rp *repairer) callID(c *toolcall.Call) string {
	if rp.prefix == "" {
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		rp.prefix = "call_" + hex.EncodeToString(b) + "_"
	}
	return rp.prefix + strings.TrimPrefix(c.ID, "call_")
}

func (rp *repairer) offered(name string) bool {
	ts := rp.toolSet()
	if ts == nil {
		return false
	}
	for _, n := range ts.Names() {
		if n == name {
			return true
		}
	}
	return false
}

type wireCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

func (rp *repairer) wire(c *toolcall.Call, index int, streamed bool) wireCall {
	w := wireCall{ID: rp.callID(c), Type: "function"}
	if streamed {
		w.Index = &index
	}
	w.Function.Name, w.Function.Arguments = c.Name, string(c.Arguments)
	return w
}

type wireMessage struct {
	Role             string          `json:"role"`
	Content          *string         `json:"content"`
	ReasoningContent *string         `json:"reasoning_content,omitempty"`
	ToolCalls        json.RawMessage `json:"tool_calls,omitempty"`
}

// whole repairs a complete (non-streamed) response body; where names the repair in the metrics. A body that
// needs nothing is returned as it came.
func (rp *repairer) whole(b []byte, where string) []byte {
	var resp map[string]json.RawMessage
	if json.Unmarshal(b, &resp) != nil {
		return b
	}
	var choices []map[string]json.RawMessage
	if json.Unmarshal(resp["choices"], &choices) != nil || len(choices) == 0 {
		return b
	}
	changed := false
	for _, ch := range choices {
		var msg wireMessage
		var finish string
		if json.Unmarshal(ch["message"], &msg) != nil || len(msg.ToolCalls) > 2 && string(msg.ToolCalls) != "null" {
			continue
		}
		_ = json.Unmarshal(ch["finish_reason"], &finish)
		if finish == "length" {
			continue // a cut-off answer is no call to run, whatever it looks like
		}
		content, reasoning := deref(msg.Content), deref(msg.ReasoningContent)
		var calls []toolcall.Call
		w := where
		if toolcall.LooksLikeCalls(content) {
			res := toolcall.ParseWith(content, rp.format, rp.toolSet())
			if len(res.Calls) > 0 {
				calls = res.Calls
				content = res.Content
				if reasoning == "" && res.Reasoning != "" {
					reasoning = res.Reasoning
				}
			}
		}
		if len(calls) == 0 && toolcall.LooksLikeCalls(reasoning) {
			// The call was written while thinking (llama.cpp#22684): it is still the model's only call, but only
			// one naming an offered tool is taken.
			res := toolcall.ParseWith(reasoning, rp.format, rp.toolSet())
			for _, c := range append(res.Calls, res.ReasoningCalls...) {
				if rp.offered(c.Name) {
					calls = append(calls, c)
				}
			}
			if where == "content" {
				w = "reasoning"
			}
		}
		if len(calls) == 0 {
			continue
		}
		wc := make([]wireCall, len(calls))
		for i := range calls {
			wc[i] = rp.wire(&calls[i], i, false)
			rp.g.metrics.repair(rp.model, w)
		}
		msg.ToolCalls, _ = json.Marshal(wc)
		msg.Content = nil
		if content != "" {
			msg.Content = &content
		}
		msg.ReasoningContent = nil
		if reasoning != "" {
			msg.ReasoningContent = &reasoning
		}
		msg.Role = "assistant"
		ch["message"], _ = json.Marshal(msg)
		ch["finish_reason"] = json.RawMessage(`"tool_calls"`)
		changed = true
	}
	if !changed {
		return b
	}
	resp["choices"], _ = json.Marshal(choices)
	out, err := json.Marshal(resp)
	if err != nil {
		return b
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// chunk is what the streaming repair reads of one event.
type chunk struct {
	ID                string `json:"id"`
	Object            string `json:"object"`
	Created           int64  `json:"created"`
	Model             string `json:"model"`
	SystemFingerprint string `json:"system_fingerprint,omitempty"`
	Choices           []struct {
		Index int `json:"index"`
		Delta struct {
			Role             string          `json:"role"`
			Content          *string         `json:"content"`
			ReasoningContent *string         `json:"reasoning_content"`
			ToolCalls        json.RawMessage `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Error json.RawMessage `json:"error"`
}

type outDelta struct {
	Role             string     `json:"role,omitempty"`
	Content          *string    `json:"content,omitempty"`
	ReasoningContent *string    `json:"reasoning_content,omitempty"`
	ToolCalls        []wireCall `json:"tool_calls,omitempty"`
}

type outChoice struct {
	Index        int      `json:"index"`
	Delta        outDelta `json:"delta"`
	FinishReason *string  `json:"finish_reason"`
}

type outChunk struct {
	ID                string      `json:"id"`
	Object            string      `json:"object"`
	Created           int64       `json:"created"`
	Model             string      `json:"model"`
	SystemFingerprint string      `json:"system_fingerprint,omitempty"`
	Choices           []outChoice `json:"choices"`
}

// streamState follows one streamed answer through visor's parser.
type streamState struct {
	rp        *repairer
	w         io.Writer
	fl        http.Flusher
	p         *toolcall.Parser
	native    bool // the server sent tool_calls itself: pass everything through
	calls     int
	reasonC   []toolcall.Call
	last      chunk
	content   strings.Builder
	reasoning strings.Builder
	finish    string
	record    []ToolCall
	where     string // what a repair is counted as
}

// stream copies an event stream, feeding every content delta to the parser: text the parser releases goes out
// at once (so only a partially written tag is held back), complete calls go out as tool_calls deltas, and the
// finish reason becomes tool_calls when calls were found. A chunk the parser passes unchanged is forwarded as
// the server's bytes.
func (rp *repairer) stream(ctx context.Context, w io.Writer, body io.Reader) {
	st := &streamState{rp: rp, w: w, where: "content"}
	st.fl, _ = w.(http.Flusher)
	repair := rp.req.tools
	if repair {
		st.p = toolcall.New(rp.format)
		st.p.Init(rp.toolSet())
	}
	br := bufio.NewReaderSize(body, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && !st.line(line, repair) {
			return
		}
		if br.Buffered() == 0 && st.fl != nil {
			st.fl.Flush()
		}
		if err != nil {
			break
		}
	}
	if rp.g.cfg.Recorder != nil && st.finish != "" {
		rp.g.cfg.Recorder.Record(context.WithoutCancel(ctx), Exchange{Model: rp.model, Request: rp.req.body,
			Content: st.content.String(), Reasoning: st.reasoning.String(), ToolCalls: st.record, Finish: st.finish})
	}
}

// line handles one line of the event stream; false stops the copy (the client went away).
func (st *streamState) line(line []byte, repair bool) bool {
	data, ok := bytes.CutPrefix(line, []byte("data: "))
	if !ok || bytes.HasPrefix(data, []byte("[DONE]")) {
		return st.write(line)
	}
	var c chunk
	if json.Unmarshal(data, &c) != nil {
		return st.write(line)
	}
	if bytes.Contains(data, []byte(`"timings"`)) {
		if t, ok := timingsOf(data); ok {
			st.rp.g.metrics.timings(st.rp.model, t)
		}
	}
	if len(c.Error) > 0 && repair && !st.native && parseFailure(c.Error) {
		// The server's own parser gave up at the end; visor's has seen every byte of the text.
		return st.finishWith(st.p.Close(), "stop", "parse_error")
	}
	if len(c.Choices) == 0 {
		return st.write(line)
	}
	ch := c.Choices[0]
	st.last = c
	d := ch.Delta
	if d.Content != nil {
		st.content.WriteString(*d.Content)
	}
	if d.ReasoningContent != nil {
		st.reasoning.WriteString(*d.ReasoningContent)
	}
	if len(d.ToolCalls) > 0 && string(d.ToolCalls) != "null" {
		if repair && !st.native {
			// The server parsed the calls itself: release the text the parser still holds (never as calls: the
			// server's are the answer), then pass everything through.
			var text []toolcall.Event
			for _, ev := range st.p.Close() {
				if ev.Kind == toolcall.KindContent || ev.Kind == toolcall.KindReasoning {
					text = append(text, ev)
				}
			}
			if len(text) > 0 && !st.emit(text, nil, "", nil) {
				return false
			}
		}
		st.native = true
		st.recordNative(d.ToolCalls)
	}
	if ch.FinishReason != nil {
		st.finish = *ch.FinishReason
	}
	if !repair || st.native {
		return st.write(line)
	}
	var evs []toolcall.Event
	if d.ReasoningContent != nil && *d.ReasoningContent != "" {
		for _, ev := range st.p.FeedReasoning(*d.ReasoningContent) {
			if ev.Kind == toolcall.KindReasoningCall {
				st.reasonC = append(st.reasonC, *ev.Call)
			}
		}
	}
	if d.Content != nil && *d.Content != "" {
		evs = st.p.Feed(*d.Content)
		if len(evs) == 1 && evs[0].Kind == toolcall.KindContent && evs[0].Text == *d.Content && ch.FinishReason == nil {
			return st.write(line) // the common case: text the parser let through whole
		}
	}
	if ch.FinishReason != nil {
		evs = append(evs, st.p.Close()...)
		return st.finishWith(evs, *ch.FinishReason, "content")
	}
	return st.emit(evs, d.ReasoningContent, d.Role, nil)
}

// emit writes the parser's events as one chunk (reasoning passes as the server sent it).
func (st *streamState) emit(evs []toolcall.Event, reasoning *string, role string, finish *string) bool {
	var delta outDelta
	delta.Role = role
	var text, think strings.Builder
	for _, ev := range evs {
		switch ev.Kind {
		case toolcall.KindContent:
			text.WriteString(ev.Text)
		case toolcall.KindError:
			if !ev.Shown { // a Shown error's text came just before as content
				text.WriteString(ev.Text)
			}
		case toolcall.KindReasoning:
			think.WriteString(ev.Text)
		case toolcall.KindCall:
			delta.ToolCalls = append(delta.ToolCalls, st.rp.wire(ev.Call, st.calls, true))
			st.recordCall(ev.Call)
			st.calls++
			st.rp.g.metrics.repair(st.rp.model, st.where)
		case toolcall.KindReasoningCall:
			st.reasonC = append(st.reasonC, *ev.Call)
		}
	}
	if text.Len() > 0 {
		s := text.String()
		delta.Content = &s
	}
	if reasoning != nil && *reasoning != "" {
		think.WriteString(*reasoning)
	}
	if think.Len() > 0 {
		s := think.String()
		delta.ReasoningContent = &s
	}
	if delta.Content == nil && delta.ReasoningContent == nil && delta.ToolCalls == nil && delta.Role == "" && finish == nil {
		return true // everything in this chunk is held back
	}
	return st.writeChunk(delta, finish)
}

// finishWith releases what the parser held, turns calls written while thinking into calls when nothing else
// called, and ends the answer with the right finish reason.
func (st *streamState) finishWith(evs []toolcall.Event, finish, where string) bool {
	st.where = where
	if !st.emit(evs, nil, "", nil) {
		return false
	}
	if st.calls == 0 && finish != "length" {
		var delta outDelta
		for i := range st.reasonC {
			if c := &st.reasonC[i]; st.rp.offered(c.Name) {
				delta.ToolCalls = append(delta.ToolCalls, st.rp.wire(c, st.calls, true))
				st.recordCall(c)
				st.calls++
				st.rp.g.metrics.repair(st.rp.model, "reasoning")
			}
		}
		if len(delta.ToolCalls) > 0 && !st.writeChunk(delta, nil) {
			return false
		}
	}
	if st.calls > 0 && finish == "stop" {
		finish = "tool_calls"
	}
	st.finish = finish
	return st.writeChunk(outDelta{}, &finish)
}

func (st *streamState) writeChunk(d outDelta, finish *string) bool {
	c := st.last
	out := outChunk{ID: c.ID, Object: "chat.completion.chunk", Created: c.Created, Model: c.Model,
		SystemFingerprint: c.SystemFingerprint, Choices: []outChoice{{Delta: d, FinishReason: finish}}}
	b, err := json.Marshal(out)
	if err != nil {
		return true
	}
	return st.write(append(append([]byte("data: "), b...), '\n', '\n'))
}

func (st *streamState) write(b []byte) bool {
	_, err := st.w.Write(b)
	return err == nil
}

func (st *streamState) recordCall(c *toolcall.Call) {
	st.record = append(st.record, ToolCall{ID: c.ID, Name: c.Name, Arguments: string(c.Arguments)})
}

func (st *streamState) recordNative(raw json.RawMessage) {
	var calls []wireCall
	if json.Unmarshal(raw, &calls) != nil {
		return
	}
	for _, c := range calls {
		if c.Function.Name != "" || len(st.record) == 0 {
			st.record = append(st.record, ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
			continue
		}
		st.record[len(st.record)-1].Arguments += c.Function.Arguments
	}
}

// replayAsStream sends a complete response as an event stream, for a streaming client whose answer had to be
// asked for again without streaming.
func (rp *repairer) replayAsStream(w io.Writer, b []byte) {
	var resp struct {
		ID      string `json:"id"`
		Created int64  `json:"created"`
		Model   string `json:"model"`
		Choices []struct {
			Message      wireMessage `json:"message"`
			FinishReason string      `json:"finish_reason"`
		} `json:"choices"`
	}
	if json.Unmarshal(b, &resp) != nil || len(resp.Choices) == 0 {
		return
	}
	m := resp.Choices[0].Message
	d := outDelta{Role: "assistant", Content: m.Content, ReasoningContent: m.ReasoningContent}
	var calls []wireCall
	_ = json.Unmarshal(m.ToolCalls, &calls)
	for i := range calls {
		idx := i
		calls[i].Index = &idx
	}
	d.ToolCalls = calls
	st := &streamState{rp: rp, w: w, last: chunk{ID: resp.ID, Created: resp.Created, Model: resp.Model}}
	fin := resp.Choices[0].FinishReason
	_ = st.writeChunk(d, nil) && st.writeChunk(outDelta{}, &fin) && st.write([]byte("data: [DONE]\n\n"))
}
