// Package agentfile reads agent definitions from YAML: which model or endpoint, the system prompt, the tools and
// MCP servers, and the loop's limits. It validates strictly (unknown keys, conflicting or missing settings are
// errors naming the file, the line and the fix) and resolves relative paths against the file's folder. It does
// not start anything.
package agentfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/visorhq/visor/internal/redact"
	"github.com/visorhq/visor/internal/safefile"
	"github.com/visorhq/visor/tools"
)

// Spec is one agent.
type Spec struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	Model       Model  `yaml:"model"`
	System      string `yaml:"system"`
	// Prompt is a default user message, used when the command line gives none.
	Prompt string `yaml:"prompt"`

	Tools      []string `yaml:"tools"`
	Workspace  string   `yaml:"workspace"`
	AllowFetch bool     `yaml:"allow_fetch"`
	AllowShell []string `yaml:"allow_shell"`
	// AllowShellLaunchers are programs run_shell may start although they run other programs (sh, python, env,
	// find -exec…): naming one here allows the model to run anything.
	AllowShellLaunchers []string `yaml:"allow_shell_launchers"`
	// AllowProtected lists protected names (.git, .vscode, .envrc…) the tools may write anyway.
	AllowProtected []string    `yaml:"allow_protected"`
	MCP            []MCPServer `yaml:"mcp"`

	ToolMode    string   `yaml:"tool_mode"`   // native (default when the server's template has tools), raw, auto
	ToolFormat  string   `yaml:"tool_format"` // hermes (default), qwen-xml
	ToolChoice  string   `yaml:"tool_choice"` // auto (default), required, none
	MaxSteps    int      `yaml:"max_steps"`
	MaxTokens   int      `yaml:"max_tokens"`
	Temperature *float32 `yaml:"temperature"`

	// Path is the file the spec came from; relative paths inside it were resolved against its folder.
	Path string `yaml:"-"`
}

// Model says where the model runs: a GGUF file visor serves with llama-server, or a running endpoint.
type Model struct {
	Path       string   `yaml:"path"`
	MMProj     string   `yaml:"mmproj"`
	Endpoint   string   `yaml:"endpoint"`
	APIKeyEnv  string   `yaml:"api_key_env"` // name of the environment variable holding the key; keys never live in files
	Ctx        int      `yaml:"ctx"`
	Parallel   int      `yaml:"parallel"`
	Plan       string   `yaml:"plan"` // auto (default) or off
	GPU        string   `yaml:"gpu"`  // auto, an index, or a size such as 24GiB
	CacheType  string   `yaml:"cache_type"`
	ServerArgs []string `yaml:"server_args"`
}

// MCPServer is an MCP server whose tools the agent may call: a command run over stdio, or a URL.
type MCPServer struct {
	Name    string            `yaml:"name"`
	Command []string          `yaml:"command"`
	Env     map[string]string `yaml:"env"`
	URL     string            `yaml:"url"`
}

// ErrInvalid is wrapped by every validation error.
var ErrInvalid = errors.New("invalid agent file")

// MaxFileSize bounds an agent file: system prompts are long, but not megabytes long.
const MaxFileSize = 1 << 20

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Load reads and validates the agent file at path, and checks what it names on disk: the workspace folder, the
// model and projector files. Only a regular file is read (a FIFO or a device is refused, not waited on), and at
// most MaxFileSize bytes.
func Load(path string) (Spec, error) {
	b, err := safefile.ReadFile(path, MaxFileSize)
	if err != nil {
		return Spec{}, fmt.Errorf("agent file: %w", err)
	}
	s, err := Parse(b, path)
	if err != nil {
		return Spec{}, err
	}
	if err := s.checkDisk(b); err != nil {
		return Spec{}, err
	}
	return s, nil
}

// Parse validates data as the agent file named path (used for messages and to resolve relative paths). It reads
// nothing from disk; Load also checks the files and folders the spec names.
func Parse(data []byte, path string) (Spec, error) {
	var s Spec
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		if errors.Is(err, io.EOF) {
			return Spec{}, errEmpty(path)
		}
		return Spec{}, yamlError(path, data, err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil && !emptyDoc(&next):
		return Spec{}, fmt.Errorf("%w: %s:%d: a second YAML document starts here; an agent file holds one agent: "+
			"put each agent in its own file, or remove the `---`", ErrInvalid, path, next.Line)
	case err != nil && !errors.Is(err, io.EOF):
		return Spec{}, yamlError(path, data, err)
	}
	var doc yaml.Node
	_ = yaml.Unmarshal(data, &doc) // decoded above already; this pass only gives line numbers
	if emptyDoc(&doc) {
		return Spec{}, errEmpty(path)
	}
	s.Path = path
	if err := s.check(lines{&doc}); err != nil {
		return Spec{}, err
	}
	dir := filepath.Dir(path)
	s.Model.Path = resolve(dir, s.Model.Path)
	s.Model.MMProj = resolve(dir, s.Model.MMProj)
	if s.Workspace == "" {
		s.Workspace = "."
	}
	s.Workspace = resolve(dir, s.Workspace)
	return s, nil
}

