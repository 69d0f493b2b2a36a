package vram

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NVML reads GPUs through NVIDIA's management library. go-nvml loads libnvidia-ml at run time, so the binary builds
// and runs on machines without a driver; there GPUs returns ErrNoGPU.
type NVML struct {
	// Logger receives per-device query failures (nil: slog.Default()).
	Logger *slog.Logger
}

// GPUs implements GPUSource. Each call initialises and shuts NVML down, so nothing stays loaded between plans.
func (n NVML) GPUs(ctx context.Context) ([]GPU, error) {
	log := n.Logger
	if log == nil {
		log = slog.Default()
	}
	lib := nvml.New()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("%w: NVML: %s (is the NVIDIA driver installed?)", ErrNoGPU, lib.ErrorString(ret))
	}
	defer lib.Shutdown()
	count, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("%w: NVML device count: %s", ErrNoGPU, lib.ErrorString(ret))
	}
	var out []GPU
	for i := 0; i < count; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		dev, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			log.Warn("nvml: skip device", "index", i, "err", lib.ErrorString(ret))
			continue
		}
		g := GPU{Index: i, Source: "nvml"}
		g.Name, _ = dev.GetName()
		// The v2 query separates the driver's reserve from "used"; v1 counts it as used (~615 MiB on an idle H200).
		// Drivers before R510 lack v2 (FUNCTION_NOT_FOUND or ARGUMENT_VERSION_MISMATCH): fall back to v1.
		if m, ret := dev.GetMemoryInfo_v2(); ret == nvml.SUCCESS {
			g.Total, g.Free, g.Used, g.Reserved = m.Total, m.Free, m.Used, m.Reserved
		} else if m, ret := dev.GetMemoryInfo(); ret == nvml.SUCCESS {
			g.Total, g.Free, g.Used, g.Source = m.Total, m.Free, m.Used, "nvml-v1"
		} else {
			log.Warn("nvml: memory query failed", "index", i, "err", lib.ErrorString(ret))
			continue
		}
		seen := map[uint32]bool{}
		for _, q := range []func() ([]nvml.ProcessInfo, nvml.Return){dev.GetComputeRunningProcesses, dev.GetGraphicsRunningProcesses} {
			ps, ret := q()
			if ret != nvml.SUCCESS {
				continue
			}
			for _, p := range ps {
				// A Vulkan process shows up in both lists.
				if seen[p.Pid] {
					continue
				}
				seen[p.Pid] = true
				name, _ := lib.SystemGetProcessName(int(p.Pid))
				g.Processes = append(g.Processes, Process{PID: p.Pid, Name: name, Used: p.UsedGpuMemory})
			}
		}
		out = append(out, g)
	}
	return out, nil
}

// NVMLUsage reads the GPUs' memory, all GPUs together, each time it is called (a gateway's /metrics); nil
// without NVML.
func NVMLUsage(ctx context.Context) func() (used, total uint64, ok bool) {
	if _, err := (NVML{}).GPUs(ctx); err != nil {
		return nil
	}
	return func() (uint64, uint64, bool) {
		gpus, err := (NVML{}).GPUs(context.Background())
		if err != nil || len(gpus) == 0 {
			return 0, 0, false
		}
		var used, total uint64
		for _, g := range gpus {
			used += g.Total - g.Free
			total += g.Total
		}
		return used, total, true
	}
}
