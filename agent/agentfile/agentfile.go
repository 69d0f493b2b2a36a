// Package agentfile reads agent definitions from YAML: which model or endpoint, the system prompt, the tools and
// MCP servers, and the loop's limits. It validates strictly (unknown keys, conflicting or missing settings are
// errors in the form `file:line:col: problem — fix`), publishes its JSON Schema (Schema, generated from Spec),
// and resolves relative paths against the file's folder. Load also takes the steps' images through the image
// policy (package images), so a bad one is refused with its line before any model loads. A file may leave the model out: the command line or
// the config file then names it. It does not start anything.
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
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/visorhq/visor/images"
	"github.com/visorhq/visor/internal/redact"
	"github.com/visorhq/visor/internal/safefile"
	"github.com/visorhq/visor/internal/userpath"
	"github.com/visorhq/visor/internal/yamlcheck"
	"github.com/visorhq/visor/tools/mcp"
	"github.com/visorhq/visor/tools/toolset"
)

// Spec is one agent.
type Spec struct {
	Name        string `yaml:"name" jsonschema:"required,pattern=^[a-zA-Z0-9_-]+$,maxLength=64" jsonschema_description:"The agent's name: letters, digits, _ and - (sessions are filed under it)."`
	Description string `yaml:"description" jsonschema_description:"What the agent is for, for people reading the file."`
	Model       Model  `yaml:"model" jsonschema_description:"Where the model runs: path (visor starts llama-server) or endpoint (a running server). Left out, visor run takes --model or the config file's default."`
	System      string `yaml:"system" jsonschema_description:"The system prompt."`
	// Prompt is a default user message, used when the command line gives none.
	Prompt string `yaml:"prompt" jsonschema_description:"The user message when the command line gives none."`
	// Steps are user messages sent one after another in one session, when the command line gives no prompt.
	Steps []Step `yaml:"steps" jsonschema_description:"User messages sent one after another in one session when the command line gives no prompt; each next step's images are evaluated ahead."`

	Tools      []string `yaml:"tools" jsonschema:"uniqueItems=true" jsonschema_description:"Built-in tools: list_dir, read_file, search_files, view_image, write_file, fetch_url, run_shell, session_search."`
	Workspace  string   `yaml:"workspace" jsonschema_description:"Folder the file tools are confined to, relative to this file (default: the file's folder)."`
	AllowFetch bool     `yaml:"allow_fetch" jsonschema_description:"Let fetch_url reach the network."`
	AllowShell []string `yaml:"allow_shell" jsonschema_description:"Program names run_shell may run; run_shell is off when empty."`
	// AllowShellLaunchers are programs run_shell may start although they run other programs (sh, python, env,
	// find -exec…): naming one here allows the model to run anything.
	AllowShellLaunchers []string `yaml:"allow_shell_launchers" jsonschema_description:"Programs run_shell may run although they run other programs (sh, python, env…): allows anything."`
	// AllowProtected lists protected names (.git, .vscode, .envrc…) the tools may write anyway.
	AllowProtected []string    `yaml:"allow_protected" jsonschema_description:"Protected names (.git, .vscode, .envrc…) the tools may write anyway."`
	MCP            []MCPServer `yaml:"mcp" jsonschema_description:"MCP servers whose tools the agent may call, named name__tool."`

	ToolMode    string   `yaml:"tool_mode" jsonschema:"enum=auto,enum=native,enum=raw" jsonschema_description:"native: the server's chat template renders tools (default when it can); raw: visor renders the prompt and parses calls."`
	ToolFormat  string   `yaml:"tool_format" jsonschema:"enum=hermes,enum=qwen-xml,enum=auto" jsonschema_description:"Tool-call syntax in raw mode (default hermes)."`
	ToolChoice  string   `yaml:"tool_choice" jsonschema:"enum=auto,enum=required,enum=none" jsonschema_description:"Whether the model may, must or must not call tools (default auto)."`
	MaxSteps    int      `yaml:"max_steps" jsonschema:"minimum=1" jsonschema_description:"Most model turns per message (default 8)."`
	MaxTokens   int      `yaml:"max_tokens" jsonschema:"minimum=0" jsonschema_description:"Most tokens per model turn (0: the server's default)."`
	Temperature *float32 `yaml:"temperature" jsonschema:"minimum=0,maximum=2" jsonschema_description:"Sampling temperature, 0 to 2."`
	// ImageWindow bounds the images each request re-sends; nil lets the cost model choose.
	ImageWindow *ImageWindow `yaml:"image_window" jsonschema_description:"Which images of the history each request re-sends (the stored conversation keeps them all); left out, visor chooses from the engine's measured costs."`

	// Path is the file the spec came from; relative paths inside it were resolved against its folder.
	Path string `yaml:"-"`
}

