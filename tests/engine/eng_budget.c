/* eng_budget: the budget, device and host memory pressure, cuMemGetInfo and HOSTOFF_MIN_BYTES.
 *
 *   eng_budget oversize          (HOSTOFF_BUDGET=16M)
 *       cuMemAlloc and cuMemAllocAsync of 32 MiB: "oversize alloc RC", "oversize async RC";
 *       then two 4 MiB buffers and one of exactly the budget: "budget-sized alloc RC"; the two
 *       small ones must still hold their bytes.
 *   eng_budget fill MIB N        allocates up to N buffers of MIB MiB, filling each by a kernel,
 *       until the first error: "allocated K of N first error RC" (RC 0: none); then two rounds
 *       of verify-and-update kernels over all of them and a bit-exact check of each.
 *   eng_budget meminfo           cuMemGetInfo at each step of a scripted sequence (4 MiB
 *       buffers): "meminfo STEP free FREE total TOTAL" for STEP start, one, four, five, small,
 *       freed.
 *   eng_budget where             allocations of 1 MiB, 4 MiB - 4 KiB, 4 MiB and 6 MiB, then eight
 *       4 MiB buffers worked under the budget: "where BYTES BEFORE AFTER" for each of the first
 *       four, where BEFORE/AFTER say what backs it before and after the pressure: L (the
 *       driver's own linear memory: the allocation passed through), D or H (a VMM mapping of a
 *       device- or host-located handle: the engine's).
 *   eng_budget planned           (HOSTOFF_BUDGET=512M, HOSTOFF_POLICY=oracle and the plan
 *       engine_harness.py writes: after Z's fill, evict A0..A31) thirty-two 8 MiB buffers
 *       A0..A31 and a 64 MiB Z, each filled by a launch; a sync of the fills (the planned
 *       evictions start up to the background cap, 64 MiB in flight: at the allocation 8 have
 *       landed, 8 are in flight and 16 wait), then a 352 MiB allocation 32 MiB short of room:
 *       "where Z C", C as for `where`. The plan gives Z no later use, so the engine's own choice
 *       of victim (needed furthest ahead) would be Z (H): D says the room came from the planned
 *       evictions waiting behind the cap instead.
 *
 * Every mode ends with "data: ok" when every byte checked was exact. */
#include "engtest.h"

static const char image[] = "simcuda-module 1\n" ENG_KERNELS;
static struct eng_module m;

static char where(CUdeviceptr ptr) {
    /* Asked of the simulator, not the driver API: cuMemRetainAllocationHandle would pin it. */
    char c = simcuda_where((const void *)(uintptr_t)ptr);
    return c == 'D' || c == 'H' ? c : 'L';
}

static void check(const char *what, CUdeviceptr p, uint64_t id, uint64_t ver, uint64_t bytes) {
    uint64_t bad = eng_host_check(p, id, ver, bytes);
    EXPECT(bad == 0, "%s: %llu words differ", what, (unsigned long long)bad);
}

static int oversize(void) {
    CUdeviceptr p = 0;
    printf("oversize alloc %d\n", (int)cuMemAlloc(&p, 32 * MIB));
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    printf("oversize async %d\n", (int)cuMemAllocAsync(&p, 32 * MIB, s));
    CUdeviceptr a, b, whole;
    CK(cuMemAlloc(&a, 4 * MIB));
    CK(cuMemAlloc(&b, 4 * MIB));
    CK(eng_launch(m.fill, s, a, 1, 0, 4 * MIB));
    CK(eng_launch(m.fill, s, b, 2, 0, 4 * MIB));
    CUresult rc = cuMemAlloc(&whole, 16 * MIB);
    printf("budget-sized alloc %d\n", (int)rc);
    if (rc == CUDA_SUCCESS) {
        CK(eng_launch(m.fill, s, whole, 3, 0, 16 * MIB));
        CK(cuStreamSynchronize(s));
        check("whole", whole, 3, 0, 16 * MIB);
        CK(cuMemFree(whole));
    }
    CK(cuStreamSynchronize(s));
    check("a", a, 1, 0, 4 * MIB);
    check("b", b, 2, 0, 4 * MIB);
    CK(cuMemFree(a));
    CK(cuMemFree(b));
    return 0;
}

static int fill(int mib, int n) {
    uint64_t bytes = (uint64_t)mib * MIB;
    CUdeviceptr *p = calloc((size_t)n, sizeof *p);
    EXPECT(p != NULL, "out of memory");
    CUresult first = CUDA_SUCCESS;
    int k = 0;
    for (; k < n; k++) {
        first = cuMemAlloc(&p[k], bytes);
        if (first != CUDA_SUCCESS) break;
        CK(eng_launch(m.fill, NULL, p[k], 1 + (uint64_t)k, 0, bytes));
    }
    printf("allocated %d of %d first error %d\n", k, n, (int)first);
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < k; i++)
            CK(eng_launch(m.vu, NULL, p[i], 1 + (uint64_t)i, round, bytes));
    CK(cuCtxSynchronize());
    for (int i = 0; i < k; i++) {
        check("buffer", p[i], 1 + (uint64_t)i, 2, bytes);
        CK(cuMemFree(p[i]));
    }
    free(p);
    return 0;
}

static void meminfo(const char *step) {
    size_t free_b = 0, total = 0;
    CK(cuMemGetInfo(&free_b, &total));
    printf("meminfo %s free %zu total %zu\n", step, free_b, total);
}

