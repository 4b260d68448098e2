/* simcuda-demo: what the simulated H200 does, in one short run.
 *
 * A toy training step (forward through 8 layers, backward in reverse) on the simulated driver:
 * the host enqueues everything and runs ahead of the device; one activation is moved to a
 * host-located VMM handle at the same device address, the way hostoff will offload it, and the
 * backward pass still reads the right bytes, remotely. Prints the virtual timeline and the
 * simulator's report counters. This is the quick start's main job until the hostoff engine
 * exists. */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simcuda.h"

#define LAYERS    8
#define ACT_BYTES (8u << 20)

static int check(CUresult rc, const char *what) {
    if (rc == CUDA_SUCCESS) return 0;
    const char *name = NULL;
    cuGetErrorName(rc, &name);
    fprintf(stderr, "simcuda-demo: %s failed: %s (%d)\n", what, name ? name : "?", (int)rc);
    exit(1);
}
#define CK(call) check((call), #call)

/* Kernel bodies: the simulated device runs these host functions. */
void layer_forward(void **p) {
    const uint32_t *in = *(uint32_t **)p[0];
    uint32_t *out = *(uint32_t **)p[1];
    uint64_t n = *(uint64_t *)p[2];
    for (uint64_t i = 0; i < n; i++)
        out[i] = in[i] * 2654435761u + 1;
}

void layer_backward(void **p) {
    const uint32_t *act = *(uint32_t **)p[0];
    uint64_t n = *(uint64_t *)p[1];
    uint64_t *sum = *(uint64_t **)p[2];
    uint64_t s = 0;
    for (uint64_t i = 0; i < n; i++)
        s += act[i];
    *sum += s;
}

static const char image[] = "simcuda-module 1\n"
                            "kernel layer_forward ptr ptr u64 ns=400000\n"
                            "kernel layer_backward ptr u64 ptr ns=800000\n";

static double ms(uint64_t ns) {
    return (double)ns / 1e6;
}

/* Moves a device-backed VMM mapping's bytes to a host-located handle and maps that at the same
 * address: the pointer the kernels hold stays valid. */
static void offload(CUdeviceptr va, size_t size, CUmemGenericAllocationHandle dev_handle,
                    CUstream copy_stream, CUevent last_use) {
    CUmemAllocationProp host = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_HOST}};
    CUmemGenericAllocationHandle hh;
    CK(cuMemCreate(&hh, size, &host, 0));
    CUdeviceptr staging;
    CK(cuMemAddressReserve(&staging, size, 0, 0, 0));
    CK(cuMemMap(staging, size, 0, hh, 0));
    CUmemAccessDesc rw = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
                          .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CK(cuMemSetAccess(staging, size, &rw, 1));
    CK(cuStreamWaitEvent(copy_stream, last_use, 0)); /* after the last queued use */
    CK(cuMemcpyDtoDAsync(staging, va, size, copy_stream));
    CK(cuStreamSynchronize(copy_stream)); /* remap only once nothing queued still uses it */
    CK(cuMemUnmap(staging, size));
    CK(cuMemAddressFree(staging, size));
    CK(cuMemUnmap(va, size));
    CK(cuMemRelease(dev_handle));
    CK(cuMemMap(va, size, 0, hh, 0));
    CK(cuMemSetAccess(va, size, &rw, 1));
    CK(cuMemRelease(hh));
}

