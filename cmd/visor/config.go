package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/visorhq/visor/agent/agentfile"
	"github.com/visorhq/visor/config"
	"github.com/visorhq/visor/memory"
)

// loadConfig reads --config FILE, or the default config file when path is empty (a missing default is fine).
func loadConfig(path string) (config.Config, error) {
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return config.Config{}, fmt.Errorf("--config: %w", err)
		}
		return config.Load(path)
	}
	p, err := config.DefaultPath()
	if err != nil {
		return config.Config{}, nil // no home folder: no config, as if the file were missing
	}
	return config.Load(p)
}

// explicit reports the flags given on the command line, or through their environment variable (VISOR_MODEL is
// as deliberate as --model).
func explicit(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
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

// applyConfig fills what the command line left unset from the config file: the entry --model names, tools,
// workspace and database (the default model comes later, in defaultModel, after a resumed session's). Flags
// always win.
func (t *turn) applyConfig(cfg config.Config) error {
	set := explicit(t.fs)
	if set["model"] {
		if m, ok := cfg.Models[t.engine.model]; ok && !fileExists(t.engine.model) {
			t.modelName = t.engine.model
			t.engine.applyModel(m, set)
		}
	}
	if t.imageWindow == nil {
		t.imageWindow = cfg.ImageWindow // an agent file's own wins
	}
	if t.fromSpec {
		return nil // an agent file's tools and workspace are the agent's own
	}
	tf := &t.toolFlags
	if !set["tools"] && len(cfg.Tools) > 0 {
		tf.names = strings.Join(cfg.Tools, ",")
	}
	if !set["workspace"] && cfg.Workspace != "" {
		tf.workspace = cfg.Workspace
	}
	if !set["allow-fetch"] && cfg.AllowFetch {
		tf.fetch = true
	}
	if !set["allow-shell"] && len(cfg.AllowShell) > 0 {
		tf.shell = strings.Join(cfg.AllowShell, ",")
	}
	if !set["db"] && cfg.DB != "" {
		t.db = cfg.DB
	}
	return nil
}

// defaultModel uses the config's default model when neither the command line nor a resumed session named one.
func (t *turn) defaultModel(cfg config.Config) {
	if t.engine.model != "" || t.engine.endpoint != "" || cfg.Model == "" {
		return
	}
	t.modelName = cfg.Model
	t.modelFrom = fmt.Sprintf("the default model %q of %s", cfg.Model, cfg.Path)
	t.engine.applyModel(cfg.Models[cfg.Model], explicit(t.fs))
}

// applyModel sets the engine from a named model, leaving the flags that were given alone.
func (e *engineFlags) applyModel(m agentfile.Model, set map[string]bool) {
	if !set["model"] || m.Path != "" || m.Endpoint != "" {
		e.model, e.endpoint = m.Path, m.Endpoint
	}
	str := func(name string, dst *string, v string) {
		if !set[name] && v != "" {
			*dst = v
		}
	}
	str("mmproj", &e.mmproj, m.MMProj)
	str("plan", &e.plan, m.Plan)
	str("gpu", &e.gpu, m.GPU)
	str("cache-type", &e.cacheType, m.CacheType)
	if !set["api-key"] && m.APIKeyEnv != "" {
		e.apiKey = os.Getenv(m.APIKeyEnv)
	}
	if !set["ctx"] && m.Ctx != 0 {
		e.ctx = m.Ctx
	}
	if !set["parallel"] && m.Parallel != 0 {
		e.parallel = m.Parallel
	}
	if !set["server-arg"] && len(m.ServerArgs) > 0 {
		e.extra = append(envServerArgs(), m.ServerArgs...)
	}
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// modelProfile is what a session stores about its model (memory.Session.EngineProfile), enough to resume it
// with the same model and engine settings when no model is given.
type modelProfile struct {
	Name string `json:"name,omitempty"`
	agentfile.Model
}

func (e engineFlags) profile(name string) string {
	endpoint := e.endpoint
	if u, err := url.Parse(endpoint); err != nil || u.User != nil {
		endpoint = "" // credentials never go into the database; such a session is resumed with --endpoint
	}
	p := modelProfile{Name: name, Model: agentfile.Model{Path: e.model, MMProj: e.mmproj, Endpoint: endpoint,
		Ctx: e.ctx, Parallel: e.parallel, Plan: e.plan, GPU: e.gpu, CacheType: e.cacheType, ServerArgs: e.extra}}
	b, _ := json.Marshal(p)
	return string(b)
}

// sessionLabel is what the session list and status lines show as the model: the config's name for it, or
// the file's name, or the (redacted) endpoint.
func sessionLabel(t turn) string {
	if t.modelName != "" {
		return t.modelName
	}
	return modelLabel(t.engine)
}

// resumeModel gives a resumed session the model it was stored with, when the command line names none.
func (t *turn) resumeModel(ctx context.Context, store *memory.Store) error {
	set := explicit(t.fs)
	if t.session == "" || set["model"] || set["endpoint"] || store == nil {
		return nil
	}
	id, err := store.ResolveSessionID(ctx, t.session)
	if err != nil {
		return fmt.Errorf("--session %s: %w", t.session, err)
	}
	sess, err := store.Session(ctx, id)
	if err != nil {
		return err
	}
	var p modelProfile
	if sess.EngineProfile == "" || json.Unmarshal([]byte(sess.EngineProfile), &p) != nil || (p.Path == "" && p.Endpoint == "") {
		return nil // stored before sessions remembered their model: the config's default or --model decides
	}
	t.modelName = p.Name
	t.engine.applyModel(p.Model, set)
	return nil
}
