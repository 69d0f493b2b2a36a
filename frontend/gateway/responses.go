package gateway

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"
)

// The Responses API (/v1/responses), which the Vercel AI SDK's default OpenAI provider and LangChain's
// useResponsesApi call, is served by translation: the request becomes a chat completion (input items to
// messages, function tools to tools, text.format to response_format), runs through the chat path (image
// intake, tool-call repair, queueing and swaps alike), and the answer, or its stream, is translated back into a
// response object or its events. Responses are kept in a bounded store so that previous_response_id and
// item_reference work as they do against OpenAI with store on.

func newID(prefix string) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// responseStore keeps recent responses' conversations (as chat messages) and output items, oldest dropped
// first past maxBytes.
type responseStore struct {
	mu       sync.Mutex
	maxBytes int
	bytes    int
	order    []string
	convs    map[string][]json.RawMessage // response id → the chat messages up to and including its answer
	items    map[string]json.RawMessage   // item id → the Responses item
	itemsOf  map[string][]string
}

func newResponseStore(maxBytes int) *responseStore {
	return &responseStore{maxBytes: maxBytes, convs: map[string][]json.RawMessage{}, items: map[string]json.RawMessage{},
		itemsOf: map[string][]string{}}
}

func (s *responseStore) put(id string, conv []json.RawMessage, items map[string]json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range conv {
		n += len(m)
	}
	for k, it := range items {
		n += len(it)
		s.items[k] = it
		s.itemsOf[id] = append(s.itemsOf[id], k)
	}
	s.convs[id] = conv
	s.order = append(s.order, id)
	s.bytes += n
	for s.bytes > s.maxBytes && len(s.order) > 1 {
		old := s.order[0]
		s.order = s.order[1:]
		for _, m := range s.convs[old] {
			s.bytes -= len(m)
		}
		for _, k := range s.itemsOf[old] {
			s.bytes -= len(s.items[k])
			delete(s.items, k)
		}
		delete(s.convs, old)
		delete(s.itemsOf, old)
	}
}

func (s *responseStore) conv(id string) ([]json.RawMessage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.convs[id]
	return c, ok
}

func (s *responseStore) item(id string) (json.RawMessage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.items[id]
	return it, ok
}

// respRequest is what the translation keeps of a Responses request for the answer.
type respRequest struct {
	model     string
	stream    bool
	store     bool
	prev      string
	messages  []json.RawMessage // the chat messages sent
	echo      map[string]json.RawMessage
	created   int64
	id        string
	maxOutput *int64
}

type badRequest struct{ msg, param string }

func (e *badRequest) Error() string { return e.msg }

func bad(param, format string, a ...any) error {
	return &badRequest{msg: fmt.Sprintf(format, a...), param: param}
}

