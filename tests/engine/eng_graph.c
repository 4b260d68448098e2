/* eng_graph: stream capture and graph launches over evicted buffers.
 *
 * Run with HOSTOFF_BUDGET=16M and 4 MiB buffers (room for four). Buffers G0, G1 and C are filled
 * first and pushed out by six others (O0..O5), so when the capture begins they are host-located
 * (the program checks where each buffer's physical handle lives, through the driver). In GLOBAL
 * capture mode, the strictest, stream A captures: a step kernel on G0, a fork to stream B that
 * steps G1, a device-to-device copy of G0 into C, and the join back to A. Meanwhile the program
 * launches ordinary work on a third stream over an evicted buffer: nothing may restore,
 * synchronise or query during the capture, or the driver invalidates it (the capture must end
 * with CUDA_SUCCESS). The graph is then launched several times, each launch followed by work on
 * the other stream that pushes the graph's buffers out again (those moves must wait for the
 * graph's kernels); every other iteration the program checks G0, G1 and C bit-exactly.
 *
 * A second capture, in RELAXED mode, allocates a new buffer N while capturing (the engine must
 * take it without evicting) and captures a step of N and of G0; its graph is launched twice.
 *
 * Step kernels keep the version in word 0: a graph's kernel arguments are fixed, so each launch
 * checks every word against the version the buffer holds and writes the next one.
 *
 * stdout: "where:" lines (placement before the capture), "graph launches N", "data: ok". */
#include "engtest.h"

#define BYTES    (4 * MIB)
#define NOTHERS  6
#define LAUNCHES 6

/* step(ptr buf, u64 id, u64 words): word 0 holds v; every other word must hold eng_word(id, v, i);
 * then the buffer moves to v + 1. */
void graph_step(void **p) {
    uint64_t *b = *(uint64_t **)p[0], id = *(uint64_t *)p[1], n = *(uint64_t *)p[2], bad = 0;
    uint64_t v = b[0];
    for (uint64_t i = 1; i < n; i++) {
        bad += b[i] != eng_word(id, v, i);
        b[i] = eng_word(id, v + 1, i);
    }
    b[0] = v + 1;
    if (bad) atomic_fetch_add(&eng_errors, bad);
}

/* vinit(ptr buf, u64 id, u64 words): the buffer at version 0 in the step layout. */
void graph_vinit(void **p) {
    uint64_t *b = *(uint64_t **)p[0], id = *(uint64_t *)p[1], n = *(uint64_t *)p[2];
    b[0] = 0;
    for (uint64_t i = 1; i < n; i++)
        b[i] = eng_word(id, 0, i);
}

static const char image[] = "simcuda-module 1\n"
                            "kernel graph_step ptr u64 u64 ns=30000\n"
                            "kernel graph_vinit ptr u64 u64 ns=5000\n" ENG_KERNELS;

static CUfunction step_fn, vinit_fn;

static void launch3(CUfunction f, CUstream s, CUdeviceptr buf, uint64_t id) {
    uint64_t words = BYTES / 8;
    void *args[] = {&buf, &id, &words};
    CK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
}

/* Where the physical memory behind ptr lives: 'D' device, 'H' host (VMM handles), 'L' not a VMM
 * mapping (driver linear memory or managed memory). */
static char where(CUdeviceptr ptr) {
    /* Asked of the simulator, not the driver API: cuMemRetainAllocationHandle would pin it. */
    char c = simcuda_where((const void *)(uintptr_t)ptr);
    return c == 'D' || c == 'H' ? c : 'L';
}

/* Checks a step-layout buffer at `version` with a synchronous copy. */
static void check_step(const char *what, CUdeviceptr buf, uint64_t id, uint64_t version) {
    uint64_t n = BYTES / 8, bad = 0;
    uint64_t *h = malloc(BYTES);
    EXPECT(h != NULL, "out of memory");
    CK(cuMemcpyDtoH(h, buf, BYTES));
    bad += h[0] != version;
    for (uint64_t i = 1; i < n; i++)
        bad += h[i] != eng_word(id, version, i);
    free(h);
    EXPECT(bad == 0, "%s: %llu words differ from version %llu", what, (unsigned long long)bad,
           (unsigned long long)version);
}