func errEmpty(path string) error {
	return fmt.Errorf("%w: %s is empty: an agent file needs at least `name: my-agent` and a model "+
		"(`model: {path: model.gguf}` or `model: {endpoint: http://host:port}`)", ErrInvalid, path)
}

// emptyDoc reports a document with nothing in it (only comments, or a bare `---`).
func emptyDoc(n *yaml.Node) bool {
	if n.Kind == 0 {
		return true
	}
	if n.Kind == yaml.DocumentNode {
		return len(n.Content) == 0 || emptyDoc(n.Content[0])
	}
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null" && (n.Value == "" || n.Value == "~" || n.Value == "null")
}

var (
	yamlLineRE   = regexp.MustCompile(`^line (\d+): (.*)$`)
	unknownKeyRE = regexp.MustCompile(`^field (\S+) not found in type agentfile\.(\w+)$`)
	wrongTypeRE  = regexp.MustCompile("^cannot unmarshal !!(\\w+) (?:`(.*)` )?into (\\S+)$")
)

// typeFix says what a value of Go type t is written as.
var typeFix = map[string]string{
	"int": "a whole number", "float32": "a number", "bool": "true or false", "string": "text",
	"[]string": "a list, e.g. [a, b]", "[]agentfile.MCPServer": "a list of servers, e.g. [{name: fs, command: [mcp-fs]}]",
	"agentfile.Model": "a mapping, e.g. {path: model.gguf}", "map[string]string": "a mapping, e.g. {KEY: value}",
}

// yamlError turns yaml.v3's messages into path:line: form, one per problem, with the fix for an unknown key
// and for a value of the wrong type.
func yamlError(path string, data []byte, err error) error {
	var msgs []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	for i, m := range msgs {
		line := ""
		if g := yamlLineRE.FindStringSubmatch(m); g != nil {
			line, m = g[1], g[2]
		}
		if g := wrongTypeRE.FindStringSubmatch(m); g != nil && line != "" {
			what := typeFix[g[3]]
			if what == "" {
				what = g[3]
			}
			key := keyAtLine(data, line)
			val := g[2]
			if val == "" {
				val = "a " + map[string]string{"seq": "list", "map": "mapping"}[g[1]]
			} else {
				val = "`" + val + "`"
			}
			m = fmt.Sprintf("%s is %s: write %s", key, val, what)
			if key == "" {
				m = fmt.Sprintf("%s: write %s", val, what)
			}
		}
		if g := unknownKeyRE.FindStringSubmatch(m); g != nil {
			m = fmt.Sprintf("unknown key %s", g[1])
			if near := closest(g[1], knownKeys[g[2]]); near != "" {
				m += fmt.Sprintf(": did you mean %s?", near)
			} else if keys := knownKeys[g[2]]; len(keys) > 0 {
				m += fmt.Sprintf(": use one of %s", strings.Join(keys, ", "))
			}
		}
		if line != "" {
			msgs[i] = fmt.Sprintf("%s:%s: %s", path, line, m)
		} else {
			msgs[i] = fmt.Sprintf("%s: %s", path, m)
		}
	}
	return fmt.Errorf("%w: %s", ErrInvalid, strings.Join(msgs, "; "))
}

// keyAtLine returns the dotted key whose value starts on line (as yaml.v3 reports it), or "".
func keyAtLine(data []byte, line string) string {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return ""
	}
	var walk func(n *yaml.Node, prefix string) string
	walk = func(n *yaml.Node, prefix string) string {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				name := k.Value
				if prefix != "" {
					name = prefix + "." + name
				}
				if fmt.Sprint(v.Line) == line && v.Kind == yaml.ScalarNode || fmt.Sprint(k.Line) == line && v.Kind != yaml.ScalarNode {
					return name
				}
				if r := walk(v, name); r != "" {
					return r
				}
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				if r := walk(c, fmt.Sprintf("%s[%d]", prefix, i)); r != "" {
					return r
				}
			}
		}
		return ""
	}
	return walk(doc.Content[0], "")
}

// knownKeys are the keys of each struct the file decodes into, for suggestions.
var knownKeys = map[string][]string{
	"Spec":      yamlKeys(reflect.TypeFor[Spec]()),
	"Model":     yamlKeys(reflect.TypeFor[Model]()),
	"MCPServer": yamlKeys(reflect.TypeFor[MCPServer]()),
}

