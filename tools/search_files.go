package tools

import (
	"bufio"
	"context"
	_ "embed"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"strings"

	"github.com/visorhq/visor/internal/safefile"
)

//go:embed search_files.md
var searchFilesDescription string

const (
	searchMaxFileSize = 1 << 20
	searchMaxLineLen  = 300
)

type searchFilesIn struct {
	Pattern    string `json:"pattern" jsonschema_description:"Regular expression (RE2 syntax), or plain text when literal is true."`
	Literal    bool   `json:"literal,omitempty" jsonschema:"default=false" jsonschema_description:"Treat pattern as plain text."`
	IgnoreCase bool   `json:"ignore_case,omitempty" jsonschema:"default=false" jsonschema_description:"Match regardless of letter case."`
	Path       string `json:"path,omitempty" jsonschema:"default=." jsonschema_description:"Directory to search, relative to the workspace root."`
	Glob       string `json:"glob,omitempty" jsonschema_description:"Only search files whose name matches this pattern, e.g. *.go."`
	MaxResults int    `json:"max_results,omitempty" jsonschema:"default=50,minimum=1,maximum=500" jsonschema_description:"Stop after this many matching lines."`
}

func searchFilesTool(root string) Tool {
	return New(SearchFilesName, describe(searchFilesDescription), func(ctx context.Context, in searchFilesIn) (Result, error) {
		return searchFiles(ctx, root, in)
	}, Parallel())
}

func searchFiles(ctx context.Context, root string, in searchFilesIn) (Result, error) {
	expr := in.Pattern
	if in.Literal {
		expr = regexp.QuoteMeta(expr)
	}
	if in.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return Result{}, fmt.Errorf("pattern is not a valid RE2 regular expression (%w); set literal=true to search for plain text", err)
	}
	if in.Glob != "" {
		if _, err := path.Match(in.Glob, ""); err != nil {
			return Result{}, fmt.Errorf("glob %q is malformed: %w", in.Glob, err)
		}
	}
	maxResults := in.MaxResults
	if maxResults <= 0 {
		maxResults = 50
	}
	r, rel, err := openIn(root, in.Path)
	if err != nil {
		return Result{}, err
	}
	defer r.Close()

	var b strings.Builder
	found, files, skipped := 0, 0, 0
	full := false
	fsys := r.FS()
	err = fs.WalkDir(fsys, rel, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == rel {
				return err
			}
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" && p != rel {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if in.Glob != "" {
			if ok, _ := path.Match(in.Glob, d.Name()); !ok {
				return nil
			}
		}
		info, err := d.Info()
		if err != nil || info.Size() > searchMaxFileSize {
			skipped++
			return nil
		}
		n, ok, cut := searchFile(r, p, re, maxResults-found, &b)
		if !ok {
			skipped++
			return nil
		}
		if cut {
			skipped++ // searched only in part; its matches so far still count
		}
		files++
		found += n
		if found >= maxResults {
			full = true
			return fs.SkipAll
		}
		return nil
	})
	if err != nil {
		return Result{}, fmt.Errorf("search %s: %w", displayPath(in.Path), unwrapPathError(err))
	}
	res := Result{Text: b.String()}
	if found == 0 {
		res.Text = fmt.Sprintf("No matches for %q in %d files.", in.Pattern, files)
	}
	if skipped > 0 {
		res.Text += fmt.Sprintf("[%d binary or large files skipped]\n", skipped)
	}
	if full {
		res.Truncated = true
		res.Text += fmt.Sprintf("[stopped after %d matches; narrow the pattern, path or glob]\n", found)
	}
	return res, nil
}

// searchFile appends up to limit matching lines of one file to b. ok is false for binary or unreadable files, and
// for those read_file refuses (not regular, or hard-linked); cut is true when the file could not be read to its
// end (a read error, or a line longer than the scanner allows).
func searchFile(r *os.Root, name string, re *regexp.Regexp, limit int, b *strings.Builder) (n int, ok, cut bool) {
	f, st, err := safefile.OpenIn(r, name)
	if err != nil {
		return 0, false, false
	}
	defer f.Close()
	if safefile.Links(st) > 1 {
		return 0, false, false
	}
	br := bufio.NewReaderSize(f, 64<<10)
	head, _ := br.Peek(sniffLen)
	if isBinary(head) {
		return 0, false, false
	}
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 0, 64<<10), searchMaxFileSize)
	for line := 1; sc.Scan() && n < limit; line++ {
		if text := sc.Bytes(); re.Match(text) {
			s := string(text)
			if len(s) > searchMaxLineLen {
				s = truncateRunes(s, searchMaxLineLen) + " …"
			}
			fmt.Fprintf(b, "%s:%d: %s\n", name, line, strings.TrimRight(s, "\r"))
			n++
		}
	}
	return n, true, sc.Err() != nil
}
