// Package yamlcheck decodes hand-written YAML files (agent files, the config file) strictly, reporting each
// problem as `file:line:col: problem — fix`, and generates their JSON Schemas from the same Go types, so an
// editor's yaml-language-server and visor agree on what a file may say. It knows nothing of what the fields
// mean: callers check values and place their messages with Locate.
package yamlcheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/visorhq/visor/internal/typo"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/invopop/jsonschema"
	"gopkg.in/yaml.v3"
)

// Problem is one thing wrong in a file, where it is and how to fix it.
type Problem struct {
	File      string
	Line, Col int // 1-based; 0 when the problem has no place (a missing key is reported at its parent)
	Problem   string
	Fix       string
	// Err, when set, is what Unwrap returns (a caller's sentinel such as agentfile.ErrInvalid).
	Err error
}

func (p *Problem) Error() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", p.Line, max(p.Col, 1))
	}
	b.WriteString(": ")
	b.WriteString(p.Problem)
	if p.Fix != "" {
		b.WriteString(" — ")
		b.WriteString(p.Fix)
	}
	return b.String()
}

func (p *Problem) Unwrap() error { return p.Err }

// Decode decodes the single YAML document in data into out (a pointer to a struct), refusing unknown keys
// (naming the nearest known one), values of the wrong type, an empty file and a second document. It returns
// the document's root node for Locate.
func Decode(data []byte, file string, out any) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Problem{File: file, Line: 1, Col: 1, Problem: "the file is empty", Fix: "see the examples folder for a starting point"}
		}
		return nil, syntaxProblem(file, err)
	}
	var second yaml.Node
	switch err := dec.Decode(&second); {
	case err == nil && !emptyDoc(&second):
		return nil, &Problem{File: file, Line: second.Line, Col: second.Column, Problem: "a second YAML document (after ---)",
			Fix: "keep one document per file: remove the --- line and what follows, or move it to its own file"}
	case err != nil && !errors.Is(err, io.EOF):
		return nil, syntaxProblem(file, err)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil, &Problem{File: file, Line: 1, Col: 1, Problem: "the file holds no settings", Fix: "see the examples folder for a starting point"}
	}
	t := reflect.TypeOf(out)
	if t.Kind() != reflect.Pointer {
		return nil, fmt.Errorf("yamlcheck: Decode needs a pointer, got %s", t)
	}
	if p := check(file, root, t.Elem(), ""); p != nil {
		return nil, p
	}
	if err := root.Decode(out); err != nil {
		return nil, syntaxProblem(file, err) // check should have caught it; keep yaml's line at least
	}
	return root, nil
}

// emptyDoc reports a document with nothing in it (a bare or trailing ---).
func emptyDoc(n *yaml.Node) bool {
	if n.Kind == yaml.DocumentNode {
		return len(n.Content) == 0 || emptyDoc(n.Content[0])
	}
	return n.Kind == 0 || n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

var yamlPrefix = strings.NewReplacer("yaml: ", "")

// syntaxProblem turns a yaml.v3 error ("yaml: line 3: did not find expected key") into a Problem at its line.
func syntaxProblem(file string, err error) *Problem {
	msg := yamlPrefix.Replace(err.Error())
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.Index(rest, ":"); i > 0 {
			if n, err := strconv.Atoi(rest[:i]); err == nil {
				line, msg = n, strings.TrimSpace(rest[i+1:])
			}
		}
	}
	return &Problem{File: file, Line: line, Col: 1, Problem: "not valid YAML: " + msg,
		Fix: "check the indentation and quoting on this line and the one before"}
}

