package tools

import (
	"context"
	_ "embed"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

//go:embed list_dir.md
var listDirDescription string

const listDirMaxEntries = 1000

type listDirIn struct {
	Path  string `json:"path,omitempty" jsonschema:"default=." jsonschema_description:"Directory, relative to the workspace root."`
	Depth int    `json:"depth,omitempty" jsonschema:"default=1,minimum=1,maximum=6" jsonschema_description:"How many levels to descend; 1 lists only the directory itself."`
}

func listDirTool(root string) Tool {
	return New(ListDirName, describe(listDirDescription), func(ctx context.Context, in listDirIn) (Result, error) {
		return listDir(ctx, root, in)
	}, Parallel())
}

func listDir(ctx context.Context, root string, in listDirIn) (Result, error) {
	r, rel, err := openIn(root, in.Path)
	if err != nil {
		return Result{}, err
	}
	defer r.Close()
	st, err := r.Stat(rel)
	if err != nil {
		return Result{}, fmt.Errorf("list %s: %w", in.Path, unwrapPathError(err))
	}
	if !st.IsDir() {
		return Result{}, fmt.Errorf("%s is a file, not a directory; use read_file", in.Path)
	}
	depth := max(in.Depth, 1)
	var b strings.Builder
	n, more := 0, false
	fsys := r.FS()
	// fs.WalkDir visits entries in lexical order and does not follow symlinked directories.
	err = fs.WalkDir(fsys, rel, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == rel {
				return err
			}
			return nil // an unreadable subdirectory should not hide the rest
		}
		if p == rel {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		level := strings.Count(strings.TrimPrefix(p, rel+"/"), "/")
		if rel == "." {
			level = strings.Count(p, "/")
		}
		if n == listDirMaxEntries {
			more = true
			return fs.SkipAll
		}
		{
			name := path.Base(p)
			switch {
			case d.Type()&fs.ModeSymlink != 0:
				name += "@"
			case d.IsDir():
				name += "/"
			}
			b.WriteString(strings.Repeat("  ", level) + name + "\n")
			n++
		}
		if d.IsDir() && (level+1 >= depth || d.Name() == ".git") {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil {
		return Result{}, fmt.Errorf("list %s: %w", in.Path, unwrapPathError(err))
	}
	dir := strings.TrimSuffix(displayPath(in.Path), "/") + "/"
	res := Result{Text: dir + "\n" + b.String()}
	if n == 0 {
		res.Text = dir + " is empty."
	}
	if more {
		res.Truncated = true
		res.Text += fmt.Sprintf("[output truncated: first %d entries shown; list a subdirectory or use a lower depth]\n", n)
	}
	return res, nil
}

func displayPath(p string) string {
	if strings.TrimSpace(p) == "" {
		return "."
	}
	return p
}
