package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	gschema "github.com/google/jsonschema-go/jsonschema"
	"github.com/invopop/jsonschema"

	"github.com/visorhq/visor/internal/schemadraft"
)

// schemaFor reflects In into the JSON Schema of a tool's arguments object. References are inlined and
// $schema/$id dropped because llama.cpp turns the schema into a grammar and small models read it verbatim:
// every extra keyword costs tokens and grammar states.
func schemaFor[In any]() (json.RawMessage, error) {
	t := reflect.TypeFor[In]()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("input type %s: %w", t, ErrNotStruct)
	}
	if err := checkTags(t, t.Name(), map[reflect.Type]bool{}); err != nil {
		return nil, err
	}
	r := &jsonschema.Reflector{DoNotReference: true, ExpandedStruct: true, Anonymous: true}
	s := r.ReflectFromType(t)
	s.Version = ""
	s.ID = ""
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode schema of %s: %w", t, err)
	}
	return b, nil
}

// SchemaFor is the JSON Schema of In as tools and visor's MCP server publish it: one tag dialect for all of visor
// (`jsonschema:"key=value,…"` for keywords, `jsonschema_description:"…"` for descriptions). A tag the generator
// would ignore is an error, not a silently missing description.
func SchemaFor[In any]() (json.RawMessage, error) { return schemaFor[In]() }

// ErrBadTag is returned for a struct tag the schema generator would ignore.
var ErrBadTag = errors.New("schema tag the generator ignores")

// tagKeys are the keys invopop/jsonschema reads from a `jsonschema` tag.
var tagKeys = map[string]bool{"title": true, "description": true, "default": true, "enum": true, "const": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true, "multipleOf": true,
	"minLength": true, "maxLength": true, "pattern": true, "format": true, "minItems": true, "maxItems": true,
	"uniqueItems": true, "minProperties": true, "maxProperties": true, "required": true, "nullable": true,
	"oneof_required": true, "anyof_required": true, "oneof_type": true, "anyof_type": true, "oneof_ref": true,
	"anyof_ref": true, "readOnly": true, "writeOnly": true, "example": true, "examples": true,
	"contentEncoding": true, "contentMediaType": true, "-": true}

// checkTags walks t's fields (and the structs they hold) and refuses `jsonschema` tags whose keys the generator
// does not know — such as a bare description in another library's dialect, which would vanish from the schema.
func checkTags(t reflect.Type, path string, seen map[reflect.Type]bool) error {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return nil
	}
	seen[t] = true
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := path + "." + f.Name
		if tag, ok := f.Tag.Lookup("jsonschema"); ok {
			for _, part := range strings.Split(tag, ",") {
				key, _, _ := strings.Cut(part, "=")
				if !tagKeys[strings.TrimSpace(key)] {
					return fmt.Errorf("%s: tag jsonschema:%q: %w (%q): put descriptions in jsonschema_description:\"…\" "+
						"and keywords as jsonschema:\"key=value\"", name, tag, ErrBadTag, key)
				}
			}
		}
		if err := checkTags(f.Type, name, seen); err != nil {
			return err
		}
	}
	return nil
}

// ErrNotStruct is returned for tools whose input type is not a struct: arguments are always a JSON object.
var ErrNotStruct = errors.New("tool input must be a struct")

// validator checks arguments against one tool's schema and explains failures in words a model can act on.
type validator struct {
	tool     string
	resolved *gschema.Resolved
	raw      map[string]any // the schema as plain JSON, to quote enums and list fields in messages
	required bool           // whether any top-level field is required
}

func newValidator(tool string, params json.RawMessage) (*validator, error) {
	if len(params) == 0 {
		params = json.RawMessage(`{"type":"object"}`)
	}
	var s gschema.Schema
	if err := json.Unmarshal(params, &s); err != nil {
		return nil, fmt.Errorf("parse schema: %w", err)
	}
	schemadraft.Tolerate(&s)
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("resolve schema: %w", err)
	}
	var raw map[string]any
	if err := json.Unmarshal(params, &raw); err != nil {
		return nil, fmt.Errorf("parse schema: %w", err)
	}
	req, _ := raw["required"].([]any)
	return &validator{tool: tool, resolved: rs, raw: raw, required: len(req) > 0}, nil
}

