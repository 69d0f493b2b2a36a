//go:build !unix

package safefile

import (
	"io/fs"
	"os"
)

const (
	openFlags = os.O_RDONLY
	dirFlags  = os.O_RDONLY
)

// Links returns the number of hard links of the file st describes, or 1 where the system does not say.
func Links(fs.FileInfo) uint64 { return 1 }
