package vram

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// DefaultDevicePrefix names GPUs the way the engine visor installs (Debian's llama-server, Vulkan backend) does:
// Vulkan0, Vulkan1, … in enumeration order. A CUDA build says CUDA0; pass the names when they differ.
const DefaultDevicePrefix = "Vulkan"

// Device is a GPU together with the name llama-server gives it (--device, --mmproj-device and the load log's
// buffer lines use that name).
type Device struct {
	GPU  GPU    `json:"gpu"`
	Name string `json:"name"`
	// Description is what `llama-server --list-devices` prints after the name. RPC devices name their buffers
	// after it ("RPC0[127.0.0.1:50053]"), so the load-log check uses it to tell them apart.
	Description string `json:"description,omitempty"`
}

// ResolveDevices turns a --gpu argument into the devices to plan for: a comma-separated list of sizes or NVML
// indexes ("24GiB,24GiB", "0,1") gives one device per entry; "auto" (or "") every device NVML lists; anything
// else one device, as ResolveGPU. names, when given, are llama-server's names for the devices in that order;
// otherwise device i is DefaultDevicePrefix + i (its position in the list, which is llama-server's enumeration
// order only when NVML and the backend agree: pass the names from `llama-server --list-devices` to be sure).
func ResolveDevices(ctx context.Context, src GPUSource, spec string, names []string) ([]Device, error) {
	spec = strings.TrimSpace(spec)
	var gpus []GPU
	switch {
	case strings.Contains(spec, ","):
		for _, part := range strings.Split(spec, ",") {
			part = strings.TrimSpace(part)
			if part == "" || part == "auto" {
				return nil, fmt.Errorf("vram: --gpu %q: a list takes sizes or device indexes, e.g. 24GiB,24GiB or 0,1", spec)
			}
			g, err := ResolveGPU(ctx, src, part)
			if err != nil {
				return nil, err
			}
			gpus = append(gpus, g)
		}
	case spec == "" || spec == "auto":
		if src == nil {
			return nil, fmt.Errorf("vram: %w: no GPU reader configured; pass --gpu SIZE (e.g. --gpu 24GiB) to plan for a given card", ErrNoGPU)
		}
		all, err := src.GPUs(ctx)
		if err != nil {
			return nil, fmt.Errorf("vram: %w; pass --gpu SIZE (e.g. --gpu 24GiB) to plan for a given card", err)
		}
		if len(all) == 0 {
			return nil, fmt.Errorf("vram: %w; pass --gpu SIZE (e.g. --gpu 24GiB) to plan for a given card", ErrNoGPU)
		}
		gpus = all
	default:
		g, err := ResolveGPU(ctx, src, spec)
		if err != nil {
			return nil, err
		}
		gpus = []GPU{g}
	}
	if len(names) > 0 && len(names) != len(gpus) {
		return nil, fmt.Errorf("vram: %d device names (%s) for %d GPUs: give one name per GPU, in --gpu's order",
			len(names), strings.Join(names, ","), len(gpus))
	}
	devs := make([]Device, len(gpus))
	seen := map[string]bool{}
	for i, g := range gpus {
		name := DefaultDevicePrefix + strconv.Itoa(i)
		if len(names) > 0 {
			name = strings.TrimSpace(names[i])
		}
		if name == "" || strings.ContainsAny(name, ", ") {
			return nil, fmt.Errorf("vram: device name %q: want a llama-server device name such as Vulkan1", name)
		}
		if seen[name] {
			return nil, fmt.Errorf("vram: device %s named twice: two GPUs cannot share one llama-server device", name)
		}
		seen[name] = true
		devs[i] = Device{GPU: g, Name: name}
	}
	return devs, nil
}
