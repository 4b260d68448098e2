/* A per-tensor allocator for PyTorch (torch.cuda.memory.CUDAPluggableAllocator).
 *
 * PyTorch's caching allocator sub-allocates large segments and keeps freed blocks: the driver,
 * and so libhostoff.so, sees segments, not tensors. With this allocator every tensor is its own
 * driver allocation, made with cuMemAllocAsync on the tensor's stream and freed with
 * cuMemFreeAsync on that stream: under LD_PRELOAD=libhostoff.so each tensor of at least
 * HOSTOFF_MIN_BYTES is its own engine buffer, with its own lifetime, and smaller ones come from
 * the driver's stream-ordered pool. Without the library it is a plain stream-ordered allocator.
 *
 * The two functions CUDAPluggableAllocator needs (cudaStream_t is CUstream):
 *     void *hostoff_torch_malloc(size_t size, int device, cudaStream_t stream);
 *     void  hostoff_torch_free(void *ptr, size_t size, int device, cudaStream_t stream);
 * plus hostoff_torch_stats() for the bytes PyTorch holds (the caching allocator's statistics are
 * not available with a pluggable allocator). hostoff_torch.py loads it.
 *
 * Limits: a tensor used on another stream than the one it was allocated on must be ordered by
 * the application (PyTorch's record_stream does not reach pluggable allocators); the free is
 * ordered only on the allocation stream. Build:
 *     cc -std=c11 -O2 -shared -fPIC -I/usr/local/cuda/include hostoff_torch_alloc.c \
 *        -L/usr/local/cuda/lib64/stubs -lcuda -o libhostoff_torch.so */
#include <cuda.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define EXPORT    __attribute__((visibility("default")))
#define MAX_DEVS  64
#define MAX_WARNS 8

/* Requested bytes PyTorch holds through this allocator, its peak, and call counts. */
static _Atomic uint64_t bytes_now, bytes_peak, n_allocs, n_frees, n_failures;
/* Each device's primary context, retained once; pool tuned once. */
static _Atomic(CUcontext) contexts[MAX_DEVS];
static _Atomic int pool_tuned[MAX_DEVS];

EXPORT void *hostoff_torch_malloc(size_t size, int device, CUstream stream);
EXPORT void hostoff_torch_free(void *ptr, size_t size, int device, CUstream stream);
EXPORT void hostoff_torch_stats(uint64_t out[5]);
EXPORT void hostoff_torch_reset_peak(void);

static void warn(const char *what, CUresult rc, size_t size) {
    if (atomic_fetch_add(&n_failures, 1) < MAX_WARNS)
        fprintf(stderr, "hostoff_torch: %s failed (CUresult %d, %zu bytes)\n", what, (int)rc, size);
}

/* Makes device's primary context current unless a context of that device already is. */
static CUresult ensure_context(int device) {
    CUcontext cur = NULL;
    CUdevice d;
    CUresult rc = cuCtxGetCurrent(&cur);
    if (rc == CUDA_ERROR_NOT_INITIALIZED) rc = cuInit(0);
    if (rc != CUDA_SUCCESS) return rc;
    if (cur != NULL && cuCtxGetDevice(&d) == CUDA_SUCCESS && d == device) return CUDA_SUCCESS;
    if (device < 0 || device >= MAX_DEVS) return CUDA_ERROR_INVALID_DEVICE;
    CUcontext ctx = atomic_load(&contexts[device]);
    if (ctx == NULL) {
        CUdevice dev;
        if ((rc = cuDeviceGet(&dev, device)) != CUDA_SUCCESS) return rc;
        if ((rc = cuDevicePrimaryCtxRetain(&ctx, dev)) != CUDA_SUCCESS) return rc;
        CUcontext expected = NULL;
        if (!atomic_compare_exchange_strong(&contexts[device], &expected, ctx))
            cuDevicePrimaryCtxRelease(dev); /* another thread retained it first */
    }
    return cuCtxSetCurrent(ctx);
}

/* Keeps freed memory in the device's default pool instead of returning it at every
 * synchronisation: the stream-ordered equivalent of a cache, for the small tensors. */
static void tune_pool(int device) {
    if (device < 0 || device >= MAX_DEVS || atomic_exchange(&pool_tuned[device], 1)) return;
    CUmemoryPool pool;
    CUdevice dev;
    if (cuDeviceGet(&dev, device) != CUDA_SUCCESS ||
        cuDeviceGetDefaultMemPool(&pool, dev) != CUDA_SUCCESS)
        return;
    uint64_t keep = UINT64_MAX;
    cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep);
}

EXPORT void *hostoff_torch_malloc(size_t size, int device, CUstream stream) {
    CUresult rc = ensure_context(device);
    if (rc != CUDA_SUCCESS) {
        warn("making the device's context current", rc, size);
        return NULL;
    }
    tune_pool(device);
    CUdeviceptr ptr = 0;
    rc = cuMemAllocAsync(&ptr, size ? size : 1, stream);
    if (rc != CUDA_SUCCESS) {
        warn("cuMemAllocAsync", rc, size);
        return NULL;
    }
    uint64_t now = atomic_fetch_add(&bytes_now, size) + size;
    uint64_t peak = atomic_load(&bytes_peak);
    while (now > peak && !atomic_compare_exchange_weak(&bytes_peak, &peak, now)) {
    }
    atomic_fetch_add(&n_allocs, 1);
    return (void *)ptr;
}

EXPORT void hostoff_torch_free(void *ptr, size_t size, int device, CUstream stream) {
    if (ptr == NULL) return;
    CUresult rc = ensure_context(device);
    if (rc == CUDA_SUCCESS) rc = cuMemFreeAsync((CUdeviceptr)ptr, stream);
    if (rc != CUDA_SUCCESS) warn("cuMemFreeAsync", rc, size);
    atomic_fetch_sub(&bytes_now, size);
    atomic_fetch_add(&n_frees, 1);
}

/* out: bytes held now, peak bytes held, allocations, frees, failures. */
EXPORT void hostoff_torch_stats(uint64_t out[5]) {
    out[0] = atomic_load(&bytes_now);
    out[1] = atomic_load(&bytes_peak);
    out[2] = atomic_load(&n_allocs);
    out[3] = atomic_load(&n_frees);
    out[4] = atomic_load(&n_failures);
}

/* The peak restarts from what is held now. */
EXPORT void hostoff_torch_reset_peak(void) {
    atomic_store(&bytes_peak, atomic_load(&bytes_now));
}