// Model says where the model runs: a GGUF file visor serves with llama-server, or a running endpoint.
type Model struct {
	Path       string   `yaml:"path" jsonschema_description:"GGUF model file visor serves with llama-server (relative to the file; ~/ expands)."`
	MMProj     string   `yaml:"mmproj" jsonschema_description:"Vision projector GGUF for path."`
	Endpoint   string   `yaml:"endpoint" jsonschema:"format=uri" jsonschema_description:"A running OpenAI-compatible server (http:// or https://) instead of path."`
	APIKeyEnv  string   `yaml:"api_key_env" jsonschema_description:"Name of the environment variable holding the endpoint's API key (keys never live in files)."`
	Ctx        int      `yaml:"ctx" jsonschema:"minimum=0" jsonschema_description:"Context size for llama-server (0: the model's default)."`
	Parallel   int      `yaml:"parallel" jsonschema:"minimum=0" jsonschema_description:"llama-server slots (default 1)."`
	Plan       string   `yaml:"plan" jsonschema:"enum=auto,enum=off" jsonschema_description:"auto: place the model by the VRAM plan (default); off: llama-server's own defaults."`
	GPU        string   `yaml:"gpu" jsonschema_description:"GPU the plan is for: auto, a device index, or a size such as 24GiB."`
	CacheType  string   `yaml:"cache_type" jsonschema_description:"KV cache type for the plan: f16, q8_0 or q4_0."`
	FlashAttn  string   `yaml:"flash_attn" jsonschema:"enum=on,enum=off,enum=auto" jsonschema_description:"Flash attention: on, off or auto (default: on by the plan)."`
	ServerArgs []string `yaml:"server_args" jsonschema_description:"Extra llama-server arguments, one list item each."`
}

// ImageWindow is the image window: the last Keep images go out with every request, older ones are replaced in
// the request by a short stub, Batch at a time (so the prompt cache breaks once per Batch images); Off sends
// every image every time.
type ImageWindow struct {
	Keep  int  `yaml:"keep" jsonschema:"minimum=1" jsonschema_description:"The most recent images every request carries as they are."`
	Batch int  `yaml:"batch" jsonschema:"minimum=1" jsonschema_description:"Older images leave the request this many at a time (default 1)."`
	Off   bool `yaml:"off" jsonschema_description:"Send every image of the history with every request."`
}

// Problem says what is wrong with the window and how to fix it; "" when nothing is.
func (w *ImageWindow) Problem() (problem, fix string) {
	switch {
	case w == nil:
	case w.Off && (w.Keep != 0 || w.Batch != 0):
		return "image_window: off is set with keep or batch", "remove off, or keep and batch"
	case !w.Off && w.Keep < 1:
		return "image_window: keep must be 1 or more", "give the images every request carries, e.g. `keep: 3`, or `off: true`"
	case w.Batch < 0:
		return "image_window: batch cannot be negative", "give 1 or more, e.g. `batch: 4`"
	}
	return "", ""
}

// Step is one user message of Steps: its text and the images it carries.
type Step struct {
	Prompt string `yaml:"prompt" jsonschema:"required" jsonschema_description:"The step's user message."`
	// Images are file paths, resolved against the agent file's folder; Load checks each under the image policy.
	Images []string `yaml:"images" jsonschema_description:"Image files (PNG, JPEG, GIF or BMP) the message carries, relative to this file."`
}

