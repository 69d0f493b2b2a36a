//go:build unix

package llamacpp_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/internal/safefile"
)

// A FIFO or a device as the model would block llama-server's open, and visor waiting for it, past Ctrl-C;
// Start must refuse it before starting anything. /bin/true stands in for llama-server: it is never reached.
func TestStartRefusesSpecialFilesAsModel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "model.gguf")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(dir, "real.gguf")
	if err := os.WriteFile(real, []byte("GGUF"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		cfg  llamacpp.Config
		want string
	}{
		{"fifo model", llamacpp.Config{Model: fifo}, "model file: " + fifo + " is a named pipe"},
		{"device model", llamacpp.Config{Model: "/dev/zero"}, "model file: /dev/zero is a character device"},
		{"device mmproj", llamacpp.Config{Model: real, MMProj: "/dev/zero"}, "mmproj file: /dev/zero is a character device"},
		{"directory in Args", llamacpp.Config{Args: []string{"-m", dir}}, "is a directory"},
	}
	for _, tc := range cases {
		tc.cfg.Binary = "/bin/true"
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := llamacpp.Start(ctx, tc.cfg)
		cancel()
		if !errors.Is(err, safefile.ErrNotRegular) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
