package gateway

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/visorhq/visor/internal/safefile"
)

// LoadConfig reads the models file at path, or, without one, makes a one-model config of one (the command
// line's --model or --endpoint), called name (default: the model file's base name, or "remote"). That one model
// is loaded at start, as `visor web` does, so a model that cannot load fails now.
func LoadConfig(path, name string, one ModelConfig) (FileConfig, error) {
	if path != "" {
		if one.Model != "" || one.Endpoint != "" {
			return FileConfig{}, errors.New("--config and --model/--endpoint both given: name the models in the config file, or pass one --model")
		}
		b, err := safefile.ReadFile(path, 1<<20)
		if err != nil {
			return FileConfig{}, fmt.Errorf("--config: %w", err)
		}
		return ParseConfig(path, b)
	}
	if one.Model == "" && one.Endpoint == "" {
		return FileConfig{}, errors.New("no models: pass --config models.yaml, or --model FILE.gguf [--mmproj P.gguf], or --endpoint URL")
	}
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(one.Model), ".gguf")
		if one.Endpoint != "" {
			name = "remote"
		}
	}
	if one.Endpoint != "" {
		one.Parallel = 0 // the remote server's own
	} else {
		one.APIKey = ""
	}
	return FileConfig{Models: map[string]ModelConfig{name: one}, Preload: []string{name}}, nil
}

// Names are the config's model names, sorted.
func (fc FileConfig) Names() []string { return sortedNames(fc.Models) }

// EngineFacts are what a model's engine spec says that the gateway shows and uses: a projector, the context
// and slots it is started with, its server arguments, the key its server wants.
type EngineFacts struct {
	Projector  bool
	Ctx, Slots int
	Args       []string
	APIKey     string
}

// Served is the gateway model called name for the entry mc, whose engine (spec f) open makes.
func (mc ModelConfig) Served(name string, f EngineFacts, open func() Engine) Model {
	m := Model{Name: name, Open: open, Group: mc.Group, Remote: mc.Endpoint != "", Slots: f.Slots,
		UpstreamModel: mc.UpstreamModel, ToolFormat: mc.ToolFormat, ToolsAsText: mc.ToolsAsText, APIKey: f.APIKey,
		Vision: f.Projector, Embeddings: mc.Embeddings, Ctx: f.Ctx, MTP: hasMTP(f.Args), Aliases: mc.Aliases}
	if m.Remote {
		m.Slots = 64 // the remote server queues for itself
	} else if f.Projector && f.Slots > 1 {
		// One slot is kept for requests that wait: their images are evaluated there ahead of their turn.
		m.Slots, m.ServerSlots = f.Slots-1, f.Slots
	}
	return m
}

// hasMTP reports whether llama-server's arguments turn on MTP speculation.
func hasMTP(args []string) bool {
	for i, a := range args {
		if a == "--spec-type=draft-mtp" || a == "--spec-type" && i+1 < len(args) && args[i+1] == "draft-mtp" {
			return true
		}
	}
	return false
}
