package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/visorhq/visor/agent/agentfile"
	"github.com/visorhq/visor/config"
	"github.com/visorhq/visor/frontend/gateway"
	"github.com/visorhq/visor/internal/safefile"
	"gopkg.in/yaml.v3"
)

// cmdValidate is `visor validate FILE…`: it checks agent files (and config files, by their name config.yaml)
// without starting anything, printing each problem as file:line:col: problem — fix.
func cmdValidate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return &usageError{"validate: no files: visor validate agent.yaml… (config.yaml files are checked as the config)"}
	}
	bad := 0
	for _, path := range fs.Args() {
		kind, err := validateFile(path)
		if err != nil {
			bad++
			fmt.Fprintln(stdout, err)
			continue
		}
		fmt.Fprintf(stdout, "%s: ok%s\n", path, kind)
	}
	if bad > 0 {
		return fmt.Errorf("validate: %d of %d files have problems", bad, fs.NArg())
	}
	return nil
}

// maxValidateBytes bounds a file validate reads: the largest of the files it checks (agent, config and gateway
// models files) is a few kilobytes.
const maxValidateBytes = 4 << 20

// validateFile checks path as what it is: the config file (by its name), a gateway models file (models whose
// entries name a `model:` file, or gateway settings; also by the name models.yaml), or an agent file, which is
// checked as `visor run` loads it: the files it names on disk included.
func validateFile(path string) (string, error) {
	// A FIFO or a device is refused before it is read: validate must answer, not wait for a writer.
	b, err := safefile.ReadFile(path, maxValidateBytes)
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return "", fmt.Errorf("%s: %w", path, pe.Err)
	}
	if err != nil {
		return "", err // it names the path
	}
	switch fileKind(path, b) {
	case "config":
		_, err = config.Parse(b, path)
		return "", err
	case "gateway":
		if _, err = gateway.ParseConfig(path, b); err != nil && !strings.HasPrefix(err.Error(), path) {
			err = fmt.Errorf("%s (a gateway models file): %w", path, err)
		}
		return " (gateway models file)", err
	}
	_, err = agentfile.Load(path)
	return "", err
}

// fileKind tells the three YAML files visor reads apart: "config", "gateway" or "agent".
func fileKind(path string, data []byte) string {
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

// cmdSchema is `visor schema agent|config`: the JSON Schema visor checks those files by.
func cmdSchema(args []string, stdout io.Writer) error {
	var b []byte
	var err error
	switch {
	case len(args) == 1 && isHelp(args[0]):
		_, err := fmt.Fprintln(stdout, "usage: visor schema agent|config   (the JSON Schema of agent files or of the config file)")
		return err
	case len(args) == 1 && args[0] == "agent":
		b, err = agentfile.Schema()
	case len(args) == 1 && args[0] == "config":
		b, err = config.Schema()
	default:
		return &usageError{"schema: say which: visor schema agent|config"}
	}
	if err != nil {
		return err
	}
	_, err = stdout.Write(b)
	return err
}
