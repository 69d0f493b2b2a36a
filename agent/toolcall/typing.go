package toolcall

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// kinds is a set of JSON types a schema allows.
type kinds uint8

const (
	kString kinds = 1 << iota
	kNumber
	kInteger
	kBool
	kNull
	kObject
	kArray
)

func kindOfName(t string) kinds {
	switch t {
	case "string":
		return kString
	case "number":
		return kNumber
	case "integer":
		return kInteger
	case "boolean":
		return kBool
	case "null":
		return kNull
	case "object":
		return kObject
	case "array":
		return kArray
	}
	return 0
}

func kindOfValue(v any) kinds {
	switch v.(type) {
	case string:
		return kString
	case float64, int, int64, json.Number:
		return kNumber
	case bool:
		return kBool
	case nil:
		return kNull
	case map[string]any:
		return kObject
	case []any:
		return kArray
	}
	return 0
}

// resolveRef follows a local $ref ("#/$defs/X", "#/definitions/X"), as Pydantic writes for nested models.
func resolveRef(s, root *jsonschema.Schema) *jsonschema.Schema {
	for range 8 {
		if s == nil || s.Ref == "" || root == nil {
			return s
		}
		name, ok := strings.CutPrefix(s.Ref, "#/$defs/")
		defs := root.Defs
		if !ok {
			if name, ok = strings.CutPrefix(s.Ref, "#/definitions/"); !ok {
				return s
			}
			defs = root.Definitions
		}
		next := defs[name]
		if next == nil {
			return s
		}
		s = next
	}
	return s
}

// kindsOf lists the JSON types s allows: type (or a type array such as ["string","null"]), anyOf/oneOf/allOf
// branches, enum and const values. 0 means the schema says nothing about the type.
func kindsOf(s, root *jsonschema.Schema, depth int) kinds {
	s = resolveRef(s, root)
	if s == nil || depth > 8 {
		return 0
	}
	var k kinds
	k |= kindOfName(s.Type)
	for _, t := range s.Types {
		k |= kindOfName(t)
	}
	for _, v := range s.Enum {
		k |= kindOfValue(v)
	}
	if s.Const != nil {
		k |= kindOfValue(*s.Const)
	}
	if n, _ := s.Extra["nullable"].(bool); n || string(s.Default) == "null" {
		// OpenAPI 3.0's nullable, and a field whose default is null, take null too.
		k |= kNull
	}
	for _, group := range [][]*jsonschema.Schema{s.AnyOf, s.OneOf} {
		for _, b := range group {
			bk := kindsOf(b, root, depth+1)
			if bk == 0 {
				// A branch that allows anything makes the whole union untyped.
				return 0
			}
			k |= bk
		}
	}
	for _, b := range s.AllOf {
		k |= kindsOf(b, root, depth+1)
	}
	if k == 0 {
		switch {
		case s.Properties != nil || s.AdditionalProperties != nil:
			k = kObject
		case s.Items != nil || s.PrefixItems != nil:
			k = kArray
		}
	}
	return k
}

// argTyper types the values of one call from its tool's schema. A nil *argTyper (no tools given, or a tool
// that was not offered) guesses, and records each guess so that ToolSet.Check can still undo it.
type argTyper struct {
	root *jsonschema.Schema
}

func (ts *ToolSet) typer(name string) *argTyper {
	if ts == nil {
		return nil
	}
	t, ok := ts.tools[name]
	if !ok {
		return nil
	}
	return &argTyper{root: t.schema}
}

func (t *argTyper) rootSchema() *jsonschema.Schema {
	if t == nil {
		return nil
	}
	return t.root
}

// prop returns the schema of one argument, or nil when the tool's schema does not describe it.
func (t *argTyper) prop(name string) *jsonschema.Schema {
	if t == nil {
		return nil
	}
	root := resolveRef(t.root, t.root)
	if s, ok := root.Properties[name]; ok {
		return s
	}
	return root.AdditionalProperties
}

