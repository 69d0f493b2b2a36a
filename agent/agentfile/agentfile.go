// Package agentfile reads agent definitions from YAML: which model or endpoint, the system prompt, the tools and
// MCP servers, and the loop's limits. It validates strictly (unknown keys, conflicting or missing settings are
// errors naming the file, the line and the fix) and resolves relative paths against the file's folder. It does
// not start anything.
package agentfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// Spec is one agent.
type Spec struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	Model       Model  `yaml:"model"`
	System      string `yaml:"system"`
	// Prompt is a default user message, used when the command line gives none.
	Prompt string `yaml:"prompt"`

	Tools      []string    `yaml:"tools"`
	Workspace  string      `yaml:"workspace"`
	AllowFetch bool        `yaml:"allow_fetch"`
	AllowShell []string    `yaml:"allow_shell"`
	MCP        []MCPServer `yaml:"mcp"`

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

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Load reads and validates the agent file at path.
func Load(path string) (Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Spec{}, fmt.Errorf("agent file: %w", err)
	}
	return Parse(b, path)
}

// Parse validates data as the agent file named path (used for messages and to resolve relative paths).
func Parse(data []byte, path string) (Spec, error) {
	var s Spec
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		return Spec{}, fmt.Errorf("%w %s: %s", ErrInvalid, path, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	s.Path = path
	if err := s.check(); err != nil {
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

func (s *Spec) check() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w %s: %s", ErrInvalid, s.Path, fmt.Sprintf(format, a...))
	}
	if s.Name == "" {
		return bad("name is missing: add `name: my-agent`")
	}
	if !nameRE.MatchString(s.Name) {
		return bad("name %q: use letters, digits, _ and - (at most 64)", s.Name)
	}
	m := s.Model
	switch {
	case m.Path == "" && m.Endpoint == "":
		return bad("model: give `path: model.gguf` (visor runs llama-server) or `endpoint: http://host:port` (a running server)")
	case m.Path != "" && m.Endpoint != "":
		return bad("model: path and endpoint are both set: keep one")
	case m.Endpoint != "" && (m.MMProj != "" || m.Ctx != 0 || len(m.ServerArgs) > 0):
		return bad("model: mmproj, ctx and server_args configure a llama-server visor starts; with endpoint they have no effect: remove them")
	case m.MMProj != "" && m.Path == "":
		return bad("model: mmproj needs path")
	}
	if m.APIKeyEnv != "" && os.Getenv(m.APIKeyEnv) == "" {
		return bad("model.api_key_env: the environment variable %s is empty: export it", m.APIKeyEnv)
	}
	if err := oneOf("model.plan", m.Plan, "auto", "off"); err != nil {
		return bad("%v", err)
	}
	if err := oneOf("tool_mode", s.ToolMode, "auto", "native", "raw"); err != nil {
		return bad("%v", err)
	}
	if err := oneOf("tool_format", s.ToolFormat, "hermes", "qwen-xml", "auto"); err != nil {
		return bad("%v", err)
	}
	if err := oneOf("tool_choice", s.ToolChoice, "auto", "required", "none"); err != nil {
		return bad("%v", err)
	}
	if s.MaxSteps < 0 || s.MaxTokens < 0 || m.Ctx < 0 || m.Parallel < 0 {
		return bad("max_steps, max_tokens, model.ctx and model.parallel cannot be negative")
	}
	if t := s.Temperature; t != nil && (*t < 0 || *t > 2) {
		return bad("temperature %.2f: use a value from 0 to 2", *t)
	}
	seen := map[string]bool{}
	for i, srv := range s.MCP {
		switch {
		case !nameRE.MatchString(srv.Name):
			return bad("mcp[%d]: name %q: use letters, digits, _ and - (it prefixes the server's tool names)", i, srv.Name)
		case seen[srv.Name]:
			return bad("mcp[%d]: name %q is used twice", i, srv.Name)
		case len(srv.Command) == 0 && srv.URL == "":
			return bad("mcp %s: give `command: [program, args…]` (stdio) or `url: http://…` (streamable HTTP)", srv.Name)
		case len(srv.Command) > 0 && srv.URL != "":
			return bad("mcp %s: command and url are both set: keep one", srv.Name)
		}
		seen[srv.Name] = true
	}
	return nil
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
