/* eng_faults: a workload that keeps the engine moving, for fault injection (SIMCUDA_FAIL).
 *
 *   eng_faults KERNELS
 *
 * Run with HOSTOFF_BUDGET=16M: eight 4 MiB buffers (twice the budget) are filled by kernels, then
 * KERNELS verify-and-update kernels on random buffers (alternating between two streams, ordered
 * by events) keep evicting and restoring them; every 25 kernels a buffer is freed and replaced.
 * Every buffer is checked bit-exactly at the end.
 *
 * The program itself reaches only these driver groups: cuMemAlloc_v2 (never, in offload mode:
 * every allocation is large enough to be the engine's), cuLaunchKernel, cuMemcpy (the final
 * synchronous copies) and calls no fault rule names. It makes no asynchronous copy and no VMM
 * call, so an injected failure of cuMemcpyAsync, cuMemCreate, cuMemMap, cuMemSetAccess or
 * cuMemUnmap can only hit the engine, and without the library the program would see none of
 * them: every call it makes must succeed (CK) and its data must stay exact.
 *
 * stdout: "data: ok". */
#include "engtest.h"

#define BYTES (4 * MIB)
#define NBUF  8

static const char image[] = "simcuda-module 1\n" ENG_KERNELS;

int main(int argc, char **argv) {
    int kernels = argc > 1 ? atoi(argv[1]) : 200;
    eng_primary(0);
    struct eng_module m;
    eng_load(&m, image);
    CUstream s[2];
    CUevent last[NBUF];
    int last_stream[NBUF];
    CK(cuStreamCreate(&s[0], CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&s[1], CU_STREAM_NON_BLOCKING));
    CUdeviceptr buf[NBUF];
    uint64_t id[NBUF], ver[NBUF], next_id = 1;
    for (int i = 0; i < NBUF; i++) {
        CK(cuMemAlloc(&buf[i], BYTES));
        id[i] = next_id++;
        ver[i] = 0;
        CK(cuEventCreate(&last[i], CU_EVENT_DISABLE_TIMING));
        CK(eng_launch(m.fill, s[0], buf[i], id[i], 0, BYTES));
        CK(cuEventRecord(last[i], s[0]));
        last_stream[i] = 0;
    }
    unsigned seed = 12345;
    for (int k = 0; k < kernels; k++) {
        int i = (int)(rand_r(&seed) % NBUF), st = k % 2;
        if (last_stream[i] != st) CK(cuStreamWaitEvent(s[st], last[i], 0));
        if (k > 0 && k % 25 == 0) {
            CK(cuStreamSynchronize(s[st]));
            CK(cuMemFree(buf[i]));
            CK(cuMemAlloc(&buf[i], BYTES));
            id[i] = next_id++;
            ver[i] = 0;
            CK(eng_launch(m.fill, s[st], buf[i], id[i], 0, BYTES));
        }
        CK(eng_launch(m.vu, s[st], buf[i], id[i], ver[i], BYTES));
        ver[i]++;
        CK(cuEventRecord(last[i], s[st]));
        last_stream[i] = st;
    }
    CK(cuCtxSynchronize());
    for (int i = 0; i < NBUF; i++) {
        uint64_t bad = eng_host_check(buf[i], id[i], ver[i], BYTES);
        EXPECT(bad == 0, "buffer %d: %llu words differ", i, (unsigned long long)bad);
        CK(cuMemFree(buf[i]));
        CK(cuEventDestroy(last[i]));
    }
    EXPECT(atomic_load(&eng_errors) == 0, "%llu mismatches seen by kernels",
           (unsigned long long)atomic_load(&eng_errors));
    printf("data: ok\n");
    return 0;
}
