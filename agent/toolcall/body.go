package toolcall

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// parseBlock reads the calls in one block: body is the text between the opening tag and closer, the tag that
// ended it ("" when the stream ended first).
func (p *Parser) parseBlock(open, body, closer string, closed bool) ([]Call, error) {
	switch open {
	case tagCallOpen:
		t := strings.TrimSpace(body)
		switch {
		case t == "":
			// <tool_call></tool_call> in prose ("wrap each call in <tool_call></tool_call>").
			return nil, fmt.Errorf("%w: empty %s", errNotCall, tagCallOpen)
		case t[0] == '{' || t[0] == '[' || t[0] == '`':
		case strings.HasPrefix(t, tagFuncOpen) || strings.Contains(t, tagFuncOpen) && !strings.Contains(t, glmKeyOpen):
			return parseXMLFunctions(t, closed, p.tools)
		case strings.HasPrefix(t, "<invoke") || strings.HasPrefix(t, "<"+nsPrefix+"invoke"):
			return parseInvokes(t, p.tools)
		case looksGLM(t):
			return parseGLM(t, closed, p.tools)
		}
		return p.jsonCalls(t, false)
	case tagFuncOpen:
		return parseXMLFunctions(tagFuncOpen+body+strings.TrimSuffix(closer, tagCallClose), closed, p.tools)
	case tagFuncCallsOpen:
		return parseInvokes(body, p.tools)
	case tagGemmaOpen:
		return parseGemma(body, closed, p.tools)
	case tagMistralOpen:
		return p.parseMistral(body, closed)
	case tagToolsOpen:
		return parseToolsWrapper(body)
	}
	return nil, fmt.Errorf("%w: unknown block %s", ErrMalformed, open)
}

// parseToolsWrapper reads Qwen2.5-Coder's <tools>{"name": …, "arguments": …}</tools>. The tag is the one its
// prompt lists the tools in, so a tool definition echoed back ({"type": "function", "function": {…,
// "parameters": …}}) is no call: "arguments" must be there.
func parseToolsWrapper(body string) ([]Call, error) {
	calls, err := parseJSONCalls(body, false)
	if err != nil {
		return calls, err
	}
	for _, c := range calls {
		if !c.explicitArgs {
			return nil, fmt.Errorf("%w: %s holds %q without \"arguments\": a tool definition, not a call", ErrMalformed, tagToolsOpen, c.Name)
		}
	}
	return calls, nil
}

// jsonCalls reads JSON calls in a block.
func (p *Parser) jsonCalls(s string, strict bool) ([]Call, error) {
	return parseJSONCalls(s, strict)
}

// parseJSONCalls reads one or more JSON (or Python-literal) calls, separated by whitespace, ';' or ',' and
// possibly by <tool_call> tags that a model repeated without closing (pwilkin/llama.cpp#9). strict demands the
// "arguments"/"parameters" key, for text that is only a call if it clearly says so.
func parseJSONCalls(s string, strict bool) ([]Call, error) {
	s = stripFence(strings.TrimSpace(s))
	var calls []Call
	for {
		s = trimSeps(s)
		if s == "" {
			break
		}
		if s[0] != '{' && s[0] != '[' {
			return calls, fmt.Errorf("%w: expected a JSON object", ErrMalformed)
		}
		seg := s
		if n := valueEnd(s); n > 0 {
			seg = s[:n]
		}
		v, repaired, err := decodeLenient(seg)
		if err != nil {
			if strings.Contains(seg, "{{") && strings.Contains(seg, "}}") {
				// {"name": "{{ tc.name }}", "arguments": {{ tc.arguments }}}: a chat template quoted in prose.
				return calls, fmt.Errorf("%w: a template placeholder", errNotCall)
			}
			return calls, fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		cs, err := callsFromValue(v, strict)
		for i := range cs {
			cs[i].Raw = seg
			cs[i].Repaired = joinNotes(repaired, cs[i].Repaired)
		}
		calls = append(calls, cs...)
		if err != nil {
			return calls, err
		}
		s = s[len(seg):]
	}
	if len(calls) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrMalformed)
	}
	return calls, nil
}

func trimSeps(s string) string {
	for {
		t := strings.TrimLeft(s, " \t\r\n;,")
		t = strings.TrimPrefix(t, tagCallOpen)
		t = strings.TrimPrefix(t, tagCallClose)
		if t == s {
			return s
		}
		s = t
	}
}

