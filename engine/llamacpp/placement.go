package llamacpp

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Device is one backend device llama-server can offload to, as `llama-server --list-devices` prints it:
//
//	Vulkan0: NVIDIA H200 (143771 MiB, 143000 MiB free)
type Device struct {
	Name        string `json:"name"`        // Vulkan0, CUDA0, …
	Description string `json:"description"` // NVIDIA H200
	TotalMiB    uint64 `json:"total_mib"`
	FreeMiB     uint64 `json:"free_mib"`
}

var deviceRE = regexp.MustCompile(`^\s*([A-Za-z][A-Za-z0-9_-]*\d+)\s*:\s*(.*?)\s*\((\d+) MiB,\s*(\d+) MiB free\)\s*$`)

// ParseDevices reads `llama-server --list-devices` output. A CPU-only build prints "(none)" and gives no devices.
func ParseDevices(out string) []Device {
	var ds []Device
	for _, l := range strings.Split(out, "\n") {
		m := deviceRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		total, _ := strconv.ParseUint(m[3], 10, 64)
		free, _ := strconv.ParseUint(m[4], 10, 64)
		ds = append(ds, Device{Name: m[1], Description: m[2], TotalMiB: total, FreeMiB: free})
	}
	return ds
}

// ListDevices runs `bin --list-devices`: the GPUs this llama-server (its backends, its drivers) can use. It
// returns an empty, non-nil list when there are none.
func ListDevices(ctx context.Context, bin string) ([]Device, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--list-devices").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("llamacpp: %s --list-devices: %w: %.300s", bin, err, out)
	}
	ds := ParseDevices(string(out))
	if ds == nil {
		ds = []Device{} // asked, and none: unlike nil, which means not known
	}
	return ds, nil
}

// Placement is where a started server put its model, from its load log.
type Placement struct {
	// Devices are the devices llama.cpp said it uses ("using device Vulkan0 (NVIDIA H200) …").
	Devices []string `json:"devices,omitempty"`
	// Offloaded and Layers are from "offloaded N/M layers to GPU"; Layers is 0 when the line was not printed (a
	// build without GPU backends does not print it).
	Offloaded int `json:"offloaded"`
	Layers    int `json:"layers"`
	// ModelBuffers are the devices holding weights ("Vulkan0 model buffer size = …"), CPU ones included.
	ModelBuffers []string `json:"model_buffers,omitempty"`
	// Projector is the backend the vision encoder runs on ("CLIP using Vulkan0 backend"); empty without one.
	Projector string `json:"projector,omitempty"`
}

var (
	usingDeviceRE = regexp.MustCompile(`using device (\S+)`)
	offloadedRE   = regexp.MustCompile(`offloaded (\d+)/(\d+) layers to GPU`)
	modelBufRE    = regexp.MustCompile(`load_tensors:\s+(\S+) model buffer size`)
	clipBackendRE = regexp.MustCompile(`CLIP using (\S+) backend`)
)

// Observe takes one log line. It is the pure part of the placement check; Server feeds it every line.
func (p *Placement) Observe(line string) {
	switch {
	case strings.Contains(line, "using device "):
		if m := usingDeviceRE.FindStringSubmatch(line); m != nil {
			p.Devices = append(p.Devices, m[1])
		}
	case strings.Contains(line, "layers to GPU"):
		if m := offloadedRE.FindStringSubmatch(line); m != nil {
			p.Offloaded, _ = strconv.Atoi(m[1])
			p.Layers, _ = strconv.Atoi(m[2])
		}
	case strings.Contains(line, "model buffer size"):
		if m := modelBufRE.FindStringSubmatch(line); m != nil {
			p.ModelBuffers = append(p.ModelBuffers, m[1])
		}
	case strings.Contains(line, "CLIP using"):
		if m := clipBackendRE.FindStringSubmatch(line); m != nil {
			p.Projector = m[1]
		}
	}
}

