package main

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stddef.h>

typedef int (*cu_init_t)(unsigned int);
typedef int (*cu_device_get_t)(int *, int);
typedef int (*cu_ctx_create_t)(void **, unsigned int, int);
typedef int (*cu_mem_alloc_t)(unsigned long long *, size_t);
typedef int (*cu_ctx_set_current_t)(void *);

static cu_mem_alloc_t cu_mem_alloc;
static cu_ctx_set_current_t cu_ctx_set_current;
static void *cu_ctx;

// ballast_open loads the driver's libcuda and makes a context on device 0: -1 no library, -2 missing symbols,
// else the CUDA error code of the step that failed (0 on success).
static int ballast_open(const char *lib) {
	void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
	if (!h) return -1;
	cu_init_t init = (cu_init_t)dlsym(h, "cuInit");
	cu_device_get_t get = (cu_device_get_t)dlsym(h, "cuDeviceGet");
	cu_ctx_create_t create = (cu_ctx_create_t)dlsym(h, "cuCtxCreate_v2");
	cu_mem_alloc = (cu_mem_alloc_t)dlsym(h, "cuMemAlloc_v2");
	cu_ctx_set_current = (cu_ctx_set_current_t)dlsym(h, "cuCtxSetCurrent");
	if (!init || !get || !create || !cu_mem_alloc || !cu_ctx_set_current) return -2;
	int r = init(0);
	if (r) return r;
	int dev = 0;
	if ((r = get(&dev, 0))) return r;
	return create(&cu_ctx, 0, dev);
}

// The context is current per OS thread, and Go may run each cgo call on another one: make it current first.
static int ballast_alloc(size_t n) {
	int r = cu_ctx_set_current(cu_ctx);
	if (r) return r;
	unsigned long long p = 0;
	return cu_mem_alloc(&p, n);
}
*/
import "C"

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/visorhq/visor/engine/vram"
)

// ballast holds GPU memory through the CUDA driver until free memory (NVML) is down to target: the seed's 24 GB
// card recreated on a larger one. The memory stays held until the process exits.
func ballast(ctx context.Context, target uint64) (uint64, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if r := C.ballast_open(C.CString("libcuda.so.1")); r != 0 {
		return 0, fmt.Errorf("ballast: CUDA driver (libcuda.so.1): error %d", int(r))
	}
	free := func() (uint64, error) {
		gs, err := vram.NVML{}.GPUs(ctx)
		if err != nil {
			return 0, err
		}
		if len(gs) == 0 {
			return 0, fmt.Errorf("ballast: no GPU")
		}
		return gs[0].Free, nil
	}
	const step = 2 * vram.MiB // CUDA's allocation granularity
	for {
		f, err := free()
		if err != nil {
			return 0, err
		}
		if f <= target+step {
			return f, nil
		}
		n := f - target
		if n > 8<<30 {
			n = 8 << 30
		} else if n > 64*vram.MiB {
			n -= 32 * vram.MiB // approach the target in shrinking steps: NVML lags an allocation slightly
		} else {
			n = step
		}
		if r := C.ballast_alloc(C.size_t(n)); r != 0 {
			return f, fmt.Errorf("ballast: cuMemAlloc(%d MiB): error %d", n/vram.MiB, int(r))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