// toChat translates a Responses request body into a chat completions body.
func (g *Gateway) toChat(body []byte) ([]byte, *respRequest, error) {
	root := gjson.ParseBytes(body)
	rr := &respRequest{model: root.Get("model").String(), stream: root.Get("stream").Bool(), created: time.Now().Unix(),
		id: newID("resp_"), store: root.Get("store").Type != gjson.False, prev: root.Get("previous_response_id").String(),
		echo: map[string]json.RawMessage{}}
	for _, k := range []string{"instructions", "tools", "tool_choice", "temperature", "top_p", "parallel_tool_calls", "text", "metadata", "max_output_tokens"} {
		if v := root.Get(k); v.Exists() {
			rr.echo[k] = json.RawMessage(v.Raw)
		}
	}
	var msgs []json.RawMessage
	add := func(v any) {
		b, _ := json.Marshal(v)
		msgs = append(msgs, b)
	}
	if rr.prev != "" {
		prev, ok := g.resps.conv(rr.prev)
		if !ok {
			return nil, nil, bad("previous_response_id", "previous response %q is not known here: the gateway keeps recent responses in memory only (and not across restarts); send the whole conversation as input instead", rr.prev)
		}
		msgs = append(msgs, prev...)
	}
	if ins := root.Get("instructions"); ins.Type == gjson.String && ins.String() != "" {
		// Instructions apply to this request only: they go first, not into the stored conversation.
		b, _ := json.Marshal(map[string]any{"role": "system", "content": ins.String()})
		msgs = append([]json.RawMessage{b}, msgs...)
	}
	in := root.Get("input")
	switch {
	case in.Type == gjson.String:
		add(map[string]any{"role": "user", "content": in.String()})
	case in.IsArray():
		var err error
		in.ForEach(func(i, it gjson.Result) bool {
			err = g.inputItem(fmt.Sprintf("input[%d]", i.Int()), it, &msgs, 0)
			return err == nil
		})
		if err != nil {
			return nil, nil, err
		}
	case !in.Exists():
		return nil, nil, bad("input", `no "input": send "input": "text" or a list of items`)
	default:
		return nil, nil, bad("input", `"input" is %s: send text or a list of items`, jsonKind(in))
	}
	rr.messages = msgs
	chat := map[string]json.RawMessage{}
	set := func(k string, v any) {
		b, _ := json.Marshal(v)
		chat[k] = b
	}
	set("model", rr.model)
	set("messages", msgs)
	if rr.stream {
		set("stream", true)
		set("stream_options", map[string]bool{"include_usage": true})
	}
	for _, k := range []string{"temperature", "top_p", "parallel_tool_calls", "user", "seed"} {
		if v := root.Get(k); v.Exists() {
			chat[k] = json.RawMessage(v.Raw)
		}
	}
	if v := root.Get("max_output_tokens"); v.Exists() && v.Type == gjson.Number {
		n := v.Int()
		rr.maxOutput = &n
		chat["max_tokens"] = json.RawMessage(v.Raw)
	}
	if tools := root.Get("tools"); tools.IsArray() && len(tools.Array()) > 0 {
		var out []any
		var err error
		tools.ForEach(func(i, t gjson.Result) bool {
			if typ := t.Get("type").String(); typ != "function" {
				err = bad(fmt.Sprintf("tools[%d]", i.Int()), "tool type %q is not served here: only function tools run on a local model", typ)
				return false
			}
			fn := map[string]json.RawMessage{"name": json.RawMessage(t.Get("name").Raw)}
			if d := t.Get("description"); d.Exists() {
				fn["description"] = json.RawMessage(d.Raw)
			}
			if p := t.Get("parameters"); p.Exists() && p.Type != gjson.Null {
				fn["parameters"] = json.RawMessage(p.Raw)
			} else {
				fn["parameters"] = json.RawMessage(`{"type":"object","properties":{}}`)
			}
			out = append(out, map[string]any{"type": "function", "function": fn})
			return true
		})
		if err != nil {
			return nil, nil, err
		}
		set("tools", out)
	}
	if tc := root.Get("tool_choice"); tc.Exists() {
		switch {
		case tc.Type == gjson.String:
			chat["tool_choice"] = json.RawMessage(tc.Raw)
		case tc.Get("type").String() == "function":
			set("tool_choice", map[string]any{"type": "function", "function": map[string]string{"name": tc.Get("name").String()}})
		case tc.Get("type").String() == "allowed_tools":
			set("tool_choice", tc.Get("mode").String())
		}
	}
	if f := root.Get("text.format"); f.Exists() {
		switch f.Get("type").String() {
		case "json_schema":
			js := map[string]json.RawMessage{"name": json.RawMessage(orRaw(f.Get("name"), `"response"`)), "schema": json.RawMessage(orRaw(f.Get("schema"), `{}`))}
			if s := f.Get("strict"); s.Exists() {
				js["strict"] = json.RawMessage(s.Raw)
			}
			set("response_format", map[string]any{"type": "json_schema", "json_schema": js})
		case "json_object":
			set("response_format", map[string]string{"type": "json_object"})
		}
	}
	b, err := json.Marshal(chat)
	return b, rr, err
}