func yamlKeys(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		if k, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); k != "" && k != "-" {
			out = append(out, k)
		}
	}
	return out
}

// closest returns the key within two edits of k, if there is one.
func closest(k string, keys []string) string {
	best, bestD := "", 3
	for _, c := range keys {
		if d := editDistance(k, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance counts insertions, deletions, substitutions and swaps of neighbours (stpes → steps is one).
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// lines finds where a key sits in the file, for messages.
type lines struct{ doc *yaml.Node }

// key returns the line of the key at path (strings are mapping keys, ints sequence indexes), or of its
// nearest present parent, or 0.
func (l lines) key(path ...any) int {
	n := l.doc
	if n == nil || n.Kind != yaml.DocumentNode || len(n.Content) == 0 {
		return 0
	}
	n = n.Content[0]
	line := 0
	for _, p := range path {
		switch p := p.(type) {
		case string:
			if n.Kind != yaml.MappingNode {
				return line
			}
			found := false
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == p {
					line, n, found = n.Content[i].Line, n.Content[i+1], true
					break
				}
			}
			if !found {
				return line
			}
		case int:
			if n.Kind != yaml.SequenceNode || p >= len(n.Content) {
				return line
			}
			n = n.Content[p]
			line = n.Line
		}
	}
	return line
}

// value returns the scalar text at path as written ("" when absent), so a message shows ".nan", not "NaN".
func (l lines) value(path ...any) (string, bool) {
	n := l.doc
	if n == nil || n.Kind != yaml.DocumentNode || len(n.Content) == 0 {
		return "", false
	}
	n = n.Content[0]
	for _, p := range path {
		k, ok := p.(string)
		if !ok || n.Kind != yaml.MappingNode {
			return "", false
		}
		found := false
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				n, found = n.Content[i+1], true
				break
			}
		}
		if !found {
			return "", false
		}
	}
	return n.Value, true
}

func (s *Spec) check(l lines) error {
	bad := func(line int, format string, a ...any) error {
		if line > 0 {
			return fmt.Errorf("%w: %s:%d: %s", ErrInvalid, s.Path, line, fmt.Sprintf(format, a...))
		}
		return fmt.Errorf("%w: %s: %s", ErrInvalid, s.Path, fmt.Sprintf(format, a...))
	}
	if s.Name == "" {
		return bad(l.key("name"), "name is missing: add `name: my-agent`")
	}
	if !nameRE.MatchString(s.Name) {
		return bad(l.key("name"), "name %q: use letters, digits, _ and - (at most 64)", s.Name)
	}
	m := s.Model
	switch {
	case m.Path == "" && m.Endpoint == "":
		return bad(l.key("model"), "model: give `path: model.gguf` (visor runs llama-server) or `endpoint: http://host:port` (a running server)")
	case m.Path != "" && m.Endpoint != "":
		return bad(l.key("model", "endpoint"), "model: path and endpoint are both set: keep one")
	case m.Endpoint != "" && (m.MMProj != "" || m.Ctx != 0 || len(m.ServerArgs) > 0):
		return bad(l.key("model"), "model: mmproj, ctx and server_args configure a llama-server visor starts; with endpoint they have no effect: remove them")
	case m.MMProj != "" && m.Path == "":
		return bad(l.key("model", "mmproj"), "model: mmproj needs path")
	}
	if m.Endpoint != "" {
		u, err := url.Parse(m.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad(l.key("model", "endpoint"), "model.endpoint %q: give the server's http:// or https:// URL, e.g. http://127.0.0.1:8080",
				redact.URL(m.Endpoint))
		}
	}
	if m.APIKeyEnv != "" && os.Getenv(m.APIKeyEnv) == "" {
		return bad(l.key("model", "api_key_env"), "model.api_key_env: the environment variable %s is empty: export it", m.APIKeyEnv)
	}
	if err := oneOf("model.plan", m.Plan, "auto", "off"); err != nil {
		return bad(l.key("model", "plan"), "%v", err)
	}
	if err := oneOf("tool_mode", s.ToolMode, "auto", "native", "raw"); err != nil {
		return bad(l.key("tool_mode"), "%v", err)
	}
	if err := oneOf("tool_format", s.ToolFormat, "hermes", "qwen-xml", "auto"); err != nil {
		return bad(l.key("tool_format"), "%v", err)
	}
	if err := oneOf("tool_choice", s.ToolChoice, "auto", "required", "none"); err != nil {
		return bad(l.key("tool_choice"), "%v", err)
	}
	if _, set := l.value("max_steps"); set && s.MaxSteps <= 0 {
		return bad(l.key("max_steps"), "max_steps %d: the agent needs at least 1 step; use a positive number, or remove the line for the default", s.MaxSteps)
	}
	for _, f := range []struct {
		path []any
		v    int
		fix  string
	}{
		{[]any{"max_tokens"}, s.MaxTokens, "use a positive number of tokens, or remove the line for no limit"},
		{[]any{"model", "ctx"}, m.Ctx, "use a positive number of tokens, or remove the line for the model's own"},
		{[]any{"model", "parallel"}, m.Parallel, "use a positive number of slots, or remove the line for 1"},
	} {
		if f.v < 0 {
			return bad(l.key(f.path...), "%s %d cannot be negative: %s", dotted(f.path), f.v, f.fix)
		}
	}
	if t := s.Temperature; t != nil && !(*t >= 0 && *t <= 2) { // NaN fails both comparisons
		raw, _ := l.value("temperature")
		return bad(l.key("temperature"), "temperature %s: use a number from 0 to 2 (0 is the most deterministic)", raw)
	}
	if err := (tools.BuiltinConfig{Shell: s.AllowShell, ShellLaunchers: s.AllowShellLaunchers, AllowProtected: s.AllowProtected}).Check(); err != nil {
		line := l.key("allow_shell")
		if line == 0 {
			line = l.key("allow_shell_launchers")
		}
		if strings.Contains(err.Error(), "protected") && l.key("allow_protected") > 0 {
			line = l.key("allow_protected")
		}
		return bad(line, "%v", err)
	}
	seen := map[string]bool{}
	for i, srv := range s.MCP {
		line := l.key("mcp", i)
		switch {
		case !nameRE.MatchString(srv.Name):
			return bad(line, "mcp[%d]: name %q: use letters, digits, _ and - (it prefixes the server's tool names)", i, srv.Name)
		case seen[srv.Name]:
			return bad(line, "mcp[%d]: name %q is used twice", i, srv.Name)
		case len(srv.Command) == 0 && srv.URL == "":
			return bad(line, "mcp %s: give `command: [program, args…]` (stdio) or `url: http://…` (streamable HTTP)", srv.Name)
		case len(srv.Command) > 0 && srv.URL != "":
			return bad(line, "mcp %s: command and url are both set: keep one", srv.Name)
		case srv.URL != "" && !strings.HasPrefix(srv.URL, "http://") && !strings.HasPrefix(srv.URL, "https://"):
			return bad(line, "mcp %s: url %q is not http(s): give the server's streamable HTTP endpoint", srv.Name, redact.URL(srv.URL))
		}
		seen[srv.Name] = true
	}
	return nil
}

