//go:build unix

package images

import (
	"os"
	"syscall"
)

// openNonBlocking opens path so that a FIFO without a writer does not block the open.
func openNonBlocking(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
