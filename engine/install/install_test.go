package install

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/visorhq/visor/internal/syncbuf"
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

// downloadedDebs is the folder of the .deb files the test command's engine install downloaded, for installs
// that run offline. The test is skipped without VISOR_ENGINE_DIR (failed in CI, where scripts/test.sh sets it)
// or without .deb files there.
func downloadedDebs(t *testing.T) string {
	t.Helper()
	engineDir := os.Getenv("VISOR_ENGINE_DIR")
	if engineDir == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("VISOR_ENGINE_DIR unset: scripts/test.sh sets it after installing the engine")
		}
		t.Skip("VISOR_ENGINE_DIR unset: run through scripts/test.sh, which installs the engine")
	}
	debs := filepath.Join(engineDir, "debs")
	if m, _ := filepath.Glob(filepath.Join(debs, "*.deb")); len(m) == 0 {
		t.Skipf("no .deb files in %s to install from", debs)
	}
	return debs
}

// Two installs into one folder at once: the second waits for the first (which the test holds at its lock until
// the second says it waits), then both end with a working engine. Offline, from the .deb files the test
// command's install downloaded.
func TestConcurrentInstallsWaitForEachOther(t *testing.T) {
	debs := downloadedDebs(t)
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("no flock(1) on this machine")
	}
	dir := t.TempDir()
	lock, err := os.OpenFile(filepath.Join(dir, ".install.lock"), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	env := []string{"VISOR_ENGINE_GPU=off", "VISOR_ENGINE_DEBS=" + debs}
	run := func(out *syncbuf.Buffer) chan error {
		done := make(chan error, 1)
		go func() {
			var errb bytes.Buffer
			err := Run(context.Background(), Options{Dir: dir, Env: env, Stdout: out, Stderr: &errb})
			if err != nil {
				err = fmt.Errorf("%w\n%s", err, errb.String())
			}
			done <- err
		}()
		return done
	}
	first, second := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	a := run(first)
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(first.String(), "waiting for it") {
		if time.Now().After(deadline) {
			t.Fatalf("the install did not wait for the held lock: %q", first.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	b := run(second)
	_ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	for _, done := range []chan error{a, b} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for _, out := range []*syncbuf.Buffer{first, second} {
		if !strings.Contains(out.String(), "installed: "+filepath.Join(dir, "bin", "llama-server")) {
			t.Errorf("install said %q", out.String())
		}
	}
	if v, err := exec.Command(filepath.Join(dir, "bin", "llama-server"), "--version").CombinedOutput(); err != nil {
		t.Fatalf("the engine does not run after two installs: %v\n%s", err, v)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "root.*")); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

// TestRunRefusesBadFlagsBeforeTheInstaller: visor engine install's flags and DIR are checked before the script
// runs, each refusal naming the flag (not the variable the flag sets) and the fix, and a refused flag leaves no
// engine folder behind.
func TestRunRefusesBadFlagsBeforeTheInstaller(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "notes.txt")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(tmp, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	engine := filepath.Join(tmp, "engine")
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Dir: engine, GPU: "tpu"}, "--gpu tpu: use auto, vulkan, cuda or off"},
		{Options{Dir: engine, Debs: filepath.Join(tmp, "nope")}, "--debs " + filepath.Join(tmp, "nope") + ": no such folder: give the folder holding"},
		{Options{Dir: engine, Debs: file}, "--debs " + file + ": is a file, not a folder"},
		{Options{Dir: engine, Debs: empty}, "--debs " + empty + ": holds no .deb files"},
		{Options{Dir: file}, "engine folder " + file + ": is a file, not a folder: give a folder you can write"},
		{Options{Dir: filepath.Join(file, "engine")}, "engine folder " + filepath.Join(file, "engine") + ": cannot create it"},
		{Options{Dir: "/proc/visor-engine"}, "engine folder /proc/visor-engine: cannot create it"},
	} {
		var out, errb bytes.Buffer
		c.o.Stdout, c.o.Stderr = &out, &errb
		err := Run(context.Background(), c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v\nwant %q", c.o, err, c.want)
		}
		if strings.Contains(errb.String()+fmt.Sprint(err), "VISOR_ENGINE_") {
			t.Errorf("%+v: names a variable the user did not set: %v %s", c.o, err, errb.String())
		}
	}
	if _, err := os.Stat(engine); err == nil {
		t.Errorf("a refused flag left %s behind", engine)
	}
}

// An install into a relative folder (as `scripts/install-engine.sh .cache/gpu-engine` in the GPU scripts' headers)
// writes a wrapper that runs from any directory. Before, the wrapper named its loader by the relative path and
// failed anywhere but the install's own directory, and an online install stopped silently after the package lists.
func TestRelativeFolderInstallsAWrapperThatRunsAnywhere(t *testing.T) {
	debs := downloadedDebs(t)
	script, err := filepath.Abs("install-engine.sh")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	cmd := exec.Command("bash", script, filepath.Join("rel", "engine"))
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "VISOR_ENGINE_GPU=off", "VISOR_ENGINE_DEBS="+debs)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("install into a relative folder: %v\n%s", err, out)
	}
	wrapper := filepath.Join(work, "rel", "engine", "bin", "llama-server")
	if !strings.Contains(string(out), "installed: "+wrapper) {
		t.Errorf("the installer should name the absolute wrapper %s:\n%s", wrapper, out)
	}
	v := exec.Command(wrapper, "--version")
	v.Dir = t.TempDir() // anywhere but the install's own directory
	if b, err := v.CombinedOutput(); err != nil || !strings.Contains(string(b), "version") {
		t.Fatalf("the wrapper does not run from another directory: %v\n%s", err, b)
	}
}
