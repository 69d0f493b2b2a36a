//go:build unix

package safefile

import (
	"io/fs"
	"syscall"
)

// O_NONBLOCK makes open return at once on a FIFO with no writer; on a regular file it changes nothing. O_NOCTTY
// keeps a terminal from becoming visor's controlling terminal should one be swapped in.
const openFlags = syscall.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY

// O_DIRECTORY fails on anything but a directory before it could block.
const dirFlags = syscall.O_RDONLY | syscall.O_NONBLOCK | syscall.O_DIRECTORY

// Links returns the number of hard links of the file st describes, or 1 where the system does not say.
func Links(st fs.FileInfo) uint64 {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return uint64(sys.Nlink)
	}
	return 1
}
