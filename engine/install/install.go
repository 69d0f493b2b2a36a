// Package install installs Debian's llama-server into a folder visor owns. The installer is a shell script (apt and
// dpkg do the work) embedded in the binary, so a `go install`ed visor, which has no checkout and no scripts/, gets
// its engine with `visor engine install`; a checkout runs the same file through scripts/install-engine.sh.
package install

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

//go:embed install-engine.sh
var script []byte

// Options say where to install and where the installer's lines go.
type Options struct {
	// Dir is the engine folder; empty means the installer's default ($VISOR_ENGINE_DIR or ~/.cache/visor/engine).
	Dir string
	// GPU (VISOR_ENGINE_GPU: auto, vulkan, cuda or off), Debs (VISOR_ENGINE_DEBS: a folder of .deb files to
	// install offline) and Force (VISOR_ENGINE_FORCE: reinstall a working engine) are the installer's settings;
	// unset, its environment's or defaults hold.
	GPU, Debs string
	Force     bool
	// Env is added to this process's environment, after the settings.
	Env            []string
	Stdout, Stderr io.Writer
	// Command is how the user runs the installer, for the installer's own messages.
	Command string
}

// Run runs the embedded installer and returns when it is done. The script is written to a private temporary file
// because bash reads a script as it runs: feeding it on stdin would take stdin from apt.
func Run(ctx context.Context, o Options) error {
	if err := o.check(); err != nil {
		return err
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		return fmt.Errorf("installing the engine needs bash, which is not on $PATH: install it (apt-get install bash): %w", err)
	}
	tmp, err := os.MkdirTemp("", "visor-install-")
	if err != nil {
		return fmt.Errorf("installing the engine: %w", err)
	}
	defer os.RemoveAll(tmp)
	path := filepath.Join(tmp, "install-engine.sh")
	if err := os.WriteFile(path, script, 0o700); err != nil {
		return fmt.Errorf("installing the engine: %w", err)
	}
	args := []string{path}
	if o.Dir != "" {
		args = append(args, o.Dir)
	}
	cmd := exec.CommandContext(ctx, bash, args...)
	cmd.Env = os.Environ()
	for k, v := range map[string]string{"VISOR_ENGINE_GPU": o.GPU, "VISOR_ENGINE_DEBS": o.Debs} {
		if v != "" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	if o.Force {
		cmd.Env = append(cmd.Env, "VISOR_ENGINE_FORCE=1")
	}
	cmd.Env = append(cmd.Env, o.Env...)
	if o.Command != "" {
		cmd.Env = append(cmd.Env, "VISOR_INSTALL_COMMAND="+o.Command)
	}
	cmd.Stdout, cmd.Stderr = o.Stdout, o.Stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			// The installer said why on stderr, in its own words.
			return fmt.Errorf("the engine installer failed (exit status %d): see its message above", exit.ExitCode())
		}
		return fmt.Errorf("running the engine installer: %w", err)
	}
	return nil
}

// check refuses settings the installer would misreport: it names the environment variable a flag sets
// (VISOR_ENGINE_DEBS=… has no .deb files, for a folder that does not exist), and mkdir's message for a DIR that
// is a file or cannot be made. It runs before the folders exist, so a mistyped flag leaves no empty engine folder
// behind.
func (o Options) check() error {
	switch o.GPU {
	case "", "auto", "vulkan", "cuda", "off":
	default:
		return fmt.Errorf("--gpu %s: use auto, vulkan, cuda or off", o.GPU)
	}
	if o.Debs != "" {
		const fix = "give the folder holding llama-server's .deb files (an install keeps them in DIR/debs)"
		st, err := os.Stat(o.Debs)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return fmt.Errorf("--debs %s: no such folder: %s", o.Debs, fix)
		case err != nil:
			return fmt.Errorf("--debs %s: %w", o.Debs, err)
		case !st.IsDir():
			return fmt.Errorf("--debs %s: is a file, not a folder: %s", o.Debs, fix)
		}
		if debs, _ := filepath.Glob(filepath.Join(o.Debs, "*.deb")); len(debs) == 0 {
			return fmt.Errorf("--debs %s: holds no .deb files: %s", o.Debs, fix)
		}
	}
	if o.Dir == "" {
		return nil
	}
	const fix = "give a folder you can write, or no DIR for the default"
	if st, err := os.Stat(o.Dir); err == nil && !st.IsDir() {
		return fmt.Errorf("engine folder %s: is a file, not a folder: %s", o.Dir, fix)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return fmt.Errorf("engine folder %s: cannot create it (%w): %s", o.Dir, err, fix)
	}
	if err := syscall.Access(o.Dir, 2); err != nil { // W_OK
		return fmt.Errorf("engine folder %s: not writable (%w): %s", o.Dir, err, fix)
	}
	return nil
}
