package config

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/visorhq/visor/engine/launch"
	"github.com/visorhq/visor/internal/typo"
	"github.com/visorhq/visor/tools/toolset"
)

// Precedence, from strongest: the command line (a flag, or its environment variable), an agent file, a resumed
// session's stored model, the config file, the defaults.

// Set is the settings the command line gave, by flag name.
type Set map[string]bool

// FlagsSet is the flags given on the command line, or through their environment variable (VISOR_MODEL is as
// deliberate as --model).
func FlagsSet(fs *flag.FlagSet) Set {
	set := Set{}
	if fs == nil {
		return set
	}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for flagName, env := range map[string]string{"model": "VISOR_MODEL", "mmproj": "VISOR_MMPROJ", "endpoint": "VISOR_ENDPOINT"} {
		if os.Getenv(env) != "" {
			set[flagName] = true
		}
	}
	return set
}

// Resolve reads the config file at path, or the default one when path is empty (a missing default is an empty
// config, and so is a machine without a home folder).
func Resolve(path string) (Config, error) {
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return Config{}, fmt.Errorf("--config: %w", err)
		}
		return Load(path)
	}
	p, err := DefaultPath()
	if err != nil {
		return Config{}, nil
	}
	return Load(p)
}

// ApplyModel sets the engine from a model description (a config entry, an agent file's model, a stored session's,
// a gateway entry), leaving the settings the command line gave alone. It is the one place a description becomes
// an engine spec.
func ApplyModel(s *launch.Spec, m Model, set Set) {
	if !set["model"] || m.Path != "" || m.Endpoint != "" {
		s.Model, s.Endpoint = m.Path, m.Endpoint
	}
	str := func(name string, dst *string, v string) {
		if !set[name] && v != "" {
			*dst = v
		}
	}
	str("mmproj", &s.Projector, m.MMProj)
	str("plan", &s.Plan, m.Plan)
	str("gpu", &s.GPU, m.GPU)
	str("cache-type", &s.KVType, m.CacheType)
	str("flash-attn", &s.FlashAttn, m.FlashAttn)
	if !set["api-key"] && m.APIKeyEnv != "" {
		s.APIKey = os.Getenv(m.APIKeyEnv)
	}
	if !set["ctx"] && m.Ctx != 0 {
		s.Ctx = m.Ctx
	}
	if !set["parallel"] && m.Parallel != 0 {
		s.Slots = m.Parallel
	}
	if !set["server-arg"] && len(m.ServerArgs) > 0 {
		s.ExtraArgs = append(launch.EnvServerArgs(), m.ServerArgs...)
	}
}

// UnsetKey is the error for the model called name when its api_key_env names a variable that is not set and the
// command line gave no --api-key, as agent files refuse it: running without the key would fail later, at the
// endpoint, with a 401 that does not say which variable was missing. nil otherwise.
func UnsetKey(name string, m Model, set Set) error {
	if m.APIKeyEnv == "" || set["api-key"] || os.Getenv(m.APIKeyEnv) != "" {
		return nil
	}
	return fmt.Errorf("model %s: api_key_env %s is not set: export %s=KEY first (keys never live in files), or pass --api-key",
		name, m.APIKeyEnv, m.APIKeyEnv)
}

// profile is what a session stores about its model (memory.Session.EngineProfile), enough to resume it with the
// same model and engine settings when no model is given. Its JSON is stored: fields keep their names.
type profile struct {
	Name string `json:"name,omitempty"`
	Model
}

// Profile is the stored form of an engine spec and its config name. Credentials never go into the database: an
// endpoint with them is left out, and such a session is resumed with --endpoint.
func Profile(name string, s launch.Spec) string {
	endpoint := s.Endpoint
	if u, err := url.Parse(endpoint); err != nil || u.User != nil {
		endpoint = ""
	}
	p := profile{Name: name, Model: Model{Path: s.Model, MMProj: s.Projector, Endpoint: endpoint, Ctx: s.Ctx,
		Parallel: s.Slots, Plan: s.Plan, GPU: s.GPU, CacheType: s.KVType, FlashAttn: s.FlashAttn, ServerArgs: s.ExtraArgs}}
	b, _ := json.Marshal(p)
	return string(b)
}

