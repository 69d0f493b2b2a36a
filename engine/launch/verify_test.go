package launch_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/visorhq/visor/engine/launch"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/engine/vram"
	"github.com/visorhq/visor/internal/enginetest"
)

// fakeTwoGPUServer is a stand-in for llama-server on two GPUs, which a CPU machine cannot show: when started at
// -lv 4 it first prints the load log recorded for the draft-apart placement over two RPC devices, then execs
// the real server with its arguments, so a real server answers. The real server gets --device none: a GPU build
// (the H200's Vulkan engine) would otherwise put the tiny model on its own GPU and log buffers the recording's
// plan does not have.
func fakeTwoGPUServer(t *testing.T, real string) string {
	t.Helper()
	rec, err := filepath.Abs(filepath.Join("..", "vram", "testdata", "twogpu-rpc", "draft-apart.log"))
	if err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("#!/bin/sh\n# fakeTwoGPUServer: prints a recorded two-device load log, then runs the real server.\n"+
		"case \" $* \" in *' -lv 4 '*) cat '%s' >&2;; esac\nexec '%s' \"$@\" --device none\n", rec, real)
	bin := filepath.Join(t.TempDir(), "fakeTwoGPUServer")
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestStartCheckedPlacement runs --plan auto's check: the attempt of a two-device mode carries -lv 4, the load
// log's buffer lines are collected while the server starts, and each is compared with the plan's device.
func TestStartCheckedPlacement(t *testing.T) {
	real := enginetest.Binary(t)
	tiny := tinyPlan(t)
	text, ok := tiny.Mode(vram.ModeTextOnly)
	if !ok {
		t.Fatal("no text-only mode")
	}
	c := func(name string, mib float64) vram.Component {
		return vram.Component{Name: name, Bytes: uint64(mib * vram.MiB)}
	}
	// The draft-apart plan the recording was started from (engine/vram TestPlacementAgainstRecordedLogs).
	plan := vram.ModePlan{Mode: vram.ModeDraftApart, Available: true, Fits: true, Ctx: 4096, MaxCtx: 4096, Args: text.Args,
		Devices: []vram.DevicePlan{
			{Device: "RPC0", Components: []vram.Component{c("weights", 1867.65), c("KV cache", 90), c("recurrent state", 251.25), c("compute", 101.1)}},
			{Device: "RPC1", Components: []vram.Component{c("weights", 447.6), c("compute", 0.95), c("MTP KV", 32), c("MTP compute", 64.1), c("projector", 852.5)}},
		}}
	res := vram.Result{Model: tiny.Model, Modes: []vram.ModePlan{plan},
		Devices: []vram.Device{{Name: "RPC0", Description: "127.0.0.1:50052"}, {Name: "RPC1", Description: "127.0.0.1:50053"}}}
	if a := launch.Attempts(res); len(a) != 1 || !strings.HasSuffix(strings.Join(a[0].Args, " "), " -lv 4") {
		t.Fatalf("a two-device attempt must ask for the buffer lines (-lv 4): %+v", a)
	}
	var seen atomic.Int64 // the observer runs on the server's log goroutine
	s, used, placed, err := launch.StartChecked(context.Background(), llamacpp.Config{Binary: fakeTwoGPUServer(t, real),
		OnLog: func(string) { seen.Add(1) }}, res, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	for _, ch := range placed.Checks {
		t.Log(ch)
	}
	if used.Name != "draft-apart (ctx 4096)" || placed.Mode != vram.ModeDraftApart || placed.Err != nil || len(placed.Checks) != 9 {
		t.Errorf("started %q, placement %s with %d checks, err %v", used.Name, placed.Mode, len(placed.Checks), placed.Err)
	}
	if seen.Load() == 0 {
		t.Error("the caller's OnLog observer must still see the log")
	}
	// The same log against a plan that kept the MTP draft on the first device must not pass.
	plan.Devices[0].Components = append(plan.Devices[0].Components, c("MTP KV", 32))
	plan.Devices[1].Components = plan.Devices[1].Components[:2]
	if _, err := vram.CheckPlacement(plan, res.Devices, vram.ParseLoadLog(s.LogTail(0))); err == nil ||
		!strings.Contains(err.Error(), "MTP KV           planned     32.0 MiB, logged      0.0 MiB (no such buffer") {
		t.Errorf("MTP KV planned on RPC0 but logged on RPC1 must be a mismatch: %v", err)
	}
}
