package layers

import (
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

// allowed: a package under the key may import, directly, only visor packages under one of the values (and its
// own subtree). The longest key that matches a package is its layer. Front ends reach the loop, the store and the
// engine through the session service; only cmd wires front ends.
var allowed = map[string][]string{
	"cmd": {""}, // anything: flags and wiring
	// Front ends: the session service, the loop's event and message types, images and tool images, shared helpers.
	"frontend":            {"session", "agent", "images", "tools", "internal"},
	"session":             {"session", "agent", "engine", "images", "memory", "tools", "prompts", "internal"},
	"agent":               {"agent", "engine", "images", "memory", "prompts", "tools", "internal"},
	"config":              {"agent/agentfile", "engine/launch", "tools/toolset", "internal"},
	"tools":               {"tools", "images", "memory", "internal"},
	"memory":              {"images", "tools", "internal"},
	"prompts":             {"internal"},
	"images":              {"internal"},
	"engine":              {"engine", "internal"},
	"internal":            {"internal", "images"},
	"internal/testkit":    {""}, // test helpers build real parts of every layer
	"internal/enginetest": {""},
	"internal/gpucheck":   {""}, // GPU check programs (dev tools) drive every layer
	"internal/testmodel":  {"engine/gguf", "internal"},
	"internal/layers":     {""},
}

// fixtures are test models and GPU check programs: only tests, `visor models write` (cmd) and the dev programs
// may import them, so the product's packages ship none.
var fixtures = []string{"internal/testmodel", "internal/gpucheck"}

// exceptions are imports the rules forbid that are still there, each named and pointing at the issue that
// removes it. An exception that is no longer needed fails too, so the list only shrinks.
var exceptions = map[string][]string{}

func layerOf(pkg string) string {
	best := ""
	for k := range allowed {
		if under(mod+pkg, k) && len(k) > len(best) {
			best = k
		}
	}
	return best
}

func TestImportsFollowTheLayers(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}:{{join .Imports \" \"}}", mod+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	used := map[string]map[string]bool{}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		full, imports, _ := strings.Cut(line, ":")
		pkg := strings.TrimPrefix(full, mod)
		layer := layerOf(pkg)
		if layer == "" {
			t.Errorf("%s is in no layer: add it to allowed", pkg)
			continue
		}
		checked++
		if misplaced(pkg) {
			t.Errorf("%s: test fixtures and GPU check programs live under internal/, out of the product's packages", pkg)
		}
		for _, imp := range strings.Fields(imports) {
			if !strings.HasPrefix(imp, mod) {
				continue
			}
			dep := strings.TrimPrefix(imp, mod)
			if msg := forbidden(pkg, layer, dep); msg != "" {
				if slices.Contains(exceptions[pkg], dep) {
					if used[pkg] == nil {
						used[pkg] = map[string]bool{}
					}
					used[pkg][dep] = true
					continue
				}
				t.Errorf("%s imports %s: %s", pkg, dep, msg)
			}
		}
	}
	for pkg, deps := range exceptions {
		for _, d := range deps {
			if !used[pkg][d] {
				t.Errorf("the exception %s → %s is no longer needed: remove it from exceptions", pkg, d)
			}
		}
	}
	if checked < 30 {
		t.Fatalf("only %d packages checked: the rules no longer match the tree", checked)
	}
}

// misplaced says pkg is a test fixture or a dev program inside a product package: a generated test model, a
// test helper or a main program anywhere but cmd/ and internal/.
func misplaced(pkg string) bool {
	if under(mod+pkg, "cmd") || under(mod+pkg, "internal") {
		return false
	}
	base := pkg[strings.LastIndex(pkg, "/")+1:]
	return base == "testmodel" || strings.HasSuffix(base, "test") || strings.Contains(pkg+"/", "/cmd/")
}

// forbidden says why pkg (in layer) may not import dep, or "" when it may.
func forbidden(pkg, layer, dep string) string {
	if under(mod+dep, pkg) {
		return "" // its own subtree
	}
	if under(mod+dep, "frontend") && !under(mod+pkg, "cmd") {
		return "only cmd wires front ends"
	}
	for _, f := range fixtures {
		if under(mod+dep, f) && !under(mod+pkg, "cmd") && !under(mod+pkg, "internal") {
			return "test fixtures and GPU check programs stay out of the product's packages"
		}
	}
	for _, a := range allowed[layer] {
		if a == "" || under(mod+dep, a) {
			return ""
		}
	}
	ok := append([]string(nil), allowed[layer]...)
	sort.Strings(ok)
	return layer + " may import only " + strings.Join(ok, ", ")
}

// TestTheBinaryShipsNoTestHelpers: visor itself links the tiny-model generator (visor models write, visor demo)
// but no test helper and no GPU check program.
func TestTheBinaryShipsNoTestHelpers(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", mod+"cmd/visor").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, d := range strings.Fields(string(out)) {
		for _, helper := range []string{"internal/testkit", "internal/enginetest", "internal/gpucheck", "internal/layers"} {
			if under(d, helper) {
				t.Errorf("cmd/visor links %s", strings.TrimPrefix(d, mod))
			}
		}
	}
}
