// Package safefile opens files named by someone visor does not control (a flag, an agent file, a model's tool
// call) without ever blocking: only regular files are opened, and reads are bounded. A FIFO, a device or a
// socket is refused with an error naming the path, before anything reads from it.
//
// It does not confine paths to a directory (os.Root does, and OpenIn takes one), and it does not decide limits:
// each caller passes the bound that fits what it reads.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ErrNotRegular is matched by the error (a *NotRegularError) for a path that names anything but a regular file.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped by the error for a file larger than the caller's limit.
var ErrTooLarge = errors.New("file too large")

// Check stats path, following symlinks, and refuses anything but a regular file. It opens nothing, so it suits a
// file another process will open (llama-server's model), where opening a FIFO here would block visor instead.
func Check(path string) (fs.FileInfo, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := regular(path, st); err != nil {
		return nil, err
	}
	return st, nil
}

// Open opens the regular file at path for reading. The path is stat'ed first, so a device is never opened at
// all; the open itself does not block (O_NONBLOCK), and the opened file is stat'ed again, so a FIFO swapped in
// between the two is refused too.
func Open(path string) (*os.File, fs.FileInfo, error) {
	if _, err := Check(path); err != nil {
		return nil, nil, err
	}
	f, err := os.OpenFile(path, openFlags, 0)
	if err != nil {
		return nil, nil, err
	}
	return verify(f, path)
}

// OpenIn is Open for the file name inside root; os.Root keeps it from leaving the root, symlinks included.
// Errors name the file as name, relative to the root.
func OpenIn(root *os.Root, name string) (*os.File, fs.FileInfo, error) {
	st, err := root.Stat(name)
	if err != nil {
		return nil, nil, err
	}
	if err := regular(name, st); err != nil {
		return nil, nil, err
	}
	f, err := root.OpenFile(name, openFlags, 0)
	if err != nil {
		return nil, nil, err
	}
	return verify(f, name)
}

func verify(f *os.File, name string) (*os.File, fs.FileInfo, error) {
	st, err := f.Stat()
	if err == nil {
		err = regular(name, st)
	}
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

// ReadFile reads the regular file at path, refusing one larger than max bytes with an error naming the limit.
// A file that grows past max while it is read (or a /proc file that reports size 0) is refused too: at most
// max+1 bytes are ever read.
func ReadFile(path string, max int64) ([]byte, error) {
	f, st, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st.Size() > max {
		return nil, tooLarge(path, st.Size(), max)
	}
	return ReadAll(f, path, max)
}

// ReadAll reads r to its end, refusing more than max bytes; name is used in the error.
func ReadAll(r io.Reader, name string, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if int64(len(b)) > max {
		return nil, tooLarge(name, -1, max)
	}
	return b, nil
}

func tooLarge(name string, size, max int64) error {
	if size >= 0 {
		return fmt.Errorf("%s is %d bytes, over the %d-byte limit: %w", name, size, max, ErrTooLarge)
	}
	return fmt.Errorf("%s is over the %d-byte limit: %w", name, max, ErrTooLarge)
}

// NotRegularError is the error for a path that names anything but a regular file. It matches ErrNotRegular.
type NotRegularError struct {
	Name string      // the path as the caller gave it
	Mode fs.FileMode // what it is instead
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is %s, %v: give the path of a file", e.Name, e.Kind(), ErrNotRegular)
}

// Is makes errors.Is(err, ErrNotRegular) hold.
func (e *NotRegularError) Is(target error) bool { return target == ErrNotRegular }

// Kind says what the file is, e.g. "a named pipe (FIFO)".
func (e *NotRegularError) Kind() string { return describe(e.Mode) }

// regular refuses every file type but a regular file, naming what it is instead.
func regular(name string, st fs.FileInfo) error {
	if st.Mode().IsRegular() {
		return nil
	}
	return &NotRegularError{Name: name, Mode: st.Mode()}
}

func describe(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	}
	return "a special file (" + m.Type().String() + ")"
}

// OpenDirIn opens the directory name inside root (to sync it, say) without blocking should something else have
// taken its place.
func OpenDirIn(root *os.Root, name string) (*os.File, error) {
	return root.OpenFile(name, dirFlags, 0)
}
