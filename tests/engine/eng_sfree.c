/* eng_sfree: stream-ordered reuse (src/engine_sfree.c) raced against moves.
 *
 *   eng_sfree CYCLES        (run with HOSTOFF_BUDGET=16M: room for four 4 MiB buffers)
 *
 * Phase 1, each cycle, on stream s: allocate X (cuMemAllocAsync), fill it, a 2 ms kernel that
 * verifies and rewrites every word (X's memory stays busy that long in virtual time), then
 * cuMemFreeAsync(X, s) and at once cuMemAllocAsync(Y, s): Y takes X's memory, at X's address,
 * while the kernel still runs. Then, still at once, four plain allocations on the host need the
 * whole budget, so Y is evicted: its eviction must wait for X's kernel, which still writes that
 * memory (a remap under it is a hazard the simulator records; a copy before it would leave the
 * kernel writing memory that has been handed on). Y is then filled and rewritten on s (restored
 * first) and checked on the host, bit for bit; every buffer is freed.
 * Phase 2, a free on s and an allocation on another stream t right after it: t is not ordered
 * after s, so the memory must not come back to t before X's work is done (checked with an event
 * recorded after that work, as eng_free does).
 * Phase 3, 200 pairs of cuMemAllocAsync + cuMemFreeAsync on s with no work between: the same
 * address every time and no event, wait or query in the driver (simcuda_calls; the harness checks
 * both under the library: the driver's own pool need not return the same address).
 *
 * stdout: "reused N of M", "phase 3 calls E W Q", "phase 3 same address N of 200",
 * "data: ok". */
#include "engtest.h"

static const char image[] = "simcuda-module 1\n"
                            "kernel sfree_long ptr u64 u64 u64 ns=2000000\n" ENG_KERNELS;

/* The 2 ms kernel: verifies and rewrites X, as eng_vu does (its body; the duration is its own). */
void sfree_long(void **p) {
    eng_vu(p);
}

static uint64_t calls(const char *kind) {
    char key[64];
    snprintf(key, sizeof key, "%s.device", kind);
    return simcuda_calls(key);
}

int main(int argc, char **argv) {
    int cycles = argc > 1 ? atoi(argv[1]) : 40;
    eng_primary(0);
    struct eng_module m;
    eng_load(&m, image);
    CUfunction longk;
    CK(cuModuleGetFunction(&longk, m.mod, "sfree_long"));
    CUstream s, t;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&t, CU_STREAM_NON_BLOCKING));
    CUevent after;
    CK(cuEventCreate(&after, CU_EVENT_DISABLE_TIMING));
    const uint64_t bytes = 4 * MIB;
    int reused = 0;

    /* Phase 1. */
    for (int k = 0; k < cycles; k++) {
        uint64_t idx = 1000 + 2 * (uint64_t)k, idy = idx + 1;
        CUdeviceptr x, y, z[4];
        CK(cuMemAllocAsync(&x, bytes, s));
        CK(eng_launch(m.fill, s, x, idx, 0, bytes));
        CK(eng_launch(longk, s, x, idx, 0, bytes)); /* 0 -> 1, for 2 ms */
        CK(cuMemFreeAsync(x, s));
        CK(cuMemAllocAsync(&y, bytes, s));
        reused += y == x;
        for (int i = 0; i < 4; i++)
            CK(cuMemAlloc(&z[i], bytes)); /* the budget: Y goes out, after X's kernel */
        for (int i = 0; i < 4; i++)
            CK(eng_launch(m.fill, t, z[i], 5000 + (uint64_t)i, 0, bytes));
        CK(eng_launch(m.fill, s, y, idy, 0, bytes)); /* restores Y */
        CK(eng_launch(m.vu, s, y, idy, 0, bytes));
        CK(cuStreamSynchronize(s));
        EXPECT(eng_host_check(y, idy, 1, bytes) == 0, "cycle %d: Y differs", k);
        CK(cuStreamSynchronize(t));
        for (int i = 0; i < 4; i++) {
            EXPECT(eng_host_check(z[i], 5000 + (uint64_t)i, 0, bytes) == 0, "cycle %d: Z%d", k, i);
            CK(cuMemFree(z[i]));
        }
        CK(cuMemFreeAsync(y, s));
    }
    CK(cuCtxSynchronize());

    /* Phase 2. */
    for (int k = 0; k < cycles; k++) {
        CUdeviceptr x, w;
        CK(cuMemAllocAsync(&x, bytes, s));
        CK(eng_launch(m.fill, s, x, 7000 + (uint64_t)k, 0, bytes));
        CK(eng_launch(longk, s, x, 7000 + (uint64_t)k, 0, bytes));
        CK(cuEventRecord(after, s));
        CK(cuMemFreeAsync(x, s));
        CK(cuMemAllocAsync(&w, bytes, t));
        if (w == x) {
            CUresult q = cuEventQuery(after);
            EXPECT(q == CUDA_SUCCESS,
                   "phase 2 cycle %d: stream t got X's memory before X's work "
                   "was done (query %d)",
                   k, (int)q);
        }
        CK(eng_launch(m.fill, t, w, 8000 + (uint64_t)k, 0, bytes));
        CK(cuStreamSynchronize(t));
        EXPECT(eng_host_check(w, 8000 + (uint64_t)k, 0, bytes) == 0, "phase 2 cycle %d: W", k);
        CK(cuMemFreeAsync(w, t));
    }
    CK(cuCtxSynchronize());

    /* Phase 3. */
    CUdeviceptr first = 0;
    int same = 0;
    /* One pair first: it settles what phase 2 left (frees still to complete, memory held for t). */
    CK(cuMemAllocAsync(&first, bytes, s));
    CK(cuMemFreeAsync(first, s));
    uint64_t e0 = calls("cuEventRecord"), w0 = calls("cuStreamWaitEvent"),
             q0 = calls("cuEventQuery");
    for (int k = 0; k < 200; k++) {
        CUdeviceptr x;
        CK(cuMemAllocAsync(&x, bytes, s));
        if (k == 0) first = x;
        same += x == first;
        CK(cuMemFreeAsync(x, s));
    }
    printf("phase 3 calls %llu %llu %llu\n", (unsigned long long)(calls("cuEventRecord") - e0),
           (unsigned long long)(calls("cuStreamWaitEvent") - w0),
           (unsigned long long)(calls("cuEventQuery") - q0));
    printf("phase 3 same address %d of 200\n", same);
    CK(cuCtxSynchronize());

    EXPECT(atomic_load(&eng_errors) == 0, "%llu mismatches seen by kernels",
           (unsigned long long)atomic_load(&eng_errors));
    printf("reused %d of %d\n", reused, cycles);
    printf("data: ok\n");
    return 0;
}