// knows reports whether name is an argument of the tool; without a schema every name counts. The XML parser
// uses it to tell a parameter tag from text that only looks like one.
func (t *argTyper) knows(name string) bool {
	if t == nil {
		return true
	}
	root := resolveRef(t.root, t.root)
	if len(root.Properties) == 0 {
		return true
	}
	_, ok := root.Properties[name]
	return ok
}

// typeText turns the text of an unquoted value (an XML parameter, a bare Gemma scalar) into JSON as its schema
// s says. Qwen's and GLM's templates write strings bare and everything else as JSON, so the text alone cannot
// tell "42" the string from 42 the number: the schema decides. Python literals (True, None, {'k': 'v'}) are read
// only where the schema wants a boolean, null, object or array; a string field keeps the exact text.
// guessed reports that no schema decided, and the type was inferred from the text.
func typeText(text string, s, root *jsonschema.Schema) (v json.RawMessage, guessed bool, note string) {
	t := strings.TrimSpace(text)
	k := kindsOf(s, root, 0)
	if k == 0 {
		if t != "" && strings.IndexByte("{[-0123456789tfn", t[0]) >= 0 && json.Valid([]byte(t)) {
			var buf bytes.Buffer
			if json.Compact(&buf, []byte(t)) == nil {
				return buf.Bytes(), true, ""
			}
		}
		return jsonString(text), false, ""
	}
	// An enum of strings decides by membership before anything else: "1" in ["1","2"] is a string.
	if k&kString != 0 && inStringEnum(resolveRef(s, root), text, t) {
		return jsonString(text), false, ""
	}
	if (k&kNull != 0 || k&kString == 0) && (t == "null" || t == "None") {
		// null for a field that cannot be a string is null, whatever its type says (as vLLM reads it): the
		// registry's validation then names the field, and no tool gets the word "null" as a number.
		return json.RawMessage("null"), false, noteIf(t == "None", "Python literals")
	}
	if k&kBool != 0 && (strings.EqualFold(t, "true") || strings.EqualFold(t, "false")) {
		b := strings.ToLower(t)
		return json.RawMessage(b), false, noteIf(b != t, "Python literals")
	}
	if k&(kNumber|kInteger) != 0 {
		if isJSONNumber(t) {
			return json.RawMessage(t), false, ""
		}
		if k&kString == 0 && len(t) > 2 && t[0] == '"' && t[len(t)-1] == '"' && isJSONNumber(t[1:len(t)-1]) {
			// "42" with its quotes for a field that can only be a number (SGLang's GLM-4.7 detector reads it so).
			return json.RawMessage(t[1 : len(t)-1]), false, "quoted number"
		}
		// "007": a number the model padded; JSON has no leading zeros.
		if u := strings.TrimLeft(strings.TrimPrefix(t, "-"), "0"); u != "" && u[0] >= '1' && u[0] <= '9' && isJSONNumber(u) {
			if t[0] == '-' {
				u = "-" + u
			}
			return json.RawMessage(u), false, "leading zeros"
		}
	}
	if k&(kObject|kArray) != 0 && t != "" && (t[0] == '{' || t[0] == '[') {
		if out, rep, err := decodeLenient(t); err == nil {
			out = bytes.TrimSpace(out)
			if (out[0] == '{' && k&kObject != 0) || (out[0] == '[' && k&kArray != 0) {
				var buf bytes.Buffer
				if json.Compact(&buf, out) == nil {
					return buf.Bytes(), false, rep
				}
			}
		}
	}
	// A string field, or text that fits none of the allowed types: the exact text, so that validation names the
	// field and the type it wanted instead of the parser inventing a value.
	return jsonString(text), false, ""
}

func noteIf(cond bool, note string) string {
	if cond {
		return note
	}
	return ""
}

func inStringEnum(s *jsonschema.Schema, text, trimmed string) bool {
	if s == nil {
		return false
	}
	for _, e := range s.Enum {
		if es, ok := e.(string); ok && (es == text || es == trimmed) {
			return true
		}
	}
	return false
}

func isJSONNumber(t string) bool {
	// Valid JSON that starts with a digit or '-' can only be a number; its digits are kept as written.
	return t != "" && (t[0] == '-' || t[0] >= '0' && t[0] <= '9') && json.Valid([]byte(t))
}
