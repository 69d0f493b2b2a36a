package tools

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/visorhq/visor/internal/safefile"
)

// workspace confines the file tools to one directory tree. Paths from the model are checked twice: here,
// lexically and through filepath.EvalSymlinks, to give the model a clear reason; and again by os.Root at
// open time, which closes the race where a symlink is swapped in between the check and the use.
type workspace struct {
	root string // absolute, symlinks resolved
}

func newWorkspace(root string) (workspace, error) {
	if root == "" {
		root = "."
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return workspace{}, fmt.Errorf("workspace root %q: %w", root, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return workspace{}, fmt.Errorf("workspace root %q: %w", root, err)
	}
	return workspace{root: real}, nil
}

// errOutside marks paths that leave the workspace; tools report it to the model as is.
var errOutside = errors.New("outside the workspace")

// rel maps a path from the model to a slash-separated path relative to the root with every symlink already
// resolved, so os.Root never has to follow one. Paths that do not exist yet (write_file) are resolved through
// their nearest existing parent.
func (w workspace) rel(p string) (string, error) {
	if strings.TrimSpace(p) == "" {
		p = "."
	}
	full := filepath.Clean(p)
	if !filepath.IsAbs(full) {
		full = filepath.Join(w.root, full)
	}
	// Absolute paths skip the lexical test: the root itself may be reached through a symlinked alias.
	if !filepath.IsAbs(p) && !w.contains(full) {
		return "", fmt.Errorf("path %q is %w (root %s); use a path relative to the root", p, errOutside, w.root)
	}
	real, err := resolveExisting(full)
	if err != nil {
		return "", fmt.Errorf("path %q cannot be resolved: %w", p, err)
	}
	if !w.contains(real) {
		if real != full {
			return "", fmt.Errorf("path %q leads through a symlink to %s, which is %w (root %s)", p, real, errOutside, w.root)
		}
		return "", fmt.Errorf("path %q is %w (root %s); use a path relative to the root", p, errOutside, w.root)
	}
	r, err := filepath.Rel(w.root, real)
	if err != nil {
		return "", fmt.Errorf("path %q: %w", p, err)
	}
	return filepath.ToSlash(r), nil
}

func (w workspace) contains(p string) bool {
	return p == w.root || strings.HasPrefix(p, w.root+string(filepath.Separator)) || w.root == string(filepath.Separator)
}

// resolveExisting evaluates symlinks in the longest existing prefix of p and appends the rest unchanged.
func resolveExisting(p string) (string, error) {
	real, err := filepath.EvalSymlinks(p)
	if err == nil {
		return real, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	// A dangling symlink must not be treated as a missing file: writing through it would follow it.
	if _, lerr := os.Lstat(p); lerr == nil {
		return "", &danglingError{link: p}
	}
	parent := filepath.Dir(p)
	if parent == p {
		return "", err
	}
	rp, err := resolveExisting(parent)
	if err != nil {
		return "", err
	}
	return filepath.Join(rp, filepath.Base(p)), nil
}

// danglingError names a symlink whose target does not exist.
type danglingError struct{ link string }

func (e *danglingError) Error() string { return filepath.Base(e.link) + " is a dangling symlink" }

// openIn opens the workspace at root as an os.Root and maps the model's path p into it.
func openIn(root, p string) (*os.Root, string, error) {
	w, err := newWorkspace(root)
	if err != nil {
		return nil, "", err
	}
	rel, err := w.rel(p)
	if err != nil {
		return nil, "", err
	}
	r, err := os.OpenRoot(w.root)
	if err != nil {
		return nil, "", fmt.Errorf("open workspace: %w", err)
	}
	return r, rel, nil
}

// openRegular opens the regular file p of the workspace root. Anything else is refused before it is opened, and
// the open cannot block (internal/safefile): a FIFO would hold the tool's goroutine forever, beyond the reach of
// its timeout. A file with more than one hard link is refused too: os.Root confines names, not inodes, and
// another link may lie outside the workspace (a hard link to ~/.ssh/id_ed25519 reads the key). The file stays
// open after the workspace's os.Root is closed.
func openRegular(root, p string) (*os.File, fs.FileInfo, error) {
	r, rel, err := openIn(root, p)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	shown := p
	if st, err := r.Stat(rel); err == nil && st.IsDir() {
		return nil, nil, fmt.Errorf("%s is a directory; use list_dir", shown)
	}
	f, st, err := safefile.OpenIn(r, rel)
	if err != nil {
		var nr *safefile.NotRegularError
		if errors.As(err, &nr) {
			return nil, nil, fmt.Errorf("%s is not a regular file (%s)", shown, nr.Kind())
		}
		return nil, nil, fmt.Errorf("%s: %w", shown, unwrapPathError(err))
	}
	if n := safefile.Links(st); n > 1 {
		_ = f.Close()
		return nil, nil, fmt.Errorf("%s has %d hard links; visor reads only files with one link, since another "+
			"link may lie outside the workspace", shown, n)
	}
	return f, st, nil
}
