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
	readFileMaxScan    = 64 << 20 // past the requested page, stop counting lines after this many bytes
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
	f, st, err := openRegular(root, in.Path)
	if err != nil {
		return Result{}, err
	}
	defer f.Close()
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
	var scanned int64
	partial := false // whether the file was too big to count all its lines
	for {
		text, n, cut, err := readLine(br, readFileMaxLineLen)
		if n == 0 && err != nil {
			if !errors.Is(err, io.EOF) {
				return Result{}, fmt.Errorf("read %s: %w", in.Path, err)
			}
			break
		}
		line++
		scanned += int64(n)
		if line%4096 == 0 && ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		if line >= offset+limit && scanned > readFileMaxScan {
			partial = true
			break
		}
		if line < offset || line >= offset+limit || stoppedAt > 0 {
			continue // keep counting so the model learns the file's length
		}
		if cut {
			text += " …[line cut]"
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
		total := fmt.Sprint(line)
		if partial {
			total = fmt.Sprintf("more than %d", line)
		}
		res.Text = fmt.Sprintf("%s: lines %d-%d of %s\n%s", in.Path, offset, last, total, b.String())
		if stoppedAt > 0 {
			res.Truncated = true
			res.Text += fmt.Sprintf("[output truncated at line %d: %d-byte page limit; continue with offset=%d]\n", stoppedAt, readFileMaxOutput, stoppedAt)
		} else if partial {
			res.Text += fmt.Sprintf("[more lines follow; continue with offset=%d]\n", last+1)
		} else if last < line {
			res.Text += fmt.Sprintf("[%d more lines; continue with offset=%d]\n", line-last, last+1)
		}
	}
	return res, nil
}

// readLine returns the next line without its line ending, keeping at most max bytes of it so that a
// minified file with one 100 MB line cannot fill memory; n is the full length consumed, ending included, and
// cut says whether text lost part of the line.
func readLine(br *bufio.Reader, max int) (text string, n int, cut bool, err error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		n += len(chunk)
		if room := max - len(buf); room > 0 {
			buf = append(buf, chunk[:min(room, len(chunk))]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		ending := 0
		if strings.HasSuffix(string(chunk), "\n") {
			ending = 1
			if strings.HasSuffix(string(chunk), "\r\n") {
				ending = 2
			}
		}
		s := strings.TrimSuffix(strings.TrimSuffix(string(buf), "\n"), "\r")
		if n-ending > len(s) {
			s, cut = dropPartialRune(s), true
		}
		return s, n, cut, err
	}
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
