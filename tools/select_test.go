package tools_test

import (
	"strings"
	"testing"

	"github.com/visorhq/visor/tools"
)

// TestSelectSuggestsTheToolMeant: a mistyped name in a tools list is told the tool meant, as the toolset's check
// and mistyped flags are, with the list of what there is.
func TestSelectSuggestsTheToolMeant(t *testing.T) {
	all := tools.Builtins(tools.BuiltinConfig{Root: t.TempDir()})
	_, err := tools.Select(all, "read_file,list_dri")
	if err == nil || !strings.Contains(err.Error(), `"list_dri" (did you mean list_dir?)`) ||
		!strings.Contains(err.Error(), "available: ") {
		t.Fatalf("Select(list_dri): %v", err)
	}
	if _, err := tools.Select(all, "zzzzzzzz"); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Fatalf("a name near nothing gets no guess: %v", err)
	}
}
