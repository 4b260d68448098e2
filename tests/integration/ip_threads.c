/* ip_threads: several host threads, each on its own stream and buffer, launch a kernel many times;
 * each launch verifies the buffer holds what the previous launches left and increments it. Every
 * launch also reads one buffer all threads share (its uses count launches from every thread). The
 * threads use different launch routes (kernelParams, cuLaunchKernelEx, a packed `extra` buffer).
 *
 * stdout: "data:" lines and the "expect" counts and per-buffer uses the report must show. */
#include "iptest.h"

#include <pthread.h>

#define THREADS  4
#define LAUNCHES 1000
#define WORDS    4096u

/* k_check_inc(ptr buf, u32 n, u32 expect, ptr err, ptr shared): if buf[i] != expect + i +
 * shared[0], *err += 1; then buf[i] += 1. err points into the same buffer, past the data: one
 * buffer, one use. shared (read only) holds 0. */
void k_check_inc(void **p) {
    uint32_t *d = *(uint32_t **)p[0];
    uint32_t n = *(uint32_t *)p[1], expect = *(uint32_t *)p[2];
    uint32_t *err = *(uint32_t **)p[3];
    const uint32_t *shared = *(uint32_t **)p[4];
    for (uint32_t i = 0; i < n; i++) {
        if (d[i] != expect + i + shared[0]) *err += 1;
        d[i] += 1;
    }
}

static const char image[] = "simcuda-module 1\nkernel k_check_inc ptr u32 u32 ptr ptr ns=3000\n";

static CUcontext ctx;
static CUfunction fn;
static CUdeviceptr buf[THREADS], shared;

static void *worker(void *arg) {
    int t = (int)(intptr_t)arg;
    CK(cuCtxSetCurrent(ctx));
    CUstream s;
    CK(cuStreamCreate(&s, t % 2 ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT));
    uint32_t *host = malloc((WORDS + 1) * 4);
    EXPECT(host != NULL, "out of memory");
    for (uint32_t i = 0; i < WORDS; i++)
        host[i] = (uint32_t)t * 1000000u + i;
    host[WORDS] = 0;
    CK(cuMemcpyHtoDAsync(buf[t], host, (WORDS + 1) * 4, s));
    for (uint32_t k = 0; k < LAUNCHES; k++) {
        CUdeviceptr p = buf[t], err = buf[t] + WORDS * 4;
        uint32_t n = WORDS, expect = (uint32_t)t * 1000000u + k;
        void *args[] = {&p, &n, &expect, &err, &shared};
        if (t == 2) {
            CUlaunchConfig cfg = {.gridDimX = 4,
                                  .gridDimY = 1,
                                  .gridDimZ = 1,
                                  .blockDimX = 256,
                                  .blockDimY = 1,
                                  .blockDimZ = 1,
                                  .hStream = s};
            CK(cuLaunchKernelEx(&cfg, fn, args, NULL));
        } else if (t == 3) {
            struct {
                uint64_t p;
                uint32_t n, expect;
                uint64_t err, shared;
            } packed = {p, n, expect, err, shared};
            size_t size = sizeof packed;
            void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE,
                             &size, CU_LAUNCH_PARAM_END};
            CK(cuLaunchKernel(fn, 4, 1, 1, 256, 1, 1, 0, s, NULL, extra));
        } else {
            CK(cuLaunchKernel(fn, 4, 1, 1, 256, 1, 1, 0, s, args, NULL));
        }
    }
    CK(cuMemcpyDtoHAsync(host, buf[t], (WORDS + 1) * 4, s));
    CK(cuStreamSynchronize(s));
    EXPECT(host[WORDS] == 0, "thread %d: %u mismatches seen by the kernels", t, host[WORDS]);
    for (uint32_t i = 0; i < WORDS; i++)
        EXPECT(host[i] == (uint32_t)t * 1000000u + i + LAUNCHES, "thread %d word %u: %u", t, i,
               host[i]);
    CK(cuStreamDestroy(s));
    free(host);
    return NULL;
}

int main(void) {
    ctx = ip_primary(0);
    CUmodule mod;
    CK(cuModuleLoadData(&mod, image));
    CK(cuModuleGetFunction(&fn, mod, "k_check_inc"));
    for (int t = 0; t < THREADS; t++)
        CK(cuMemAlloc(&buf[t], (WORDS + 1) * 4));
    CK(cuMemAlloc(&shared, 4096));
    CK(cuMemsetD32(shared, 0, 1024));
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        EXPECT(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) == 0, "pthread_create");
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < THREADS; t++)
        printf("data: thread %d ok\n", t);
    printf("expect counts allocs %d frees 0 launches %d copies %d\n", THREADS + 1,
           THREADS * LAUNCHES, THREADS * 2);
    for (int t = 0; t < THREADS; t++)
        printf("expect uses %d %d\n", t + 1, LAUNCHES + 2);
    printf("expect uses %d %d\n", THREADS + 1, THREADS * LAUNCHES + 1);
    return 0;
}
