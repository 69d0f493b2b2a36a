package toolcall

import (
	"fmt"
	"strings"
)

// GLM-4.5/4.6/4.7 write a call as <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>…</tool_call>, with
// or without newlines between the tags (4.5 puts each on its own line, 4.7 writes them inline). Like Qwen's XML,
// strings are bare and everything else is JSON, so values are typed from the schema.
const (
	glmKeyOpen    = "<arg_key>"
	glmKeyClose   = "</arg_key>"
	glmValueOpen  = "<arg_value>"
	glmValueClose = "</arg_value>"
)

// looksGLM reports whether a <tool_call> body is GLM's form: a bare function name, then <arg_key> pairs or
// nothing.
func looksGLM(t string) bool {
	if t == "" || t[0] == '<' {
		return false
	}
	name, rest := glmName(t)
	if name == "" || strings.ContainsAny(name, " \t{}[]\"'():,") {
		return false
	}
	rest = strings.TrimSpace(rest)
	return rest == "" || strings.HasPrefix(rest, glmKeyOpen)
}

func glmName(t string) (name, rest string) {
	end := strings.IndexAny(t, "<\n")
	if end < 0 {
		end = len(t)
	}
	return strings.TrimSpace(t[:end]), t[end:]
}

// parseGLM reads one GLM call from a <tool_call> body.
func parseGLM(t string, closed bool, ts *ToolSet) ([]Call, error) {
	name, rest := glmName(t)
	if !validName(name) {
		return nil, fmt.Errorf("%w: bad function name %s", ErrMalformed, clip(name))
	}
	ty := ts.typer(name)
	var ps []param
	var note string
	for {
		rest = strings.TrimLeft(rest, " \t\r\n")
		if rest == "" {
			break
		}
		if !strings.HasPrefix(rest, glmKeyOpen) {
			return nil, fmt.Errorf("%w: function %q: unexpected text %s", ErrMalformed, name, clip(rest))
		}
		rest = rest[len(glmKeyOpen):]
		k := strings.Index(rest, glmKeyClose)
		if k < 0 {
			return nil, fmt.Errorf("%w: function %q: missing %s", ErrMalformed, name, glmKeyClose)
		}
		key := strings.TrimSpace(rest[:k])
		rest = strings.TrimLeft(rest[k+len(glmKeyClose):], " \t\r\n")
		if !strings.HasPrefix(rest, glmValueOpen) {
			return nil, fmt.Errorf("%w: function %q: argument %q has no %s", ErrMalformed, name, key, glmValueOpen)
		}
		rest = rest[len(glmValueOpen):]
		end, next, vnote, ok := glmValueEnd(rest, closed, ty)
		if !ok {
			return nil, fmt.Errorf("%w: function %q: argument %q: missing %s (truncated?)", ErrMalformed, name, key, glmValueClose)
		}
		note = joinNote(note, vnote)
		if v := rest[:end]; strings.Contains(v, glmKeyOpen) || strings.Contains(v, glmValueOpen) {
			// What is left of the markup cannot be placed; a tool never gets it as data.
			return nil, fmt.Errorf("%w: function %q: argument %q holds GLM markup: %s", ErrMalformed, name, key, clip(v))
		}
		p := typedParam(key, rest[:end], ty)
		note = joinNote(note, p.note)
		ps = append(ps, p)
		rest = rest[next:]
	}
	if !closed {
		// Nothing but </tool_call> marks the last argument as the last one.
		return nil, fmt.Errorf("%w: function %q: missing %s", ErrUnclosed, name, tagCallClose)
	}
	args, guessed := buildArgs(ps)
	return []Call{{Name: name, Arguments: args, Repaired: note, guessed: guessed}}, nil
}

// glmPairAt reports whether r starts with a whole <arg_key>K</arg_key> followed by <arg_value>.
func glmPairAt(r string) bool {
	r = r[len(glmKeyOpen):]
	k := strings.Index(r, glmKeyClose)
	if k < 0 || k > 256 || strings.ContainsAny(r[:k], "<>\n") {
		return false
	}
	return strings.HasPrefix(strings.TrimLeft(r[k+len(glmKeyClose):], " \t\r\n"), glmValueOpen)
}

// glmValueEnd finds the end of an <arg_value>: a closer followed by the next <arg_key> or the end of the body
// (so a value may contain "</arg_value>" itself), else the next <arg_key> at the start of a line.
func glmValueEnd(s string, closed bool, ty *argTyper) (end, next int, note string, ok bool) {
	for i := 0; i < len(s); {
		j := strings.IndexByte(s[i:], '<')
		if j < 0 {
			break
		}
		i += j
		r := s[i:]
		switch {
		case strings.HasPrefix(r, glmValueClose):
			after := strings.TrimLeft(r[len(glmValueClose):], " \t\r\n")
			if after == "" || strings.HasPrefix(after, glmKeyOpen) {
				return i, i + len(glmValueClose), "", true
			}
		case strings.HasPrefix(r, glmKeyOpen) && (atLineStart(s, 0, i) || glmPairAt(r)):
			// The closer is missing and the next pair starts: on its own line (GLM-4.5) or inline, where only a
			// whole <arg_key>K</arg_key><arg_value> shows it is structure (GLM-4.7).
			return i, i, "missing " + glmValueClose, true
		}
		i++
	}
	if closed {
		return len(s), len(s), "missing " + glmValueClose, true
	}
	return 0, 0, "", false
}
