package config

import (
	"slices"
	"strings"
	"testing"

	"github.com/visorhq/visor/engine/launch"
	"github.com/visorhq/visor/internal/testmodel"
)

// A gateway entry becomes its engine spec over the command line's flags: the entry's model, projector, key and
// server arguments replace the flags', an embeddings model gets --embeddings and mean pooling unless it pools
// its own way, and the spec is checked with the entry's name.
func TestGatewaySpec(t *testing.T) {
	chat, proj, err := testmodel.Files(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	base := launch.Defaults()
	base.Projector, base.APIKey = "/flags/mmproj.gguf", "flag-key"
	t.Setenv("VISOR_TEST_GW_KEY", "env-key")
	for _, c := range []struct {
		name string
		g    GatewayModel
		ok   func(launch.Spec) bool
	}{
		{"an endpoint takes its key from its variable", GatewayModel{Model: Model{Endpoint: "http://10.0.0.2:8000/v1",
			APIKeyEnv: "VISOR_TEST_GW_KEY"}, APIKey: "cli-key"},
			func(s launch.Spec) bool { return s.APIKey == "env-key" && s.Projector == "" && s.Slots == 1 }},
		{"without a variable, the command line's key", GatewayModel{Model: Model{Endpoint: "http://10.0.0.2:8000/v1"}, APIKey: "cli-key"},
			func(s launch.Spec) bool { return s.APIKey == "cli-key" }},
		{"a local model: its projector, slots, env and port; no flag's key", GatewayModel{Model: Model{Path: chat, MMProj: proj,
			Parallel: 3}, Env: []string{"A=1"}, Port: 18080},
			func(s launch.Spec) bool {
				return s.Model == chat && s.Projector == proj && s.Slots == 3 && s.APIKey == "" && slices.Equal(s.Env, []string{"A=1"}) && s.Port == 18080
			}},
		{"embeddings: --embeddings and mean pooling", GatewayModel{Model: Model{Path: chat}, Embeddings: true},
			func(s launch.Spec) bool {
				return slices.Contains(s.ExtraArgs, "--embeddings") && strings.Contains(strings.Join(s.ExtraArgs, " "), "--pooling mean")
			}},
		{"embeddings with the entry's own pooling keep it", GatewayModel{Model: Model{Path: chat, ServerArgs: []string{"--pooling=cls"}}, Embeddings: true},
			func(s launch.Spec) bool {
				return slices.Contains(s.ExtraArgs, "--embeddings") && !strings.Contains(strings.Join(s.ExtraArgs, " "), "--pooling mean")
			}},
	} {
		s, err := GatewaySpec("m", base, c.g)
		if err != nil || !c.ok(s) {
			t.Errorf("%s: %+v, %v", c.name, s, err)
		}
	}
	if _, err := GatewaySpec("qwen", base, GatewayModel{Model: Model{Path: t.TempDir() + "/missing.gguf"}}); err == nil ||
		!strings.Contains(err.Error(), `model "qwen"`) {
		t.Errorf("a missing model file: %v; want an error naming the entry", err)
	}
}