// check normalises args, validates them and fills in schema defaults. It returns the arguments to hand to the
// tool, or a message for the model.
func (v *validator) check(args json.RawMessage) (json.RawMessage, string) {
	obj, msg := v.decode(args)
	if msg != "" {
		return nil, msg + "\n" + v.summary()
	}
	if err := v.resolved.Validate(obj); err != nil {
		return nil, fmt.Sprintf("Invalid arguments for tool %q: %s.\n%s", v.tool, v.explain(err), v.summary())
	}
	if err := v.resolved.ApplyDefaults(&obj); err != nil {
		return nil, fmt.Sprintf("Invalid arguments for tool %q: %v.\n%s", v.tool, err, v.summary())
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Sprintf("Invalid arguments for tool %q: %v", v.tool, err)
	}
	return out, ""
}

// decode accepts what models actually send: an object, an object wrapped in a JSON string (a common
// double-encoding), or nothing at all for tools whose fields are all optional.
func (v *validator) decode(args json.RawMessage) (map[string]any, string) {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || string(trimmed) == "null" || string(trimmed) == `""` {
		if v.required {
			return nil, fmt.Sprintf("Invalid arguments for tool %q: no arguments given, but %s required.", v.tool, v.requiredList())
		}
		return map[string]any{}, ""
	}
	if trimmed[0] == '"' {
		var inner string
		if err := json.Unmarshal(trimmed, &inner); err != nil {
			return nil, fmt.Sprintf("Invalid arguments for tool %q: not valid JSON (%v).", v.tool, err)
		}
		// Recursing unwraps any depth of encoding; each layer is shorter, so it ends.
		return v.decode(json.RawMessage(inner))
	}
	var obj map[string]any
	if err := json.Unmarshal(trimmed, &obj); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return nil, fmt.Sprintf("Invalid arguments for tool %q: arguments must be a JSON object, got %s.", v.tool, typeErr.Value)
		}
		return nil, fmt.Sprintf("Invalid arguments for tool %q: not valid JSON (%v).", v.tool, err)
	}
	if obj == nil {
		return v.decode(nil)
	}
	return obj, ""
}

var boundWords = map[string]string{
	"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<",
}

var (
	typeDetail = regexp.MustCompile(`^type: (.*) has type "(\w+)", want (.+)$`)
	quotedList = regexp.MustCompile(`"[^"]*"`)
)

// explain turns a jsonschema-go error ("validating root: validating /properties/x: type: ...") into
// "field "x": expected integer, got string "ten"". Unknown shapes fall back to the library's own words.
func (v *validator) explain(err error) string {
	msg := err.Error()
	ptr := ""
	for {
		i := strings.Index(msg, "validating ")
		if i < 0 {
			break
		}
		rest := msg[i+len("validating "):]
		j := strings.Index(rest, ": ")
		if j < 0 {
			break
		}
		if p := rest[:j]; p != "root" {
			ptr = p
		}
		msg = rest[j+2:]
	}
	field := pointerToField(ptr)
	sub := v.lookup(ptr)
	where := ""
	if field != "" {
		where = fmt.Sprintf("field %q: ", field)
	}
	switch {
	case strings.HasPrefix(msg, "required: missing properties: "):
		names := quotedList.FindAllString(msg, -1)
		in := ""
		if field != "" {
			in = fmt.Sprintf(" in %q", field)
		}
		return fmt.Sprintf("missing required field %s%s", strings.Join(names, ", "), in)
	case strings.HasPrefix(msg, "unexpected additional properties "):
		names := quotedList.FindAllString(msg, -1)
		return fmt.Sprintf("%sunknown field %s; allowed fields are %s", where, strings.Join(names, ", "), strings.Join(propNames(sub), ", "))
	case strings.HasPrefix(msg, "enum: "):
		enum, _ := json.Marshal(sub["enum"])
		got := strings.TrimPrefix(msg, "enum: ")
		got = got[:max(0, strings.Index(got, " does not equal"))]
		return fmt.Sprintf("%svalue %q is not allowed; expected one of %s", where, got, enum)
	}
	if kw, _, ok := strings.Cut(msg, ":"); ok && boundWords[kw] != "" {
		// The library prints numbers as rationals ("9/1"); quote the bound from the schema instead.
		got := strings.Fields(strings.TrimPrefix(msg, kw+":"))
		val := ""
		if len(got) > 0 {
			val = ", got " + strings.TrimSuffix(got[0], "/1")
		}
		bound, _ := json.Marshal(sub[kw])
		return fmt.Sprintf("%smust be %s %s%s", where, boundWords[kw], bound, val)
	}
	if m := typeDetail.FindStringSubmatch(msg); m != nil {
		want := strings.Trim(m[3], `"`)
		if strings.HasPrefix(m[3], "one of") {
			want = strings.TrimPrefix(m[3], "one of ")
		}
		got := m[1]
		if m[2] == "string" {
			got = strconv.Quote(got)
		}
		return fmt.Sprintf("%sexpected %s, got %s %s", where, want, m[2], got)
	}
	return where + msg
}

