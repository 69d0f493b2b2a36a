package tools

import (
	"bufio"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"unicode/utf8"
)

//go:embed read_file.md
var readFileDescription string

const (
	readFileMaxOutput  = 48 << 10 // stays under the Registry's default cap so the page note survives
	readFileMaxLineLen = 2000
	sniffLen           = 8 << 10
)

type readFileIn struct {
	Path   string `json:"path" jsonschema_description:"File path, relative to the workspace root."`
	Offset int    `json:"offset,omitempty" jsonschema:"default=1,minimum=1" jsonschema_description:"First line to return, 1-based."`
	Limit  int    `json:"limit,omitempty" jsonschema:"default=500,minimum=1,maximum=5000" jsonschema_description:"Maximum number of lines to return."`
}

func readFileTool(root string) Tool {
	return New(ReadFileName, describe(readFileDescription), func(ctx context.Context, in readFileIn) (Result, error) {
		return readFile(ctx, root, in)
	}, Parallel())
}

func readFile(ctx context.Context, root string, in readFileIn) (Result, error) {
	r, rel, err := openIn(root, in.Path)
	if err != nil {
		return Result{}, err
	}
	defer r.Close()
	f, err := r.Open(rel)
	if err != nil {
		return Result{}, fmt.Errorf("read %s: %w", in.Path, unwrapPathError(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Result{}, fmt.Errorf("read %s: %w", in.Path, err)
	}
	if st.IsDir() {
		return Result{}, fmt.Errorf("%s is a directory; use list_dir", in.Path)
	}
	br := bufio.NewReaderSize(f, 64<<10)
	head, _ := br.Peek(sniffLen)
	if isBinary(head) {
		mime := http.DetectContentType(head)
		hint := ""
		if strings.HasPrefix(mime, "image/") {
			hint = "; use view_image to look at it"
		}
		return Result{}, fmt.Errorf("%s is a binary file (%s, %d bytes)%s", in.Path, mime, st.Size(), hint)
	}
	offset, limit := max(in.Offset, 1), in.Limit
	if limit <= 0 {
		limit = 500
	}

	var b strings.Builder
	line, last, stoppedAt := 0, 0, 0
	for {
		text, err := br.ReadString('\n')
		if text == "" && err != nil {
			if !errors.Is(err, io.EOF) {
				return Result{}, fmt.Errorf("read %s: %w", in.Path, err)
			}
			break
		}
		line++
		if line%4096 == 0 && ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		if line < offset || line >= offset+limit || stoppedAt > 0 {
			continue // keep counting so the model learns the file's length
		}
		text = strings.TrimRight(text, "\r\n")
		if len(text) > readFileMaxLineLen {
			text = truncateRunes(text, readFileMaxLineLen) + " …[line cut]"
		}
		if b.Len()+len(text) > readFileMaxOutput {
			stoppedAt = line
			continue
		}
		fmt.Fprintf(&b, "%6d→%s\n", line, text)
		last = line
	}
	res := Result{}
	switch {
	case line == 0:
		res.Text = fmt.Sprintf("%s is empty.", in.Path)
	case offset > line:
		return Result{}, fmt.Errorf("offset %d is past the end of %s, which has %d lines", offset, in.Path, line)
	default:
		res.Text = fmt.Sprintf("%s: lines %d-%d of %d\n%s", in.Path, offset, last, line, b.String())
		if stoppedAt > 0 {
			res.Truncated = true
			res.Text += fmt.Sprintf("[output truncated at line %d: %d-byte page limit; continue with offset=%d]\n", stoppedAt, readFileMaxOutput, stoppedAt)
		} else if last < line {
			res.Text += fmt.Sprintf("[%d more lines; continue with offset=%d]\n", line-last, last+1)
		}
	}
	return res, nil
}

// isBinary uses the heuristic git and grep use: a NUL byte early on, or bytes that are not UTF-8.
func isBinary(head []byte) bool {
	if len(head) == 0 {
		return false
	}
	if strings.IndexByte(string(head), 0) >= 0 {
		return true
	}
	// The sniffed window may end mid-rune; only the last 3 bytes are allowed to be incomplete.
	for i := 0; i < len(head); {
		r, size := utf8.DecodeRune(head[i:])
		if r == utf8.RuneError && size == 1 {
			return len(head)-i > 3 || utf8.FullRune(head[i:])
		}
		i += size
	}
	return false
}

func truncateRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// unwrapPathError drops os.Root's absolute path from the message; the model only knows relative paths.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		if errors.Is(pe.Err, fs.ErrNotExist) {
			return errors.New("no such file")
		}
		return pe.Err
	}
	return err
}