int main(void) {
    CK(cuInit(0));
    CUdevice dev;
    CUcontext ctx;
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    char name[128];
    size_t total = 0;
    int sms = 0, host_vmm = 0;
    CK(cuDeviceGetName(name, sizeof name, dev));
    CK(cuDeviceTotalMem(&total, dev));
    CK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    CK(cuDeviceGetAttribute(&host_vmm, CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                            dev));
    printf("device      %s, %d SMs, %.0f GiB, host-located VMM %s\n", name, sms,
           (double)total / (1u << 30), host_vmm ? "supported" : "not supported");

    CUmodule mod;
    CUfunction fwd, bwd;
    CK(cuModuleLoadData(&mod, image));
    CK(cuModuleGetFunction(&fwd, mod, "layer_forward"));
    CK(cuModuleGetFunction(&bwd, mod, "layer_backward"));

    /* Activations live in one VMM reservation, one device handle each. */
    CUdeviceptr base;
    CK(cuMemAddressReserve(&base, (size_t)ACT_BYTES * (LAYERS + 1), 0, 0, 0));
    CUmemAllocationProp devprop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                   .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemAccessDesc rw = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
                          .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CUmemGenericAllocationHandle handles[LAYERS + 1];
    CUdeviceptr act[LAYERS + 1];
    for (int i = 0; i <= LAYERS; i++) {
        act[i] = base + (CUdeviceptr)i * ACT_BYTES;
        CK(cuMemCreate(&handles[i], ACT_BYTES, &devprop, 0));
        CK(cuMemMap(act[i], ACT_BYTES, 0, handles[i], 0));
        CK(cuMemSetAccess(act[i], ACT_BYTES, &rw, 1));
    }
    CUdeviceptr grad;
    CK(cuMemAlloc(&grad, sizeof(uint64_t)));
    CK(cuMemsetD8(grad, 0, sizeof(uint64_t)));

    CUstream compute, copy;
    CK(cuStreamCreate(&compute, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&copy, CU_STREAM_NON_BLOCKING));
    CUevent start, after_fwd, end, used3;
    CK(cuEventCreate(&start, 0));
    CK(cuEventCreate(&after_fwd, 0));
    CK(cuEventCreate(&end, 0));
    CK(cuEventCreate(&used3, CU_EVENT_DISABLE_TIMING));

    uint64_t words = ACT_BYTES / sizeof(uint32_t);
    uint32_t *seed = malloc(ACT_BYTES);
    for (uint64_t i = 0; i < words; i++)
        seed[i] = (uint32_t)i;
    CK(cuMemcpyHtoDAsync(act[0], seed, ACT_BYTES, compute));

    uint64_t host_before = simcuda_now_ns();
    CK(cuEventRecord(start, compute));
    for (int i = 0; i < LAYERS; i++) {
        void *args[] = {&act[i], &act[i + 1], &words};
        CK(cuLaunchKernel(fwd, 1024, 1, 1, 256, 1, 1, 0, compute, args, NULL));
        if (i == 3) CK(cuEventRecord(used3, compute));
    }
    CK(cuEventRecord(after_fwd, compute));
    uint64_t host_after = simcuda_now_ns();
    printf("forward     %d kernels enqueued in %.3f ms of host time: the host runs ahead\n", LAYERS,
           ms(host_after - host_before));

    /* Layer 3's activation (written by forward layer 2, read by forward layer 3) is next needed
     * in backward: move it to host memory at the same address. */
    offload(act[3], ACT_BYTES, handles[3], copy, used3);
    printf("offload     activation 3 (%u MiB) now lives in host memory at the same address\n",
           ACT_BYTES >> 20);

    for (int i = LAYERS; i >= 1; i--) {
        void *args[] = {&act[i], &words, &grad};
        CK(cuLaunchKernel(bwd, 1024, 1, 1, 256, 1, 1, 0, compute, args, NULL));
    }
    CK(cuEventRecord(end, compute));
    CK(cuStreamSynchronize(compute));

    float fwd_ms = 0, step_ms = 0;
    CK(cuEventElapsedTime(&fwd_ms, start, after_fwd));
    CK(cuEventElapsedTime(&step_ms, start, end));
    uint64_t device_sum = 0;
    CK(cuMemcpyDtoH(&device_sum, grad, sizeof device_sum));

    /* The same arithmetic on the host: the offloaded buffer must not have changed a bit. */
    uint64_t host_sum = 0;
    uint32_t *cur = seed, *next = malloc(ACT_BYTES);
    uint64_t *sums = calloc(LAYERS + 1, sizeof *sums);
    for (int i = 1; i <= LAYERS; i++) {
        for (uint64_t j = 0; j < words; j++)
            next[j] = cur[j] * 2654435761u + 1;
        for (uint64_t j = 0; j < words; j++)
            sums[i] += next[j];
        memcpy(cur, next, ACT_BYTES);
    }
    for (int i = 1; i <= LAYERS; i++)
        host_sum += sums[i];
    printf("timeline    forward %.3f ms, whole step %.3f ms of virtual device time\n", fwd_ms,
           step_ms);
    printf("check       backward checksum %s (device %llu, host %llu)\n",
           device_sum == host_sum ? "matches" : "DIFFERS", (unsigned long long)device_sum,
           (unsigned long long)host_sum);
    printf("clock       host virtual clock at end: %.3f ms\n", ms(simcuda_now_ns()));
    free(seed);
    free(next);
    free(sums);
    return device_sum == host_sum ? 0 : 1;
}
