package prompts

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"text/template"
)

// Format names a tool-call text format; the spellings match `visor toolcalls parse --format`.
type Format string

const (
	// Hermes: tools as JSON lines in <tools></tools>, calls as JSON in <tool_call>, results as
	// <tool_response>{"name": …, "content": …}</tool_response> (NousResearch Hermes, Qwen3).
	Hermes Format = "hermes"
	// QwenXML: calls as <tool_call><function=NAME><parameter=ARG>value</parameter></function></tool_call>
	// (Qwen3.5/3.6, Qwen3-Coder); results as the bare content in <tool_response>.
	QwenXML Format = "qwen-xml"
)

// ErrUnknownFormat is returned for a Format this package has no template for.
var ErrUnknownFormat = errors.New("unknown tool prompt format")

// ToolSpec describes one tool offered to the model.
type ToolSpec struct {
	Name        string
	Description string
	Parameters  json.RawMessage // a JSON Schema object; empty means no parameters
}

//go:embed templates/*.tmpl
var files embed.FS

// templates is parsed once; it is never modified afterwards, so sharing it is safe.
var templates = template.Must(template.ParseFS(files, "templates/*.tmpl"))

// ToolSystem returns the system prompt: baseSystem (if any), then the tool list and the call instructions for f.
func ToolSystem(f Format, baseSystem string, tools []ToolSpec) (string, error) {
	var name string
	switch f {
	case Hermes:
		name = "hermes_system.tmpl"
	case QwenXML:
		name = "qwen_xml_system.tmpl"
	default:
		return "", fmt.Errorf("%w %q", ErrUnknownFormat, f)
	}
	lines := make([]string, 0, len(tools))
	for i, t := range tools {
		line, err := toolLine(t)
		if err != nil {
			return "", fmt.Errorf("tool %d: %w", i, err)
		}
		lines = append(lines, line)
	}
	var buf bytes.Buffer
	data := struct {
		Base  string
		Tools []string
	}{strings.TrimSpace(baseSystem), lines}
	if err := templates.ExecuteTemplate(&buf, name, data); err != nil {
		return "", fmt.Errorf("render %s: %w", name, err)
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

// ToolResponse wraps one tool result for the user turn that returns it. Several results go in one user turn,
// joined by "\n". A Format other than QwenXML gets the Hermes form.
func ToolResponse(f Format, name, content string) string {
	payload := content
	if f != QwenXML {
		// Hermes puts the name beside the result so the model can pair results with calls (there are no ids).
		var c any = content
		if json.Valid([]byte(strings.TrimSpace(content))) {
			c = json.RawMessage(strings.TrimSpace(content))
		}
		b, err := marshal(struct {
			Name    string `json:"name"`
			Content any    `json:"content"`
		}{name, c})
		if err == nil {
			payload = pySpaced(b)
		}
	}
	var buf bytes.Buffer
	if err := templates.ExecuteTemplate(&buf, "tool_response.tmpl", payload); err != nil {
		// The template is fixed and takes a string: it cannot fail, but never lose the result if it did.
		return "<tool_response>\n" + payload + "\n</tool_response>"
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// toolLine renders a tool as Qwen's chat templates do ({{ tool | tojson }}): OpenAI's function wrapper, with
// Python's ", " and ": " separators, so the prompt matches the text the models were trained on.
func toolLine(t ToolSpec) (string, error) {
	if strings.TrimSpace(t.Name) == "" {
		return "", errors.New("tool without a name")
	}
	params := bytes.TrimSpace(t.Parameters)
	if len(params) == 0 || string(params) == "null" {
		params = []byte(`{"type":"object","properties":{}}`)
	}
	if !json.Valid(params) || params[0] != '{' {
		return "", fmt.Errorf("tool %q: parameters are not a JSON object", t.Name)
	}
	// A struct keeps the key order fixed (type, function; name, description, parameters) and RawMessage keeps the
	// schema's own key order, so the prompt is byte-stable across runs: that keeps llama-server's prompt cache warm.
	type fn struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	b, err := marshal(struct {
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}{"function", fn{t.Name, t.Description, params}})
	if err != nil {
		return "", fmt.Errorf("tool %q: %w", t.Name, err)
	}
	return pySpaced(b), nil
}

func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Compact(&out, buf.Bytes()); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// pySpaced adds a space after each ',' and ':' outside strings in compact JSON, as Python's json.dumps does.
func pySpaced(b []byte) string {
	var sb strings.Builder
	sb.Grow(len(b) + len(b)/8)
	inStr, esc := false, false
	for _, c := range b {
		sb.WriteByte(c)
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case !inStr && (c == ',' || c == ':'):
			sb.WriteByte(' ')
		}
	}
	return sb.String()
}

// ToolCall writes a past call back into assistant text in the syntax the tool prompt taught the model, so a
// history visor renders itself reads as the model's own output. A Format other than QwenXML gets the Hermes form.
func ToolCall(f Format, name string, arguments json.RawMessage) string {
	args := arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if f != QwenXML {
		return fmt.Sprintf("<tool_call>\n{\"name\": %q, \"arguments\": %s}\n</tool_call>", name, args)
	}
	var obj map[string]json.RawMessage
	_ = json.Unmarshal(args, &obj)
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "<tool_call>\n<function=%s>\n", name)
	for _, k := range keys {
		v := string(obj[k])
		var str string
		if json.Unmarshal(obj[k], &str) == nil {
			v = str // Qwen XML writes strings bare and everything else as JSON
		}
		fmt.Fprintf(&b, "<parameter=%s>\n%s\n</parameter>\n", k, v)
	}
	b.WriteString("</function>\n</tool_call>")
	return b.String()
}