func orRaw(r gjson.Result, def string) string {
	if r.Exists() {
		return r.Raw
	}
	return def
}

// inputItem appends the chat messages of one Responses input item.
func (g *Gateway) inputItem(where string, it gjson.Result, msgs *[]json.RawMessage, depth int) error {
	add := func(v any) {
		b, _ := json.Marshal(v)
		*msgs = append(*msgs, b)
	}
	if !it.IsObject() {
		return bad(where, "%s is %s, not an input item", where, jsonKind(it))
	}
	typ := it.Get("type").String()
	if typ == "" && it.Get("role").Exists() {
		typ = "message"
	}
	switch typ {
	case "message":
		role := it.Get("role").String()
		switch role {
		case "developer", "system":
			role = "system"
		case "user", "assistant":
		default:
			return bad(where+".role", "%s: role %q: use user, assistant, system or developer", where, role)
		}
		c := it.Get("content")
		if c.Type == gjson.String {
			add(map[string]any{"role": role, "content": c.String()})
			return nil
		}
		if !c.IsArray() {
			return bad(where+".content", "%s.content is %s: send text or a list of parts", where, jsonKind(c))
		}
		var parts []any
		var text strings.Builder
		var err error
		c.ForEach(func(j, p gjson.Result) bool {
			pw := fmt.Sprintf("%s.content[%d]", where, j.Int())
			switch p.Get("type").String() {
			case "input_text", "output_text", "text", "summary_text", "refusal":
				t := p.Get("text").String()
				if p.Get("type").String() == "refusal" {
					t = p.Get("refusal").String()
				}
				parts = append(parts, map[string]string{"type": "text", "text": t})
				text.WriteString(t)
			case "input_image":
				u := p.Get("image_url")
				if u.IsObject() {
					u = u.Get("url")
				}
				if p.Get("file_id").Exists() && !u.Exists() {
					err = bad(pw, "%s: file ids are not served here: send the image as a data URL in image_url", pw)
					return false
				}
				parts = append(parts, map[string]any{"type": "image_url", "image_url": map[string]string{"url": u.String()}})
			default:
				err = bad(pw, "%s: content type %q is not served here: send input_text or input_image (as a data URL)", pw, p.Get("type").String())
				return false
			}
			return true
		})
		if err != nil {
			return err
		}
		if role == "assistant" || role == "system" {
			add(map[string]any{"role": role, "content": text.String()})
		} else {
			add(map[string]any{"role": role, "content": parts})
		}
	case "function_call":
		call := map[string]any{"id": it.Get("call_id").String(), "type": "function",
			"function": map[string]string{"name": it.Get("name").String(), "arguments": it.Get("arguments").String()}}
		// Calls that follow an assistant message (or each other) belong to that message.
		if n := len(*msgs); n > 0 {
			last := gjson.ParseBytes((*msgs)[n-1])
			if last.Get("role").String() == "assistant" {
				var m map[string]any
				_ = json.Unmarshal((*msgs)[n-1], &m)
				calls, _ := m["tool_calls"].([]any)
				m["tool_calls"] = append(calls, call)
				b, _ := json.Marshal(m)
				(*msgs)[n-1] = b
				return nil
			}
		}
		add(map[string]any{"role": "assistant", "content": "", "tool_calls": []any{call}})
	case "function_call_output":
		out := it.Get("output")
		content := out.String()
		var images []any
		if out.IsArray() {
			var sb strings.Builder
			out.ForEach(func(_, p gjson.Result) bool {
				switch p.Get("type").String() {
				case "input_text", "output_text", "text":
					sb.WriteString(p.Get("text").String())
				case "input_image":
					u := p.Get("image_url")
					if u.IsObject() {
						u = u.Get("url")
					}
					images = append(images, map[string]any{"type": "image_url", "image_url": map[string]string{"url": u.String()}})
				}
				return true
			})
			content = sb.String()
		}
		add(map[string]any{"role": "tool", "tool_call_id": it.Get("call_id").String(), "content": content})
		if len(images) > 0 {
			// Tool messages cannot carry images on OpenAI-compatible servers: they follow as a user message.
			add(map[string]any{"role": "user", "content": append([]any{map[string]string{"type": "text", "text": "(images from the tool result)"}}, images...)})
		}
	case "item_reference":
		id := it.Get("id").String()
		ref, ok := g.resps.item(id)
		if !ok {
			return bad(where, "%s: item %q is not known here: the gateway keeps recent responses in memory only; send the item itself (or store: false)", where, id)
		}
		if depth > 0 {
			return bad(where, "%s: a referenced item refers to another", where)
		}
		return g.inputItem(where, gjson.ParseBytes(ref), msgs, depth+1)
	case "reasoning":
		// Reasoning is the model's own and need not be replayed to a local model.
	default:
		return bad(where, "%s: input item type %q is not served here: send messages, function_call and function_call_output items", where, typ)
	}
	return nil
}