// checkDisk checks the folder and files the spec names, with the line that names each.
func (s *Spec) checkDisk(data []byte) error {
	var doc yaml.Node
	_ = yaml.Unmarshal(data, &doc)
	l := lines{&doc}
	bad := func(line int, format string, a ...any) error {
		if line > 0 {
			return fmt.Errorf("%w: %s:%d: %s", ErrInvalid, s.Path, line, fmt.Sprintf(format, a...))
		}
		return fmt.Errorf("%w: %s: %s", ErrInvalid, s.Path, fmt.Sprintf(format, a...))
	}
	st, err := os.Stat(s.Workspace)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return bad(l.key("workspace"), "workspace %s does not exist: create the folder, or fix the path (relative paths are relative to the agent file)", s.Workspace)
	case err != nil:
		return bad(l.key("workspace"), "workspace: %v", err)
	case !st.IsDir():
		return bad(l.key("workspace"), "workspace %s is not a folder: give the folder the tools may use", s.Workspace)
	}
	for _, f := range []struct{ key, path string }{{"path", s.Model.Path}, {"mmproj", s.Model.MMProj}} {
		if f.path == "" {
			continue
		}
		if _, err := safefile.Check(f.path); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return bad(l.key("model", f.key), "model.%s %s does not exist: fix the path (relative paths are relative to the agent file)", f.key, f.path)
			}
			return bad(l.key("model", f.key), "model.%s: %v", f.key, err)
		}
	}
	return nil
}

func dotted(path []any) string {
	parts := make([]string, len(path))
	for i, p := range path {
		parts[i] = fmt.Sprint(p)
	}
	return strings.Join(parts, ".")
}

func oneOf(field, v string, allowed ...string) error {
	if v == "" {
		return nil
	}
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return fmt.Errorf("%s %q: use one of %s", field, v, strings.Join(allowed, ", "))
}

// resolve makes p absolute against dir, expanding a leading ~/.
func resolve(dir, p string) string {
	if p == "" {
		return ""
	}
	if strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			p = filepath.Join(home, p[2:])
		}
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	return filepath.Clean(p)
}
