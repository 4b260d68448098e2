/* Integrity stress for the residency engine, on the full-data simulator under LD_PRELOAD.
 *
 * Buffers totalling several times HOSTOFF_BUDGET are filled by kernels; threads, each with its
 * own stream, launch kernels that verify and update random subsets of their buffers, so buffers
 * keep being evicted and restored while other streams' work is in flight. Every word's value is
 * a function of (buffer, version, index): any lost or stale byte shows. At the end every buffer
 * is copied back and checked. Exit 0 only when all of it is bit-exact.
 *
 *   stress THREADS BUFFERS_PER_THREAD BUFFER_MIB KERNELS_PER_THREAD SEED */
#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 3


static uint64_t word(uint64_t id, uint64_t version, uint64_t i) {
    return (id << 40) ^ (version * 0x9E3779B97F4A7C15ull) ^ (i * 0xBF58476D1CE4E5B9ull);
}

/* Kernel: for each slot with a buffer, check every word holds `version`, then write version+1.
 * Params: (ptr buf, u64 id, u64 version) x SLOTS, u64 words, ptr errors. */
void stress_vu(void **p) {
    uint64_t words = *(uint64_t *)p[3 * SLOTS];
    _Atomic uint64_t *errors = *(_Atomic uint64_t **)p[3 * SLOTS + 1];
    for (int s = 0; s < SLOTS; s++) {
        uint64_t *buf = *(uint64_t **)p[3 * s];
        if (buf == NULL) continue;
        uint64_t id = *(uint64_t *)p[3 * s + 1], v = *(uint64_t *)p[3 * s + 2];
        uint64_t bad = 0;
        for (uint64_t i = 0; i < words; i++) {
            bad += buf[i] != word(id, v, i);
            buf[i] = word(id, v + 1, i);
        }
        if (bad) atomic_fetch_add(errors, bad);
    }
}

/* Kernel: fill a buffer with version 0. Params: ptr buf, u64 id, u64 words. */
void stress_fill(void **p) {
    uint64_t *buf = *(uint64_t **)p[0];
    uint64_t id = *(uint64_t *)p[1], words = *(uint64_t *)p[2];
    for (uint64_t i = 0; i < words; i++) buf[i] = word(id, 0, i);
}

static const char image[] = "simcuda-module 1\n"
                            "kernel stress_vu ptr u64 u64 ptr u64 u64 ptr u64 u64 u64 ptr ns=20000\n"
                            "kernel stress_fill ptr u64 u64 ns=5000\n";

struct worker {
    int index;
    CUcontext ctx;
    CUfunction vu;
    int nbuf;
    CUdeviceptr *bufs;
    uint64_t *ids, *versions;
    uint64_t words;
    int kernels;
    unsigned seed;
    CUresult error;
};

static _Atomic uint64_t *device_errors; /* pinned host memory the kernels count into */