// responses is POST /v1/responses.
func (g *Gateway) responses(w http.ResponseWriter, r *http.Request) {
	body, ok := readObject(w, r, `{"model": NAME, "input": ...}`)
	if !ok {
		return
	}
	chat, rr, err := g.toChat(body)
	if err != nil {
		var br *badRequest
		if errors.As(err, &br) {
			apiError(w, http.StatusBadRequest, "invalid_request_error", "", br.param, "%s", br.msg)
			return
		}
		apiError(w, http.StatusBadRequest, "invalid_request_error", "", "", "%v", err)
		return
	}
	r2 := r.Clone(r.Context())
	r2.Body = io.NopCloser(bytes.NewReader(chat))
	r2.ContentLength = int64(len(chat))
	tw := &respWriter{w: w, g: g, rr: rr, header: http.Header{}, text: respText{kind: "text"}, reason: respText{kind: "reasoning"}}
	g.chat(tw, r2)
	tw.finish()
}

// respWriter takes the chat path's answer and writes it as the Responses API's.
type respWriter struct {
	w      http.ResponseWriter
	g      *Gateway
	rr     *respRequest
	header http.Header
	status int
	buf    bytes.Buffer // a whole answer, an error, or a partial stream line
	stream bool

	seq     int
	started bool
	text    respText // kind "text"
	reason  respText // kind "reasoning"
	order   []string // the output items' ids, in the order they were opened
	calls   []*respCall
	open    string // "reasoning", "text", "call" or ""
	finish_ string
	usage   gjson.Result
	failed  gjson.Result // an error event that ended the stream
}

// respText is an output item of text, the reasoning summary or the message. The stream opens, extends and closes
// both with the same run of events; only the names of the events and fields differ, and the message's extra fields.
type respText struct {
	kind string // "reasoning" or "text": respWriter.open while this item is being written
	id   string
	buf  strings.Builder
}

// begin gives the item its id the first time it gets text, which makes it the next of the answer's items.
func (x *respText) begin(order *[]string) {
	if x.id != "" {
		return
	}
	prefix := "msg_"
	if x.kind == "reasoning" {
		prefix = "rs_"
	}
	x.id = newID(prefix)
	*order = append(*order, x.id)
}

// events are the prefixes of the item's part and text events, and the name of their part-index field.
func (x *respText) events() (part, text, index string) {
	if x.kind == "reasoning" {
		return "response.reasoning_summary_part", "response.reasoning_summary_text", "summary_index"
	}
	return "response.content_part", "response.output_text", "content_index"
}

// fields are the fields of the item's part and text events, with k: v added.
func (x *respText) fields(outputIndex int, k string, v any) map[string]any {
	_, _, index := x.events()
	f := map[string]any{"item_id": x.id, "output_index": outputIndex, index: 0, k: v}
	if x.kind == "text" && k != "part" {
		f["logprobs"] = []any{}
	}
	return f
}