// MCPServer is an MCP server whose tools the agent may call: a command run over stdio, or a URL.
type MCPServer struct {
	Name    string            `yaml:"name" jsonschema:"required,pattern=^[a-zA-Z0-9_-]+$,maxLength=64" jsonschema_description:"Prefix of the server's tool names."`
	Command []string          `yaml:"command" jsonschema_description:"Program and arguments of a stdio server."`
	Env     map[string]string `yaml:"env" jsonschema_description:"Extra environment for the command."`
	URL     string            `yaml:"url" jsonschema:"format=uri" jsonschema_description:"Streamable-HTTP server URL instead of command."`
	Tools   []string          `yaml:"tools" jsonschema:"uniqueItems=true" jsonschema_description:"Only these of the server's tools (its own names, without the prefix); left out, all of them. A server's whole list can take more of a small model's context than the conversation."`

	// envOrder is Env's keys as the file writes them (Parse fills it): a map forgets its order, and the server's
	// environment should read as the file does, the same on every run.
	envOrder []string
}

// ErrInvalid is wrapped by every validation error. Each problem is a *yamlcheck.Problem, printed as
// `file:line:col: problem — fix`; several (yaml.v3 reports all mistyped values at once) are joined, one a line.
var ErrInvalid = errors.New("invalid agent file")

// Schema is the JSON Schema of agent files, generated from Spec (published as schema/agent.schema.json).
func Schema() ([]byte, error) {
	return yamlcheck.Schema(&Spec{}, SchemaID, "visor agent file")
}

// SchemaID is the published schema's $id: its path in the repository, which examples reference relatively.
const SchemaID = "https://github.com/visorhq/visor/schema/agent.schema.json"

// pos is where a problem is: a 1-based line and column, or 0 for none.
type pos struct{ line, col int }

// problemAt makes the error for msg at p. Messages read "problem: fix"; the last ": " outside backticks and
// brackets splits them into the two halves of `problem — fix`.
func problemAt(path string, p pos, msg string) error {
	problem, fix := msg, ""
	tick, depth := false, 0
	for i := len(msg) - 1; i >= 0; i-- {
		switch msg[i] {
		case '`':
			tick = !tick
		case ')', ']', '}':
			depth++
		case '(', '[', '{':
			depth--
		}
		if !tick && depth == 0 && msg[i] == ':' && i+1 < len(msg) && msg[i+1] == ' ' {
			problem, fix = msg[:i], msg[i+2:]
			break
		}
	}
	return &yamlcheck.Problem{File: path, Line: p.line, Col: p.col, Problem: problem, Fix: fix, Err: ErrInvalid}
}

// MaxFileSize bounds an agent file: system prompts are long, but not megabytes long.
const MaxFileSize = 1 << 20

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Load reads and validates the agent file at path, and checks what it names on disk: the workspace folder, the
// model and projector files. Only a regular file is read (a FIFO or a device is refused, not waited on), and at
// most MaxFileSize bytes.
func Load(path string) (Spec, error) {
	b, err := safefile.ReadFile(path, MaxFileSize)
	if errors.Is(err, fs.ErrNotExist) {
		return Spec{}, fmt.Errorf("agent file %s: no such file: give the path of an agent YAML file (the examples folder has some; visor schema agent prints its keys) (%w)", path, fs.ErrNotExist)
	}
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
		return Spec{}, problemAt(path, pos{next.Line, next.Column}, "a second YAML document starts here; an agent file holds one agent: "+
			"put each agent in its own file, or remove the `---`")
	case err != nil && !errors.Is(err, io.EOF):
		return Spec{}, yamlError(path, data, err)
	}
	var doc yaml.Node
	_ = yaml.Unmarshal(data, &doc) // decoded above already; this pass only gives line numbers
	if emptyDoc(&doc) {
		return Spec{}, errEmpty(path)
	}
	s.Path = path
	for i := range s.MCP {
		s.MCP[i].envOrder = lines{&doc}.keys("mcp", i, "env")
	}
	if err := s.check(lines{&doc}); err != nil {
		return Spec{}, err
	}
	dir := filepath.Dir(path)
	s.Model.Path = userpath.Resolve(dir, s.Model.Path)
	s.Model.MMProj = userpath.Resolve(dir, s.Model.MMProj)
	if s.Workspace == "" {
		s.Workspace = "."
	}
	s.Workspace = userpath.Resolve(dir, s.Workspace)
	for i := range s.Steps {
		for j, im := range s.Steps[i].Images {
			s.Steps[i].Images[j] = userpath.Resolve(dir, im)
		}
	}
	return s, nil
}

