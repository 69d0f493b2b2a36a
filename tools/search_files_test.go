package tools

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSearchFiles(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"main.go":      "package main\n\nfunc main() { Run(1+2) }\n",
		"lib/run.go":   "package lib\n\n// Run runs.\nfunc Run(n int) {}\n",
		"lib/notes.md": "call run(1+2) here\n",
		".git/config":  "func Run\n",
		"big.txt":      strings.Repeat("func Run\n", searchMaxFileSize/9+1),
	})
	must(t, os.WriteFile(filepath.Join(root, "bin.dat"), []byte("func Run\x00\x01"), 0o644))
	r := builtinRegistry(t, BuiltinConfig{Root: root})

	res := mustOK(t, call(t, r, SearchFilesName, map[string]any{"pattern": `func \w+\(`}))
	want := "lib/run.go:4: func Run(n int) {}\nmain.go:3: func main() { Run(1+2) }\n[2 binary or large files skipped]\n"
	if res.Text != want {
		t.Errorf("regexp:\n%q\nwant\n%q", res.Text, want)
	}
	res = mustOK(t, call(t, r, SearchFilesName, map[string]any{"pattern": "run(1+2)", "literal": true, "ignore_case": true, "glob": "*.md"}))
	if res.Text != "lib/notes.md:1: call run(1+2) here\n" {
		t.Errorf("literal: %q", res.Text)
	}
	res = mustOK(t, call(t, r, SearchFilesName, map[string]any{"pattern": "Run", "path": "lib"}))
	if !strings.HasPrefix(res.Text, "lib/run.go:3: // Run runs.\nlib/run.go:4:") {
		t.Errorf("path: %q", res.Text)
	}
	res = mustOK(t, call(t, r, SearchFilesName, map[string]any{"pattern": "nothing-like-this", "path": "lib"}))
	if res.Text != `No matches for "nothing-like-this" in 2 files.` {
		t.Errorf("none: %q", res.Text)
	}
	mustFail(t, call(t, r, SearchFilesName, map[string]any{"pattern": "Run("}), "RE2", "literal=true")
	mustFail(t, call(t, r, SearchFilesName, map[string]any{"pattern": "x", "glob": "[a"}), "glob")
}

func TestSearchFilesMaxResults(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	var b strings.Builder
	for i := range 20 {
		fmt.Fprintf(&b, "hit %d\n", i)
	}
	writeFiles(t, root, map[string]string{"a.txt": b.String(), "b.txt": b.String()})
	r := builtinRegistry(t, BuiltinConfig{Root: root})
	res := mustOK(t, call(t, r, SearchFilesName, map[string]any{"pattern": "hit", "max_results": 25}))
	if !res.Truncated || strings.Count(res.Text, "hit ") != 25 || !strings.Contains(res.Text, "stopped after 25 matches") {
		t.Errorf("truncated=%v text=%q", res.Truncated, res.Text)
	}
}
