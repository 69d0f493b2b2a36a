package install

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The embedded installer is the real one: run against an engine folder that already holds a working llama-server
// (the one the test command installed), it checks the binary and says so without downloading anything.
func TestEmbeddedInstallerChecksAnInstalledEngine(t *testing.T) {
	dir := os.Getenv("VISOR_ENGINE_DIR")
	if dir == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("VISOR_ENGINE_DIR unset: scripts/test.sh sets it after installing the engine")
		}
		t.Skip("VISOR_ENGINE_DIR unset: run through scripts/test.sh, which installs the engine")
	}
	if _, err := os.Stat(filepath.Join(dir, "bin", "llama-server")); err != nil {
		t.Skipf("no engine in %s: %v", dir, err)
	}
	var out, errb bytes.Buffer
	err := Run(context.Background(), Options{Dir: dir, Env: []string{"VISOR_ENGINE_GPU=off"}, Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, errb.String())
	}
	if !strings.Contains(out.String(), "already installed: "+filepath.Join(dir, "bin", "llama-server")) {
		t.Errorf("installer said %q, want it to find the installed engine", out.String())
	}
}

// A bad setting is the installer's own clear error, passed through, and the Go error says where to look.
func TestEmbeddedInstallerReportsBadSettings(t *testing.T) {
	var out, errb bytes.Buffer
	err := Run(context.Background(), Options{Dir: t.TempDir(), Env: []string{"VISOR_ENGINE_GPU=tpu"}, Stdout: &out, Stderr: &errb})
	if err == nil {
		t.Fatal("VISOR_ENGINE_GPU=tpu was accepted")
	}
	if !strings.Contains(errb.String(), "VISOR_ENGINE_GPU=tpu: use auto, vulkan, cuda or off") {
		t.Errorf("stderr %q does not name the setting and its values", errb.String())
	}
	if !strings.Contains(err.Error(), "exit status 1") {
		t.Errorf("error %v", err)
	}
}