func errEmpty(path string) error {
	return &yamlcheck.Problem{File: path, Line: 1, Col: 1, Problem: "the file is empty",
		Fix: "an agent file needs at least `name: my-agent` (and a model: `model: {path: model.gguf}`, or --model)", Err: ErrInvalid}
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
	"agentfile.Model": "a mapping, e.g. {path: model.gguf}", "[]agentfile.Step": "a list of steps, e.g. [{prompt: what changed?, images: [shot.png]}]", "map[string]string": "a mapping, e.g. {KEY: value}",
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
	var probs []error
	for _, m := range msgs {
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
		if wrongTypeRE.MatchString(m) || unknownKeyRE.MatchString(m) || strings.Contains(m, ": ") {
			// a message of the forms below, which carry their fix
		} else {
			m = "not valid YAML: " + m + ": check the indentation and quoting on this line and the one before"
		}
		if g := unknownKeyRE.FindStringSubmatch(m); g != nil {
			m = fmt.Sprintf("unknown key %s", g[1])
			if near := closest(g[1], knownKeys[g[2]]); near != "" {
				m += fmt.Sprintf(": did you mean %s?", near)
			} else if keys := knownKeys[g[2]]; len(keys) > 0 {
				m += fmt.Sprintf(": use one of %s", strings.Join(keys, ", "))
			}
		}
		p := pos{}
		if n, err := strconv.Atoi(line); err == nil {
			p = pos{n, colAtLine(data, n)}
		}
		probs = append(probs, problemAt(path, p, m))
	}
	return errors.Join(probs...)
}

// colAtLine is the column of the first key or value yaml.v3 placed on line (it reports lines only), or 1.
func colAtLine(data []byte, line int) int {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil {
		return 1
	}
	col := 0
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Line == line && n.Kind == yaml.ScalarNode && (col == 0 || n.Column < col) {
			col = n.Column
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&doc)
	return max(col, 1)
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
	"Step":      yamlKeys(reflect.TypeFor[Step]()),
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

// key returns the position of the key at path (strings are mapping keys, ints sequence indexes), or of its
// nearest present parent, or 0.
func (l lines) key(path ...any) pos {
	_, p, _ := l.find(path)
	return p
}

// keys returns the keys of the mapping at path in the file's order, or nil where there is none.
func (l lines) keys(path ...any) []string {
	n, _, ok := l.find(path)
	if !ok || n.Kind != yaml.MappingNode {
		return nil
	}
	var ks []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		ks = append(ks, n.Content[i].Value)
	}
	return ks
}

