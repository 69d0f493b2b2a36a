//go:build unix

package tools

import (
	"path/filepath"
	"syscall"
	"testing"
)

// A FIFO would block open forever, out of reach of the tool's timeout; it must be refused unopened.
func TestFileToolsRefuseFIFO(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	must(t, syscall.Mkfifo(filepath.Join(root, "pipe"), 0o644))
	r := builtinRegistry(t, BuiltinConfig{Root: root})
	mustFail(t, call(t, r, ReadFileName, map[string]any{"path": "pipe"}), "not a regular file")
	mustFail(t, call(t, r, ViewImageName, map[string]any{"path": "pipe"}), "not a regular file")
	// search_files walks past it instead of hanging.
	mustOK(t, call(t, r, SearchFilesName, map[string]any{"pattern": "x"}))
}
