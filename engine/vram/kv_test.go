package vram

import (
	"context"
	"strings"
	"testing"
)

// TestKVDimension is issue 25's plan line: on the seed's budgets (a 24 GiB card, and the blog's 23.4 GB) with no
// cache type asked for, a session that will see images gets resident vision + MTP at the full 262,144 tokens with
// a quantized KV cache (q8_0 where it fits, else q4_0), not the CPU encoder (f16's choice on 24 GiB) or a cut
// context (f16's on 23.4 GB), and the table says why with the per-step costs.
func TestKVDimension(t *testing.T) {
	t.Parallel()
	model, mmproj := blogFiles(t)
	for _, c := range []struct {
		gpu  StaticGPUs
		want string
	}{
		{StaticGPUs{{Index: 0, Name: "24 GiB card", Total: 24 << 30, Free: 24 << 30, Source: "test"}}, "q8_0"},
		{blogGPU, "q4_0"},
	} {
		res, err := PlanFiles(context.Background(), FileOptions{Model: model, MMProj: mmproj, Source: c.gpu,
			Options: Options{Ctx: 262144, Parallel: 1}})
		if err != nil {
			t.Fatal(err)
		}
		rec, ok := res.Recommended()
		if !ok || rec.Mode != ModeResident || !rec.Fits || rec.LaunchCtx() != 262144 {
			t.Fatalf("%s: recommended %s fits=%v ctx %d, want resident at 262,144", c.gpu[0].Name, rec.Mode, rec.Fits, rec.LaunchCtx())
		}
		a := strings.Join(rec.Args, " ")
		if res.KV == nil || res.KV.Cache != c.want || !strings.Contains(a, "-ctk "+c.want+" -ctv "+c.want) ||
			!strings.Contains(a, "--spec-type draft-mtp") || strings.Contains(a, "--no-mmproj-offload") {
			t.Errorf("%s: kv %+v, args %s; want %s", c.gpu[0].Name, res.KV, a, c.want)
		}
		tbl := tableOf(t, res)
		if !strings.Contains(tbl, "kv cache:      "+c.want+" KV: resident") || !strings.Contains(tbl, "f16: ") {
			t.Errorf("%s: the table does not explain the choice:\n%s", c.gpu[0].Name, tbl)
		}
		t.Logf("%s: %s", c.gpu[0].Name, res.KV.Why)
	}
	// A cache type asked for is kept, and a plan without a projector stays at f16.
	res, err := PlanFiles(context.Background(), FileOptions{Model: model, MMProj: mmproj, Source: blogGPU,
		Options: Options{Ctx: 262144, Parallel: 1, CacheK: "f16", CacheV: "f16"}})
	if err != nil || res.KV != nil || res.Options.CacheK != "f16" {
		t.Errorf("f16 asked for: kv %+v cache %s %v", res.KV, res.Options.CacheK, err)
	}
	res, err = PlanFiles(context.Background(), FileOptions{Model: model, Source: blogGPU, Options: Options{Ctx: 262144, Parallel: 1}})
	if err != nil || res.KV != nil || res.Options.CacheK != "f16" {
		t.Errorf("no projector: kv %+v cache %s %v", res.KV, res.Options.CacheK, err)
	}
}
