package llamacpp

import (
	"errors"
	"strings"
	"testing"
)

// vulkanLoad is the part of a llama-server load log that says where things went, in the format Debian's build
// prints through Vulkan on the H200 (docs/engine-notes.md §7).
const vulkanLoad = `llama_model_load_from_file_impl: using device Vulkan0 (NVIDIA H200) (0000:00:07.0) - 142760 MiB free
load_tensors: offloading output layer to GPU
load_tensors: offloaded 41/41 layers to GPU
load_tensors:   CPU_Mapped model buffer size =   273.00 MiB
load_tensors:      Vulkan0 model buffer size = 16127.45 MiB
clip_ctx: CLIP using Vulkan0 backend`

// cpuLoad is the same model loaded by a build that sees no GPU (no Vulkan backend, or a driver it cannot use).
const cpuLoad = `load_tensors: loading model tensors, this can take a while... (mmap = true, direct_io = false)
load_tensors:   CPU_Mapped model buffer size = 16400.50 MiB
clip_ctx: CLIP using CPU backend`

func observe(log string) Placement {
	var p Placement
	for _, l := range strings.Split(log, "\n") {
		p.Observe(l)
	}
	return p
}

func TestParseDevices(t *testing.T) {
	t.Parallel()
	ds := ParseDevices("load_backend: loaded Vulkan backend\nAvailable devices:\n  Vulkan0: NVIDIA H200 (143771 MiB, 143000 MiB free)\n" +
		"  CUDA1: NVIDIA GeForce RTX 4090 (24080 MiB, 23500 MiB free)\n")
	if len(ds) != 2 || ds[0] != (Device{Name: "Vulkan0", Description: "NVIDIA H200", TotalMiB: 143771, FreeMiB: 143000}) ||
		ds[1].Name != "CUDA1" || ds[1].FreeMiB != 23500 {
		t.Fatalf("devices %+v", ds)
	}
	if ds := ParseDevices("Available devices:\n  (none)\n"); len(ds) != 0 {
		t.Errorf("a CPU-only build lists no device, got %+v", ds)
	}
}

func TestCheckPlacement(t *testing.T) {
	t.Parallel()
	gpu := observe(vulkanLoad)
	if !gpu.OnGPU() || gpu.Offloaded != 41 || gpu.Layers != 41 || gpu.Projector != "Vulkan0" || len(gpu.Devices) != 1 {
		t.Fatalf("placement %+v", gpu)
	}
	want := Want{GPU: "NVIDIA H200", Projector: true}
	if err := CheckPlacement(gpu, want, nil); err != nil {
		t.Errorf("everything on the GPU: %v", err)
	}
	cpu := observe(cpuLoad)
	err := CheckPlacement(cpu, want, nil)
	if !errors.Is(err, ErrCPUFallback) || !strings.Contains(err.Error(), "NVIDIA H200") ||
		!strings.Contains(err.Error(), "visor engine install") || !strings.Contains(err.Error(), "--list-devices: none") {
		t.Errorf("silent CPU fallback: %v", err)
	}
	if err := CheckPlacement(cpu, Want{}, nil); err != nil {
		t.Errorf("a CPU plan on the CPU is fine: %v", err)
	}
	partial := observe(strings.Replace(vulkanLoad, "offloaded 41/41", "offloaded 30/41", 1))
	if err := CheckPlacement(partial, want, nil); !errors.Is(err, ErrCPUFallback) || !strings.Contains(err.Error(), "30 of 41") {
		t.Errorf("partial offload: %v", err)
	}
	encCPU := observe(strings.Replace(vulkanLoad, "CLIP using Vulkan0", "CLIP using CPU", 1))
	if err := CheckPlacement(encCPU, want, []Device{{Name: "Vulkan0", Description: "NVIDIA H200"}}); !errors.Is(err, ErrCPUFallback) ||
		!strings.Contains(err.Error(), "vision encoder runs on CPU") {
		t.Errorf("encoder on the CPU: %v", err)
	}
	if err := CheckPlacement(encCPU, Want{GPU: "NVIDIA H200"}, nil); err != nil {
		t.Errorf("an encoder planned on the CPU (vision-cpu) may stay there: %v", err)
	}
	// At the default verbosity the log says nothing (seen on the H200): the device list decides.
	quiet := observe(quietLoad)
	if quiet.Evidence() {
		t.Fatalf("the default-verbosity log holds no placement lines, got %+v", quiet)
	}
	if err := CheckPlacement(quiet, want, []Device{{Name: "Vulkan0", Description: "NVIDIA H200"}}); err != nil {
		t.Errorf("quiet log, GPU listed: %v", err)
	}
	if err := CheckPlacement(quiet, want, []Device{}); !errors.Is(err, ErrCPUFallback) {
		t.Errorf("quiet log, no GPU listed: %v", err)
	}
}

// quietLoad is llama-server's whole load log at its default verbosity on the H200 (Vulkan0 in use), from
// scripts/gpu-seed-check.sh: none of the loader's placement lines are printed.
const quietLoad = `0.00.099.596 I srv    load_model: loading model '/tmp/visor-seed-check/qwen3.6-35b-a3b.gguf'
0.00.426.070 W load: model vocab missing newline token, using special_pad_id instead
0.05.090.604 I cmn          init: llama threadpool init, n_threads = 16
0.09.711.881 I common_speculative_init_result: creating MTP draft context against the target model '/tmp/visor-seed-check/qwen3.6-35b-a3b.gguf'
0.10.133.765 I srv    load_model: loaded multimodal model, '/tmp/visor-seed-check/mmproj-qwen3.6.gguf'
0.10.133.778 I srv    load_model: initializing, n_slots = 1, n_ctx_slot = 141056, kv_unified = 'false'
0.10.304.319 I srv  llama_server: listening on http://127.0.0.1:45583`
