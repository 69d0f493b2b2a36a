package vram

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// GPUSource lists the GPUs of this machine. The NVML reader implements it; tests use a fixed list, so the
// planner stays pure code.
type GPUSource interface {
	GPUs(ctx context.Context) ([]GPU, error)
}

// ErrNoGPU means no GPU could be queried (no NVIDIA driver, no NVML library, no device).
var ErrNoGPU = errors.New("no GPU found")

// StaticGPUs is a GPUSource returning a fixed list.
type StaticGPUs []GPU

// GPUs implements GPUSource.
func (s StaticGPUs) GPUs(context.Context) ([]GPU, error) { return s, nil }

// ResolveGPU turns a --gpu argument into the device to plan for: "auto" (or "") picks the NVML device with the
// most free memory, a number picks that index, a size ("24GiB", "23.4GB") plans for a card with that much free.
func ResolveGPU(ctx context.Context, src GPUSource, spec string) (GPU, error) {
	spec = strings.TrimSpace(spec)
	if spec != "" && spec != "auto" {
		if _, err := strconv.Atoi(spec); err != nil {
			size, serr := ParseSize(spec)
			if serr != nil {
				return GPU{}, fmt.Errorf("vram: --gpu %q: want auto, a device index or a size like 24GiB: %w", spec, serr)
			}
			return GPU{Index: -1, Name: "manual " + spec, Total: size, Free: size, Source: "manual"}, nil
		}
	}
	if src == nil {
		return GPU{}, fmt.Errorf("vram: %w: no GPU reader configured; pass --gpu SIZE (e.g. --gpu 24GiB) to plan for a given card", ErrNoGPU)
	}
	gpus, err := src.GPUs(ctx)
	if err != nil {
		return GPU{}, fmt.Errorf("vram: %w; pass --gpu SIZE (e.g. --gpu 24GiB) to plan for a given card", err)
	}
	if len(gpus) == 0 {
		return GPU{}, fmt.Errorf("vram: %w; pass --gpu SIZE (e.g. --gpu 24GiB) to plan for a given card", ErrNoGPU)
	}
	if spec == "" || spec == "auto" {
		best := gpus[0]
		for _, g := range gpus[1:] {
			if g.Free > best.Free {
				best = g
			}
		}
		return best, nil
	}
	idx, _ := strconv.Atoi(spec)
	for _, g := range gpus {
		if g.Index == idx {
			return g, nil
		}
	}
	return GPU{}, fmt.Errorf("vram: --gpu %d: no such device (found %d)", idx, len(gpus))
}
