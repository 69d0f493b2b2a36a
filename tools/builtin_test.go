package tools

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// builtinRegistry registers the built-ins for cfg, so tests go through validation and defaults as the
// agent does.
func builtinRegistry(t *testing.T, cfg BuiltinConfig) *Registry {
	t.Helper()
	r := NewRegistry(WithLogger(slog.New(slog.DiscardHandler)))
	for _, tool := range Builtins(cfg) {
		if err := r.Register(tool); err != nil {
			t.Fatalf("register %s: %v", tool.Spec().Name, err)
		}
	}
	return r
}

func call(t *testing.T, r *Registry, name string, args any) Result {
	t.Helper()
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return r.Call(context.Background(), name, b)
}

func mustOK(t *testing.T, res Result) Result {
	t.Helper()
	if res.IsError {
		t.Fatalf("unexpected error result: %s", res.Text)
	}
	return res
}

func mustFail(t *testing.T, res Result, want ...string) {
	t.Helper()
	if !res.IsError {
		t.Fatalf("expected an error result, got: %s", res.Text)
	}
	for _, w := range want {
		if !strings.Contains(res.Text, w) {
			t.Errorf("error %q lacks %q", res.Text, w)
		}
	}
}

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// hardLinkedWorkspace returns a workspace holding ok.txt ("fine") and key, a hard link to a file outside it
// (../secret/key, "hunter2"); it skips the test where the file system has no hard links.
func hardLinkedWorkspace(t *testing.T) (root string) {
	t.Helper()
	base := t.TempDir()
	root = filepath.Join(base, "ws")
	writeFiles(t, base, map[string]string{"secret/key": "hunter2\n", "ws/ok.txt": "fine\n"})
	if err := os.Link(filepath.Join(base, "secret/key"), filepath.Join(root, "key")); err != nil {
		t.Skipf("hard links unsupported here: %v", err)
	}
	return root
}

func names(ts []Tool) string {
	var n []string
	for _, t := range ts {
		n = append(n, t.Spec().Name)
	}
	return strings.Join(n, ",")
}

func TestBuiltinsRespectConfig(t *testing.T) {
	t.Parallel()
	if got := names(Builtins(BuiltinConfig{})); got != "list_dir,read_file,search_files,view_image,write_file" {
		t.Errorf("defaults = %s", got)
	}
	all := Builtins(BuiltinConfig{AllowFetch: true, Shell: []string{"echo"}})
	if got := names(all); got != "fetch_url,list_dir,read_file,run_shell,search_files,view_image,write_file" {
		t.Errorf("enabled = %s", got)
	}
	// Every built-in must register: a schema that fails to compile would only show up at startup.
	builtinRegistry(t, BuiltinConfig{AllowFetch: true, Shell: []string{"echo"}})
	for _, tool := range all {
		s := tool.Spec()
		if strings.TrimSpace(s.Description) == "" || strings.Contains(s.Description, "%!") {
			t.Errorf("%s: bad description %q", s.Name, s.Description)
		}
	}
	if !specOf(all, ViewImageName).ReturnsImages || specOf(all, WriteFileName).Parallel || !specOf(all, ReadFileName).Parallel {
		t.Error("flags: view_image must return images, read_file is parallel, write_file is not")
	}
}

func specOf(ts []Tool, name string) Spec {
	for _, t := range ts {
		if t.Spec().Name == name {
			return t.Spec()
		}
	}
	return Spec{}
}

func TestSelect(t *testing.T) {
	t.Parallel()
	all := Builtins(BuiltinConfig{})
	got, err := Select(all, "read_file, list_dir", "read_file")
	if err != nil || names(got) != "read_file,list_dir" {
		t.Errorf("Select = %s, %v", names(got), err)
	}
	if _, err := Select(all, "read_fil"); err == nil || !strings.Contains(err.Error(), "available: list_dir, read_file") {
		t.Errorf("unknown: %v", err)
	}
	if _, err := Select(all, "fetch_url"); err == nil || !strings.Contains(err.Error(), "disabled") {
		t.Errorf("disabled: %v", err)
	}
}
