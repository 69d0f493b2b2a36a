package vram

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/visorhq/visor/engine/gguf"
	"github.com/visorhq/visor/engine/modelgen"
)

// smallQwen writes the §8 Qwen3.6 header with 8 experts instead of 256 (2.7 GB, sparse): the shape the two-device
// logs in testdata were recorded with, over two RPC devices of a CPU host (Debian b11669, libggml0-backend-rpc).
func smallQwen(t testing.TB) Facts {
	t.Helper()
	kv, ts := modelgen.Qwen36()
	for i := range kv {
		if kv[i].Key == "qwen35moe.expert_count" {
			kv[i].Value = uint32(8)
		}
	}
	for i := range ts {
		switch {
		case strings.Contains(ts[i].Name, "_exps"):
			ts[i].Shape[2] = 8
		case strings.HasSuffix(ts[i].Name, "ffn_gate_inp.weight"):
			ts[i].Shape[1] = 8
		}
	}
	path := filepath.Join(t.TempDir(), "small.gguf")
	if err := gguf.WriteFile(path, kv, ts); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	fa, err := FactsFromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	return fa
}

// rpcDevices are the two RPC devices of the recordings, as `llama-server --list-devices` named them.
func rpcDevices() []Device {
	g := GPU{Name: "RPC CPU", Total: 24105 * MiB, Free: 24105 * MiB, Source: "test"}
	return []Device{{GPU: g, Name: "RPC0", Description: "127.0.0.1:50052"}, {GPU: g, Name: "RPC1", Description: "127.0.0.1:50053"}}
}

func mustMode(t *testing.T, r Result, m Mode) ModePlan {
	t.Helper()
	p, ok := r.Mode(m)
	if !ok {
		t.Fatalf("mode %s not planned; modes: %v", m, modeNames(r))
	}
	return p
}

