/* eng_free: stream-ordered frees, frees right after asynchronous work, and moves that must wait
 * for queued uses.
 *
 *   eng_free CYCLES
 *
 * Run with HOSTOFF_BUDGET=16M (room for four 4 MiB buffers).
 * Phase 0, moves wait for queued work: a 2 ms kernel on P, then, on another stream, allocations
 * and kernels that need the whole budget: P's eviction (a 76 us copy) must wait for the kernel,
 * or the remap lands under it (the simulator records a hazard).
 * Phase 1, async frees on another stream, CYCLES times: allocate X (8 MiB; cuMemAllocAsync or
 * cuMemAlloc, alternately), fill it, verify-update it and keep it busy on stream A or C
 * (alternately: consecutive cycles are not ordered with each other), record an event on it,
 * make stream B wait for that and cuMemFreeAsync(X, B). The free must not unmap X before the
 * work is done (a hazard), and the memory must not come back to an allocation before then: each
 * allocation that returns the address of a freed buffer checks (cuEventQuery) that the freed
 * buffer's work has completed. Freed memory must be reused: the device footprint stays bounded
 * and few distinct addresses come back.
 * Phase 2, plain cuMemFree right after asynchronous launches on a non-blocking stream, CYCLES / 4
 * times: the driver's cuMemFree waits for the device; a stream-ordered free must wait for the
 * buffer's queued uses (same checks).
 * Phase 3, frees of buffers in every state: six 4 MiB buffers under the budget, one 200 us kernel
 * reading five of them at once (more than the budget: some stay host-located and are read
 * remotely), then each buffer freed at once, on another stream, ordered after that kernel only
 * by an event: the host-located ones must not be unmapped under it.
 * Phase 4, a restore waits for remote uses: H is pushed out, two buffers are freed to leave room,
 * and while a capture is open on another stream (nothing is restored then) a 2 ms kernel reads H
 * where it is, in host memory. After the capture a launch on a third stream restores H: the copy
 * back must wait for the 2 ms kernel, or the remap lands under it (a hazard).
 *
 * stdout: "distinct addresses N of M allocations", "data: ok". */
#include "engtest.h"

#define MAXADDR 4096

/* sum5(ptr x5, u64 id0, u64 version, u64 words): checks five buffers (ids id0..id0+4). */
void free_check5(void **p) {
    uint64_t id0 = *(uint64_t *)p[5], v = *(uint64_t *)p[6], n = *(uint64_t *)p[7], bad = 0;
    for (int k = 0; k < 5; k++) {
        const uint64_t *b = *(uint64_t **)p[k];
        for (uint64_t i = 0; i < n; i++)
            bad += b[i] != eng_word(id0 + (uint64_t)k, v, i);
    }
    if (bad) atomic_fetch_add(&eng_errors, bad);
}

static const char image[] = "simcuda-module 1\n"
                            "kernel free_check5 ptr ptr ptr ptr ptr u64 u64 u64 ns=200000\n"
                            "kernel free_long ptr u64 ns=300000\n"
                            "kernel free_longer ptr ns=2000000\n" ENG_KERNELS;

static CUdeviceptr seen[MAXADDR];
static int nseen, nallocs;

/* Freed buffers whose work may still be queued: the address and an event after that work. */
#define NFREED 8
static struct {
    CUdeviceptr addr;
    CUevent after;
} freed[NFREED];
static int next_freed;

static void note_alloc(CUdeviceptr p) {
    nallocs++;
    for (int i = 0; i < NFREED; i++) {
        if (freed[i].addr != p) continue;
        CUresult q = cuEventQuery(freed[i].after);
        EXPECT(q == CUDA_SUCCESS,
               "allocation %d returned %#llx, freed before work still queued on it (query %d)",
               nallocs, (unsigned long long)p, (int)q);
        freed[i].addr = 0;
    }
    for (int i = 0; i < nseen; i++)
        if (seen[i] == p) return;
    if (nseen < MAXADDR) seen[nseen++] = p;
}

/* Records that p is being freed after the work recorded so far on s. */
static void note_free(CUdeviceptr p, CUstream s) {
    int i = next_freed++ % NFREED;
    freed[i].addr = p;
    CK(cuEventRecord(freed[i].after, s));
}