int main(void) {
    eng_primary(0);
    struct eng_module m;
    eng_load(&m, image);
    CK(cuModuleGetFunction(&step_fn, m.mod, "graph_step"));
    CK(cuModuleGetFunction(&vinit_fn, m.mod, "graph_vinit"));
    CUstream a, b, other;
    CK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));

    /* Ids: G0 1, G1 2, C 3 (holds copies of G0, so it is checked against id 1), O 10.. */
    CUdeviceptr g0, g1, c, o[NOTHERS];
    uint64_t ov[NOTHERS] = {0};
    CK(cuMemAlloc(&g0, BYTES));
    CK(cuMemAlloc(&g1, BYTES));
    CK(cuMemAlloc(&c, BYTES));
    launch3(vinit_fn, other, g0, 1);
    launch3(vinit_fn, other, g1, 2);
    launch3(vinit_fn, other, c, 1);
    for (int i = 0; i < NOTHERS; i++) {
        CK(cuMemAlloc(&o[i], BYTES));
        CK(eng_launch(m.fill, other, o[i], 10 + (uint64_t)i, 0, BYTES));
    }
    CK(cuStreamSynchronize(other));
    printf("where: G0 %c G1 %c C %c\n", where(g0), where(g1), where(c));

    /* Capture 1 (GLOBAL): step G0 on A; fork: step G1 on B; copy G0 -> C on A; join. */
    CUevent fork, join;
    CK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
    CK(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
    CK(cuStreamBeginCapture(a, CU_STREAM_CAPTURE_MODE_GLOBAL));
    launch3(step_fn, a, g0, 1);
    CK(cuEventRecord(fork, a));
    CK(cuStreamWaitEvent(b, fork, 0));
    launch3(step_fn, b, g1, 2);
    /* Ordinary work on a stream outside the capture, over a buffer that is host-located now. */
    CK(eng_launch(m.vu, other, o[0], 10, ov[0], BYTES));
    ov[0]++;
    CK(cuMemcpyDtoDAsync(c, g0, BYTES, a));
    CK(cuEventRecord(join, b));
    CK(cuStreamWaitEvent(a, join, 0));
    CUgraph graph;
    CK(cuStreamEndCapture(a, &graph));
    CUgraphExec exec;
    CK(cuGraphInstantiateWithFlags(&exec, graph, 0));

    uint64_t v0 = 0, v1 = 0;
    int launches = 0;
    for (int it = 0; it < LAUNCHES; it++) {
        CK(cuGraphLaunch(exec, a));
        launches++;
        v0++;
        v1++;
        /* Work that needs the whole budget: the graph's buffers must go out again, after its
         * kernels and copy are done. */
        for (int i = 0; i < NOTHERS; i++) {
            CK(eng_launch(m.vu, other, o[i], 10 + (uint64_t)i, ov[i], BYTES));
            ov[i]++;
        }
        if (it % 2 == 1) {
            CK(cuStreamSynchronize(a));
            check_step("G0", g0, 1, v0);
            check_step("G1", g1, 2, v1);
            check_step("C", c, 1, v0);
        }
    }

    /* Capture 2 (RELAXED): allocate N while capturing; step N and G0. */
    CUdeviceptr n;
    CK(cuStreamBeginCapture(a, CU_STREAM_CAPTURE_MODE_RELAXED));
    CK(cuMemAlloc(&n, BYTES));
    launch3(step_fn, a, n, 4);
    launch3(step_fn, a, g0, 1);
    CUgraph graph2;
    CK(cuStreamEndCapture(a, &graph2));
    CUgraphExec exec2;
    CK(cuGraphInstantiateWithFlags(&exec2, graph2, 0));
    launch3(vinit_fn, a, n, 4);
    uint64_t vn = 0;
    for (int it = 0; it < 2; it++) {
        CK(cuGraphLaunch(exec2, a));
        launches++;
        vn++;
        v0++;
        for (int i = 0; i < NOTHERS; i++) {
            CK(eng_launch(m.vu, other, o[i], 10 + (uint64_t)i, ov[i], BYTES));
            ov[i]++;
        }
    }

    CK(cuCtxSynchronize());
    check_step("G0", g0, 1, v0);
    check_step("G1", g1, 2, v1);
    check_step("C", c, 1, v0 - 2); /* the last copy ran before graph 2's steps */
    check_step("N", n, 4, vn);
    for (int i = 0; i < NOTHERS; i++) {
        uint64_t bad = eng_host_check(o[i], 10 + (uint64_t)i, ov[i], BYTES);
        EXPECT(bad == 0, "O%d: %llu words differ", i, (unsigned long long)bad);
    }
    EXPECT(atomic_load(&eng_errors) == 0, "%llu mismatches seen by kernels",
           (unsigned long long)atomic_load(&eng_errors));
    CK(cuGraphExecDestroy(exec));
    CK(cuGraphExecDestroy(exec2));
    CK(cuGraphDestroy(graph));
    CK(cuGraphDestroy(graph2));
    CK(cuMemFree(g0));
    CK(cuMemFree(g1));
    CK(cuMemFree(c));
    CK(cuMemFree(n));
    for (int i = 0; i < NOTHERS; i++)
        CK(cuMemFree(o[i]));
    printf("graph launches %d\n", launches);
    printf("data: ok\n");
    return 0;
}
