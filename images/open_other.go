//go:build !unix

package images

import "os"

func openNonBlocking(path string) (*os.File, error) { return os.Open(path) }
