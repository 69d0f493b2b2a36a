package launch_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/visorhq/visor/engine/gguf"
	"github.com/visorhq/visor/engine/launch"
	"github.com/visorhq/visor/engine/modelgen"
	"github.com/visorhq/visor/engine/vram"
)

// TestSeedStartsResidentWithQuantizedKV: on the seed's 24 GiB budget, with no cache type asked for, the first
// launch attempt of `--plan auto` is resident vision + MTP at the full 262,144 tokens with the plan's quantized KV
// cache: the engine starts the way `visor plan` recommends.
func TestSeedStartsResidentWithQuantizedKV(t *testing.T) {
	dir := t.TempDir()
	model, mmproj := filepath.Join(dir, "qwen3.6.gguf"), filepath.Join(dir, "mmproj.gguf")
	kv, ts := modelgen.Qwen36()
	if err := gguf.WriteFile(model, kv, ts); err != nil {
		t.Fatal(err)
	}
	kv, ts = modelgen.QwenVLProjector()
	if err := gguf.WriteFile(mmproj, kv, ts); err != nil {
		t.Fatal(err)
	}
	res, err := vram.PlanFiles(context.Background(), vram.FileOptions{Model: model, MMProj: mmproj,
		Source:  vram.StaticGPUs{{Name: "24 GiB card", Total: 24 << 30, Free: 24 << 30, Source: "test"}},
		Options: vram.Options{Ctx: 262144, Parallel: 1}})
	if err != nil {
		t.Fatal(err)
	}
	a := launch.Attempts(res)
	if len(a) == 0 {
		t.Fatal("no attempts")
	}
	args := strings.Join(a[0].Args, " ")
	if a[0].Name != "resident (ctx 262144)" || !strings.Contains(args, "-c 262144") || !strings.Contains(args, "-ctk q8_0 -ctv q8_0") ||
		!strings.Contains(args, "--spec-type draft-mtp") || !strings.Contains(args, "--mmproj "+mmproj) ||
		strings.Contains(args, "--no-mmproj-offload") {
		t.Errorf("first attempt %s: %s", a[0].Name, args)
	}
}
