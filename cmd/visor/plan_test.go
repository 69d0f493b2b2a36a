package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/visorhq/visor/engine/gguf"
	"github.com/visorhq/visor/engine/modelgen"
)

// TestPlanTwoGPUs: `visor plan --gpu 24GiB,24GiB` on the seed's model (engine-notes §8, header only) prints each
// card's buffers and recommends keeping vision and MTP at 262,144 tokens with no swap, with the command line.
func TestPlanTwoGPUs(t *testing.T) {
	t.Setenv("VISOR_ENGINE_DIR", t.TempDir()) // --server is not given: no engine is asked, no cache written
	dir := t.TempDir()
	model, mmproj := filepath.Join(dir, "qwen3.6-35b-a3b.gguf"), filepath.Join(dir, "mmproj.gguf")
	kv, ts := modelgen.Qwen36()
	if err := gguf.WriteFile(model, kv, ts); err != nil {
		t.Fatal(err)
	}
	kv, ts = modelgen.QwenVLProjector()
	if err := gguf.WriteFile(mmproj, kv, ts); err != nil {
		t.Fatal(err)
	}
	args := []string{"plan", "--model", model, "--mmproj", mmproj, "--gpu", "24GiB,24GiB", "--ctx", "262144",
		"--cache-type", "q4_0", "--ubatch", "2048", "--draft-max", "3", "--server", filepath.Join(dir, "no-such-server")}
	out, _, err := visor(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out)
	for _, want := range []string{
		"recommended: projector-apart (ctx 262144)\n",
		"--spec-type draft-mtp --spec-draft-n-max 3 --mmproj " + mmproj + " -dev Vulkan0 --mmproj-device Vulkan1\n",
		"projector-apart  Vulkan0   0–40+out   16,128     1,440",
		"projector-apart  Vulkan1          -        -",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q", want)
		}
	}
	if strings.Contains(out[strings.Index(out, "recommended:"):], "--mmproj-gpu-swap") {
		t.Error("the recommendation must not need the fork's swap")
	}
	out, _, err = visor(t, append(args, "--json")...)
	if err != nil {
		t.Fatal(err)
	}
	var plan struct {
		Devices []struct{ Name string } `json:"devices"`
		Modes   []struct {
			Mode    string `json:"mode"`
			Fits    bool   `json:"fits"`
			Devices []struct {
				Device string `json:"device"`
				Fits   bool   `json:"fits"`
				Total  uint64 `json:"total"`
			} `json:"devices"`
		} `json:"modes"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil || len(plan.Devices) != 2 {
		t.Fatalf("plan --json: %v\n%s", err, out)
	}
	found := false
	for _, m := range plan.Modes {
		if m.Mode == "projector-apart" {
			found = m.Fits && len(m.Devices) == 2 && m.Devices[0].Device == "Vulkan0" && m.Devices[1].Total > 0
		}
	}
	if !found {
		t.Errorf("--json lacks a fitting projector-apart with two devices:\n%s", out)
	}
}