// pointerToField renders a schema pointer such as /properties/a/items/properties/b as a.b[] style paths.
func pointerToField(ptr string) string {
	var b strings.Builder
	parts := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	for i := 0; i < len(parts); i++ {
		switch parts[i] {
		case "properties":
			if i+1 < len(parts) {
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(parts[i+1])
				i++
			}
		case "items":
			b.WriteString("[]")
		}
	}
	return b.String()
}

func (v *validator) lookup(ptr string) map[string]any {
	cur := v.raw
	for _, p := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		if p == "" {
			continue
		}
		next, ok := cur[p].(map[string]any)
		if !ok {
			return cur
		}
		cur = next
	}
	return cur
}

func propNames(s map[string]any) []string {
	props, _ := s["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, fmt.Sprintf("%q", k))
	}
	sort.Strings(names)
	if len(names) == 0 {
		return []string{"none"}
	}
	return names
}

func (v *validator) requiredList() string {
	req, _ := v.raw["required"].([]any)
	names := make([]string, len(req))
	for i, r := range req {
		names[i] = fmt.Sprintf("%q", r)
	}
	if len(names) == 1 {
		return names[0] + " is"
	}
	return strings.Join(names, ", ") + " are"
}

// summary lists the tool's top-level parameters in one line each, so a model that got the call wrong sees the
// shape it should have used without the full schema.
func (v *validator) summary() string {
	props, _ := v.raw["properties"].(map[string]any)
	if len(props) == 0 {
		return fmt.Sprintf("Tool %q takes no arguments; call it with {}.", v.tool)
	}
	req := map[string]bool{}
	if rs, ok := v.raw["required"].([]any); ok {
		for _, r := range rs {
			if s, ok := r.(string); ok {
				req[s] = true
			}
		}
	}
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	// Required first, then alphabetical: what the model must fix comes first.
	sort.Slice(names, func(i, j int) bool {
		if req[names[i]] != req[names[j]] {
			return req[names[i]]
		}
		return names[i] < names[j]
	})
	var b strings.Builder
	fmt.Fprintf(&b, "Parameters of %q:", v.tool)
	for _, n := range names {
		p, _ := props[n].(map[string]any)
		var attrs []string
		if t, ok := p["type"]; ok {
			attrs = append(attrs, fmt.Sprint(t))
		}
		if req[n] {
			attrs = append(attrs, "required")
		}
		if e, ok := p["enum"]; ok {
			eb, _ := json.Marshal(e)
			attrs = append(attrs, "one of "+string(eb))
		}
		for _, kw := range []string{"minimum", "maximum"} {
			if m, ok := p[kw]; ok {
				attrs = append(attrs, fmt.Sprintf("%s %s %v", kw[:3], boundWords[kw], m))
			}
		}
		if d, ok := p["default"]; ok {
			db, _ := json.Marshal(d)
			attrs = append(attrs, "default "+string(db))
		}
		fmt.Fprintf(&b, "\n- %s (%s)", n, strings.Join(attrs, ", "))
		if d, ok := p["description"].(string); ok && d != "" {
			if r := []rune(d); len(r) > 100 {
				d = string(r[:100]) + "…"
			}
			b.WriteString(": " + d)
		}
	}
	return b.String()
}