// check walks node against type t, reporting the first unknown key or mistyped value. path is the dotted
// name of node ("model", "mcp.0") for messages.
func check(file string, n *yaml.Node, t reflect.Type, path string) *Problem {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	here := func(problem, fix string) *Problem {
		return &Problem{File: file, Line: n.Line, Col: n.Column, Problem: problem, Fix: fix}
	}
	name := path
	if name == "" {
		name = "the file"
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return here(name+" should be a mapping of key: value", "indent its keys under it, one per line")
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			f, ok := fields[k.Value]
			if !ok {
				p := &Problem{File: file, Line: k.Line, Col: k.Column, Problem: fmt.Sprintf("unknown key %s%s", k.Value, in(path))}
				if near := typo.Nearest(k.Value, keys(fields)); near != "" {
					p.Fix = fmt.Sprintf("did you mean %s?", near)
				} else {
					p.Fix = "known keys: " + strings.Join(keys(fields), ", ")
				}
				return p
			}
			if p := check(file, v, f.Type, join(path, k.Value)); p != nil {
				return p
			}
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return here(name+" should be a list", fmt.Sprintf("write [a, b] or one `- item` per line (%s: [%s])", leaf(path), exampleScalar(t.Elem())))
		}
		for i, item := range n.Content {
			if p := check(file, item, t.Elem(), join(path, strconv.Itoa(i))); p != nil {
				return p
			}
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return here(name+" should be a mapping of name: value", "indent its entries under it, one per line")
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if p := check(file, n.Content[i+1], t.Elem(), join(path, n.Content[i].Value)); p != nil {
				return p
			}
		}
	default:
		if n.Kind != yaml.ScalarNode {
			return here(fmt.Sprintf("%s should be %s", name, describe(t)), fmt.Sprintf("write it on one line: %s: %s", leaf(path), exampleScalar(t)))
		}
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			return here(fmt.Sprintf("%s: %q is not %s", name, n.Value, describe(t)), fmt.Sprintf("for example %s: %s", leaf(path), exampleScalar(t)))
		}
	}
	return nil
}

func in(path string) string {
	if path == "" {
		return ""
	}
	return " in " + path
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func leaf(path string) string {
	if i := strings.LastIndex(path, "."); i >= 0 {
		return path[i+1:]
	}
	return path
}

func describe(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "text"
	}
	return t.String()
}

func exampleScalar(t reflect.Type) string {
	switch describe(t) {
	case "a whole number":
		return "8"
	case "a number":
		return "0.7"
	case "true or false":
		return "true"
	}
	return "text"
}

type field struct{ Type reflect.Type }

// yamlFields maps t's yaml keys to their fields, inlined structs included; fields tagged "-" are left out.
func yamlFields(t reflect.Type) map[string]field {
	out := map[string]field{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			for k, v := range yamlFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = field{Type: f.Type}
	}
	return out
}

func keys(m map[string]field) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Locate returns the position of the value at the dotted path ("model.plan", "mcp.0.name") in root, or of
// the deepest part of the path that exists (a missing key is reported at its parent). A missing root is 1:1.
func Locate(root *yaml.Node, path string) (line, col int) {
	if root == nil {
		return 1, 1
	}
	n := root
	line, col = n.Line, n.Column
	if path == "" {
		return line, col
	}
	for _, part := range strings.Split(path, ".") {
		var next *yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == part {
					// The key's position: an editor jumps to the line that names the setting.
					line, col = n.Content[i].Line, n.Content[i].Column
					next = n.Content[i+1]
				}
			}
		case yaml.SequenceNode:
			if i, err := strconv.Atoi(part); err == nil && i >= 0 && i < len(n.Content) {
				next = n.Content[i]
				line, col = next.Line, next.Column
			}
		}
		if next == nil {
			return line, col
		}
		n = next
	}
	return line, col
}

// Schema returns the JSON Schema (draft 2020-12) of v's type, keys named by their yaml tags, unknown keys
// refused; id is the schema's $id and title its title. Descriptions and enums come from jsonschema struct tags.
func Schema(v any, id, title string) ([]byte, error) {
	r := &jsonschema.Reflector{FieldNameTag: "yaml", RequiredFromJSONSchemaTags: true, DoNotReference: false}
	s := r.Reflect(v)
	s.ID = jsonschema.ID(id)
	s.Title = title
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("yamlcheck: schema of %T: %w", v, err)
	}
	return append(b, '\n'), nil
}
