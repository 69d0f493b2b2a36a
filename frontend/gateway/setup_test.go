package gateway_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/visorhq/visor/frontend/gateway"
)

// A models file entry and its engine's facts make the gateway's model: a remote one queues on its server, a
// vision model with several slots keeps one for queued prefills, MTP is read from the server's arguments.
func TestModelConfigServed(t *testing.T) {
	for _, c := range []struct {
		name             string
		mc               gateway.ModelConfig
		f                gateway.EngineFacts
		slots, server    int
		vision, mtp, rmt bool
	}{
		{"remote", gateway.ModelConfig{Endpoint: "http://x/v1"}, gateway.EngineFacts{Slots: 1}, 64, 0, false, false, true},
		{"vision with 3 slots", gateway.ModelConfig{Model: "m.gguf"}, gateway.EngineFacts{Projector: true, Slots: 3}, 2, 3, true, false, false},
		{"vision with one slot", gateway.ModelConfig{Model: "m.gguf"}, gateway.EngineFacts{Projector: true, Slots: 1}, 1, 0, true, false, false},
		{"text with 2 slots", gateway.ModelConfig{Model: "m.gguf"}, gateway.EngineFacts{Slots: 2}, 2, 0, false, false, false},
		{"mtp", gateway.ModelConfig{Model: "m.gguf"}, gateway.EngineFacts{Slots: 1, Args: []string{"--spec-type", "draft-mtp"}}, 1, 0, false, true, false},
	} {
		m := c.mc.Served("n", c.f, nil)
		if m.Slots != c.slots || m.ServerSlots != c.server || m.Vision != c.vision || m.MTP != c.mtp || m.Remote != c.rmt {
			t.Errorf("%s: %+v", c.name, m)
		}
	}
}

// LoadConfig reads a models file, or makes one model of the command line's, loaded at start; both or neither
// is refused with the fix.
func TestLoadConfig(t *testing.T) {
	if _, err := gateway.LoadConfig("m.yaml", "", gateway.ModelConfig{Model: "q.gguf"}); err == nil || !strings.Contains(err.Error(), "both given") {
		t.Errorf("--config and --model: %v", err)
	}
	if _, err := gateway.LoadConfig("", "", gateway.ModelConfig{}); err == nil || !strings.Contains(err.Error(), "--config models.yaml") {
		t.Errorf("no models: %v", err)
	}
	fc, err := gateway.LoadConfig("", "", gateway.ModelConfig{Model: "/m/qwen3.gguf", Parallel: 2, APIKey: "k"})
	if mc := fc.Models["qwen3"]; err != nil || mc.Parallel != 2 || mc.APIKey != "" || len(fc.Preload) != 1 || fc.Preload[0] != "qwen3" {
		t.Errorf("one local model: %+v, %v", fc, err)
	}
	fc, err = gateway.LoadConfig("", "", gateway.ModelConfig{Endpoint: "http://x/v1", Parallel: 4, APIKey: "k"})
	if mc := fc.Models["remote"]; err != nil || mc.Parallel != 0 || mc.APIKey != "k" {
		t.Errorf("one endpoint: %+v, %v", fc, err)
	}
	path := filepath.Join(t.TempDir(), "models.yaml")
	if err := os.WriteFile(path, []byte("models:\n  b:\n    endpoint: http://x/v1\n  a:\n    endpoint: http://y/v1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if fc, err = gateway.LoadConfig(path, "", gateway.ModelConfig{}); err != nil || strings.Join(fc.Names(), ",") != "a,b" {
		t.Errorf("the file: %v, %v", fc.Names(), err)
	}
}
