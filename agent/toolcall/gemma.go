package toolcall

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Gemma 4 writes <|tool_call>call:NAME{key:<|"|>text<|"|>,n:3,flag:true,xs:[1,2],o:{k:v}}<tool_call|>: keys are
// bare (or quoted), strings sit between <|"|> marks, numbers, booleans and null are bare.
const (
	tagGemmaOpen  = "<|tool_call>"
	tagGemmaClose = "<tool_call|>"
	gemmaQuote    = `<|"|>`
)

// gnode is one parsed Gemma value.
type gnode struct {
	kind byte // 's' quoted string, 'b' bare scalar, 'o' object, 'a' array
	text string
	keys []string
	vals []gnode
}

type gemmaReader struct {
	s    string
	pos  int
	note string // repairs made, for Call.Repaired
}

var errGemmaEOF = errors.New("value ends early")

func (r *gemmaReader) ws() {
	for r.pos < len(r.s) && strings.IndexByte(" \t\r\n", r.s[r.pos]) >= 0 {
		r.pos++
	}
}

func (r *gemmaReader) value(depth int) (gnode, error) {
	if depth > 64 {
		return gnode{}, errors.New("nested too deeply")
	}
	r.ws()
	rest := r.s[r.pos:]
	switch {
	case rest == "":
		return gnode{}, errGemmaEOF
	case strings.HasPrefix(rest, gemmaQuote):
		body := rest[len(gemmaQuote):]
		e := strings.Index(body, gemmaQuote)
		if e < 0 {
			// No closing mark: the string runs to the call's closing brace (vLLM takes the rest, Ollama
			// closes the mark before the final "}").
			t := strings.TrimRight(body, " \t\r\n")
			if !strings.HasSuffix(t, "}") || depth != 1 {
				return gnode{}, errors.New("unterminated <|\"|> string")
			}
			r.note = joinNote(r.note, "missing closing "+gemmaQuote)
			r.pos += len(gemmaQuote) + len(t) - 1
			return gnode{kind: 's', text: t[:len(t)-1]}, nil
		}
		r.pos += len(gemmaQuote) + e + len(gemmaQuote)
		return gnode{kind: 's', text: body[:e]}, nil
	case rest[0] == '\'':
		// 'text': single quotes where <|"|> belongs; Ollama reads them as a string, and so a stray <|"|> right
		// after the closing quote.
		if e := singleQuotedEnd(rest); e > 0 {
			r.pos += e
			if strings.HasPrefix(r.s[r.pos:], gemmaQuote) {
				r.pos += len(gemmaQuote)
			}
			r.note = joinNote(r.note, "single quotes")
			return gnode{kind: 's', text: rest[1 : e-1]}, nil
		}
	case rest[0] == '"':
		// Some generations quote with plain JSON strings.
		e := stringEnd(rest, 0)
		if e < 0 {
			return gnode{}, errors.New("unterminated string")
		}
		var str string
		if err := json.Unmarshal([]byte(rest[:e]), &str); err != nil {
			return gnode{}, err
		}
		r.pos += e
		return gnode{kind: 's', text: str}, nil
	case rest[0] == '{':
		n := gnode{kind: 'o'}
		err := r.members('}', func() error {
			k, err := r.key()
			if err != nil {
				return err
			}
			v, err := r.value(depth + 1)
			if err != nil {
				return err
			}
			n.keys, n.vals = append(n.keys, k), append(n.vals, v)
			return nil
		})
		return n, err
	case rest[0] == '[':
		n := gnode{kind: 'a'}
		err := r.members(']', func() error {
			v, err := r.value(depth + 1)
			n.vals = append(n.vals, v)
			return err
		})
		return n, err
	}
	e := strings.IndexAny(rest, ",}]")
	if e < 0 {
		e = len(rest)
	}
	if e == 0 {
		if rest[0] == '}' && depth == 1 {
			// {key:}: no value, read as the empty string (vLLM's _parse_gemma4_args).
			r.note = joinNote(r.note, "empty value")
			return gnode{kind: 's'}, nil
		}
		return gnode{}, fmt.Errorf("unexpected %q", rest[:1])
	}
	r.pos += e
	text := strings.TrimSpace(rest[:e])
	if q := strings.Index(text, gemmaQuote); q >= 0 {
		// The opening <|"|> is missing: {query:weather in Tokyo<|"|>}. The text before the one closing mark is the
		// string (Ollama closes unbalanced marks the same way); a mark anywhere else cannot be placed, and no
		// value may hand the mark to a tool.
		if q != len(text)-len(gemmaQuote) {
			return gnode{}, fmt.Errorf("%s in the middle of a bare value %s", gemmaQuote, clip(text))
		}
		r.note = joinNote(r.note, "missing opening "+gemmaQuote)
		return gnode{kind: 's', text: strings.TrimSpace(text[:q])}, nil
	}
	return gnode{kind: 'b', text: text}, nil
}

// singleQuotedEnd returns the length of the 'string' at the start of s: it ends at a quote followed by
// , } ] or the end (so "it's" inside survives), or -1.
func singleQuotedEnd(s string) int {
	for j := 1; j < len(s); j++ {
		if s[j] == '\'' {
			k := j + 1
			for k < len(s) && strings.IndexByte(" \t\r\n", s[k]) >= 0 {
				k++
			}
			if k == len(s) || strings.IndexByte(",}]", s[k]) >= 0 || strings.HasPrefix(s[k:], gemmaQuote) {
				return j + 1
			}
		}
	}
	return -1
}

