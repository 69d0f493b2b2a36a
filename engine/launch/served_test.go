package launch

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteServedSaysWhyItFailed: a served-engine file that cannot be written is an error naming the cause (it
// was dropped, and visor serve said other commands would reuse an engine none could find); one that can is
// written whole, with no temporary file left beside it.
func TestWriteServedSaysWhyItFailed(t *testing.T) {
	dir := t.TempDir()
	notDir := filepath.Join(dir, "run")
	if err := os.WriteFile(notDir, []byte("a file where the folder goes"), 0o644); err != nil {
		t.Fatal(err)
	}
	st := Served{URL: "http://127.0.0.1:8080", PID: 1, VisorPID: 2, Model: "m.gguf"}
	err := writeServed(filepath.Join(notDir, "k.json"), st)
	if err == nil || !strings.Contains(err.Error(), "advertise the engine") || !strings.Contains(err.Error(), notDir) {
		t.Fatalf("writing below a file: %v, want an error naming %s", err, notDir)
	}
	path := filepath.Join(dir, "ok", "k.json")
	if err := writeServed(path, st); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got Served
	if err := json.Unmarshal(b, &got); err != nil || got.URL != st.URL || got.Model != st.Model || got.VisorPID != 2 {
		t.Fatalf("read back %+v (%v) from %s", got, err, b)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left behind: %v", err)
	}
}