func stripFence(s string) string {
	if !strings.HasPrefix(s, "```") {
		return s
	}
	s = strings.TrimPrefix(s, "```")
	if nl := strings.IndexByte(s, '\n'); nl >= 0 && !strings.ContainsAny(s[:nl], "{[") {
		s = s[nl+1:]
	}
	return strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "```"))
}

func joinNotes(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + ", " + b
}

func callsFromValue(v json.RawMessage, strict bool) ([]Call, error) {
	v = bytes.TrimSpace(v)
	if len(v) > 0 && v[0] == '[' {
		var items []json.RawMessage
		if err := json.Unmarshal(v, &items); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		// Valid calls beside junk still count; the junk is reported once (see the package doc).
		var calls []Call
		var first error
		for _, it := range items {
			c, err := callFromObject(it, strict)
			if err != nil {
				if first == nil {
					first = err
				}
				continue
			}
			calls = append(calls, c)
		}
		return calls, first
	}
	c, err := callFromObject(v, strict)
	if err != nil {
		return nil, err
	}
	return []Call{c}, nil
}

func callFromObject(v json.RawMessage, strict bool) (Call, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(v, &m); err != nil {
		return Call{}, fmt.Errorf("%w: a call must be a JSON object: %w", ErrMalformed, err)
	}
	// OpenAI's own shape, {"type":"function","function":{"name":…,"arguments":…}}, sometimes appears as text.
	if fn, ok := m["function"]; ok && len(bytes.TrimSpace(fn)) > 0 && bytes.TrimSpace(fn)[0] == '{' {
		return callFromObject(fn, strict)
	}
	var c Call
	if err := json.Unmarshal(m["name"], &c.Name); err != nil || strings.TrimSpace(c.Name) == "" {
		return Call{}, fmt.Errorf("%w: missing \"name\"", ErrMalformed)
	}
	c.Name = strings.TrimSpace(c.Name)
	if err := nameError(c.Name); err != nil {
		return Call{}, err
	}
	args, ok := m["arguments"]
	c.explicitArgs = ok
	if !ok {
		args, ok = m["parameters"]
	}
	if !ok {
		if strict {
			return Call{}, fmt.Errorf("%w: missing \"arguments\"", ErrMalformed)
		}
		args = json.RawMessage("{}")
	}
	obj, note, err := argumentsObject(args)
	if err != nil {
		return Call{}, fmt.Errorf("%w: arguments of %q: %w", ErrMalformed, c.Name, err)
	}
	c.Arguments, c.Repaired = obj, note
	return c, nil
}

// argumentsObject accepts an object, null, or a string holding an object (OpenAI style, sometimes escaped twice).
func argumentsObject(args json.RawMessage) (json.RawMessage, string, error) {
	args = bytes.TrimSpace(args)
	var note string
	for range 3 {
		if len(args) == 0 || string(args) == "null" {
			return json.RawMessage("{}"), note, nil
		}
		switch args[0] {
		case '{':
			var buf bytes.Buffer
			if err := json.Compact(&buf, args); err != nil {
				return nil, "", err
			}
			return buf.Bytes(), note, nil
		case '"':
			var s string
			if err := json.Unmarshal(args, &s); err != nil {
				return nil, "", err
			}
			s = strings.TrimSpace(s)
			if s == "" {
				return json.RawMessage("{}"), note, nil
			}
			v, rep, err := decodeLenient(s)
			if err != nil {
				return nil, "", fmt.Errorf("string is not a JSON object: %w", err)
			}
			note = joinNotes(note, rep)
			args = bytes.TrimSpace(v)
		default:
			return nil, "", errors.New("not a JSON object")
		}
	}
	return nil, "", errors.New("nested too deeply")
}

