package llamacpp

import (
	"errors"
	"regexp"
	"strings"
)

// oomSigns are lower-cased fragments of the messages llama.cpp and ggml print when an allocation fails, as found
// in their sources and in users' logs:
//
//   - ggml-cuda (also built for ROCm/MUSA, same text): "…alloc_buffer: allocating N MiB on device 0: cudaMalloc
//     failed: out of memory", and "CUDA error: out of memory" from the error macro;
//   - ggml-vulkan: "ggml_vulkan: Device memory allocation of size N failed." followed by the exception text
//     "vk::Device::allocateMemory: ErrorOutOfDeviceMemory" (vk::OutOfDeviceMemoryError; ErrorOutOfHostMemory for
//     pinned host buffers);
//   - ggml's CPU allocator: "ggml_aligned_malloc: insufficient memory (attempted to allocate N MB)";
//   - C++ allocation failure: "std::bad_alloc".
var oomSigns = []string{
	"out of memory",
	"cudamalloc failed",
	"outofdevicememory",
	"outofhostmemory",
	"device memory allocation of size",
	"insufficient memory",
	"bad_alloc",
}

// oomBuffer matches the generic buffer messages that name an allocation as the cause:
//
//   - ggml-alloc / ggml-backend: "alloc_tensor_range: failed to allocate Vulkan0 buffer of size N",
//     "ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size N",
//     "ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size N";
//   - llama-model: "error loading model: unable to allocate Vulkan0 buffer" / "unable to allocate backend buffer";
//   - llama-context / llama-kv-cache: "graph_reserve: failed to allocate compute buffers", "failed to initialize
//     the context: failed to allocate compute pp buffers" (or tg), "failed to allocate buffer for kv cache";
//   - ggml-metal: "failed to allocate buffer, size = N MiB".
//
// A bare "failed to create context" is deliberately not matched: llama.cpp also prints it for causes that a smaller
// mode cannot fix (an unsupported cache type, a bad flash-attention combination). It counts only together with
// one of the allocation lines above, which llama.cpp prints just before it.
var oomBuffer = regexp.MustCompile(`(failed|unable) to allocate .*buffer`)

// IsOOM reports whether err is a llama-server exit caused by running out of memory (GPU memory, or host memory
// for the CPU backend and pinned buffers), judged from the log lines the *ExitError carries. Such a failure
// may go away with a smaller placement; any other failure (bad flag, corrupt model, missing file) will not.
func IsOOM(err error) bool { return len(OOMLines(err)) > 0 }

// OOMLines returns the allocation-failure lines of err's *ExitError (none when it is not out of memory): the
// two or three lines worth showing when a mode is given up, out of the dozen an exit's Reason holds.
func OOMLines(err error) []string {
	var ee *ExitError
	if !errors.As(err, &ee) {
		return nil
	}
	var out []string
	for _, l := range ee.Reason {
		if oomLine(l) {
			out = append(out, l)
		}
	}
	return out
}

func oomLine(line string) bool {
	l := strings.ToLower(line)
	for _, s := range oomSigns {
		if strings.Contains(l, s) {
			return true
		}
	}
	return oomBuffer.MatchString(l)
}
