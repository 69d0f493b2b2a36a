package toolcall

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

const (
	paramOpen  = "<parameter="
	paramClose = "</parameter>"
	// paramCloseStem starts every closer a model writes for a parameter, drifted ones included: </parameter1>,
	// </parameter_function>, or a bare </parameter at the end of a line.
	paramCloseStem = "</parameter"
)

// typedParam types one value from the tool's schema (see typeText).
func typedParam(name, text string, ty *argTyper) param {
	var root = ty.rootSchema()
	v, guessed, note := typeText(text, ty.prop(name), root)
	return param{name: name, value: v, guess: text, typed: guessed, note: note}
}

// trimFormatNewlines removes the one newline Qwen's template writes after <parameter=X> and the one before
// </parameter>; everything else, indentation and blank lines included, is the value (an edit tool's old text
// is often one indented line).
func trimFormatNewlines(v string) string {
	if strings.HasPrefix(v, "\r\n") {
		v = v[2:]
	} else if strings.HasPrefix(v, "\n") {
		v = v[1:]
	}
	if strings.HasSuffix(v, "\r\n") {
		v = v[:len(v)-2]
	} else if strings.HasSuffix(v, "\n") {
		v = v[:len(v)-1]
	}
	return v
}

// parseXMLFunctions reads one or more <function=NAME>…</function> calls (Qwen3.5/3.6, Qwen3-Coder) from s, the
// whole text of one block. closed says the block's end tag arrived; without it a missing </function> or
// </parameter> means the stream was cut, not that the model forgot a tag.
func parseXMLFunctions(s string, closed bool, ts *ToolSet) ([]Call, error) {
	var calls []Call
	// Nested call examples inside values are tracked until one of them turns out not to close; after that the
	// body is read flat, so a pathological body costs at most one extra pass.
	nested := true
	for {
		i := strings.Index(s, tagFuncOpen)
		if i < 0 {
			break
		}
		start := s[i:]
		rest := start[len(tagFuncOpen):]
		gt := strings.IndexByte(rest, '>')
		if gt < 0 {
			return calls, fmt.Errorf("%w: unterminated <function= tag", ErrMalformed)
		}
		name := strings.Trim(strings.TrimSpace(rest[:gt]), `"'`)
		if err := nameError(name); err != nil {
			// <function=bad_func_no_gt\n</function>: the tag never closed, and what runs to the next '>' is no
			// name (vLLM drops such a call; here it is an error, and the calls after it still count).
			// <function=...></function> in prose is no call at all.
			return calls, err
		}
		ty := ts.typer(name)
		body := rest[gt+1:]
		ps, n, note, err := parseXMLParams(body, closed, ty, &nested)
		if err != nil {
			return calls, fmt.Errorf("%w: function %q: %w", ErrMalformed, name, err)
		}
		args, guessed := buildArgs(ps)
		for _, p := range ps {
			note = joinNote(note, p.note)
		}
		consumed := len(tagFuncOpen) + gt + 1 + n
		calls = append(calls, Call{Name: name, Arguments: args, Raw: start[:consumed], Repaired: note, guessed: guessed})
		s = start[consumed:]
	}
	if len(calls) == 0 {
		return nil, fmt.Errorf("%w: no <function=NAME>", ErrMalformed)
	}
	return calls, nil
}

// joinNote adds a note once.
func joinNote(notes, n string) string {
	if n == "" || notes == n || strings.Contains(", "+notes+", ", ", "+n+", ") {
		return notes
	}
	return joinNotes(notes, n)
}

