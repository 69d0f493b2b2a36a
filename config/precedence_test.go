package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/visorhq/visor/engine/launch"
	"github.com/visorhq/visor/tools/toolset"
)

// A model description's settings fill the spec unless the command line gave them, and the stored profile gives
// them back.
func TestApplyModelAndProfile(t *testing.T) {
	m := Model{Path: "/m/q.gguf", MMProj: "/m/p.gguf", Ctx: 8192, Parallel: 2, Plan: "off", GPU: "0", CacheType: "q8_0",
		FlashAttn: "off", ServerArgs: []string{"-t", "4"}}
	s := launch.Defaults()
	s.Ctx, s.FlashAttn = 4096, "on"
	ApplyModel(&s, m, Set{"ctx": true, "flash-attn": true})
	if s.Model != m.Path || s.Projector != m.MMProj || s.Ctx != 4096 || s.Slots != 2 || s.Plan != "off" || s.GPU != "0" ||
		s.KVType != "q8_0" || s.FlashAttn != "on" || s.ExtraArgs[len(s.ExtraArgs)-1] != "4" {
		t.Fatalf("spec %+v", s)
	}
	name, back, ok := ParseProfile(Profile("qwen", s))
	if !ok || name != "qwen" || back.FlashAttn != "on" || back.CacheType != "q8_0" || back.Ctx != 4096 || back.Path != m.Path {
		t.Fatalf("profile: %q %+v %v", name, back, ok)
	}
	if _, _, ok := ParseProfile(Profile("", launch.Spec{Endpoint: "http://u:secret@h:1"})); ok {
		t.Fatal("an endpoint with credentials was stored")
	}
}

// TestUnknownModel: a --model that is no file and no name of the config, but looks like a name, is told the
// config's names (and the one meant), not only "no such file"; a path, a file and a known name pass.
func TestUnknownModel(t *testing.T) {
	file := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := Config{Path: "/home/me/.config/visor/config.yaml", Models: map[string]Model{"qwen": {Path: "/m/q.gguf"}, "tiny": {Path: "/m/t.gguf"}}}
	for _, tc := range []struct {
		model string
		set   Set
		want  string // "": no error
	}{
		{"tny", Set{"model": true}, "--model tny: no such file, nor a model named in /home/me/.config/visor/config.yaml (did you mean tiny?): give a GGUF file or one of qwen, tiny"},
		{"llama", Set{"model": true}, "--model llama: no such file, nor a model named in /home/me/.config/visor/config.yaml: give a GGUF file or one of qwen, tiny"},
		{"tiny", Set{"model": true}, ""},
		{"/nope/model.gguf", Set{"model": true}, ""}, // the file check names it
		{"model.gguf", Set{"model": true}, ""},
		{file, Set{"model": true}, ""},
		{"tny", Set{}, ""}, // not from the command line
	} {
		err := c.UnknownModel(tc.model, tc.set)
		if got := fmt.Sprint(err); (tc.want == "") != (err == nil) || err != nil && got != tc.want {
			t.Errorf("UnknownModel(%q, %v) = %v, want %q", tc.model, tc.set, err, tc.want)
		}
	}
	if err := (Config{}).UnknownModel("tny", Set{"model": true}); err != nil {
		t.Errorf("no config: %v", err)
	}
}

// TestFillLeavesSessionSearchOutWithNoStore: the config's tools serve every command, so --no-store leaves out
// its session_search (which needs the database) instead of refusing the command; --tools session_search given
// on the command line is the command line's to answer for, and is left alone.
func TestFillLeavesSessionSearchOutWithNoStore(t *testing.T) {
	c := Config{Tools: []string{"list_dir", "session_search", "read_file"}}
	for _, tc := range []struct {
		noStore bool
		set     Set
		given   []string
		want    string
	}{
		{false, Set{}, nil, "list_dir,session_search,read_file"},
		{true, Set{}, nil, "list_dir,read_file"},
		{true, Set{"tools": true}, []string{"session_search"}, "session_search"},
	} {
		var spec launch.Spec
		var name, db string
		tools := toolset.Options{Names: tc.given}
		c.Fill(Settings{Engine: &spec, ModelName: &name, Tools: &tools, DB: &db, NoStore: tc.noStore}, tc.set, false)
		if got := strings.Join(tools.Names, ","); got != tc.want {
			t.Errorf("no-store %v, set %v: tools %s, want %s", tc.noStore, tc.set, got, tc.want)
		}
	}
}

// TestDefaultModelOriginNamesTheOthers: the default model's errors say which other models the config names, so
// the copy of examples/config.yaml whose qwen file is missing points at --model tiny.
func TestDefaultModelOriginNamesTheOthers(t *testing.T) {
	for _, tc := range []struct {
		models map[string]Model
		want   string
	}{
		{map[string]Model{"qwen": {Path: "/m/q.gguf"}}, `the default model "qwen" of /c.yaml`},
		{map[string]Model{"qwen": {Path: "/m/q.gguf"}, "tiny": {Path: "/m/t.gguf"}, "box": {Endpoint: "http://x"}},
			`the default model "qwen" of /c.yaml (it also names box, tiny)`},
	} {
		c := Config{Path: "/c.yaml", Model: "qwen", Models: tc.models}
		var spec launch.Spec
		var name, db string
		var tools toolset.Options
		if got := c.FillDefaultModel(Settings{Engine: &spec, ModelName: &name, Tools: &tools, DB: &db}, Set{}); got != tc.want {
			t.Errorf("origin %q, want %q", got, tc.want)
		}
	}
}