// OnGPU reports whether any weights went to a GPU.
func (p Placement) OnGPU() bool {
	if p.Layers > 0 {
		return p.Offloaded > 0
	}
	for _, b := range p.ModelBuffers {
		if !isHostBuffer(b) {
			return true
		}
	}
	return false
}

func isHostBuffer(name string) bool {
	return strings.HasPrefix(name, "CPU") || strings.HasSuffix(name, "_Host") || strings.EqualFold(name, "host")
}

// Want is where a plan placed the server.
type Want struct {
	GPU       string // the device the plan is for, as the user reads it ("NVIDIA H200"); empty: the CPU
	Projector bool   // the vision encoder is planned on the GPU too
}

// ErrCPUFallback means llama-server started on the CPU although the plan placed it on a GPU: the GPU backend or
// its driver libraries are missing, and every token would be an order of magnitude slower.
var ErrCPUFallback = errors.New("llama-server is running on the CPU, not the GPU the plan chose")

// Evidence reports whether the load log said where the model went. At llama-server's default verbosity
// (-lv 3) Debian's build prints none of the loader's lines; -lv 4 prints them all.
func (p Placement) Evidence() bool {
	return p.Layers > 0 || len(p.ModelBuffers) > 0 || len(p.Devices) > 0 || p.Projector != ""
}

// CheckPlacement compares where the server put the model with where the plan wanted it. devices is what
// `--list-devices` showed (nil if not asked). A silent CPU fallback, a partial offload or a vision encoder left
// on the CPU is an error naming the fix. When the log is silent (default verbosity) the device list decides: a
// llama-server that lists no GPU runs on the CPU, one that lists the GPU offloads to it (-ngl 999).
func CheckPlacement(p Placement, w Want, devices []Device) error {
	if w.GPU == "" {
		return nil
	}
	if !p.Evidence() {
		if devices != nil && len(devices) == 0 {
			return fmt.Errorf("%w (%s): it lists no GPU device (llama-server --list-devices: none); %s",
				ErrCPUFallback, w.GPU, placementFix)
		}
		return nil
	}
	seen := "it lists no GPU device (llama-server --list-devices: none)"
	if len(devices) > 0 {
		var ns []string
		for _, d := range devices {
			ns = append(ns, d.Name+": "+d.Description)
		}
		seen = "it lists " + strings.Join(ns, ", ")
	}
	fix := placementFix
	switch {
	case !p.OnGPU():
		return fmt.Errorf("%w (%s): %s; %s", ErrCPUFallback, w.GPU, seen, fix)
	case p.Layers > 0 && p.Offloaded < p.Layers:
		return fmt.Errorf("%w: only %d of %d layers went to %s: the plan placed all of them; %s",
			ErrCPUFallback, p.Offloaded, p.Layers, w.GPU, fix)
	case w.Projector && p.Projector != "" && isHostBuffer(p.Projector):
		return fmt.Errorf("%w: the vision encoder runs on %s although the plan placed it on %s; %s",
			ErrCPUFallback, p.Projector, w.GPU, fix)
	}
	return nil
}

const placementFix = "install the GPU backend with `visor engine install --gpu vulkan --force` " +
	"(Debian's libggml0-backend-vulkan with libvulkan1, libegl1 and libglvnd0; NVIDIA's Vulkan driver needs glvnd's " +
	"libEGL), make sure the driver's Vulkan ICD is found (VK_DRIVER_FILES), or start with --plan off to run on the CPU"

// placementLog accumulates a Placement from log lines arriving on the log goroutine.
type placementLog struct {
	mu sync.Mutex
	p  Placement
}

func (l *placementLog) observe(line string) {
	l.mu.Lock()
	l.p.Observe(line)
	l.mu.Unlock()
}

func (l *placementLog) get() Placement {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.p
	p.Devices = append([]string(nil), p.Devices...)
	p.ModelBuffers = append([]string(nil), p.ModelBuffers...)
	return p
}

// ProjectorOnCPU says the load log put the vision encoder on the CPU backend.
func (p Placement) ProjectorOnCPU() bool {
	return p.Projector != "" && strings.Contains(strings.ToUpper(p.Projector), "CPU")
}