// parseXMLParams reads the parameters of one function; n is how much of body the function used.
func parseXMLParams(body string, closed bool, ty *argTyper, nested *bool) (ps []param, n int, note string, err error) {
	pos := 0
	last := lastTags{body: body}
	for {
		pos += len(body[pos:]) - len(strings.TrimLeft(body[pos:], " \t\r\n"))
		r := body[pos:]
		switch {
		case strings.HasPrefix(r, tagFuncClose):
			return ps, pos + len(tagFuncClose), note, nil
		case strings.HasPrefix(r, paramOpen):
			gt := strings.IndexByte(r, '>')
			if gt < 0 {
				return nil, 0, "", errors.New("unterminated <parameter= tag")
			}
			name := strings.Trim(strings.TrimSpace(r[len(paramOpen):gt]), `"'`)
			vstart := pos + gt + 1
			end, next, vnote, ok := xmlValueEnd(body, name, vstart, closed, ty, nested, &last)
			if !ok {
				return nil, 0, "", fmt.Errorf("parameter %q: missing %s (truncated?)", name, paramClose)
			}
			note = joinNote(note, vnote)
			ps = append(ps, typedParam(name, trimFormatNewlines(body[vstart:end]), ty))
			pos = next
		case strings.HasPrefix(r, paramCloseStem):
			// A stray closer after a value that already ended (a model that wrote two).
			pos += closerLen(r)
		case strings.HasPrefix(r, "{"):
			// Llama-3.1 style <function=NAME>{json}</function>.
			end := strings.Index(r, tagFuncClose)
			if end < 0 {
				if !closed {
					return nil, 0, "", fmt.Errorf("missing %s (truncated?)", tagFuncClose)
				}
				end = len(r)
			}
			v, rep, err := decodeLenient(r[:end])
			if err != nil {
				return nil, 0, "", err
			}
			var m []param
			if err := eachMember(v, func(k string, raw json.RawMessage) { m = append(m, param{name: k, value: raw}) }); err != nil {
				return nil, 0, "", err
			}
			return append(ps, m...), pos + min(len(r), end+len(tagFuncClose)), joinNotes(note, rep), nil
		case r == "" || strings.HasPrefix(r, tagFuncOpen) || strings.HasPrefix(r, tagCallClose) || strings.HasPrefix(r, tagCallOpen):
			// The function ended without </function>: at the end of a closed block, or where the next call starts.
			if r == "" && !closed {
				return nil, 0, "", fmt.Errorf("missing %s (truncated?)", tagFuncClose)
			}
			return ps, pos, joinNote(note, "missing </function>"), nil
		default:
			return nil, 0, "", fmt.Errorf("unexpected text %s", clip(r))
		}
	}
}

// exactCloserFirst reports whether an exact </parameter> comes in r before the next <parameter= or
// </function>.
func exactCloserFirst(r string) bool {
	// A closer that drifted is followed by the next tag within a line or two; a window keeps a value full of
	// such tags linear.
	r = r[:min(len(r), 4096)]
	c := strings.Index(r, paramClose)
	if c < 0 {
		return false
	}
	for _, t := range []string{paramOpen, tagFuncClose} {
		if i := strings.Index(r[:c], t); i >= 0 {
			return false
		}
	}
	return true
}

// closerLen is the length of the parameter closer at the start of r: </parameter>, a drifted </parameterX…>
// with a short tail, or a bare </parameter.
func closerLen(r string) int {
	n := len(paramCloseStem)
	if len(r) > n && r[n] == '>' {
		return n + 1
	}
	for j := n; j < len(r) && j < n+24; j++ {
		switch r[j] {
		case '>':
			return j + 1
		case '<', '\n', '\r', ' ', '\t':
			return n
		}
	}
	return n
}

// atLineStart reports whether only spaces or tabs stand between s[i] and the previous newline (or from): in a
// finished reply (a string) or the stream's buffer (bytes).
func atLineStart[T string | []byte](s T, from, i int) bool {
	for j := i - 1; j >= from; j-- {
		switch s[j] {
		case ' ', '\t':
			continue
		case '\n':
			return true
		}
		return false
	}
	return true
}

// paramNameAt returns the name in a <parameter=NAME> tag at the start of r.
func paramNameAt(r string) (string, bool) {
	rest := r[len(paramOpen):]
	gt := strings.IndexAny(rest, ">\n")
	if gt < 0 || rest[gt] != '>' {
		return "", false
	}
	return strings.Trim(strings.TrimSpace(rest[:gt]), `"'`), true
}

// endsValue reports whether what follows a parameter closer (after whitespace) shows that the closer was real:
// another known parameter, the end of the function or block, or the end of the text.
func endsValue(after string, closed bool, ty *argTyper) bool {
	after = strings.TrimLeft(after, " \t\r\n")
	switch {
	case after == "":
		return true
	case strings.HasPrefix(after, paramOpen):
		name, ok := paramNameAt(after)
		return ok && ty.knows(name)
	case strings.HasPrefix(after, tagFuncClose), strings.HasPrefix(after, tagCallClose),
		strings.HasPrefix(after, paramCloseStem):
		return true
	}
	return false
}

