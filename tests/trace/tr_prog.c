/* tr_prog: a small program whose trace (HOSTOFF_TRACE) is known line by line; test_trace.py
 * holds the expected lines. Two non-blocking streams and the legacy one; kernels of known
 * virtual durations queued behind a long one (so their events time them exactly); an
 * allocation of each traced kind; copies each way, a memset, a cross-stream wait, stream and
 * device synchronisations, both kinds of free. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(call)                                                                                   \
    do {                                                                                           \
        CUresult rc_ = (call);                                                                     \
        if (rc_ != CUDA_SUCCESS) {                                                                 \
            fprintf(stderr, "tr_prog: %s failed: %d\n", #call, (int)rc_);                          \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static const char image[] = "simcuda-module 1\n"
                            "kernel k_long ptr ns=1000000\n"
                            "kernel k_a ptr ns=7000\n"
                            "kernel k_b ptr ptr ns=11000\n"
                            "kernel k_c ptr ns=13000\n";

static void launch(CUfunction f, CUstream s, CUdeviceptr *p0, CUdeviceptr *p1) {
    void *params[] = {p0, p1};
    CK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, NULL));
}

int main(void) {
    CUdevice dev;
    CUcontext ctx;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CUmodule mod;
    CUfunction k_long, k_a, k_b, k_c;
    CK(cuModuleLoadData(&mod, image));
    CK(cuModuleGetFunction(&k_long, mod, "k_long"));
    CK(cuModuleGetFunction(&k_a, mod, "k_a"));
    CK(cuModuleGetFunction(&k_b, mod, "k_b"));
    CK(cuModuleGetFunction(&k_c, mod, "k_c"));
    CUstream s1, s2;
    CK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));

    CUdeviceptr a, b, c;
    void *h;
    CK(cuMemAlloc(&a, 1 << 20));                               /* id 1 */
    CK(cuMemAllocAsync(&b, 2 << 20, s1));                      /* id 2, stream 1 */
    CK(cuMemAllocManaged(&c, 64 << 10, CU_MEM_ATTACH_GLOBAL)); /* id 3 */
    CK(cuMemAllocHost(&h, 64 << 10));                          /* id 4: host memory, not traced */

    CK(cuMemcpyHtoDAsync(a, h, 64 << 10, s1));
    launch(k_long, s1, &a, NULL);
    launch(k_a, s1, &a, NULL);
    launch(k_b, s1, &a, &b);
    CUevent e;
    CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    CK(cuEventRecord(e, s1));
    CK(cuStreamWaitEvent(s2, e, 0)); /* stream 2 appears: waits for stream 1 */
    launch(k_c, s2, &b, NULL);
    CK(cuMemsetD8Async(b, 0, 2 << 20, s2));
    CK(cuMemcpyDtoDAsync(a, b, 1 << 20, s2));
    launch(k_a, NULL, &c, NULL);
    CK(cuStreamSynchronize(s2));
    CK(cuMemcpyDtoH(h, a, 4096));
    CK(cuMemFreeAsync(b, s1));
    CK(cuCtxSynchronize());
    CK(cuMemFree(a));
    CK(cuMemFree(c));
    CK(cuMemFreeHost(h));
    CK(cuEventDestroy(e));
    puts("tr_prog: done");
    return 0;
}
