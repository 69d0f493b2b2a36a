package toolcall

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/visorhq/visor/internal/schemadraft"
)

var (
	// ErrUnknownTool: the call names a tool that was not offered.
	ErrUnknownTool = errors.New("unknown tool")
	// ErrInvalidArguments: the arguments fail the tool's JSON Schema.
	ErrInvalidArguments = errors.New("arguments do not match the tool's schema")
)

// ToolSet checks calls against the tools offered to the model.
type ToolSet struct {
	tools map[string]tool
}

type tool struct {
	schema   *jsonschema.Schema
	resolved *jsonschema.Resolved
}

// ToolDef is one tool offered to the model: its name and the JSON Schema of its arguments object.
type ToolDef struct {
	Name       string
	Parameters json.RawMessage
}

// ParseTools reads tools in OpenAI's format: an array of {"type":"function","function":{name,description,
// parameters}}, or a request object with such a "tools" array.
func ParseTools(data []byte) (*ToolSet, error) {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '{' {
		var req struct {
			Tools json.RawMessage `json:"tools"`
		}
		if err := json.Unmarshal(data, &req); err != nil {
			return nil, fmt.Errorf("read tools: %w", err)
		}
		data = req.Tools
	}
	var defs []struct {
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	if err := json.Unmarshal(data, &defs); err != nil {
		return nil, fmt.Errorf("read tools: %w", err)
	}
	td := make([]ToolDef, len(defs))
	for i, d := range defs {
		if d.Function.Name == "" {
			return nil, fmt.Errorf("read tools: tool %d has no function.name", i)
		}
		td[i] = ToolDef{Name: d.Function.Name, Parameters: d.Function.Parameters}
	}
	ts, err := NewToolSet(td)
	if err != nil {
		return nil, fmt.Errorf("read tools: %w", err)
	}
	return ts, nil
}

// NewToolSet compiles the tools' schemas. The parser types each value from them (Parser.Init) and Check
// validates whole calls against them.
func NewToolSet(defs []ToolDef) (*ToolSet, error) {
	ts := &ToolSet{tools: map[string]tool{}}
	for _, d := range defs {
		params := d.Parameters
		if len(bytes.TrimSpace(params)) == 0 || string(bytes.TrimSpace(params)) == "null" {
			params = json.RawMessage(`{"type":"object"}`)
		}
		var s jsonschema.Schema
		if err := json.Unmarshal(params, &s); err != nil {
			return nil, fmt.Errorf("schema of %q: %w", d.Name, err)
		}
		schemadraft.Tolerate(&s)
		rs, err := s.Resolve(nil)
		if err != nil {
			return nil, fmt.Errorf("resolve schema of %q: %w", d.Name, err)
		}
		ts.tools[d.Name] = tool{schema: &s, resolved: rs}
	}
	return ts, nil
}

// Names lists the tools, sorted.
func (ts *ToolSet) Names() []string {
	names := make([]string, 0, len(ts.tools))
	for n := range ts.tools {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Check validates c against its tool's schema. First it turns XML values whose JSON type was only guessed (the
// text "42" for a string parameter) back into strings, as the schema says; that edit is lossless because the
// guessed values kept the model's exact text.
func (ts *ToolSet) Check(c *Call) error {
	t, ok := ts.tools[c.Name]
	if !ok {
		return fmt.Errorf("%w %q (offered: %s)", ErrUnknownTool, c.Name, strings.Join(ts.Names(), ", "))
	}
	if len(c.guessed) > 0 {
		c.Arguments = coerceStrings(c.Arguments, c.guessed, t.schema)
	}
	var inst any
	if err := json.Unmarshal(c.Arguments, &inst); err != nil {
		return fmt.Errorf("%w: %q: %w", ErrInvalidArguments, c.Name, err)
	}
	if err := t.resolved.Validate(inst); err != nil {
		return fmt.Errorf("%w: %q: %w", ErrInvalidArguments, c.Name, err)
	}
	return nil
}

func coerceStrings(args json.RawMessage, guessed map[string]string, s *jsonschema.Schema) json.RawMessage {
	var ps []param
	changed := false
	err := eachMember(args, func(k string, raw json.RawMessage) {
		if text, ok := guessed[k]; ok && wantsString(s.Properties[k]) {
			raw, changed = jsonString(text), true
		}
		ps = append(ps, param{name: k, value: raw})
	})
	if err != nil || !changed {
		return args
	}
	out, _ := buildArgs(ps)
	return out
}

func wantsString(s *jsonschema.Schema) bool {
	if s == nil {
		return false
	}
	if s.Type != "" {
		return s.Type == "string"
	}
	return len(s.Types) > 0 && slices.Contains(s.Types, "string") && !slices.ContainsFunc(s.Types, func(t string) bool {
		return t != "string" && t != "null"
	})
}