// find walks path from the document's root: the node there, the position of its key (or of the nearest present
// parent when the path stops short), and whether the whole path was found.
func (l lines) find(path []any) (*yaml.Node, pos, bool) {
	n := l.doc
	if n == nil || n.Kind != yaml.DocumentNode || len(n.Content) == 0 {
		return nil, pos{}, false
	}
	n = n.Content[0]
	line := pos{}
	for _, p := range path {
		switch p := p.(type) {
		case string:
			if n.Kind != yaml.MappingNode {
				return n, line, false
			}
			found := false
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == p {
					line, n, found = pos{n.Content[i].Line, n.Content[i].Column}, n.Content[i+1], true
					break
				}
			}
			if !found {
				return n, line, false
			}
		case int:
			if n.Kind != yaml.SequenceNode || p >= len(n.Content) {
				return n, line, false
			}
			n = n.Content[p]
			line = pos{n.Line, n.Column}
		}
	}
	return n, line, true
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
	bad := func(p pos, format string, a ...any) error {
		return problemAt(s.Path, p, fmt.Sprintf(format, a...))
	}
	if s.Name == "" {
		return bad(l.key("name"), "name is missing: add `name: my-agent`")
	}
	if !nameRE.MatchString(s.Name) {
		return bad(l.key("name"), "name %q: use letters, digits, _ and - (at most 64)", s.Name)
	}
	m := s.Model
	switch {
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
	if problem, fix := s.ImageWindow.Problem(); problem != "" {
		return bad(l.key("image_window"), "%s: %s", problem, fix)
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
	// The tools are checked by the function that builds them, so a file that validates is a file run starts.
	if err := s.ToolOptions().Check(true); err != nil {
		var p *toolset.Problem
		line := l.key("tools")
		if errors.As(err, &p) && p.Setting == "allow_shell" {
			if line = l.key("allow_shell"); line.line == 0 {
				line = l.key("allow_shell_launchers")
			}
			if strings.Contains(err.Error(), "protected") && l.key("allow_protected").line > 0 {
				line = l.key("allow_protected")
			}
		}
		return bad(line, "%v", firstError(err))
	}
	if len(s.Steps) > 0 && s.Prompt != "" {
		return bad(l.key("prompt"), "prompt and steps are both set: keep steps (its first prompt is the first message), or prompt alone")
	}
	for i, st := range s.Steps {
		if strings.TrimSpace(st.Prompt) == "" {
			return bad(l.key("steps", i), "step %d has no prompt: give each step `prompt: …` (the message it sends)", i+1)
		}
		for j, im := range st.Images {
			if strings.TrimSpace(im) == "" {
				return bad(l.key("steps", i, "images", j), "step %d: image %d is empty: give the image file's path, relative to this file", i+1, j+1)
			}
		}
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
	bad := func(p pos, format string, a ...any) error {
		return problemAt(s.Path, p, fmt.Sprintf(format, a...))
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
	// Each step's images go through the image policy now, so a bad one fails before any model loads. The
	// limits are the defaults: a front end with tighter ones checks again when it reads them.
	for i, st := range s.Steps {
		for j, im := range st.Images {
			at := l.key("steps", i, "images", j)
			if _, err := safefile.Check(im); errors.Is(err, fs.ErrNotExist) {
				return bad(at, "step %d: image %s does not exist: fix the path (relative paths are relative to the agent file)", i+1, im)
			}
			if _, err := (images.Limits{}).ReadFile(im); err != nil {
				return bad(at, "step %d: image %s: %v", i+1, im, err)
			}
		}
	}
	return nil
}

// ToolOptions are the tool settings of the file, for toolset.Open, its MCP servers included.
func (s Spec) ToolOptions() toolset.Options {
	o := toolset.Options{Names: s.Tools, Workspace: s.Workspace, AllowFetch: s.AllowFetch, Shell: s.AllowShell,
		ShellLaunchers: s.AllowShellLaunchers, AllowProtected: s.AllowProtected}
	for _, m := range s.MCP {
		sc := mcp.ServerConfig{Name: m.Name, URL: m.URL, Tools: m.Tools}
		if len(m.Command) > 0 {
			sc.Command, sc.Args = m.Command[0], m.Command[1:]
		}
		for _, k := range envKeys(m) {
			sc.Env = append(sc.Env, k+"="+m.Env[k])
		}
		o.MCP = append(o.MCP, sc)
	}
	return o
}

// envKeys are m.Env's keys in the file's order; any the file's order lacks (a YAML merge key, a spec not read by
// Parse) follow, sorted, so the order never depends on map iteration.
func envKeys(m MCPServer) []string {
	keys := make([]string, 0, len(m.Env))
	seen := make(map[string]bool, len(m.Env))
	for _, k := range m.envOrder {
		if _, ok := m.Env[k]; ok && !seen[k] {
			keys, seen[k] = append(keys, k), true
		}
	}
	rest := make([]string, 0, len(m.Env)-len(keys))
	for k := range m.Env {
		if !seen[k] {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	return append(keys, rest...)
}

// firstError is the first of joined errors: a file's problems are reported one at a time, at their line.
func firstError(err error) error {
	if j, ok := err.(interface{ Unwrap() []error }); ok && len(j.Unwrap()) > 0 {
		return firstError(j.Unwrap()[0])
	}
	return err
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