int main(int argc, char **argv) {
    int cycles = argc > 1 ? atoi(argv[1]) : 200;
    eng_primary(0);
    struct eng_module m;
    eng_load(&m, image);
    CUfunction check5, longk, longer;
    CK(cuModuleGetFunction(&check5, m.mod, "free_check5"));
    CK(cuModuleGetFunction(&longk, m.mod, "free_long"));
    CK(cuModuleGetFunction(&longer, m.mod, "free_longer"));
    CUstream a, b, c;
    CK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&c, CU_STREAM_NON_BLOCKING));
    CUevent done;
    CK(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
    for (int i = 0; i < NFREED; i++)
        CK(cuEventCreate(&freed[i].after, CU_EVENT_DISABLE_TIMING));

    /* Phase 0. */
    CUdeviceptr p, q[4];
    CK(cuMemAlloc(&p, 4 * MIB));
    note_alloc(p);
    CK(eng_launch(m.fill, a, p, 1, 0, 4 * MIB));
    void *pargs[] = {&p};
    CK(cuLaunchKernel(longer, 1, 1, 1, 1, 1, 1, 0, a, pargs, NULL));
    for (int i = 0; i < 4; i++) {
        CK(cuMemAlloc(&q[i], 4 * MIB));
        note_alloc(q[i]);
        CK(eng_launch(m.fill, b, q[i], 2 + (uint64_t)i, 0, 4 * MIB));
    }
    CK(eng_launch(m.check, a, p, 1, 0, 4 * MIB));
    CK(cuCtxSynchronize());
    CK(cuMemFree(p));
    for (int i = 0; i < 4; i++)
        CK(cuMemFree(q[i]));

    /* Phase 1. */
    for (int k = 0; k < cycles; k++) {
        uint64_t bytes = 8 * MIB, id = 1000 + (uint64_t)k;
        CUstream w = k % 2 ? c : a;
        CUdeviceptr x;
        if (k % 4 < 2)
            CK(cuMemAllocAsync(&x, bytes, w));
        else
            CK(cuMemAlloc(&x, bytes));
        note_alloc(x);
        CK(eng_launch(m.fill, w, x, id, 0, bytes));
        CK(eng_launch(m.vu, w, x, id, 0, bytes));
        uint64_t words = bytes / 8;
        void *args[] = {&x, &words};
        CK(cuLaunchKernel(longk, 1, 1, 1, 1, 1, 1, 0, w, args, NULL)); /* keeps x in use */
        CK(eng_launch(m.check, w, x, id, 1, bytes));
        note_free(x, w);
        CK(cuEventRecord(done, w));
        CK(cuStreamWaitEvent(b, done, 0));
        CK(cuMemFreeAsync(x, b));
    }
    CK(cuCtxSynchronize());

    /* Phase 2. */
    for (int k = 0; k < cycles / 4; k++) {
        uint64_t bytes = 8 * MIB, id = 5000 + (uint64_t)k;
        CUstream w = k % 2 ? c : a;
        CUdeviceptr x;
        CK(cuMemAlloc(&x, bytes));
        note_alloc(x);
        CK(eng_launch(m.fill, w, x, id, 0, bytes));
        uint64_t words = bytes / 8;
        void *args[] = {&x, &words};
        CK(cuLaunchKernel(longk, 1, 1, 1, 1, 1, 1, 0, w, args, NULL));
        CK(eng_launch(m.check, w, x, id, 0, bytes));
        note_free(x, w);
        CK(cuMemFree(x));
    }
    CK(cuCtxSynchronize());

    /* Phase 3. */
    CUdeviceptr six[6];
    uint64_t bytes = 4 * MIB;
    for (int i = 0; i < 6; i++) {
        CK(cuMemAlloc(&six[i], bytes));
        note_alloc(six[i]);
        CK(eng_launch(m.fill, a, six[i], 100 + (uint64_t)i, 0, bytes));
    }
    uint64_t id0 = 100, ver = 0, words = bytes / 8;
    void *args[] = {&six[0], &six[1], &six[2], &six[3], &six[4], &id0, &ver, &words};
    CK(cuLaunchKernel(check5, 1, 1, 1, 1, 1, 1, 0, a, args, NULL));
    CK(cuEventRecord(done, a));
    CK(cuStreamWaitEvent(b, done, 0));
    for (int i = 0; i < 6; i++)
        CK(cuMemFreeAsync(six[i], b));
    CK(cuCtxSynchronize());

    /* Phase 4. */
    CUdeviceptr h, j[4];
    CK(cuMemAlloc(&h, bytes));
    note_alloc(h);
    CK(eng_launch(m.fill, a, h, 300, 0, bytes));
    for (int i = 0; i < 4; i++) {
        CK(cuMemAlloc(&j[i], bytes));
        note_alloc(j[i]);
        CK(eng_launch(m.fill, a, j[i], 301 + (uint64_t)i, 0, bytes));
    }
    CK(cuMemFree(j[0]));
    CK(cuMemFree(j[1]));
    CK(cuCtxSynchronize());
    CK(cuStreamBeginCapture(c, CU_STREAM_CAPTURE_MODE_RELAXED));
    void *hargs[] = {&h};
    CK(cuLaunchKernel(longer, 1, 1, 1, 1, 1, 1, 0, a, hargs, NULL)); /* h stays host-located */
    CUgraph empty;
    CK(cuStreamEndCapture(c, &empty));
    CK(cuGraphDestroy(empty));
    CK(eng_launch(m.vu, b, h, 300, 0, bytes)); /* restores h: after the kernel on a only */
    CK(cuCtxSynchronize());
    EXPECT(eng_host_check(h, 300, 1, bytes) == 0, "h differs");
    CK(cuMemFree(h));
    CK(cuMemFree(j[2]));
    CK(cuMemFree(j[3]));

    EXPECT(atomic_load(&eng_errors) == 0, "%llu mismatches seen by kernels",
           (unsigned long long)atomic_load(&eng_errors));
    printf("distinct addresses %d of %d allocations\n", nseen, nallocs);
    printf("data: ok\n");
    return 0;
}
