package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/visorhq/visor/agent/agentfile"
	"github.com/visorhq/visor/internal/safefile"
)

// maxValidateBytes bounds a file Validate reads: the largest of the files it checks (agent, config and gateway
// models files) is a few kilobytes.
const maxValidateBytes = 4 << 20

// Validate checks path as what it is, without starting anything: the config file (by its name), a gateway models
// file (models whose entries name a `model:` file, or gateway settings; also by the name models.yaml), which
// gateway parses (the gateway's format is its own), or an agent file, checked as `visor run` loads it: the files
// it names on disk included. what describes the kind for the "ok" line (" (gateway models file)", or ""); err
// holds the problems, each as file:line:col: problem — fix.
func Validate(path string, gateway func(path string, data []byte) error) (what string, err error) {
	// A FIFO or a device is refused before it is read: validate must answer, not wait for a writer.
	b, err := safefile.ReadFile(path, maxValidateBytes)
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return "", fmt.Errorf("%s: %w", path, pe.Err)
	}
	if err != nil {
		return "", err // it names the path
	}
	switch FileKind(path, b) {
	case "config":
		_, err = Parse(b, path)
		return "", err
	case "gateway":
		if err = gateway(path, b); err != nil && !strings.HasPrefix(err.Error(), path) {
			err = fmt.Errorf("%s (a gateway models file): %w", path, err)
		}
		return " (gateway models file)", err
	}
	_, err = agentfile.Load(path)
	return "", err
}

// FileKind tells the three YAML files visor reads apart: "config", "gateway" or "agent".
func FileKind(path string, data []byte) string {
	switch filepath.Base(path) {
	case "config.yaml", "config.yml":
		return "config"
	case "models.yaml", "models.yml":
		return "gateway"
	}
	var top map[string]yaml.Node
	if yaml.Unmarshal(data, &top) != nil {
		return "agent"
	}
	if _, ok := top["name"]; ok {
		return "agent"
	}
	for _, k := range []string{"addr", "idle_unload", "max_queue", "queue_timeout", "preload"} {
		if _, ok := top[k]; ok {
			return "gateway"
		}
	}
	var models map[string]map[string]yaml.Node
	if m, ok := top["models"]; ok && m.Decode(&models) == nil {
		for _, entry := range models {
			if _, ok := entry["model"]; ok {
				return "gateway" // the config file's models name theirs with path:
			}
		}
		return "config"
	}
	return "agent"
}

// LoadAgentFile is agentfile.Load, for `visor run`: a file that is one of visor's other YAML files is told what it
// is and the command that reads it (a gateway models.yaml given to run was told "unknown key models — did you
// mean model?", issue 22).
func LoadAgentFile(path string) (agentfile.Spec, error) {
	spec, err := agentfile.Load(path)
	if err != nil {
		return spec, notAnAgentFile(path, err)
	}
	return spec, nil
}

func notAnAgentFile(path string, err error) error {
	if _, cerr := safefile.Check(path); cerr != nil {
		return err // a FIFO or device is not read twice; Load's error says what it is
	}
	data, rerr := os.ReadFile(path)
	if rerr != nil {
		return err
	}
	switch FileKind(path, data) {
	case "gateway":
		return fmt.Errorf("%s is a gateway models file, not an agent file: serve its models with visor gateway --config %s (an agent file has name:, prompt: or steps:)", path, path)
	case "config":
		return fmt.Errorf("%s is visor's config file, not an agent file: it gives every command its defaults (--config %s); an agent file has name:, prompt: or steps:", path, path)
	}
	return err
}