// Label is what the session list and status lines show as the model: the config's name for it, or the file's
// name, or the (redacted) endpoint.
func Label(name string, s launch.Spec) string {
	if name != "" {
		return name
	}
	return s.Label()
}

// ParseProfile reads a stored profile; ok is false for sessions stored before they remembered their model.
func ParseProfile(stored string) (name string, m Model, ok bool) {
	var p profile
	if stored == "" || json.Unmarshal([]byte(stored), &p) != nil || (p.Path == "" && p.Endpoint == "") {
		return "", Model{}, false
	}
	return p.Name, p.Model, true
}

// Settings are what the config file fills for a command that runs an agent.
type Settings struct {
	Engine    *launch.Spec
	ModelName *string // the config's name for the model, when it came from there
	Tools     *toolset.Options
	DB        *string
	// NoStore is --no-store: the config's session_search, which needs the database, is left out then.
	NoStore bool
}

// Fill fills what the command line left unset: the entry --model names (when no such file exists), and unless
// the settings come from an agent file (whose tools and workspace are the agent's own) the tools, workspace and
// database. The default model comes later (FillDefaultModel), after a resumed session's.
func (c Config) Fill(s Settings, set Set, agentFile bool) {
	if set["model"] {
		if m, ok := c.Models[s.Engine.Model]; ok && !fileExists(s.Engine.Model) {
			*s.ModelName = s.Engine.Model
			ApplyModel(s.Engine, m, set)
		}
	}
	if agentFile {
		return
	}
	if !set["tools"] && len(c.Tools) > 0 {
		s.Tools.Names = append([]string(nil), c.Tools...)
		if s.NoStore {
			// The config's list serves every command: --no-store once refused it whole because of this one.
			s.Tools.Names = slices.DeleteFunc(s.Tools.Names, toolset.NeedsStore)
		}
	}
	if !set["workspace"] && c.Workspace != "" {
		s.Tools.Workspace = c.Workspace
	}
	if !set["allow-fetch"] && c.AllowFetch {
		s.Tools.AllowFetch = true
	}
	if !set["allow-shell"] && len(c.AllowShell) > 0 {
		s.Tools.Shell = append([]string(nil), c.AllowShell...)
	}
	if !set["db"] && c.DB != "" {
		*s.DB = c.DB
	}
}

// UnknownModel is the error for a --model that is neither a file nor a model the config file names, when it
// looks meant as a name (no folder and no .gguf in it, or close to one of the names): the file check alone
// would say only "no such file: give the path of a GGUF model file", hiding that names work at all. nil
// otherwise.
func (c Config) UnknownModel(model string, set Set) error {
	if !set["model"] || model == "" || len(c.Models) == 0 || fileExists(model) {
		return nil
	}
	if _, ok := c.Models[model]; ok {
		return nil
	}
	names := c.Names()
	near := typo.Nearest(model, names)
	if near == "" && (strings.ContainsRune(model, filepath.Separator) || strings.HasSuffix(model, ".gguf")) {
		return nil
	}
	hint := ""
	if near != "" {
		hint = fmt.Sprintf(" (did you mean %s?)", near)
	}
	return fmt.Errorf("--model %s: no such file, nor a model named in %s%s: give a GGUF file or one of %s",
		model, c.Path, hint, strings.Join(names, ", "))
}

// FillDefaultModel uses the config's default model when neither the command line nor a resumed session named
// one; it returns where the model was named then ("the default model "qwen" of FILE", for errors), else "".
func (c Config) FillDefaultModel(s Settings, set Set) string {
	if s.Engine.Model != "" || s.Engine.Endpoint != "" || c.Model == "" {
		return ""
	}
	*s.ModelName = c.Model
	ApplyModel(s.Engine, c.Models[c.Model], set)
	origin := fmt.Sprintf("the default model %q of %s", c.Model, c.Path)
	// A newcomer's copy of examples/config.yaml names a file they lack, and a model they have (tiny).
	if others := slices.DeleteFunc(c.Names(), func(n string) bool { return n == c.Model }); len(others) > 0 {
		origin += fmt.Sprintf(" (it also names %s)", strings.Join(others, ", "))
	}
	return origin
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