// part is the item's one part, holding text.
func (x *respText) part(text string) map[string]any {
	if x.kind == "reasoning" {
		return map[string]any{"type": "summary_text", "text": text}
	}
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}}
}

// item is the output item: as output_item.added shows it (nothing in it yet), or completed.
func (x *respText) item(completed bool) map[string]any {
	parts := []any{}
	if completed {
		p := x.part(x.buf.String())
		if x.kind == "text" {
			p["logprobs"] = []any{}
		}
		parts = []any{p}
	}
	if x.kind == "reasoning" {
		return map[string]any{"id": x.id, "type": "reasoning", "summary": parts}
	}
	status := "in_progress"
	if completed {
		status = "completed"
	}
	return map[string]any{"id": x.id, "type": "message", "status": status, "role": "assistant", "content": parts}
}

// streamText writes delta of x, opening x first unless it is the item being written.
func (t *respWriter) streamText(x *respText, delta string) {
	part, text, _ := x.events()
	if t.open != x.kind {
		t.closeOpen()
		x.begin(&t.order)
		t.open = x.kind
		t.event("response.output_item.added", map[string]any{"output_index": t.outputs(), "item": x.item(false)})
		t.event(part+".added", x.fields(t.outputs(), "part", x.part("")))
	}
	x.buf.WriteString(delta)
	t.event(text+".delta", x.fields(t.outputs(), "delta", delta))
}

// closeText writes the events that close x, the item being written.
func (t *respWriter) closeText(x *respText) {
	part, text, _ := x.events()
	idx, s := t.outputs(), x.buf.String()
	t.event(text+".done", x.fields(idx, "text", s))
	t.event(part+".done", x.fields(idx, "part", x.part(s)))
	t.event("response.output_item.done", map[string]any{"output_index": idx, "item": x.item(true)})
}

type respCall struct {
	id, callID, name string
	args             strings.Builder
	index            int // output_index
	done             bool
}

func (t *respWriter) Header() http.Header { return t.header }

func (t *respWriter) WriteHeader(status int) {
	if t.status != 0 {
		return
	}
	t.status = status
	if status == http.StatusOK && strings.HasPrefix(t.header.Get("Content-Type"), "text/event-stream") {
		t.stream = true
		h := t.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		t.w.WriteHeader(http.StatusOK)
	}
}

func (t *respWriter) Write(b []byte) (int, error) {
	if t.status == 0 {
		t.WriteHeader(http.StatusOK)
	}
	if !t.stream {
		return t.buf.Write(b)
	}
	t.buf.Write(b)
	for {
		i := bytes.IndexByte(t.buf.Bytes(), '\n')
		if i < 0 {
			break
		}
		line := string(bytes.TrimSpace(t.buf.Next(i + 1)))
		if data, ok := strings.CutPrefix(line, "data: "); ok && data != "[DONE]" {
			t.chunk(gjson.Parse(data))
		} else if strings.HasPrefix(line, ":") {
			// SSE comments (loading progress) pass through.
			_, _ = io.WriteString(t.w, line+"\n\n")
			t.Flush()
		}
	}
	return len(b), nil
}

