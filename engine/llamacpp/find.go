// Package llamacpp supervises a llama-server process: finding the binary, starting it from a typed config,
// waiting for health, capturing its log, detecting crashes with the log lines that explain them, stopping it
// without leaving orphans, and reading its capabilities (--help flags, /props, /slots, /v1/models).
// It does not decide what to run; the planner and the agent do.
package llamacpp

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// ErrNotFound means no llama-server binary was found anywhere visor looks.
var ErrNotFound = errors.New("llama-server not found")

// InstallDir is where `visor engine install` (scripts/install-engine.sh) puts the engine unless VISOR_ENGINE_DIR overrides it.
func InstallDir() string {
	if d := os.Getenv("VISOR_ENGINE_DIR"); d != "" {
		return d
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = filepath.Join(os.TempDir(), "visor-cache")
	}
	return filepath.Join(cache, "visor", "engine")
}

// Find locates llama-server: the explicit path (flag or config) first, then VISOR_LLAMA_SERVER, then $PATH, then
// the folder install-engine.sh installs into.
func Find(explicit string) (string, error) {
	if explicit != "" {
		return checkExec(explicit)
	}
	if env := os.Getenv("VISOR_LLAMA_SERVER"); env != "" {
		return checkExec(env)
	}
	if p, err := exec.LookPath("llama-server"); err == nil {
		return p, nil
	}
	installed := filepath.Join(InstallDir(), "bin", "llama-server")
	if _, err := os.Stat(installed); err == nil {
		return checkExec(installed)
	}
	return "", fmt.Errorf("%w on $PATH or in %s: run `visor engine install` (in a checkout: make engine), or pass --server PATH",
		ErrNotFound, filepath.Dir(installed))
}

func checkExec(p string) (string, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("llama-server at %s: %w", p, err)
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("llama-server at %s is not an executable file", p)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("llama-server at %s: %w", p, err)
	}
	return abs, nil
}
