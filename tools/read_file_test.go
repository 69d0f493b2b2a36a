package tools

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadFilePages(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	var lines []string
	for i := 1; i <= 10; i++ {
		lines = append(lines, fmt.Sprintf("line %d", i))
	}
	writeFiles(t, root, map[string]string{"ten.txt": strings.Join(lines, "\n") + "\n", "empty.txt": "", "crlf.txt": "a\r\nb\r\n"})
	r := builtinRegistry(t, BuiltinConfig{Root: root})

	res := mustOK(t, call(t, r, ReadFileName, map[string]any{"path": "ten.txt", "offset": 3, "limit": 2}))
	want := "ten.txt: lines 3-4 of 10\n     3→line 3\n     4→line 4\n[6 more lines; continue with offset=5]\n"
	if res.Text != want {
		t.Errorf("got\n%q\nwant\n%q", res.Text, want)
	}
	res = mustOK(t, call(t, r, ReadFileName, map[string]any{"path": "ten.txt"}))
	if !strings.HasPrefix(res.Text, "ten.txt: lines 1-10 of 10\n") || strings.Contains(res.Text, "more lines") {
		t.Errorf("defaults: %q", res.Text)
	}
	if res := mustOK(t, call(t, r, ReadFileName, map[string]any{"path": "crlf.txt"})); strings.Contains(res.Text, "\r") {
		t.Errorf("CR kept: %q", res.Text)
	}
	if res := mustOK(t, call(t, r, ReadFileName, map[string]any{"path": "empty.txt"})); res.Text != "empty.txt is empty." {
		t.Errorf("empty: %q", res.Text)
	}
	mustFail(t, call(t, r, ReadFileName, map[string]any{"path": "ten.txt", "offset": 11}), "past the end", "10 lines")
	mustFail(t, call(t, r, ReadFileName, map[string]any{"path": "nope.txt"}), "no such file")
	mustFail(t, call(t, r, ReadFileName, map[string]any{"path": "."}), "directory")
	mustFail(t, call(t, r, ReadFileName, map[string]any{"path": "ten.txt", "offset": 0}), `field "offset"`, "must be >= 1")
}

func TestReadFileCapsOutput(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	long := strings.Repeat("x", 5000)
	var b strings.Builder
	for range 100 {
		b.WriteString(strings.Repeat("y", 1000) + "\n")
	}
	writeFiles(t, root, map[string]string{"long.txt": long + "\n", "big.txt": b.String()})
	r := builtinRegistry(t, BuiltinConfig{Root: root})

	res := mustOK(t, call(t, r, ReadFileName, map[string]any{"path": "long.txt"}))
	if !strings.Contains(res.Text, "…[line cut]") || len(res.Text) > readFileMaxLineLen+200 {
		t.Errorf("long line not cut: %d bytes", len(res.Text))
	}
	res = mustOK(t, call(t, r, ReadFileName, map[string]any{"path": "big.txt"}))
	if !res.Truncated || !strings.Contains(res.Text, "continue with offset=") || len(res.Text) > readFileMaxOutput+1000 {
		t.Errorf("page cap: truncated=%v len=%d tail=%q", res.Truncated, len(res.Text), res.Text[len(res.Text)-120:])
	}
}

func TestReadFileRefusesBinary(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	must(t, os.WriteFile(filepath.Join(root, "pic.png"), pngBytes(t, 4, 4), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "blob.bin"), []byte{0xff, 0xfe, 0x00, 0x01, 'a'}, 0o644))
	// Valid UTF-8 that happens to be cut mid-rune at the sniff boundary is still text.
	must(t, os.WriteFile(filepath.Join(root, "utf8.txt"), []byte(strings.Repeat("é", sniffLen)), 0o644))
	r := builtinRegistry(t, BuiltinConfig{Root: root})
	mustFail(t, call(t, r, ReadFileName, map[string]any{"path": "pic.png"}), "binary", "image/png", "view_image")
	mustFail(t, call(t, r, ReadFileName, map[string]any{"path": "blob.bin"}), "binary")

	mustOK(t, call(t, r, ReadFileName, map[string]any{"path": "utf8.txt"}))
}

func TestReadLineCutsLongLines(t *testing.T) {
	t.Parallel()
	in := strings.Repeat("a", 10) + "\r\n" + strings.Repeat("b", 11) + "\n" + strings.Repeat("é", 6) + "\n" + "tail"
	br := bufio.NewReaderSize(strings.NewReader(in), 16) // smaller than a line, to cross buffer refills
	want := []struct {
		text string
		n    int
		cut  bool
	}{{"aaaaaaaaaa", 12, false}, {"bbbbbbbbbb", 12, true}, {"ééééé", 13, true}, {"tail", 4, false}}
	for _, w := range want {
		text, n, cut, _ := readLine(br, 10)
		if text != w.text || n != w.n || cut != w.cut {
			t.Errorf("readLine = %q,%d,%v want %q,%d,%v", text, n, cut, w.text, w.n, w.cut)
		}
	}
	if _, n, _, err := readLine(br, 10); n != 0 || err == nil {
		t.Errorf("after the end: n=%d err=%v", n, err)
	}
}
