package tools

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// TestBuiltinSpecsGolden pins exactly what the model is shown for each built-in. A change to a description
// or a struct tag shows up as a diff of testdata/builtin_specs.golden; regenerate with go test -update.
func TestBuiltinSpecsGolden(t *testing.T) {
	specs := make([]map[string]any, 0)
	for _, tool := range Builtins(BuiltinConfig{AllowFetch: true, Shell: []string{"go", "git"}}) {
		s := tool.Spec()
		specs = append(specs, map[string]any{
			"name": s.Name, "description": s.Description, "parameters": s.Parameters,
			"returns_images": s.ReturnsImages, "parallel": s.Parallel, "timeout": s.Timeout.String(),
		})
	}
	got, err := json.MarshalIndent(specs, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := filepath.Join("testdata", "builtin_specs.golden")
	if *update {
		must(t, os.MkdirAll("testdata", 0o755))
		must(t, os.WriteFile(golden, got, 0o644))
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./tools -run Golden -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("built-in specs changed; review and run go test ./tools -run Golden -update\ngot:\n%s", got)
	}
}