// members reads an object's or an array's members, each with one call of member, from after its opening
// bracket through close. The comma between two members may be missing, as in some generations.
func (r *gemmaReader) members(close byte, member func() error) error {
	r.pos++
	for {
		r.ws()
		if r.pos >= len(r.s) {
			return errGemmaEOF
		}
		if r.s[r.pos] == close {
			r.pos++
			return nil
		}
		if err := member(); err != nil {
			return err
		}
		r.ws()
		if r.pos < len(r.s) && r.s[r.pos] == ',' {
			r.pos++
		}
	}
}

func (r *gemmaReader) key() (string, error) {
	r.ws()
	rest := r.s[r.pos:]
	if strings.HasPrefix(rest, gemmaQuote) {
		body := rest[len(gemmaQuote):]
		e := strings.Index(body, gemmaQuote)
		if e < 0 || !strings.HasPrefix(strings.TrimLeft(body[e+len(gemmaQuote):], " "), ":") {
			return "", errors.New("bad quoted key")
		}
		after := body[e+len(gemmaQuote):]
		r.pos += len(gemmaQuote) + e + len(gemmaQuote) + strings.IndexByte(after, ':') + 1
		return body[:e], nil
	}
	c := strings.IndexByte(rest, ':')
	if c < 0 {
		return "", errGemmaEOF
	}
	k := strings.Trim(strings.TrimSpace(rest[:c]), `"'`)
	if k == "" || strings.ContainsAny(k, "{}[],") {
		return "", fmt.Errorf("bad key %q", rest[:c])
	}
	r.pos += c + 1
	return k, nil
}

// toJSON writes a Gemma value as JSON, typing bare scalars from the schema s.
func (n gnode) toJSON(buf *bytes.Buffer, s, root *jsonschema.Schema) (guessed bool) {
	s = resolveRef(s, root)
	switch n.kind {
	case 's':
		buf.Write(jsonString(n.text))
	case 'b':
		v, g, _ := typeText(n.text, s, root)
		buf.Write(v)
		guessed = g
	case 'o':
		buf.WriteByte('{')
		for i, k := range n.keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			buf.Write(jsonString(k))
			buf.WriteByte(':')
			var sub *jsonschema.Schema
			if s != nil {
				sub = s.Properties[k]
				if sub == nil {
					sub = s.AdditionalProperties
				}
			}
			n.vals[i].toJSON(buf, sub, root)
		}
		buf.WriteByte('}')
	case 'a':
		buf.WriteByte('[')
		for i, v := range n.vals {
			if i > 0 {
				buf.WriteByte(',')
			}
			var sub *jsonschema.Schema
			if s != nil {
				sub = s.Items
			}
			v.toJSON(buf, sub, root)
		}
		buf.WriteByte(']')
	}
	return guessed
}

// parseGemma reads the calls in one <|tool_call> block: call:NAME{…}, possibly several in a row.
func parseGemma(body string, closed bool, ts *ToolSet) ([]Call, error) {
	var calls []Call
	s := strings.TrimSpace(body)
	for s != "" {
		var note string
		// A doubled or stray prefix (":call:bash", "call:call:bash") is structure the model repeated, not part of
		// the name.
		for t := ""; t != s; {
			t = s
			s = strings.TrimPrefix(strings.TrimLeft(s, ": \t\r\n"), "call:")
			if t != s && !strings.HasPrefix(t, "call:") {
				note = "stray colon before call:"
			}
		}
		open := strings.IndexByte(s, '{')
		if open < 0 {
			return calls, fmt.Errorf("%w: expected call:NAME{…}", ErrMalformed)
		}
		name := strings.TrimSpace(s[:open])
		if !validName(name) || strings.Contains(name, ":") {
			return calls, fmt.Errorf("%w: bad function name %s", ErrMalformed, clip(name))
		}
		r := gemmaReader{s: s, pos: open, note: note}
		n, err := r.value(0)
		if err != nil {
			if errors.Is(err, errGemmaEOF) && !closed {
				err = fmt.Errorf("%w: %w", ErrUnclosed, err)
			}
			return calls, fmt.Errorf("%w: function %q: %w", ErrMalformed, name, err)
		}
		ty := ts.typer(name)
		var buf bytes.Buffer
		var guessed map[string]string
		buf.WriteByte('{')
		for i, k := range n.keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			buf.Write(jsonString(k))
			buf.WriteByte(':')
			if n.vals[i].toJSON(&buf, ty.prop(k), ty.rootSchema()) {
				if guessed == nil {
					guessed = map[string]string{}
				}
				guessed[k] = n.vals[i].text
			}
		}
		buf.WriteByte('}')
		args, _ := buildArgsFromObject(buf.Bytes())
		calls = append(calls, Call{Name: name, Arguments: args, Raw: tagGemmaOpen + "call:" + s[:r.pos] + tagGemmaClose,
			Repaired: r.note, guessed: guessed})
		s = strings.TrimSpace(s[r.pos:])
	}
	if len(calls) == 0 {
		return nil, fmt.Errorf("%w: empty <|tool_call> block", ErrMalformed)
	}
	return calls, nil
}

// buildArgsFromObject applies the last-one-wins rule for repeated keys, as buildArgs does for XML.
func buildArgsFromObject(obj []byte) (json.RawMessage, error) {
	var ps []param
	if err := eachMember(obj, func(k string, raw json.RawMessage) { ps = append(ps, param{name: k, value: raw}) }); err != nil {
		return nil, err
	}
	out, _ := buildArgs(ps)
	return out, nil
}
