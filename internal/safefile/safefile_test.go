//go:build unix

package safefile_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/visorhq/visor/internal/safefile"
)

// noHang runs f and fails the test, instead of hanging it, when f blocks; a blocked open on a FIFO is released
// by opening its other end.
func noHang(t *testing.T, fifo string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		if fifo != "" {
			if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				_ = w.Close()
			}
		}
		t.Fatal("blocked for 5s")
		return nil
	}
}

func TestSpecialFilesAreRefusedWithoutBlocking(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cases := []struct{ path, what string }{
		{fifo, "a named pipe (FIFO)"},
		{sock, "a socket"},
		{"/dev/zero", "a character device"},
		{"/dev/null", "a character device"},
		{dir, "a directory"},
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, c := range cases {
		calls := map[string]func() error{
			"Check":    func() error { _, err := safefile.Check(c.path); return err },
			"Open":     func() error { _, _, err := safefile.Open(c.path); return err },
			"ReadFile": func() error { _, err := safefile.ReadFile(c.path, 1<<20); return err },
		}
		if strings.HasPrefix(c.path, dir+"/") {
			calls["OpenIn"] = func() error { _, _, err := safefile.OpenIn(root, filepath.Base(c.path)); return err }
		}
		for name, call := range calls {
			err := noHang(t, fifo, call)
			if !errors.Is(err, safefile.ErrNotRegular) || !strings.Contains(err.Error(), c.what) ||
				!strings.Contains(err.Error(), filepath.Base(c.path)) {
				t.Errorf("%s(%s) = %v, want ErrNotRegular naming the path and %q", name, c.path, err, c.what)
			}
		}
	}
}

func TestReadFileIsBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := safefile.ReadFile(p, 10); err != nil || string(b) != "0123456789" {
		t.Fatalf("at the limit: %q, %v", b, err)
	}
	_, err := safefile.ReadFile(p, 9)
	if !errors.Is(err, safefile.ErrTooLarge) || !strings.Contains(err.Error(), "9-byte limit") || !strings.Contains(err.Error(), p) {
		t.Fatalf("over the limit: %v", err)
	}
	// A stream with no end (what /dev/zero would be) stops at the limit instead of filling memory.
	f, err := os.Open("/dev/zero")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	_, err = safefile.ReadAll(f, "/dev/zero", 1<<20)
	if !errors.Is(err, safefile.ErrTooLarge) || !strings.Contains(err.Error(), "1048576-byte limit") {
		t.Fatalf("endless stream: %v", err)
	}
}

func TestOpenFollowsSymlinksToRegularFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(p, filepath.Join(dir, "ln")); err != nil {
		t.Fatal(err)
	}
	f, st, err := safefile.Open(filepath.Join(dir, "ln"))
	if err != nil || st.Size() != 1 {
		t.Fatalf("%v %v", st, err)
	}
	f.Close()
	if n := safefile.Links(st); n != 1 {
		t.Errorf("Links = %d, want 1", n)
	}
	if err := os.Link(p, filepath.Join(dir, "hard")); err != nil {
		t.Fatal(err)
	}
	if st, err = safefile.Check(p); err != nil || safefile.Links(st) != 2 {
		t.Errorf("after a hard link: %v, %v", st, err)
	}
	if _, err := safefile.Check(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
}
