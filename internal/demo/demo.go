// Package demo holds what `visor demo` shows the loop with: a small workspace for list_dir to find and the words
// that say what happened, since the tiny model's answer ("Hi!") says nothing on its own.
package demo

import (
	"fmt"
	"os"
	"path/filepath"
)

// Workspace writes the demo's folder (a few files in a new temporary folder) and returns it; the caller removes it.
func Workspace() (string, error) {
	ws, err := os.MkdirTemp("", "visor-demo-")
	if err != nil {
		return "", fmt.Errorf("demo: %w", err)
	}
	for name, body := range map[string]string{"notes.txt": "buy milk\n", "plan.md": "# Plan\nship visor\n",
		"src/main.go": "package main\n"} {
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			os.RemoveAll(ws)
			return "", fmt.Errorf("demo: %w", err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			os.RemoveAll(ws)
			return "", fmt.Errorf("demo: %w", err)
		}
	}
	return ws, nil
}

// Explained follows the tiny model's answer: "Hi!" after a tool call says nothing on its own.
const Explained = `
demo: what happened: a real llama-server ran visor's tiny test model, which is wired to call list_dir and then
      answer "Hi!". visor offered its tools, parsed the model's call, ran the real tool in the workspace and sent the
      result back: that loop is the point, the words are not. With a real model:
        VISOR_MODEL=~/models/your.gguf make demo
        visor ask "What is in this folder?" --model ~/models/your.gguf --tools list_dir,read_file
        visor chat --model M.gguf --mmproj mmproj.gguf     (screenshots: /image shot.png)
`