func (t *respWriter) Flush() {
	if f, ok := t.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (t *respWriter) event(typ string, fields map[string]any) {
	fields["type"] = typ
	fields["sequence_number"] = t.seq
	t.seq++
	b, _ := json.Marshal(fields)
	fmt.Fprintf(t.w, "event: %s\ndata: %s\n\n", typ, b)
}

// base is the response object's fields, with status and output.
func (t *respWriter) base(status string, output []any) map[string]any {
	rr := t.rr
	resp := map[string]any{"id": rr.id, "object": "response", "created_at": rr.created, "status": status,
		"model": rr.model, "output": output, "error": nil, "incomplete_details": nil, "store": rr.store,
		"previous_response_id": nilIfEmpty(rr.prev), "tools": []any{}, "tool_choice": "auto", "parallel_tool_calls": true,
		"text": map[string]any{"format": map[string]string{"type": "text"}}, "metadata": map[string]any{},
		"instructions": nil, "max_output_tokens": nil, "temperature": nil, "top_p": nil, "reasoning": map[string]any{},
		"truncation": "disabled", "usage": nil}
	for k, v := range rr.echo {
		resp[k] = v
	}
	return resp
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func (t *respWriter) chunk(c gjson.Result) {
	if !t.started {
		t.started = true
		t.event("response.created", map[string]any{"response": t.base("in_progress", []any{})})
		t.event("response.in_progress", map[string]any{"response": t.base("in_progress", []any{})})
	}
	if e := c.Get("error"); e.IsObject() {
		t.failed = e
		return
	}
	if u := c.Get("usage"); u.IsObject() {
		t.usage = u
	}
	ch := c.Get("choices.0")
	if !ch.Exists() {
		return
	}
	d := ch.Get("delta")
	if rc := d.Get("reasoning_content"); rc.Type == gjson.String && rc.String() != "" {
		t.streamText(&t.reason, rc.String())
	}
	if s := d.Get("content"); s.Type == gjson.String && s.String() != "" {
		t.streamText(&t.text, s.String())
	}
	d.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		idx := int(tc.Get("index").Int())
		for len(t.calls) <= idx {
			t.calls = append(t.calls, nil)
		}
		call := t.calls[idx]
		if call == nil {
			t.closeOpen()
			call = &respCall{id: newID("fc_"), callID: tc.Get("id").String(), name: tc.Get("function.name").String(), index: t.outputs()}
			if call.callID == "" {
				call.callID = newID("call_")
			}
			t.calls[idx] = call
			t.order = append(t.order, call.id)
			t.open = "call"
			t.event("response.output_item.added", map[string]any{"output_index": call.index, "item": map[string]any{
				"id": call.id, "type": "function_call", "status": "in_progress", "call_id": call.callID, "name": call.name, "arguments": ""}})
		}
		if a := tc.Get("function.arguments").String(); a != "" {
			call.args.WriteString(a)
			t.event("response.function_call_arguments.delta", map[string]any{"item_id": call.id, "output_index": call.index, "delta": a})
		}
		return true
	})
	if f := ch.Get("finish_reason"); f.Type == gjson.String {
		t.finish_ = f.String()
	}
}

// outputs is the output index of the item being written: the items opened so far, less one when one is open.
func (t *respWriter) outputs() int {
	n := len(t.order)
	if t.open != "" {
		n--
	}
	return n
}

func (c *respCall) item() map[string]any {
	return map[string]any{"id": c.id, "type": "function_call", "status": "completed", "call_id": c.callID, "name": c.name, "arguments": c.args.String()}
}

func (t *respWriter) closeOpen() {
	switch t.open {
	case "reasoning":
		t.closeText(&t.reason)
	case "text":
		t.closeText(&t.text)
	case "call":
		for _, c := range t.calls {
			if c != nil && !c.done {
				c.done = true
				t.event("response.function_call_arguments.done", map[string]any{"item_id": c.id, "output_index": c.index, "arguments": c.args.String()})
				t.event("response.output_item.done", map[string]any{"output_index": c.index, "item": c.item()})
			}
		}
	}
	t.open = ""
}

// output lists the answer's items in the order they were opened (streamed) or reasoning, message, calls.
func (t *respWriter) output() ([]any, map[string]json.RawMessage) {
	var out []any
	items := map[string]json.RawMessage{}
	byID := map[string]map[string]any{}
	for _, x := range []*respText{&t.reason, &t.text} {
		if x.id != "" {
			byID[x.id] = x.item(true)
		}
	}
	for _, c := range t.calls {
		if c != nil {
			byID[c.id] = c.item()
		}
	}
	for _, id := range t.order {
		it := byID[id]
		out = append(out, it)
		b, _ := json.Marshal(it)
		items[id] = b
	}
	return out, items
}