// tableOf is the plan's table, as visor plan prints it.
func tableOf(t *testing.T, r Result) string {
	t.Helper()
	var b bytes.Buffer
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func modeNames(r Result) []string {
	var s []string
	for _, p := range r.Modes {
		s = append(s, string(p.Mode))
	}
	return s
}

func device(t *testing.T, p ModePlan, name string) DevicePlan {
	t.Helper()
	for _, d := range p.Devices {
		if d.Device == name {
			return d
		}
	}
	t.Fatalf("%s has no share on %s: %+v", p.Mode, name, p.Devices)
	return DevicePlan{}
}

// TestTwoGPUBlogCase is the acceptance: on two 24 GiB cards the seed's model (§8) keeps vision and MTP
// at 262,144 tokens without a swap, by putting the projector on the second card, with upstream's flags only.
func TestTwoGPUBlogCase(t *testing.T) {
	t.Parallel()
	model, mmproj := blogFiles(t)
	o := blogOptions()
	o.SwapSupported = false // Debian's llama-server: no --mmproj-gpu-swap
	res, err := PlanFiles(context.Background(), FileOptions{Model: model, MMProj: mmproj, GPU: "24GiB,24GiB", Options: o})
	if err != nil {
		t.Fatal(err)
	}
	tbl := tableOf(t, res)
	t.Logf("\n%s", tbl)
	if len(res.Devices) != 2 || res.Devices[0].Name != "Vulkan0" || res.Devices[1].Name != "Vulkan1" {
		t.Fatalf("devices: %+v", res.Devices)
	}
	rec, ok := res.Recommended()
	if !ok || rec.Mode != ModeProjectorApart || !rec.Fits || rec.LaunchCtx() != 262144 {
		t.Fatalf("recommended %s fits=%v ctx %d; want projector-apart at 262,144", rec.Mode, rec.Fits, rec.LaunchCtx())
	}
	a := " " + strings.Join(rec.Args, " ") + " "
	for _, want := range []string{" -c 262144 ", " --spec-type draft-mtp ", " --mmproj " + mmproj + " ", " -dev Vulkan0 ",
		" --mmproj-device Vulkan1 ", " -ctk q4_0 ", " -ub 2048 "} {
		if !strings.Contains(a, want) {
			t.Errorf("args lack %q: %s", want, a)
		}
	}
	for _, bad := range []string{"--mmproj-gpu-swap", "--no-mmproj-offload", " -ts "} {
		if strings.Contains(a, bad) {
			t.Errorf("args must not carry %q: %s", bad, a)
		}
	}
	if !strings.Contains(tbl, "recommended: projector-apart (ctx 262144)\n               llama-server "+strings.Join(rec.Args, " ")) {
		t.Errorf("table does not recommend projector-apart with its command line")
	}
	// The card with the model holds exactly what resident holds less the projector and its encoder buffers, with
	// one context's driver memory: the per-device plan does not carry the encoder staging and the further
	// contexts' driver memory the one-card plan has (measured on one H200 only).
	resident := mustMode(t, res, ModeResident)
	v0, v1 := device(t, rec, "Vulkan0"), device(t, rec, "Vulkan1")
	oneCard := component(resident, "encoder staging") + component(resident, "driver context") - DefaultOverhead
	if want := resident.Total - component(resident, "projector") - component(resident, "encoder compute") - oneCard; v0.Total != want {
		t.Errorf("Vulkan0 holds %s, want resident less the projector: %s", mib(v0.Total), mib(want))
	}
	for _, c := range []string{"weights", "KV cache", "recurrent state", "compute", "MTP KV", "MTP compute"} {
		if got, want := component(DevicePlanMode(v0), c), component(resident, c); got != want {
			t.Errorf("Vulkan0 %s = %s, resident plans %s", c, mib(got), mib(want))
		}
	}
	if want := component(resident, "projector") + component(resident, "encoder compute") + DefaultOverhead; v1.Total != want {
		t.Errorf("Vulkan1 holds %s, want projector + encoder + driver context %s", mib(v1.Total), mib(want))
	}
	if v0.Usable != 24<<30-DefaultMargin || !v0.Fits || !v1.Fits {
		t.Errorf("usable %s, fits %v/%v", mib(v0.Usable), v0.Fits, v1.Fits)
	}
	if _, err := json.Marshal(res); err != nil {
		t.Fatal(err)
	}
}

// DevicePlanMode wraps a device's components as a ModePlan, for component().
func DevicePlanMode(d DevicePlan) ModePlan { return ModePlan{Components: d.Components} }

// TestTwoBlogCards: on two of the blog's cards (23.4 GB free each) resident does not fit at 262K on one card; a
// second card makes vision + MTP fit at the full context in three ways, none of which swaps.
func TestTwoBlogCards(t *testing.T) {
	t.Parallel()
	model, mmproj := blogFiles(t)
	o := blogOptions()
	o.SwapSupported = false
	card := GPU{Name: "24 GB card", Total: 24e9, Free: 23.4e9, Source: "test"}
	res, err := PlanFiles(context.Background(), FileOptions{Model: model, MMProj: mmproj, GPU: "auto",
		Source: StaticGPUs{card, card}, Options: o})
	if err != nil {
		t.Fatal(err)
	}
	tbl := tableOf(t, res)
	t.Logf("\n%s", tbl)
	if p := mustMode(t, res, ModeResident); p.Fits {
		t.Errorf("resident on one 23.4 GB card must not fit at 262K: %s", mib(p.Total))
	}
	var got []string
	for _, c := range res.Candidates() {
		got = append(got, string(c.Mode)+"@"+itoa(c.LaunchCtx()))
	}
	want := "projector-apart@262144 draft-apart@262144 layer-split@262144 vision-cpu@262144 vision-no-mtp@262144 text-only@262144 resident@"
	if g := strings.Join(got, " "); !strings.HasPrefix(g, want) {
		t.Errorf("candidates %q, want them to start %q", g, want)
	}
	// draft-apart: the second card holds the NextN block and the output head, with the MTP draft context.
	d := mustMode(t, res, ModeDraftApart)
	second := device(t, d, "Vulkan1")
	if second.Layers != [2]int{40, 41} || !second.Output || component(DevicePlanMode(second), "MTP KV") == 0 {
		t.Errorf("draft-apart's second card: %+v", second)
	}
	if a := strings.Join(d.Args, " "); !strings.Contains(a, "-dev Vulkan0,Vulkan1 -sm layer -ts 79,5 -ot "+noPipelineOverride) {
		t.Errorf("draft-apart args: %s", a)
	}
	first := device(t, d, "Vulkan0")
	if component(DevicePlanMode(first), "MTP KV") != 0 || component(DevicePlanMode(first), "KV cache") != component(mustMode(t, res, ModeResident), "KV cache") {
		t.Errorf("draft-apart's first card should hold every main KV layer and no MTP KV: %+v", first.Components)
	}
}

// TestSingleDeviceUnchanged: with one device PlanDevices is Plan, argument for argument.
func TestSingleDeviceUnchanged(t *testing.T) {
	t.Parallel()
	model, mmproj := blogFiles(t)
	m, err := factsFromPath(model)
	if err != nil {
		t.Fatal(err)
	}
	p, err := factsFromPath(mmproj)
	if err != nil {
		t.Fatal(err)
	}
	g := blogGPU[0]
	want, err := Plan(m, &p, g, blogOptions())
	if err != nil {
		t.Fatal(err)
	}
	got, err := PlanDevices(m, &p, []Device{{GPU: g, Name: "Vulkan0"}}, blogOptions())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("one-device PlanDevices differs from Plan")
	}
}

