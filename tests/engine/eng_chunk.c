/* eng_chunk: an eviction's copy goes to the link in chunks (HOSTOFF_EVICT_CHUNK, at most
 * HO_SEND_AHEAD ahead of it), so that a free or a use that calls the eviction off stops the copy
 * there instead of carrying the whole buffer.
 *
 *   eng_chunk free|use|exit
 *
 * Run with HOSTOFF_BUDGET=1G, HOSTOFF_POLICY=oracle and the plan engine_harness.py writes: after
 * launch 0 (A's fill), evict buffer 0 (A). A is 256 MiB, filled on stream s; the program polls
 * s until the fill is done (cuStreamQuery), and its next call (a progress point) starts the
 * planned eviction: its first chunks go to the link.
 * Then at once:
 *   free: cuMemFree(A), and a new 256 MiB buffer is allocated, filled and checked;
 *   use:  a verify-update of A on s (launch 1), which must find every word of the fill and
 *         leave the next version, checked bit-exactly at the end;
 *   exit: nothing more: the process ends with the eviction in flight (its queued copy runs, or
 *         the driver drops it with the context; the report counts it as cancelled).
 * The harness reads how many bytes the cancelled eviction carried from both reports.
 *
 * stdout: "data: ok". */
#include "engtest.h"

static const char image[] = "simcuda-module 1\n" ENG_KERNELS;

#define BYTES (256 * MIB)

int main(int argc, char **argv) {
    if (argc != 2 || (strcmp(argv[1], "free") != 0 && strcmp(argv[1], "use") != 0 &&
                      strcmp(argv[1], "exit") != 0)) {
        fprintf(stderr, "usage: eng_chunk free|use|exit\n");
        return 2;
    }
    bool use = strcmp(argv[1], "use") == 0;
    eng_primary(0);
    struct eng_module m;
    eng_load(&m, image);
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr a;
    CK(cuMemAlloc(&a, BYTES));
    CK(eng_launch(m.fill, s, a, 1, 0, BYTES));
    /* Polled, not waited for: a synchronising call would hand the engine's held chunks to the
     * link before it blocks (engine_send.c), and the eviction may already have started. */
    CUresult q;
    while ((q = cuStreamQuery(s)) == CUDA_ERROR_NOT_READY)
        ;
    EXPECT(q == CUDA_SUCCESS, "cuStreamQuery: %d", (int)q);
    CK(cuStreamQuery(s)); /* the progress point that starts the planned eviction */
    if (strcmp(argv[1], "exit") == 0) {
        printf("data: ok\n");
        return 0;
    }
    if (use) {
        CK(eng_launch(m.vu, s, a, 1, 0, BYTES));
        CK(cuCtxSynchronize());
        uint64_t bad = eng_host_check(a, 1, 1, BYTES);
        EXPECT(bad == 0, "A: %llu words differ", (unsigned long long)bad);
        EXPECT(atomic_load(&eng_errors) == 0, "A: the verify-update found %llu words wrong",
               (unsigned long long)atomic_load(&eng_errors));
        CK(cuMemFree(a));
    } else {
        CK(cuMemFree(a));
        CUdeviceptr b;
        CK(cuMemAlloc(&b, BYTES));
        CK(eng_launch(m.fill, s, b, 2, 0, BYTES));
        CK(cuCtxSynchronize());
        uint64_t bad = eng_host_check(b, 2, 0, BYTES);
        EXPECT(bad == 0, "B: %llu words differ", (unsigned long long)bad);
        CK(cuMemFree(b));
    }
    CK(cuStreamDestroy(s));
    printf("data: ok\n");
    return 0;
}
