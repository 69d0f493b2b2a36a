package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/visorhq/visor/engine/launch"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/engine/vram"
)

// engineDeviceNames asks the engine for its GPU names (`llama-server --list-devices`: Vulkan0, CUDA1, …) so a
// multi-GPU plan's --device flags name what this build calls them. Only for --gpu auto, where NVML lists the
// GPUs; nil (the planner's Vulkan0, Vulkan1, … default) when the engine cannot be asked, or lists a different
// number of devices than NVML does, or for one GPU, where no flag names a device.
func engineDeviceNames(ctx context.Context, server, gpu string, src vram.GPUSource) []string {
	if g := strings.TrimSpace(gpu); g != "" && g != "auto" {
		return nil
	}
	gpus, err := src.GPUs(ctx)
	if err != nil || len(gpus) < 2 {
		return nil
	}
	bin, err := llamacpp.Find(server)
	if err != nil {
		return nil
	}
	listed, err := llamacpp.ListDevices(ctx, bin)
	if err != nil || len(listed) != len(gpus) {
		return nil
	}
	names := make([]string, len(listed))
	for i, d := range listed {
		names[i] = d.Name
	}
	return names
}

// reportPlacement tells the user where a multi-device placement's buffers went: one line per check, and a
// warning when one is not where the plan put it (the server keeps running; the plan's headroom is then
// uncertain).
func reportPlacement(w io.Writer, p launch.Placement) {
	if p.Mode == "" {
		return
	}
	fmt.Fprintf(w, "placement %s, per the load log:\n", p.Mode)
	for _, c := range p.Checks {
		fmt.Fprintf(w, "  %s\n", c)
	}
	if p.Err != nil {
		fmt.Fprintf(w, "visor: warning: %v\n", p.Err)
	}
}