// llamaLayerDevice is llama.cpp's rule for -ts (llama-model.cpp, load_tensors): cumulative shares as float32,
// layer il of n (blocks + the output layer) goes to the first device whose share exceeds il/n.
func llamaLayerDevice(ts []float32, il, n int) int {
	var total float32
	for _, w := range ts {
		total += w
	}
	var acc float32
	x := float32(il) / float32(n)
	for d, w := range ts {
		acc += w
		if acc/total > x {
			return d
		}
	}
	return len(ts) - 1
}

// TestTensorSplitRule checks tensorSplit against llama.cpp's assignment for every boundary of two devices up to
// 128 blocks and a grid of three-device splits: each block and the output head land where the plan put them.
// The recordings confirm the rule: -ts 1,1 put blocks 0–20 of 41 on the first device, -ts 3,1 blocks 0–31.
func TestTensorSplitRule(t *testing.T) {
	t.Parallel()
	check := func(ends []int, blocks int) {
		s := tensorSplit(ends, blocks)
		var ts []float32
		for _, p := range strings.Split(s, ",") {
			var v float32
			if _, err := fmt.Sscan(p, &v); err != nil || v <= 0 {
				t.Fatalf("ends %v: bad -ts %q", ends, s)
			}
			ts = append(ts, v)
		}
		lo := 0
		for d, hi := range ends {
			for il := lo; il < hi; il++ {
				if got := llamaLayerDevice(ts, il, blocks+1); got != d {
					t.Fatalf("ends %v (-ts %s): block %d goes to device %d, planned %d", ends, s, il, got, d)
				}
			}
			lo = hi
		}
		if got := llamaLayerDevice(ts, blocks, blocks+1); got != len(ends)-1 {
			t.Fatalf("ends %v: output head on device %d", ends, got)
		}
	}
	for blocks := 2; blocks <= 128; blocks++ {
		for e := 1; e < blocks; e++ {
			check([]int{e, blocks}, blocks)
		}
	}
	for e0 := 1; e0 < 60; e0 += 3 {
		for e1 := e0 + 1; e1 < 61; e1 += 2 {
			check([]int{e0, e1, 61}, 61)
		}
	}
	if got := tensorSplit([]int{40, 41}, 41); got != "79,5" {
		t.Errorf("draft-apart split of the 41-block model: -ts %s, want 79,5", got)
	}
	// The two recorded splits, in llama.cpp's own rule.
	for _, c := range []struct {
		ts   []float32
		last int // last block on device 0
	}{{[]float32{1, 1}, 20}, {[]float32{3, 1}, 31}} {
		if llamaLayerDevice(c.ts, c.last, 42) != 0 || llamaLayerDevice(c.ts, c.last+1, 42) != 1 {
			t.Errorf("-ts %v: the rule disagrees with the recording (last block on device 0: %d)", c.ts, c.last)
		}
	}
}

