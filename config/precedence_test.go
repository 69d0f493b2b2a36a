package config

import (
	"testing"

	"github.com/visorhq/visor/engine/launch"
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