// literalParam reports whether the <parameter=name> tag at the start of r is text in the value of parameter
// self rather than the next parameter after a missing closer: it names the value's own parameter, or the same
// parameter is given again further on (a file that documents the tool it is written with).
func literalParam(last *lastTags, at int, name, self string) bool {
	return name == self || last.of(name) > at
}

// lastTags finds, once per name, where the last <parameter=NAME> line of a body starts, so that asking for
// every tag in a long value stays linear.
type lastTags struct {
	body string
	at   map[string]int
}

func (l *lastTags) of(name string) int {
	if l.at == nil {
		// One pass over this function's lines for every name, on the first question; it stops at the function's
		// end, so that a block of many functions is not scanned once per function.
		l.at = map[string]int{}
		body := l.body
		if e := strings.Index(body, "\n"+tagFuncClose); e >= 0 {
			body = body[:e]
		}
		for i := 0; ; {
			j := strings.Index(body[i:], "\n"+paramOpen)
			if j < 0 {
				break
			}
			i += j + 1
			if n, ok := paramNameAt(body[i:]); ok {
				l.at[n] = i
			}
		}
	}
	if i, ok := l.at[name]; ok {
		return i
	}
	return -1
}

// xmlValueEnd finds where the value that starts at body[from:] ends: end is where its text stops, next where
// parsing goes on. Values may span lines and contain tags of their own — a file that holds "</parameter>", or a
// whole <tool_call> example — so a closer counts only where what follows it is another known parameter, the end
// of the function or the end of the block; call tags that open at the start of a line nest until they close.
// Without a closer, the value ends before a known <parameter= at the start of a line or before </function>.
func xmlValueEnd(body, self string, from int, closed bool, ty *argTyper, nested *bool, last *lastTags) (end, next int, note string, ok bool) {
	depth := 0
	for i := from; i < len(body); {
		j := strings.IndexByte(body[i:], '<')
		if j < 0 {
			break
		}
		i += j
		r := body[i:]
		if *nested && atLineStart(body, from, i) && (strings.HasPrefix(r, tagCallOpen) || strings.HasPrefix(r, tagFuncOpen)) {
			depth++
			i++
			continue
		}
		if depth > 0 {
			if strings.HasPrefix(r, tagFuncClose) || strings.HasPrefix(r, tagCallClose) {
				depth--
			}
			i++
			continue
		}
		switch {
		case strings.HasPrefix(r, paramCloseStem):
			n := closerLen(r)
			if r[:n] != paramClose && exactCloserFirst(r[n:]) {
				// </parameters>, </parameterList>: text in the value, since the real closer comes before the
				// next parameter.
				break
			}
			if endsValue(r[n:], closed, ty) {
				if r[:n] != paramClose {
					note = "drifted </parameter> tag"
				}
				return i, i + n, note, true
			}
		case strings.HasPrefix(r, paramOpen):
			if name, ok := paramNameAt(r); ok && ty.knows(name) && atLineStart(body, from, i) && !literalParam(last, i, name, self) {
				return i, i, "missing </parameter>", true
			}
		case strings.HasPrefix(r, tagFuncClose):
			if after := strings.TrimLeft(r[len(tagFuncClose):], " \t\r\n"); after == "" || strings.HasPrefix(after, tagCallClose) ||
				strings.HasPrefix(after, tagFuncOpen) || strings.HasPrefix(after, tagCallOpen) {
				return i, i, "missing </parameter>", true
			}
		case strings.HasPrefix(r, tagCallClose):
			if strings.TrimSpace(r[len(tagCallClose):]) == "" {
				return i, i, "missing </parameter>", true
			}
		}
		i++
	}
	if depth > 0 && *nested {
		// A call tag opened inside the value and never closed: it was prose, not an example. Read flat.
		*nested = false
		return xmlValueEnd(body, self, from, closed, ty, nested, last)
	}
	if closed {
		// The block ended: its end tag closed the value too.
		return len(body), len(body), "missing </parameter>", true
	}
	return 0, 0, "", false
}
