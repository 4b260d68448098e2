/* Smoke test of the PyTorch adapter (contrib/pytorch/hostoff_torch_alloc.c) on the simulator,
 * without PyTorch: it dlopen()s the adapter as CUDAPluggableAllocator does and calls its two
 * functions as PyTorch would, with no context current at first (the adapter makes the device's
 * primary context current itself). Under LD_PRELOAD=libhostoff.so with a small HOSTOFF_BUDGET,
 * each tensor is an engine buffer and the data must survive eviction bit for bit.
 *
 *   adapter_smoke ADAPTER.so [TENSORS [MIB]]      (defaults 6 tensors of 16 MiB)
 *
 * stdout: "adapter: ok tensors=N bytes_peak=B allocs=A frees=F failures=0". */
#include <cuda.h>
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void *(*malloc_fn)(size_t, int, CUstream);
typedef void (*free_fn)(void *, size_t, int, CUstream);
typedef void (*stats_fn)(uint64_t out[5]);

#define MAX_TENSORS 64

static int fail(const char *what, CUresult rc) {
    fprintf(stderr, "adapter_smoke: %s failed (%d)\n", what, (int)rc);
    return 1;
}

#define CK(call)                                                                                   \
    do {                                                                                           \
        CUresult rc_ = (call);                                                                     \
        if (rc_ != CUDA_SUCCESS) return fail(#call, rc_);                                          \
    } while (0)

static uint64_t word(int t, size_t i) {
    return ((uint64_t)(t + 1) << 48) ^ (i * 0x9E3779B97F4A7C15ull);
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: adapter_smoke ADAPTER.so [TENSORS [MIB]]\n");
        return 2;
    }
    int n = argc > 2 ? atoi(argv[2]) : 6;
    size_t bytes = (size_t)(argc > 3 ? atoi(argv[3]) : 16) << 20;
    if (n < 1 || n > MAX_TENSORS || bytes == 0) return 2;
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        fprintf(stderr, "adapter_smoke: %s\n", dlerror());
        return 1;
    }
    /* dlsym's object pointers become function pointers through memcpy (ISO C). */
    void *sym[3] = {dlsym(h, "hostoff_torch_malloc"), dlsym(h, "hostoff_torch_free"),
                    dlsym(h, "hostoff_torch_stats")};
    malloc_fn my_malloc;
    free_fn my_free;
    stats_fn stats;
    memcpy(&my_malloc, &sym[0], sizeof my_malloc);
    memcpy(&my_free, &sym[1], sizeof my_free);
    memcpy(&stats, &sym[2], sizeof stats);
    if (sym[0] == NULL || sym[1] == NULL || sym[2] == NULL) {
        fprintf(stderr, "adapter_smoke: the adapter lacks its exports\n");
        return 1;
    }
    /* The first allocation finds no current context: the adapter sets it up. */
    void *ptr[MAX_TENSORS];
    ptr[0] = my_malloc(bytes, 0, NULL);
    if (ptr[0] == NULL) return fail("hostoff_torch_malloc (no context current)", 0);
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int t = 1; t < n; t++) {
        ptr[t] = my_malloc(bytes, 0, s);
        if (ptr[t] == NULL) return fail("hostoff_torch_malloc", 0);
    }
    void *empty = my_malloc(0, 0, s); /* PyTorch may ask for 0 bytes */
    if (empty == NULL) return fail("hostoff_torch_malloc(0)", 0);

    uint64_t *host = malloc(bytes);
    if (host == NULL) return 1;
    for (int t = 0; t < n; t++) {
        for (size_t i = 0; i < bytes / 8; i++)
            host[i] = word(t, i);
        CK(cuMemcpyHtoD((CUdeviceptr)ptr[t], host, bytes));
    }
    long bad = 0;
    for (int t = n - 1; t >= 0; t--) {
        CK(cuMemcpyDtoH(host, (CUdeviceptr)ptr[t], bytes));
        for (size_t i = 0; i < bytes / 8; i++)
            bad += host[i] != word(t, i);
    }
    free(host);
    my_free(empty, 0, 0, s);
    my_free(ptr[0], bytes, 0, NULL);
    for (int t = 1; t < n; t++)
        my_free(ptr[t], bytes, 0, s);
    CK(cuStreamSynchronize(s));
    CK(cuStreamDestroy(s));
    uint64_t st[5];
    stats(st);
    bool ok = bad == 0 && st[0] == 0 && st[1] == (uint64_t)n * bytes && st[2] == (uint64_t)n + 1 &&
              st[3] == (uint64_t)n + 1 && st[4] == 0;
    printf("adapter: %s tensors=%d mismatches=%ld bytes_now=%llu bytes_peak=%llu allocs=%llu "
           "frees=%llu failures=%llu\n",
           ok ? "ok" : "FAILED", n, bad, (unsigned long long)st[0], (unsigned long long)st[1],
           (unsigned long long)st[2], (unsigned long long)st[3], (unsigned long long)st[4]);
    return ok ? 0 : 1;
}
