//go:build unix

package gguf

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The VRAM planner opens the model before llama-server does: a FIFO there blocked open(2) for good, out of reach
// of Ctrl-C, and a device read without end. Both must be refused at once.
func TestOpenRefusesSpecialFiles(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "m.gguf")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{fifo: "named pipe", "/dev/zero": "character device"} {
		done := make(chan error, 1)
		go func() { _, err := Open(path); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), path+" is a "+want) {
				t.Errorf("Open(%s) = %v, want it refused as a %s", path, err, want)
			}
		case <-time.After(5 * time.Second):
			// Release the blocked open by opening the other end, so the test ends.
			if w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				_ = w.Close()
			}
			t.Errorf("Open(%s) blocked for 5s", path)
		}
	}
}