static int meminfo_steps(void) {
    CUdeviceptr p[5], small;
    meminfo("start");
    CK(cuMemAlloc(&p[0], 4 * MIB));
    CK(eng_launch(m.fill, NULL, p[0], 1, 0, 4 * MIB));
    meminfo("one");
    for (int i = 1; i < 4; i++) {
        CK(cuMemAlloc(&p[i], 4 * MIB));
        CK(eng_launch(m.fill, NULL, p[i], 1 + (uint64_t)i, 0, 4 * MIB));
    }
    meminfo("four");
    CK(cuMemAlloc(&p[4], 4 * MIB)); /* over the budget: the least recently used goes out */
    CK(eng_launch(m.fill, NULL, p[4], 5, 0, 4 * MIB));
    CK(cuCtxSynchronize());
    meminfo("five");
    CK(cuMemAlloc(&small, MIB)); /* below HOSTOFF_MIN_BYTES: the driver's */
    meminfo("small");
    CK(cuMemFree(p[3]));
    CK(cuMemFree(p[4]));
    CK(cuCtxSynchronize());
    meminfo("freed");
    for (int i = 0; i < 3; i++) {
        check("buffer", p[i], 1 + (uint64_t)i, 0, 4 * MIB);
        CK(cuMemFree(p[i]));
    }
    CK(cuMemFree(small));
    return 0;
}

static int where_steps(void) {
    static const uint64_t sizes[4] = {MIB, 4 * MIB - 4096, 4 * MIB, 6 * MIB};
    CUdeviceptr p[4], q[8];
    char before[4];
    for (int i = 0; i < 4; i++) {
        CK(cuMemAlloc(&p[i], sizes[i]));
        CK(eng_launch(m.fill, NULL, p[i], 100 + (uint64_t)i, 0, sizes[i]));
        before[i] = where(p[i]);
    }
    for (int i = 0; i < 8; i++) {
        CK(cuMemAlloc(&q[i], 4 * MIB));
        CK(eng_launch(m.fill, NULL, q[i], 200 + (uint64_t)i, 0, 4 * MIB));
    }
    for (int i = 0; i < 8; i++)
        CK(eng_launch(m.vu, NULL, q[i], 200 + (uint64_t)i, 0, 4 * MIB));
    CK(cuCtxSynchronize());
    for (int i = 0; i < 4; i++)
        printf("where %llu %c %c\n", (unsigned long long)sizes[i], before[i], where(p[i]));
    for (int i = 0; i < 4; i++) {
        check("sized", p[i], 100 + (uint64_t)i, 0, sizes[i]);
        CK(cuMemFree(p[i]));
    }
    for (int i = 0; i < 8; i++) {
        check("pressure", q[i], 200 + (uint64_t)i, 1, 4 * MIB);
        CK(cuMemFree(q[i]));
    }
    return 0;
}

/* 32 buffers of 8 MiB and Z of 64 MiB under 512 MiB; then 352 MiB more. */
#define PLANNED_A 32
static int planned_first(void) {
    CUdeviceptr a[PLANNED_A], z, n;
    for (int i = 0; i < PLANNED_A; i++) {
        CK(cuMemAlloc(&a[i], 8 * MIB));
        CK(eng_launch(m.fill, NULL, a[i], 300 + (uint64_t)i, 0, 8 * MIB));
    }
    CK(cuMemAlloc(&z, 64 * MIB));
    CK(eng_launch(m.fill, NULL, z, 400, 0, 64 * MIB)); /* the plan's evictions follow this one */
    /* The fills are done (not the engine's copies, which cuCtxSynchronize would wait for too). */
    CK(cuStreamSynchronize(NULL));
    CK(cuMemAlloc(&n, 352 * MIB));
    printf("where Z %c\n", where(z));
    CK(eng_launch(m.fill, NULL, n, 500, 0, 352 * MIB));
    for (int i = 0; i < PLANNED_A; i++)
        CK(eng_launch(m.check, NULL, a[i], 300 + (uint64_t)i, 0, 8 * MIB));
    CK(cuCtxSynchronize());
    for (int i = 0; i < PLANNED_A; i++)
        check("planned", a[i], 300 + (uint64_t)i, 0, 8 * MIB);
    check("kept", z, 400, 0, 64 * MIB);
    check("new", n, 500, 0, 352 * MIB);
    for (int i = 0; i < PLANNED_A; i++)
        CK(cuMemFree(a[i]));
    CK(cuMemFree(z));
    CK(cuMemFree(n));
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: eng_budget oversize|fill MIB N|meminfo|where|planned\n");
        return 2;
    }
    eng_primary(0);
    eng_load(&m, image);
    int rc = 2;
    if (strcmp(argv[1], "oversize") == 0)
        rc = oversize();
    else if (strcmp(argv[1], "fill") == 0 && argc == 4)
        rc = fill(atoi(argv[2]), atoi(argv[3]));
    else if (strcmp(argv[1], "meminfo") == 0)
        rc = meminfo_steps();
    else if (strcmp(argv[1], "where") == 0)
        rc = where_steps();
    else if (strcmp(argv[1], "planned") == 0)
        rc = planned_first();
    else
        fprintf(stderr, "eng_budget: unknown mode %s\n", argv[1]);
    if (rc == 0) {
        EXPECT(atomic_load(&eng_errors) == 0, "%llu mismatches seen by kernels",
               (unsigned long long)atomic_load(&eng_errors));
        printf("data: ok\n");
    }
    return rc;
}
