package toolcall

import (
	"fmt"
	"strings"
)

// Mistral models mark calls with [TOOL_CALLS] and no end tag. Before tokenizer v11 (Mistral 7B v0.3, Nemo) a JSON
// array of {"name","arguments"} follows; from v11 on (Mistral Small 3.x, Devstral, Magistral, Ministral) each call
// is NAME[ARGS]{json}, optionally NAME[CALL_ID]id[ARGS]{json}, and a second call repeats [TOOL_CALLS]. The
// scanner ends the block where the JSON value closes, so prose after it stays content.
const (
	tagMistralOpen = "[TOOL_CALLS]"
	mistralArgs    = "[ARGS]"
	mistralCallID  = "[CALL_ID]"
)

func (p *Parser) parseMistral(body string, closed bool) ([]Call, error) {
	t := strings.TrimSpace(body)
	if t == "" {
		return nil, fmt.Errorf("%w: nothing after %s", ErrMalformed, tagMistralOpen)
	}
	if t[0] == '[' || t[0] == '{' {
		return p.jsonCalls(t, false)
	}
	end := strings.IndexAny(t, "[{")
	if end <= 0 {
		return nil, fmt.Errorf("%w: expected NAME[ARGS]{…} after %s", ErrMalformed, tagMistralOpen)
	}
	name := strings.TrimSpace(t[:end])
	if !validName(name) || strings.Contains(name, ":") {
		return nil, fmt.Errorf("%w: bad function name %s", ErrMalformed, clip(name))
	}
	rest := t[end:]
	if strings.HasPrefix(rest, mistralCallID) {
		rest = rest[len(mistralCallID):]
		i := strings.IndexAny(rest, "[{")
		if i < 0 {
			i = len(rest)
		}
		rest = rest[i:]
	}
	rest = strings.TrimSpace(strings.TrimPrefix(rest, mistralArgs))
	if rest == "" || rest[0] != '{' {
		if !closed {
			return nil, fmt.Errorf("%w: %s %q has no arguments", ErrUnclosed, tagMistralOpen, name)
		}
		return nil, fmt.Errorf("%w: %s %q has no arguments object", ErrMalformed, tagMistralOpen, name)
	}
	v, rep, err := decodeLenient(rest)
	if err != nil {
		return nil, fmt.Errorf("%w: arguments of %q: %w", ErrMalformed, name, err)
	}
	obj, note, err := argumentsObject(v)
	if err != nil {
		return nil, fmt.Errorf("%w: arguments of %q: %w", ErrMalformed, name, err)
	}
	return []Call{{Name: name, Arguments: obj, Repaired: joinNotes(rep, note)}}, nil
}
