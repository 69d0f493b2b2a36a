package launch

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/visorhq/visor/engine/llamacpp"
)

// OffloadedThreads is the CPU thread count for a server whose layers and projector all run on the GPU, given the
// machine's logical CPUs and physical cores; 0 leaves llama-server's default (one thread per physical core).
//
// That default takes every CPU of a machine without SMT (most cloud VMs), and the CPU backend's OpenMP threads
// then spin at a barrier for every token's small CPU graph (embedding lookup, sampling): any other process that
// wakes, the agent reading the stream included, delays that barrier. On the H200 host (16 CPUs, 16 threads)
// visor's client streamed 0.97× the tokens/s of a bare HTTP read one request after the other, and 1.000× when
// both read at once. Two CPUs are left free; with everything on the GPU the threads only wait.
func OffloadedThreads(logical, physical int) int {
	if physical <= 0 || physical > logical {
		physical = logical
	}
	if physical < logical-1 || logical <= 2 {
		return 0 // SMT siblings or tiny machines: the default already leaves room, or there is none to leave
	}
	return max(1, min(physical, logical-2))
}

// withOffloadedThreads adds -t to each attempt that keeps every layer and the projector on the GPU, when base
// sets no thread count of its own.
func withOffloadedThreads(base llamacpp.Config, attempts []llamacpp.Attempt, threads int) []llamacpp.Attempt {
	if threads <= 0 || base.Threads > 0 || hasThreads(base.ExtraArgs) {
		return attempts
	}
	for i, a := range attempts {
		if hasThreads(a.Args) || slices.Contains(a.Args, "--no-mmproj-offload") {
			continue
		}
		if j := slices.Index(a.Args, "-ngl"); j < 0 || j+1 >= len(a.Args) || a.Args[j+1] != "999" {
			continue
		}
		attempts[i].Args = append(append([]string(nil), a.Args...), "-t", strconv.Itoa(threads))
	}
	return attempts
}

func hasThreads(args []string) bool {
	return slices.ContainsFunc(args, func(a string) bool { return a == "-t" || a == "--threads" })
}

// machineThreads reads this machine's logical CPUs (those the process may use) and physical cores.
func machineThreads() (logical, physical int) {
	logical = runtime.NumCPU()
	cores := map[string]bool{}
	dirs, _ := filepath.Glob("/sys/devices/system/cpu/cpu[0-9]*/topology")
	for _, d := range dirs {
		pkg, err1 := os.ReadFile(filepath.Join(d, "physical_package_id"))
		core, err2 := os.ReadFile(filepath.Join(d, "core_id"))
		if err1 != nil || err2 != nil {
			return logical, 0
		}
		cores[strings.TrimSpace(string(pkg))+"/"+strings.TrimSpace(string(core))] = true
	}
	return logical, len(cores)
}
