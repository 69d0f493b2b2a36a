package tools

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"

	"github.com/visorhq/visor/internal/safefile"
)

//go:embed write_file.md
var writeFileDescription string

type writeFileIn struct {
	Path    string `json:"path" jsonschema_description:"File path, relative to the workspace root."`
	Content string `json:"content" jsonschema_description:"The complete new content of the file."`
}

func writeFileTool(root string, allowProtected []string) Tool {
	return New(WriteFileName, describe(writeFileDescription), func(ctx context.Context, in writeFileIn) (string, error) {
		return writeFile(root, allowProtected, in)
	})
}

func writeFile(root string, allowProtected []string, in writeFileIn) (string, error) {
	r, rel, err := openIn(root, in.Path)
	if err != nil {
		return "", err
	}
	defer r.Close()
	if rel == "." {
		return "", errors.New("path names the workspace root; give a file name")
	}
	if err := refuseProtected(in.Path, rel, allowProtected); err != nil {
		return "", err
	}
	if err := refuseGitShape(in.Path, rel, allowProtected, func(p string) bool {
		_, err := r.Lstat(p)
		return err == nil
	}); err != nil {
		return "", err
	}
	perm := fs.FileMode(0o644)
	verb := "created"
	if st, err := r.Stat(rel); err == nil {
		if st.IsDir() {
			return "", fmt.Errorf("%s is a directory", in.Path)
		}
		// A FIFO or a device in the workspace is someone's plumbing, not a file to replace. (A hard-linked file
		// is fine: the rename below gives the name a new inode and leaves the other links as they were.)
		if !st.Mode().IsRegular() {
			return "", fmt.Errorf("%s is not a regular file (%s); write_file replaces only regular files",
				in.Path, (&safefile.NotRegularError{Mode: st.Mode()}).Kind())
		}
		perm, verb = st.Mode().Perm(), "replaced"
	}
	if dir := path.Dir(rel); dir != "." {
		if err := r.MkdirAll(dir, 0o755); err != nil {
			return "", fmt.Errorf("create directories for %s: %w", in.Path, unwrapPathError(err))
		}
	}
	if err := atomicWrite(r, rel, []byte(in.Content), perm); err != nil {
		return "", fmt.Errorf("write %s: %w", in.Path, err)
	}
	return fmt.Sprintf("%s %s (%d bytes).", verb, in.Path, len(in.Content)), nil
}

// atomicWrite writes to a sibling temporary file and renames it over name, so a crash or a concurrent reader
// never sees a partial file.
func atomicWrite(r *os.Root, name string, data []byte, perm fs.FileMode) error {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(path.Dir(name), "."+path.Base(name)+".tmp-"+hex.EncodeToString(rnd[:]))
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return unwrapPathError(err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = r.Rename(tmp, name)
	}
	if err != nil {
		_ = r.Remove(tmp)
		return unwrapPathError(err)
	}
	// The rename itself lives in the directory; syncing it makes the new name survive a power cut. Best effort:
	// the write already succeeded and some filesystems refuse to sync directories.
	if d, err := safefile.OpenDirIn(r, path.Dir(name)); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