// decodeLenient returns s as valid JSON, repairing what small models get wrong (hermes-agent#12068, #13042,
// llama.cpp#22072): single quotes and Python constants, unescaped apostrophes, raw control characters in strings,
// a missing closing quote, and quotes escaped twice. Truncated values are not completed: that would invent data.
func decodeLenient(s string) (json.RawMessage, string, error) {
	s = strings.TrimSpace(s)
	if json.Valid([]byte(s)) {
		return json.RawMessage(s), "", nil
	}
	var strictErr error
	var anyv any
	if err := json.Unmarshal([]byte(s), &anyv); err != nil {
		strictErr = err
	}
	if strings.Contains(s, `\"`) {
		var un string
		if err := json.Unmarshal([]byte(`"`+s+`"`), &un); err == nil && json.Valid([]byte(un)) {
			return json.RawMessage(un), "double-escaped quotes", nil
		}
	}
	if out, notes := normalize(s); json.Valid(out) {
		return out, notes, nil
	}
	return nil, "", strictErr
}

// stringEnd returns the index just past the string literal that starts at s[i] (quote " or '), or -1 if it never
// closes. A single quote closes only before , : } ] ) or the end, so "what's" inside 'it' survives.
func stringEnd(s string, i int) int {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case q:
			if q == '"' || closesSingle(s, j+1) {
				return j + 1
			}
		}
	}
	return -1
}

func closesSingle(s string, k int) bool {
	for k < len(s) && (s[k] == ' ' || s[k] == '\t' || s[k] == '\r' || s[k] == '\n') {
		k++
	}
	return k == len(s) || strings.IndexByte(",:}])", s[k]) >= 0
}

// valueEnd returns the length of the balanced JSON-ish value at the start of s, or -1 if it does not close.
func valueEnd(s string) int {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"', '\'':
			e := stringEnd(s, i)
			if e < 0 {
				return -1
			}
			i = e - 1
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return -1
}

// normalize rewrites Python-literal and sloppy JSON into JSON, noting each kind of fix.
func normalize(s string) ([]byte, string) {
	out := make([]byte, 0, len(s)+8)
	notes := map[string]bool{}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\'':
			if c == '\'' {
				notes["single quotes"] = true
			}
			out = append(out, '"')
			end := stringEnd(s, i)
			contentEnd := end - 1
			if end < 0 {
				// The string runs to the end: close it before the trailing brackets.
				notes["missing closing quote"] = true
				contentEnd = len(strings.TrimRight(s, "}] \t\r\n"))
				if contentEnd <= i {
					contentEnd = len(s)
				}
				end = contentEnd
			}
			out = appendStringBody(out, s[i+1:contentEnd], c, notes)
			out = append(out, '"')
			i = end
		case c == '-' || (c >= '0' && c <= '9'):
			j := i + 1
			for j < len(s) && strings.IndexByte("0123456789eE+-.", s[j]) >= 0 {
				j++
			}
			out = append(out, s[i:j]...)
			i = j
		case c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '_':
			j := i + 1
			for j < len(s) && (s[j] >= 'A' && s[j] <= 'Z' || s[j] >= 'a' && s[j] <= 'z' || s[j] == '_' || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			w := s[i:j]
			switch w {
			case "True":
				w = "true"
			case "False":
				w = "false"
			case "None":
				w = "null"
			}
			if w != s[i:j] {
				notes["Python literals"] = true
			}
			out = append(out, w...)
			i = j
		default:
			out = append(out, c)
			i++
		}
	}
	keys := make([]string, 0, len(notes))
	for k := range notes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return out, strings.Join(keys, ", ")
}

func appendStringBody(out []byte, body string, quote byte, notes map[string]bool) []byte {
	for j := 0; j < len(body); j++ {
		d := body[j]
		switch {
		case d == '\\' && j+1 < len(body):
			n := body[j+1]
			if n == '\'' {
				out = append(out, '\'')
			} else {
				out = append(out, d, n)
			}
			j++
		case d == '"' && quote == '\'':
			out = append(out, '\\', '"')
		case d == '\'' && quote == '\'':
			notes["unescaped apostrophe"] = true
			out = append(out, d)
		case d == '\n':
			notes["raw newline in string"] = true
			out = append(out, '\\', 'n')
		case d == '\r':
			notes["raw newline in string"] = true
			out = append(out, '\\', 'r')
		case d == '\t':
			notes["raw tab in string"] = true
			out = append(out, '\\', 't')
		case d < 0x20:
			notes["control character in string"] = true
			out = fmt.Appendf(out, `\u%04x`, d)
		default:
			out = append(out, d)
		}
	}
	return out
}

