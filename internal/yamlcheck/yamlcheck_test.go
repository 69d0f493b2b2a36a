package yamlcheck_test

import (
	"strings"
	"testing"

	"github.com/visorhq/visor/internal/yamlcheck"
)

type inner struct {
	Path string `yaml:"path"`
	Ctx  int    `yaml:"ctx"`
}

type doc struct {
	Name   string           `yaml:"name"`
	Tools  []string         `yaml:"tools"`
	Models map[string]inner `yaml:"models"`
	Skip   string           `yaml:"-"`
}

func TestDecodeNamesLineColumnAndFix(t *testing.T) {
	cases := []struct{ src, want string }{
		{"name: a\nnmae: b\n", `f.yaml:2:1: unknown key nmae — did you mean name?`},
		{"models:\n  m:\n    ctx: many\n", `f.yaml:3:10: models.m.ctx: "many" is not a whole number — for example ctx: 8`},
		{"tools: read_file\n", "f.yaml:1:8: tools should be a list — write [a, b]"},
		{"", "f.yaml:1:1: the file is empty"},
		{"name: a\n---\nname: b\n", "f.yaml:2:1: a second YAML document"},
		{"name: [\n", "f.yaml:1:1: not valid YAML"},
		{"skip: x\n", "unknown key skip"}, // a yaml:"-" field is not a key
	}
	for _, tc := range cases {
		var d doc
		_, err := yamlcheck.Decode([]byte(tc.src), "f.yaml", &d)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q:\n got %v\nwant %s", tc.src, err, tc.want)
		}
	}
	var d doc
	if _, err := yamlcheck.Decode([]byte("name: a\nmodels: {m: {path: x.gguf, ctx: 8}}\n---\n"), "f.yaml", &d); err != nil ||
		d.Models["m"].Ctx != 8 {
		t.Errorf("valid file with an empty trailing document: %+v %v", d, err)
	}
}
