//go:build unix

package agentfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/visorhq/visor/agent/agentfile"
	"github.com/visorhq/visor/internal/safefile"
)

// A FIFO or a device given as the agent file blocked visor (past Ctrl-C) or read without end.
func TestLoadRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "agent.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, "/dev/zero", dir} {
		done := make(chan error, 1)
		go func() { _, err := agentfile.Load(p); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, safefile.ErrNotRegular) || !strings.Contains(err.Error(), p) {
				t.Errorf("Load(%s) = %v, want it refused as not a regular file", p, err)
			}
		case <-time.After(5 * time.Second):
			if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				_ = w.Close()
			}
			t.Errorf("Load(%s) blocked for 5s", p)
		}
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, make([]byte, agentfile.MaxFileSize+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := agentfile.Load(big); !errors.Is(err, safefile.ErrTooLarge) {
		t.Errorf("a file over the limit: %v", err)
	}
}
