// Package llamacpp supervises a llama-server process: finding the binary, starting it from a typed config,
// waiting for health, capturing its log, detecting crashes with the log lines that explain them, stopping it
// without leaving orphans, and reading its capabilities (--help flags, /props, /slots, /v1/models).
// It does not decide what to run; the planner and the agent do.
package llamacpp

import (
	"errors"
	"fmt"
	"io/fs"
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
		return checkExec("--server ", explicit)
	}
	if env := os.Getenv("VISOR_LLAMA_SERVER"); env != "" {
		return checkExec("VISOR_LLAMA_SERVER=", env)
	}
	if p, err := exec.LookPath("llama-server"); err == nil {
		return p, nil
	}
	installed := filepath.Join(InstallDir(), "bin", "llama-server")
	if _, err := os.Stat(installed); err == nil {
		return checkExec("the installed engine ", installed)
	}
	return "", fmt.Errorf("%w on $PATH or in %s: run `visor engine install` (in a checkout: make engine), or pass --server PATH",
		ErrNotFound, filepath.Dir(installed))
}

// checkExec checks the llama-server binary at p, which origin named ("--server ", "VISOR_LLAMA_SERVER="), so
// the error says where the wrong path came from and what to do.
func checkExec(origin, p string) (string, error) {
	const fix = "give the path of a llama-server binary, or leave it unset for the one `visor engine install` installs"
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("%s%s: no such file: %s", origin, p, fix)
	case err != nil:
		return "", fmt.Errorf("%s%s: %w", origin, p, err)
	case fi.IsDir() || fi.Mode()&0o111 == 0:
		return "", fmt.Errorf("%s%s: not an executable file: %s", origin, p, fix)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("%s%s: %w", origin, p, err)
	}
	return abs, nil
}
