package layers

import (
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/visorhq/visor/"

// rules: a package under the key must not import (directly or not) a package under any of the values.
var rules = map[string][]string{
	"agent":     {"session", "frontend", "cmd"},
	"tools":     {"agent", "session", "frontend", "cmd"},
	"prompts":   {"agent", "session", "frontend", "engine", "tools", "memory"},
	"engine":    {"agent", "session", "frontend", "cmd", "tools"},
	"memory":    {"agent", "session", "frontend", "engine", "cmd"},
	"images":    {"agent", "session", "frontend", "engine", "cmd", "tools", "memory"},
	"session":   {"frontend", "cmd"},
	"frontend":  {"cmd"},
	"internal/": {"frontend", "cmd"},
}

func under(pkg, prefix string) bool {
	p := strings.TrimPrefix(pkg, mod)
	prefix = strings.TrimSuffix(prefix, "/")
	return p == prefix || strings.HasPrefix(p, prefix+"/")
}

func TestLayers(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}:{{join .Deps \" \"}}", mod+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, deps, _ := strings.Cut(line, ":")
		if !strings.HasPrefix(pkg, mod) || strings.HasPrefix(pkg, mod+"internal/testkit") || strings.HasPrefix(pkg, mod+"internal/layers") {
			continue
		}
		for from, banned := range rules {
			if !under(pkg, from) {
				continue
			}
			checked++
			for _, d := range strings.Fields(deps) {
				for _, b := range banned {
					if strings.HasPrefix(d, mod) && under(d, b) && !under(d, from) {
						t.Errorf("%s imports %s: %s must not depend on %s", strings.TrimPrefix(pkg, mod), strings.TrimPrefix(d, mod), from, b)
					}
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d packages checked: the rules no longer match the tree", checked)
	}
}