func readLog(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "twogpu-rpc", name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// smallPlan is the plan the recordings were started from: `visor plan --model small.gguf --mmproj mmproj.gguf
// --gpu 24105MiB,24105MiB --devices RPC0,RPC1 --ctx 16384 --cache-type q4_0`.
func smallPlan(t *testing.T) Result {
	t.Helper()
	_, mmproj := blogFiles(t)
	p, err := factsFromPath(mmproj)
	if err != nil {
		t.Fatal(err)
	}
	res, err := PlanDevices(smallQwen(t), &p, rpcDevices(), Options{Ctx: 16384, CacheK: "q4_0", CacheV: "q4_0"})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestPlacementAgainstRecordedLogs: each two-device placement, and resident pinned to one of the two, was
// started over two RPC devices (a CPU host standing in for two GPUs: ggml's RPC backend gives llama-server real
// separate devices with their own buffers) with the plan's own arguments; every buffer went to the planned
// device, at the planned size.
func TestPlacementAgainstRecordedLogs(t *testing.T) {
	t.Parallel()
	res := smallPlan(t)
	for _, c := range []struct {
		mode Mode
		log  string
		ts   string // the -ts the log was recorded with
	}{
		{ModeResident, "resident-pinned.log", ""},
		{ModeProjectorApart, "projector-apart.log", ""},
		{ModeDraftApart, "draft-apart.log", "79,5"},
		{ModeSplit, "layer-split.log", "73,11"},
	} {
		p := mustMode(t, res, c.mode)
		a := strings.Join(p.Args, " ")
		if c.ts != "" && !strings.Contains(a, "-ts "+c.ts+" ") || c.ts == "" && strings.Contains(a, "-ts") {
			t.Errorf("%s: args %s no longer match the recording (-ts %q)", c.mode, a, c.ts)
		}
		checks, err := CheckPlacement(p, res.Devices, ParseLoadLog(readLog(t, c.log)))
		for _, ch := range checks {
			t.Logf("%s: %s", c.mode, ch)
		}
		if err != nil {
			t.Errorf("%s: %v", c.mode, err)
		}
		// Every device buffer the plan names was found: weights, KV, recurrent, compute, MTP, projector.
		if want := map[Mode]int{ModeResident: 7, ModeProjectorApart: 7, ModeDraftApart: 9, ModeSplit: 11}[c.mode]; len(checks) != want {
			t.Errorf("%s: %d checks, want %d", c.mode, len(checks), want)
		}
	}
}

// TestCheckPlacementCatchesMisplacement: the check fails when buffers sit elsewhere than planned, when the
// encoder runs on another device, and when pipeline parallelism multiplied the compute buffers.
func TestCheckPlacementCatchesMisplacement(t *testing.T) {
	t.Parallel()
	res := smallPlan(t)
	apart := mustMode(t, res, ModeProjectorApart)
	_, err := CheckPlacement(apart, res.Devices, ParseLoadLog(readLog(t, "draft-apart.log")))
	if err == nil || !strings.Contains(err.Error(), "weights") || !strings.Contains(err.Error(), "RPC1") ||
		!strings.Contains(err.Error(), "where the plan put none") {
		t.Errorf("projector-apart plan against the draft-apart log: %v", err)
	}
	split := mustMode(t, res, ModeSplit)
	_, err = CheckPlacement(split, res.Devices, ParseLoadLog(readLog(t, "pipeline-ts-1-1.log")))
	if err == nil || !strings.Contains(err.Error(), "pipeline copies") {
		t.Errorf("a log with pipeline parallelism on must fail: %v", err)
	}
	lines := readLog(t, "projector-apart.log")
	for i, l := range lines {
		lines[i] = strings.Replace(l, "CLIP using RPC0[127.0.0.1:50053]", "CLIP using RPC0[127.0.0.1:50052]", 1)
	}
	if _, err := CheckPlacement(apart, res.Devices, ParseLoadLog(lines)); err == nil || !strings.Contains(err.Error(), "projector") {
		t.Errorf("the encoder on the model's device must fail projector-apart: %v", err)
	}
	if _, err := CheckPlacement(apart, res.Devices, LoadLog{}); err == nil || !strings.Contains(err.Error(), "-lv 4") {
		t.Errorf("an empty log must say how to get the buffer lines: %v", err)
	}
	// Pinned to RPC0, resident expects the encoder there too; the projector-apart log has it on RPC1.
	_, err = CheckPlacement(mustMode(t, res, ModeResident), res.Devices, ParseLoadLog(readLog(t, "projector-apart.log")))
	if err == nil || !strings.Contains(err.Error(), "projector") || strings.Contains(err.Error(), "weights") {
		t.Errorf("resident pinned to RPC0 against a log with the encoder on RPC1: %v", err)
	}
	one := smallPlan(t)
	one.Devices, one.Modes = nil, nil
	single, err := PlanDevices(one.Model, one.Projector, rpcDevices()[:1], Options{Ctx: 16384})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CheckPlacement(mustMode(t, single, ModeResident), rpcDevices(), LoadLog{}); err == nil ||
		!strings.Contains(err.Error(), "single-device plan") {
		t.Errorf("a one-GPU plan has nothing to check per device: %v", err)
	}
}

// TestParseLoadLogVulkan reads the Vulkan form of the lines (the names the H200 run printed in §7-§9).
func TestParseLoadLogVulkan(t *testing.T) {
	t.Parallel()
	log := []string{
		"load_tensors:   CPU_Mapped model buffer size =   272.81 MiB",
		"load_tensors:      Vulkan0 model buffer size = 15702.23 MiB",
		"load_tensors:      Vulkan1 model buffer size =   424.50 MiB",
		"llama_context: n_ctx                 = 262144",
		"llama_kv_cache:    Vulkan0 KV buffer size =  1440.00 MiB",
		"llama_memory_recurrent:    Vulkan0 RS buffer size =   251.25 MiB",
		"sched_reserve:    Vulkan0 compute buffer size =  1328.36 MiB",
		"sched_reserve:    Vulkan1 compute buffer size =     0.95 MiB",
		"sched_reserve: Vulkan_Host compute buffer size =    36.02 MiB",
		"sched_reserve: reserve took 1.2 ms, sched copies = 1",
		"llama_context: n_ctx                 = 262144",
		"llama_kv_cache:    Vulkan1 KV buffer size =   512.00 MiB",
		"sched_reserve:    Vulkan1 compute buffer size =  1192.02 MiB",
		"clip_ctx: CLIP using Vulkan1 backend",
		"sched_reserve:    Vulkan1 compute buffer size =  1192.02 MiB",
	}
	l := ParseLoadLog(log)
	if l.CLIP != "Vulkan1" || !reflect.DeepEqual(l.Copies, []int{1}) || len(l.Buffers) != 10 {
		t.Fatalf("parsed %+v", l)
	}
	if b := l.Buffers[len(l.Buffers)-1]; b != (Buffer{Kind: "compute", Buffer: "Vulkan1", Context: 1, MiB: 1192.02}) {
		t.Errorf("MTP compute: %+v", b)
	}
	if b := l.Buffers[3]; b.Kind != "KV" || b.Context != 0 || b.Buffer != "Vulkan0" {
		t.Errorf("buffers: %+v", l.Buffers)
	}
	var keep LogLines
	keep.Add("llama_model_loader: - kv 0: general.architecture str = qwen35moe")
	for _, line := range log {
		keep.Add(line)
	}
	if !reflect.DeepEqual(ParseLoadLog(keep.Lines()), l) || len(keep.Lines()) != len(log) {
		t.Errorf("LogLines kept %d lines, want the %d placement lines", len(keep.Lines()), len(log))
	}
}

func TestResolveDevices(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := StaticGPUs{{Index: 0, Name: "a", Free: 10}, {Index: 1, Name: "b", Free: 20}}
	devs, err := ResolveDevices(ctx, nil, "24GiB, 20GiB", nil)
	if err != nil || len(devs) != 2 || devs[0].Name != "Vulkan0" || devs[1].Name != "Vulkan1" || devs[1].GPU.Free != 20<<30 {
		t.Errorf("sizes: %+v %v", devs, err)
	}
	if devs, err := ResolveDevices(ctx, src, "auto", []string{"CUDA0", "CUDA1"}); err != nil || len(devs) != 2 ||
		devs[1].Name != "CUDA1" || devs[1].GPU.Name != "b" {
		t.Errorf("auto: %+v %v", devs, err)
	}
	if devs, err := ResolveDevices(ctx, src, "1", nil); err != nil || len(devs) != 1 || devs[0].GPU.Name != "b" {
		t.Errorf("index: %+v %v", devs, err)
	}
	for spec, names := range map[string][]string{"24GiB,": nil, "auto,24GiB": nil, "0,7": nil, "0,1": {"Vulkan0"},
		"24GiB,24GiB": {"Vulkan0", "Vulkan0"}, "8GiB,8GiB": {"Vulkan0", "bad name"}} {
		if _, err := ResolveDevices(ctx, src, spec, names); err == nil {
			t.Errorf("ResolveDevices(%q, %v) accepted", spec, names)
		}
	}
}

// TestSplitArithmetic: a layer split's device shares add up to the whole model, every block counted once,
// each KV layer and recurrent layer on exactly one device, and the balance leaves the cards even.
func TestSplitArithmetic(t *testing.T) {
	t.Parallel()
	res := smallPlan(t)
	m := res.Model
	resident := mustMode(t, res, ModeResident)
	for _, mode := range []Mode{ModeDraftApart, ModeSplit, ModeProjectorApart} {
		p := mustMode(t, res, mode)
		for _, c := range []string{"weights", "KV cache", "recurrent state", "MTP KV", "projector"} {
			if got, want := component(p, c), component(resident, c); got != want {
				t.Errorf("%s: %s sums to %d over the devices, resident holds %d", mode, c, got, want)
			}
		}
		var w uint64
		for _, d := range p.Devices {
			w += component(DevicePlanMode(d), "weights")
		}
		if w != m.WeightBytes-m.HostBytes {
			t.Errorf("%s: weights %d, want %d", mode, w, m.WeightBytes-m.HostBytes)
		}
	}
	split := mustMode(t, res, ModeSplit)
	a, b := split.Devices[0], split.Devices[1]
	if d := math.Abs(float64(a.Headroom-b.Headroom)) / MiB; d > 200 {
		t.Errorf("balanced split leaves %s and %s of headroom", group(a.Headroom/MiB), group(b.Headroom/MiB))
	}
}