// param is one argument in the order the model wrote it.
type param struct {
	name  string
	value json.RawMessage
	guess string // raw text when the value's JSON type was guessed from unquoted XML
	typed bool
	note  string // a repair the value needed (Python literals)
}

func buildArgs(ps []param) (json.RawMessage, map[string]string) {
	// Last one wins on a repeated name, as a JSON decoder would do.
	seen := map[string]int{}
	var order []param
	for _, p := range ps {
		if i, ok := seen[p.name]; ok {
			order[i] = p
			continue
		}
		seen[p.name] = len(order)
		order = append(order, p)
	}
	var buf bytes.Buffer
	var guessed map[string]string
	buf.WriteByte('{')
	for i, p := range order {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(jsonString(p.name))
		buf.WriteByte(':')
		buf.Write(p.value)
		if p.typed {
			if guessed == nil {
				guessed = map[string]string{}
			}
			guessed[p.name] = p.guess
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), guessed
}

func jsonString(s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// eachMember calls fn for each member of a JSON object, in order.
func eachMember(v json.RawMessage, fn func(string, json.RawMessage)) error {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return errors.New("not a JSON object")
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		k, _ := t.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		fn(k, raw)
	}
	return nil
}

// parseInvokes reads Anthropic-style <invoke name="X"><parameter name="Y">v</parameter></invoke> text
// (hermes-agent#8965); an "antml:" namespace prefix is accepted.
func parseInvokes(s string, ts *ToolSet) ([]Call, error) {
	s = strings.NewReplacer("<"+nsPrefix, "<", "</"+nsPrefix, "</").Replace(s)
	var calls []Call
	for {
		i := strings.Index(s, "<invoke")
		if i < 0 {
			break
		}
		start := s[i:]
		gt := strings.IndexByte(start, '>')
		if gt < 0 {
			return calls, fmt.Errorf("%w: unterminated <invoke tag", ErrMalformed)
		}
		name := attr(start[len("<invoke"):gt], "name")
		if !validName(name) {
			return calls, fmt.Errorf("%w: <invoke> without a function name: %s", ErrMalformed, clip(name))
		}
		body := start[gt+1:]
		end := strings.Index(body, "</invoke>")
		if end < 0 {
			return calls, fmt.Errorf("%w: invoke %q: missing </invoke> (truncated?)", ErrMalformed, name)
		}
		ty := ts.typer(name)
		var ps []param
		for b := body[:end]; ; {
			j := strings.Index(b, "<parameter")
			if j < 0 {
				break
			}
			b = b[j:]
			pgt := strings.IndexByte(b, '>')
			if pgt < 0 {
				return calls, fmt.Errorf("%w: invoke %q: unterminated <parameter tag", ErrMalformed, name)
			}
			pname := attr(b[len("<parameter"):pgt], "name")
			vend := strings.Index(b[pgt+1:], "</parameter>")
			if vend < 0 {
				return calls, fmt.Errorf("%w: invoke %q: missing </parameter>", ErrMalformed, name)
			}
			ps = append(ps, typedParam(pname, trimFormatNewlines(b[pgt+1:pgt+1+vend]), ty))
			b = b[pgt+1+vend+len("</parameter>"):]
		}
		args, guessed := buildArgs(ps)
		var note string
		for _, p := range ps {
			note = joinNote(note, p.note)
		}
		consumed := gt + 1 + end + len("</invoke>")
		calls = append(calls, Call{Name: name, Arguments: args, Raw: start[:consumed], Repaired: note, guessed: guessed})
		s = start[consumed:]
	}
	if len(calls) == 0 {
		return nil, fmt.Errorf("%w: no <invoke name=…>", ErrMalformed)
	}
	return calls, nil
}

// nsPrefix is the namespace some models copy from Anthropic's prompt format.
const nsPrefix = "ant" + "ml:"

func attr(attrs, key string) string {
	i := strings.Index(attrs, key+"=")
	if i < 0 {
		return ""
	}
	v := strings.TrimSpace(attrs[i+len(key)+1:])
	if v == "" {
		return ""
	}
	if q := v[0]; q == '"' || q == '\'' {
		if e := strings.IndexByte(v[1:], q); e >= 0 {
			return v[1 : 1+e]
		}
		return ""
	}
	if e := strings.IndexAny(v, " \t\r\n/>"); e >= 0 {
		return v[:e]
	}
	return v
}