func (t *respWriter) usageObj() map[string]any {
	in, out := t.usage.Get("prompt_tokens").Int(), t.usage.Get("completion_tokens").Int()
	return map[string]any{"input_tokens": in, "output_tokens": out, "total_tokens": in + out,
		"input_tokens_details":  map[string]int64{"cached_tokens": t.usage.Get("prompt_tokens_details.cached_tokens").Int()},
		"output_tokens_details": map[string]int64{"reasoning_tokens": 0}}
}

// final builds the finished response object and stores the conversation.
func (t *respWriter) final() map[string]any {
	output, items := t.output()
	if output == nil {
		output = []any{}
	}
	status := "completed"
	resp := t.base(status, output)
	if t.finish_ == "length" {
		resp["status"] = "incomplete"
		resp["incomplete_details"] = map[string]string{"reason": "max_output_tokens"}
	}
	resp["usage"] = t.usageObj()
	if t.rr.store {
		asst := map[string]any{"role": "assistant", "content": t.text.buf.String()}
		var calls []any
		for _, c := range t.calls {
			if c != nil {
				calls = append(calls, map[string]any{"id": c.callID, "type": "function", "function": map[string]string{"name": c.name, "arguments": c.args.String()}})
			}
		}
		if len(calls) > 0 {
			asst["tool_calls"] = calls
		}
		b, _ := json.Marshal(asst)
		conv := t.rr.messages
		if len(conv) > 0 && gjson.GetBytes(conv[0], "role").String() == "system" && t.rr.echo["instructions"] != nil {
			conv = conv[1:] // instructions are not carried to the next response
		}
		t.g.resps.put(t.rr.id, append(append([]json.RawMessage{}, conv...), b), items)
	}
	return resp
}

// finish writes what the chat path left: the whole response, the stream's last events, or the error.
func (t *respWriter) finish() {
	if t.stream {
		if t.buf.Len() > 0 {
			t.Write([]byte("\n"))
		}
		if !t.started {
			t.chunk(gjson.Parse(`{}`))
		}
		t.closeOpen()
		if t.failed.Exists() {
			resp := t.base("failed", []any{})
			resp["error"] = map[string]any{"code": orString(t.failed.Get("code").String(), "server_error"), "message": t.failed.Get("message").String()}
			t.event("response.failed", map[string]any{"response": resp})
			t.Flush()
			return
		}
		t.event("response.completed", map[string]any{"response": t.final()})
		t.Flush()
		return
	}
	if t.status != http.StatusOK {
		for k, v := range t.header {
			t.w.Header()[k] = v
		}
		if t.status == 0 {
			t.status = http.StatusInternalServerError
		}
		t.w.WriteHeader(t.status)
		_, _ = t.w.Write(t.buf.Bytes())
		return
	}
	c := gjson.ParseBytes(t.buf.Bytes())
	t.usage = c.Get("usage")
	m := c.Get("choices.0.message")
	if s := m.Get("reasoning_content").String(); s != "" {
		t.reason.begin(&t.order)
		t.reason.buf.WriteString(s)
	}
	if s := m.Get("content").String(); s != "" {
		t.text.begin(&t.order)
		t.text.buf.WriteString(s)
	}
	m.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		call := &respCall{id: newID("fc_"), callID: tc.Get("id").String(), name: tc.Get("function.name").String()}
		call.args.WriteString(tc.Get("function.arguments").String())
		t.calls = append(t.calls, call)
		t.order = append(t.order, call.id)
		return true
	})
	t.finish_ = c.Get("choices.0.finish_reason").String()
	writeJSON(t.w, http.StatusOK, t.final())
}

func orString(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
