// Package config reads visor's user config file, $XDG_CONFIG_HOME/visor/config.yaml (~/.config/visor/config.yaml):
// the default and named models (path, projector, engine flags), the tools and the workspace, so they are not
// repeated on every command. It validates like agent files (`file:line:col: problem — fix`) and publishes its
// JSON Schema (Schema). It does not apply the settings: command-line flags override them in cmd/visor.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/visorhq/visor/agent/agentfile"
	"github.com/visorhq/visor/internal/safefile"
	"github.com/visorhq/visor/internal/userpath"
	"github.com/visorhq/visor/internal/yamlcheck"
)

// Config is the file's content.
type Config struct {
	// Model names the entry of Models used when no --model is given.
	Model  string           `yaml:"model" jsonschema_description:"The model used when no --model is given: a name from models."`
	Models map[string]Model `yaml:"models" jsonschema_description:"Named models; --model NAME picks one."`

	Tools      []string `yaml:"tools" jsonschema:"uniqueItems=true" jsonschema_description:"Built-in tools enabled when no --tools is given (e.g. [list_dir, read_file])."`
	Workspace  string   `yaml:"workspace" jsonschema_description:"Folder the file tools are confined to when no --workspace is given (~/ expands)."`
	AllowFetch bool     `yaml:"allow_fetch" jsonschema_description:"Let fetch_url reach the network."`
	AllowShell []string `yaml:"allow_shell" jsonschema_description:"Commands run_shell may run."`
	DB         string   `yaml:"db" jsonschema_description:"Conversation database (default ~/.local/share/visor/visor.db)."`
	// ImageWindow is the image window of every command's sessions (an agent file's own wins).
	ImageWindow *agentfile.ImageWindow `yaml:"image_window" jsonschema_description:"Which images of the history each request re-sends (the stored conversation keeps them all); left out, visor chooses from the engine's measured costs."`

	// Path is the file the config came from; empty when there was none.
	Path string `yaml:"-"`
}

// Model is one named model: the same settings as an agent file's model.
type Model = agentfile.Model

// ErrInvalid is wrapped by every validation error.
var ErrInvalid = errors.New("invalid config file")

// DefaultPath is where the config file lives: $XDG_CONFIG_HOME/visor/config.yaml, else ~/.config/visor/config.yaml.
func DefaultPath() (string, error) {
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "visor", "config.yaml"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("config: find the home folder: %w", err)
	}
	return filepath.Join(home, ".config", "visor", "config.yaml"), nil
}

// MaxFileSize bounds the config file: a few named models and settings, not megabytes.
const MaxFileSize = 1 << 20

// Load reads the config at path; a missing file is an empty config, not an error. Anything but a regular file (a
// FIFO, a device) is refused before it is read, so a wrong path cannot block every command (internal/safefile).
func Load(path string) (Config, error) {
	b, err := safefile.ReadFile(path, MaxFileSize)
	if errors.Is(err, fs.ErrNotExist) {
		return Config{}, nil
	}
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return Parse(b, path)
}

// Parse validates data as the config file named path; relative paths resolve against its folder.
func Parse(data []byte, path string) (Config, error) {
	var c Config
	if strings.TrimSpace(string(data)) == "" {
		c.Path = path
		return c, nil // an empty config is a config with nothing set
	}
	root, err := yamlcheck.Decode(data, path, &c)
	if err != nil {
		var p *yamlcheck.Problem
		if errors.As(err, &p) {
			p.Err = ErrInvalid
			return Config{}, p
		}
		return Config{}, fmt.Errorf("%w %s: %w", ErrInvalid, path, err)
	}
	c.Path = path
	if err := c.check(root); err != nil {
		return Config{}, err
	}
	dir := filepath.Dir(path)
	for name, m := range c.Models {
		m.Path, m.MMProj = userpath.Resolve(dir, m.Path), userpath.Resolve(dir, m.MMProj)
		c.Models[name] = m
	}
	if c.Workspace != "" {
		c.Workspace = userpath.Resolve(dir, c.Workspace)
	}
	if c.DB != "" {
		c.DB = userpath.Resolve(dir, c.DB)
	}
	return c, nil
}

func (c *Config) check(root *yaml.Node) error {
	bad := func(field, problem, fix string) error {
		line, col := yamlcheck.Locate(root, field)
		return &yamlcheck.Problem{File: c.Path, Line: line, Col: col, Problem: problem, Fix: fix, Err: ErrInvalid}
	}
	if c.Model != "" {
		if _, ok := c.Models[c.Model]; !ok {
			return bad("model", fmt.Sprintf("model %q is not one of the models below", c.Model), "add it under `models:` or use one of: "+strings.Join(c.Names(), ", "))
		}
	}
	if problem, fix := c.ImageWindow.Problem(); problem != "" {
		return bad("image_window", problem, fix)
	}
	for _, name := range c.Names() {
		m := c.Models[name]
		at := "models." + name
		switch {
		case m.Path == "" && m.Endpoint == "":
			return bad(at, fmt.Sprintf("model %s has neither path nor endpoint", name), "add `path: model.gguf` (visor runs llama-server) or `endpoint: http://host:port`")
		case m.Path != "" && m.Endpoint != "":
			return bad(at+".endpoint", fmt.Sprintf("model %s: path and endpoint are both set", name), "keep one")
		case m.MMProj != "" && m.Path == "":
			return bad(at+".mmproj", fmt.Sprintf("model %s: mmproj needs path", name), "add `path: model.gguf`, or remove mmproj")
		case m.Plan != "" && m.Plan != "auto" && m.Plan != "off":
			return bad(at+".plan", fmt.Sprintf("model %s: plan %q", name, m.Plan), "use auto or off")
		case m.Ctx < 0 || m.Parallel < 0:
			return bad(at, fmt.Sprintf("model %s: ctx and parallel cannot be negative", name), "use 0 for the default")
		}
	}
	return nil
}

// Names lists the named models in order.
func (c Config) Names() []string {
	out := make([]string, 0, len(c.Models))
	for n := range c.Models {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Schema is the config file's JSON Schema, generated from Config (published as schema/config.schema.json).
func Schema() ([]byte, error) {
	return yamlcheck.Schema(&Config{}, SchemaID, "visor config file")
}

// SchemaID is the published schema's $id.
const SchemaID = "https://github.com/visorhq/visor/schema/config.schema.json"
