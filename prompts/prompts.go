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
	// GLM: GLM-4.5/4.6's template text, tools as JSON lines in <tools></tools>, calls as
	// <tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n</tool_call>; results as the bare content in
	// <tool_response>.
	GLM Format = "glm"
	// Gemma4: tools declared as Gemma 4's template writes them, <|tool>declaration:NAME{…}<tool|> with <|"|>
	// strings; calls as <|tool_call>call:NAME{…}<tool_call|>, results as <|tool_response>response:NAME{…}
	// <tool_response|>. The template has no instruction text: the declarations are all the model was trained on.
	Gemma4 Format = "gemma4"
	// Mistral: tools as [AVAILABLE_TOOLS][…][/AVAILABLE_TOOLS] (the v11+ templates of Mistral Small 3.x, Devstral,
	// Magistral), calls as [TOOL_CALLS]NAME[ARGS]{…}, results in [TOOL_RESULTS]…[/TOOL_RESULTS].
	Mistral Format = "mistral"
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
	line := toolLine
	switch f {
	case Hermes:
		name = "hermes_system.tmpl"
	case QwenXML:
		name = "qwen_xml_system.tmpl"
	case GLM:
		name = "glm_system.tmpl"
	case Gemma4:
		name, line = "gemma4_system.tmpl", gemmaDeclaration
	case Mistral:
		name = "mistral_system.tmpl"
	default:
		return "", fmt.Errorf("%w %q", ErrUnknownFormat, f)
	}
	lines := make([]string, 0, len(tools))
	for i, t := range tools {
		line, err := line(t)
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
// joined by "\n". An unknown Format gets the Hermes form.
func ToolResponse(f Format, name, content string) string {
	switch f {
	case Gemma4:
		return "<|tool_response>response:" + name + "{value:" + gemmaString(content) + "}<tool_response|>"
	case Mistral:
		return "[TOOL_RESULTS]" + content + "[/TOOL_RESULTS]"
	}
	payload := content
	if f != QwenXML && f != GLM {
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

// toolSchema is a tool's parameters, or an empty object schema.
func toolSchema(t ToolSpec) (json.RawMessage, error) {
	if strings.TrimSpace(t.Name) == "" {
		return nil, errors.New("tool without a name")
	}
	params := bytes.TrimSpace(t.Parameters)
	if len(params) == 0 || string(params) == "null" {
		params = []byte(`{"type":"object","properties":{}}`)
	}
	if !json.Valid(params) || params[0] != '{' {
		return nil, fmt.Errorf("tool %q: parameters are not a JSON object", t.Name)
	}
	return params, nil
}

// gemmaDeclaration renders a tool as Gemma 4's template does: declaration:NAME{description:…,parameters:{…}}
// in <|tool>…<tool|>, strings between <|"|> marks, keys bare, JSON Schema types upper-cased, description
// first and type last in each schema (the template's format_parameters macro), other keys sorted.
func gemmaDeclaration(t ToolSpec) (string, error) {
	params, err := toolSchema(t)
	if err != nil {
		return "", err
	}
	var schema any
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.UseNumber()
	if err := dec.Decode(&schema); err != nil {
		return "", fmt.Errorf("tool %q: %w", t.Name, err)
	}
	var b strings.Builder
	b.WriteString("<|tool>declaration:" + t.Name + "{description:" + gemmaString(t.Description) + ",parameters:")
	writeGemma(&b, schema, true)
	b.WriteString("}<tool|>")
	return b.String(), nil
}

const gemmaQuote = `<|"|>`

func gemmaString(s string) string { return gemmaQuote + s + gemmaQuote }

// writeGemma writes v in Gemma 4's notation; schema says v is a JSON Schema (its "type" is upper-cased).
func writeGemma(b *strings.Builder, v any, schema bool) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			if k != "description" && k != "type" {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		if _, ok := x["description"]; ok {
			keys = append([]string{"description"}, keys...)
		}
		if _, ok := x["type"]; ok {
			keys = append(keys, "type")
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(k + ":")
			val := x[k]
			if s, ok := val.(string); ok && schema && k == "type" {
				val = strings.ToUpper(s)
			}
			// Below "properties" the keys are argument names, each with a schema; elsewhere the values are
			// schemas where the schema says so (items, anyOf branches) and data otherwise (enum, default).
			sub := schema && k != "enum" && k != "default" && k != "const" && k != "examples"
			writeGemma(b, val, sub)
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writeGemma(b, e, schema)
		}
		b.WriteByte(']')
	case string:
		b.WriteString(gemmaString(x))
	case json.Number:
		b.WriteString(x.String())
	case bool:
		fmt.Fprint(b, x)
	case nil:
		b.WriteString("null")
	}
}

// toolLine renders a tool as Qwen's chat templates do ({{ tool | tojson }}): OpenAI's function wrapper, with
// Python's ", " and ": " separators, so the prompt matches the text the models were trained on.
func toolLine(t ToolSpec) (string, error) {
	params, err := toolSchema(t)
	if err != nil {
		return "", err
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
// history visor renders itself reads as the model's own output. An unknown Format gets the Hermes form.
func ToolCall(f Format, name string, arguments json.RawMessage) string {
	args := arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	switch f {
	case QwenXML, GLM, Gemma4:
	case Mistral:
		return "[TOOL_CALLS]" + name + "[ARGS]" + string(args)
	default:
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
	switch f {
	case Gemma4:
		b.WriteString("<|tool_call>call:" + name + "{")
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			var v any
			dec := json.NewDecoder(bytes.NewReader(obj[k]))
			dec.UseNumber()
			_ = dec.Decode(&v)
			b.WriteString(k + ":")
			writeGemma(&b, v, false)
		}
		b.WriteString("}<tool_call|>")
		return b.String()
	case GLM:
		b.WriteString("<tool_call>" + name + "\n")
		for _, k := range keys {
			fmt.Fprintf(&b, "<arg_key>%s</arg_key>\n<arg_value>%s</arg_value>\n", k, bareValue(obj[k]))
		}
		b.WriteString("</tool_call>")
		return b.String()
	}
	fmt.Fprintf(&b, "<tool_call>\n<function=%s>\n", name)
	for _, k := range keys {
		fmt.Fprintf(&b, "<parameter=%s>\n%s\n</parameter>\n", k, bareValue(obj[k]))
	}
	b.WriteString("</function>\n</tool_call>")
	return b.String()
}

// bareValue writes a string bare and everything else as JSON, as Qwen's and GLM's templates do.
func bareValue(v json.RawMessage) string {
	var str string
	if json.Unmarshal(v, &str) == nil {
		return str
	}
	return string(v)
}
