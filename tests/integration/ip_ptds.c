/* ip_ptds: two host threads launch long kernels on "the default stream" (stream 0). Compiled with
 * -DCUDA_API_PER_THREAD_DEFAULT_STREAM=1, cuda.h turns the calls into their _ptsz/_ptds variants
 * and each thread's default stream is its own: the two threads' kernels overlap in virtual time.
 * Compiled without it (the control), both threads share the legacy default stream and serialise.
 *
 * stdout: the per-thread durations (per-thread build only: in the legacy build they depend on how
 * the threads' calls interleave), the span from the first start to the last end, and whether the
 * threads overlapped, from cuEventElapsedTime in virtual milliseconds. */
#include "iptest.h"

#include <pthread.h>

#define THREADS   2
#define KERNELS   4
#define WORDS     1024u
#define KERNEL_MS 1.0f /* ns=1000000 below */

/* k_long(ptr p, u32 n): p[i] += 1; 1 ms of virtual time. */
void k_long(void **p) {
    uint32_t *d = *(uint32_t **)p[0];
    uint32_t n = *(uint32_t *)p[1];
    for (uint32_t i = 0; i < n; i++)
        d[i] += 1;
}

static const char image[] = "simcuda-module 1\nkernel k_long ptr u32 ns=1000000\n";

static CUcontext ctx;
static CUfunction fn;
static CUdeviceptr buf[THREADS];
static CUevent start[THREADS], end[THREADS];
static pthread_barrier_t enqueued;

static void *worker(void *arg) {
    int t = (int)(intptr_t)arg;
    CK(cuCtxSetCurrent(ctx));
    CK(cuEventRecord(start[t], 0));
    uint32_t n = WORDS;
    void *args[] = {&buf[t], &n};
    for (int k = 0; k < KERNELS; k++)
        CK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, 0, args, NULL));
    CK(cuEventRecord(end[t], 0));
    /* Both threads enqueue before either waits: a wait moves the virtual host clock on. */
    pthread_barrier_wait(&enqueued);
    CK(cuStreamSynchronize(0));
    uint32_t host[WORDS];
    CK(cuMemcpyDtoH(host, buf[t], sizeof host));
    for (uint32_t i = 0; i < WORDS; i++)
        EXPECT(host[i] == (uint32_t)t * 100u + KERNELS, "thread %d word %u: %u", t, i, host[i]);
    return NULL;
}

int main(void) {
    ctx = ip_primary(0);
    CUmodule mod;
    CK(cuModuleLoadData(&mod, image));
    CK(cuModuleGetFunction(&fn, mod, "k_long"));
    for (int t = 0; t < THREADS; t++) {
        CK(cuMemAlloc(&buf[t], WORDS * 4));
        CK(cuMemsetD32(buf[t], (unsigned)t * 100u, WORDS));
        CK(cuEventCreate(&start[t], 0));
        CK(cuEventCreate(&end[t], 0));
    }
    CK(cuCtxSynchronize());
    pthread_barrier_init(&enqueued, NULL, THREADS);
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        EXPECT(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) == 0, "pthread_create");
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);

    /* Times relative to thread 0's start event (may be negative). */
    float first = 0, last = 0;
    for (int t = 0; t < THREADS; t++) {
        float s = 0, e = 0, d = 0;
        CK(cuEventElapsedTime(&s, start[0], start[t]));
        CK(cuEventElapsedTime(&e, start[0], end[t]));
        CK(cuEventElapsedTime(&d, start[t], end[t]));
        if (t == 0 || s < first) first = s;
        if (t == 0 || e > last) last = e;
#if CUDA_API_PER_THREAD_DEFAULT_STREAM
        printf("thread %d: %.1f ms\n", t, (double)d);
#endif
    }
    float span = last - first;
#if CUDA_API_PER_THREAD_DEFAULT_STREAM
    printf("default stream: per-thread\n");
#else
    printf("default stream: legacy\n");
#endif
    printf("span: %.1f ms\n", (double)span);
    /* Serialised, the kernels take THREADS * KERNELS ms end to end; overlapped, KERNELS ms. */
    printf("overlap: %s\n", span < 0.75f * THREADS * KERNELS * KERNEL_MS ? "yes" : "no");
    for (int t = 0; t < THREADS; t++)
        CK(cuMemFree(buf[t]));
    return 0;
}