static void *work(void *arg) {
    struct worker *w = arg;
    CUstream s;
    if ((w->error = cuCtxSetCurrent(w->ctx)) != CUDA_SUCCESS) return NULL;
    if ((w->error = cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS) return NULL;
    for (int k = 0; k < w->kernels; k++) {
        CUdeviceptr ptr[SLOTS] = {0, 0, 0};
        uint64_t id[SLOTS] = {0, 0, 0}, ver[SLOTS] = {0, 0, 0};
        int want = 1 + (int)(rand_r(&w->seed) % SLOTS);
        int chosen[SLOTS], n = 0;
        while (n < want) {
            int b = (int)(rand_r(&w->seed) % (unsigned)w->nbuf);
            bool dup = false;
            for (int j = 0; j < n; j++) dup |= chosen[j] == b;
            if (dup) {
                if (n >= w->nbuf) break;
                continue;
            }
            chosen[n] = b;
            ptr[n] = w->bufs[b];
            id[n] = w->ids[b];
            ver[n] = w->versions[b]++;
            n++;
        }
        void *args[3 * SLOTS + 2];
        for (int j = 0; j < SLOTS; j++) {
            args[3 * j] = &ptr[j];
            args[3 * j + 1] = &id[j];
            args[3 * j + 2] = &ver[j];
        }
        args[3 * SLOTS] = &w->words;
        args[3 * SLOTS + 1] = &device_errors;
        if ((w->error = cuLaunchKernel(w->vu, 1, 1, 1, 1, 1, 1, 0, s, args, NULL)) != CUDA_SUCCESS)
            return NULL;
    }
    w->error = cuStreamSynchronize(s);
    cuStreamDestroy(s);
    return NULL;
}

#define CK(call)                                                                                   \
    do {                                                                                           \
        CUresult rc_ = (call);                                                                     \
        if (rc_ != CUDA_SUCCESS) {                                                                 \
            fprintf(stderr, "stress: %s failed: %d\n", #call, (int)rc_);                           \
            return 2;                                                                              \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: stress THREADS BUFFERS_PER_THREAD BUFFER_MIB KERNELS SEED\n");
        return 2;
    }
    int threads = atoi(argv[1]), per = atoi(argv[2]), mib = atoi(argv[3]), kernels = atoi(argv[4]);
    unsigned seed = (unsigned)atoi(argv[5]);
    CK(cuInit(0));
    CUdevice dev;
    CUcontext ctx;
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CUmodule mod;
    CUfunction vu, fill;
    CK(cuModuleLoadData(&mod, image));
    CK(cuModuleGetFunction(&vu, mod, "stress_vu"));
    CK(cuModuleGetFunction(&fill, mod, "stress_fill"));
    CK(cuMemHostAlloc((void **)&device_errors, sizeof *device_errors, 0));
    atomic_store(device_errors, 0);

    int total = threads * per;
    uint64_t bytes = (uint64_t)mib << 20, words = bytes / 8;
    CUdeviceptr *bufs = calloc((size_t)total, sizeof *bufs);
    uint64_t *ids = calloc((size_t)total, sizeof *ids), *versions = calloc((size_t)total, 8);
    for (int b = 0; b < total; b++) {
        CK(cuMemAlloc(&bufs[b], bytes));
        ids[b] = (uint64_t)b + 1;
        void *args[] = {&bufs[b], &ids[b], &words};
        CK(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    }
    CK(cuCtxSynchronize());

    pthread_t tid[64];
    struct worker w[64];
    for (int t = 0; t < threads && t < 64; t++) {
        w[t] = (struct worker){.index = t, .ctx = ctx, .vu = vu, .nbuf = per,
                               .bufs = &bufs[t * per], .ids = &ids[t * per],
                               .versions = &versions[t * per], .words = words, .kernels = kernels,
                               .seed = seed * 7919u + (unsigned)t};
        pthread_create(&tid[t], NULL, work, &w[t]);
    }
    int failed = 0;
    for (int t = 0; t < threads && t < 64; t++) {
        pthread_join(tid[t], NULL);
        if (w[t].error != CUDA_SUCCESS) {
            fprintf(stderr, "stress: thread %d: driver error %d\n", t, (int)w[t].error);
            failed = 1;
        }
    }
    CK(cuCtxSynchronize());

    /* Every buffer, copied back, must hold its final version in every word. */
    uint64_t *host = malloc(bytes), final_bad = 0;
    for (int b = 0; b < total; b++) {
        CK(cuMemcpyDtoH(host, bufs[b], bytes));
        for (uint64_t i = 0; i < words; i++) final_bad += host[i] != word(ids[b], versions[b], i);
        CK(cuMemFree(bufs[b]));
    }
    uint64_t in_kernel = atomic_load(device_errors);
    printf("stress: %d threads x %d kernels over %d buffers of %d MiB: %llu mismatches in kernels, "
           "%llu at the end\n",
           threads, kernels, total, mib, (unsigned long long)in_kernel,
           (unsigned long long)final_bad);
    free(host);
    return failed || in_kernel != 0 || final_bad != 0 ? 1 : 0;
}
