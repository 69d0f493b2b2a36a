/* rpcsrv: a ggml RPC server over the CPU backend. Each one is a separate llama-server device (RPC0, RPC1, …) with
 * its own buffers, so a CPU host can show where a multi-GPU placement puts each buffer. Built and started by
 * scripts/rpc-devices.sh against the engine's own libggml. The prototypes are ggml's public API (ggml-backend.h,
 * ggml-rpc.h), declared here so that no -dev package is needed. */
#include <stddef.h>
#include <stdio.h>

typedef void *dev_handle;
enum { DEVICE_TYPE_CPU = 0 };
extern void ggml_backend_load_all_from_path(const char *dir);
extern dev_handle ggml_backend_dev_by_type(int type);
extern void ggml_backend_rpc_start_server(const char *endpoint, const char *cache_dir, size_t n_threads,
                                          size_t n_devices, dev_handle *devices);

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: rpcsrv BACKEND_DIR HOST:PORT THREADS\n");
        return 2;
    }
    ggml_backend_load_all_from_path(argv[1]);
    dev_handle cpu = ggml_backend_dev_by_type(DEVICE_TYPE_CPU);
    if (cpu == NULL) {
        fprintf(stderr, "rpcsrv: no CPU backend in %s\n", argv[1]);
        return 1;
    }
    size_t threads = 1;
    if (sscanf(argv[3], "%zu", &threads) != 1 || threads == 0) {
        fprintf(stderr, "rpcsrv: THREADS must be a positive number, got %s\n", argv[3]);
        return 2;
    }
    ggml_backend_rpc_start_server(argv[2], NULL, threads, 1, &cpu);
    return 0;
}
