/* Stream-ordered reuse of freed memory (docs/simcuda.md, "Capacity"), as NVIDIA's stream-ordered
 * allocator does it: a free is reused at once by a later allocation on the same stream, by one on
 * another stream once an event orders it after the free, and by anyone once the free has
 * completed; the pool attributes switch the last two off; work on another stream that races the
 * reused range is a hazard; the pool, not the device, keeps freed memory until a synchronising
 * call (beyond its release threshold), and never more than its allocations used at once on one
 * stream; and the same calls give the same addresses and timeline.
 *
 * Every test runs in a forked child (simchild.h): SIMCUDA_* is read once per process and each
 * child writes its own SIMCUDA_REPORT. */
#include "simchild.h"

#define ALLOC (8 * MiB)
#define MS    1000000ull

static CUstream nb_stream(void) {
    CUstream s;
    CHK_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    return s;
}

/* ------------------------------------------------------------------ the same stream */

/* 1000 alloc/use/free rounds of 8 MiB through a 64 MiB device, each using the buffer for 1 ms
 * on the device: the host gets a second ahead of the device, and every round gets the same
 * address at once, with the footprint flat at one buffer. */
static int c_same_stream(void) {
    ctx_up();
    CUstream s = nb_stream();
    const size_t total = free_bytes();
    CUdeviceptr first = 0;
    for (int i = 0; i < 1000; i++) {
        CUdeviceptr p;
        CHK_OK(cuMemAllocAsync(&p, ALLOC, s));
        if (i == 0) first = p;
        CHK_EQ(p, first);
        CHK_EQ(free_bytes(), total - ALLOC);
        use_for(p, MS, s);
        CHK_OK(cuMemFreeAsync(p, s));
    }
    CHK(simcuda_now_ns() < 100 * MS); /* far ahead: the device's work ends after 1000 ms */
    /* The reused memory holds data like any other. */
    CUdeviceptr p;
    CHK_OK(cuMemAllocAsync(&p, ALLOC, s));
    CHK_EQ(p, first);
    fill(p, 77, ALLOC / 4, s);
    uint32_t back[4];
    CHK_OK(cuMemcpyDtoHAsync(back, p + ALLOC - sizeof back, sizeof back, s));
    CHK_OK(cuStreamSynchronize(s));
    CHK_EQ(back[3], 77 + ALLOC / 4 - 1);
    CHK(simcuda_now_ns() >= 1000 * MS);
    CHK_OK(cuMemFreeAsync(p, s));
    CHK_OK(cuStreamSynchronize(s));
    CHK_EQ(free_bytes(), total);
    return 0;
}

static void test_same_stream(void **state) {
    (void)state;
    const char *env[] = {"SIMCUDA_DEVICE_MEM=64M", NULL};
    run_child("same_stream", c_same_stream, env);
    assert_int_equal(report("same_stream", "peak_device_bytes"), ALLOC);
    assert_int_equal(report("same_stream", "hazards"), 0);
    assert_int_equal(report("same_stream", "illegal_accesses"), 0);
}

/* ------------------------------------------------------------------ other streams */

/* A buffer allocated on s1, used there for 1 ms and freed there; the host is then well ahead. */
static CUdeviceptr freed_on(CUstream s1) {
    CUdeviceptr a;
    CHK_OK(cuMemAllocAsync(&a, ALLOC, s1));
    use_for(a, MS, s1);
    CHK_OK(cuMemFreeAsync(a, s1));
    return a;
}

/* No ordering between the streams: not before the free has completed; then it is reused. */
static int c_cross_no_dep(void) {
    ctx_up();
    CUstream s1 = nb_stream(), s2 = nb_stream();
    const size_t total = free_bytes();
    CUdeviceptr a = freed_on(s1), b, c;
    CHK_OK(cuMemAllocAsync(&b, ALLOC, s2));
    CHK(b != a);
    CHK_EQ(free_bytes(), total - 2 * ALLOC); /* the freed buffer still counts */
    CHK_OK(cuStreamSynchronize(s1));         /* the free has completed */
    CHK_EQ(free_bytes(), total - ALLOC);
    CHK_OK(cuMemAllocAsync(&c, ALLOC, s2));
    CHK_EQ(c, a); /* opportunistic: its range too */
    CHK_OK(cuMemFreeAsync(b, s2));
    CHK_OK(cuMemFreeAsync(c, s2));
    CHK_OK(cuStreamSynchronize(s2));
    CHK_EQ(free_bytes(), total);
    return 0;
}

static void test_cross_stream_no_dependency(void **state) {
    (void)state;
    run_child("cross_no_dep", c_cross_no_dep, NULL);
    assert_int_equal(report("cross_no_dep", "peak_device_bytes"), 2 * ALLOC);
    assert_int_equal(report("cross_no_dep", "hazards"), 0);
}

/* An event recorded after the free, waited on by s2: s2's allocation reuses it at once. One
 * recorded before the free orders nothing useful. */
static int c_cross_event(void) {
    ctx_up();
    CUstream s1 = nb_stream(), s2 = nb_stream();
    CUevent before, after;
    CHK_OK(cuEventCreate(&before, CU_EVENT_DISABLE_TIMING));
    CHK_OK(cuEventCreate(&after, CU_EVENT_DISABLE_TIMING));
    const size_t total = free_bytes();
    CUdeviceptr a, b, c;
    CHK_OK(cuMemAllocAsync(&a, ALLOC, s1));
    use_for(a, MS, s1);
    CHK_OK(cuEventRecord(before, s1));
    CHK_OK(cuMemFreeAsync(a, s1));
    CHK_OK(cuStreamWaitEvent(s2, before, 0));
    CHK_OK(cuMemAllocAsync(&b, ALLOC, s2));
    CHK(b != a);
    CHK_OK(cuEventRecord(after, s1));
    CHK_OK(cuStreamWaitEvent(s2, after, 0));
    CHK_OK(cuMemAllocAsync(&c, ALLOC, s2));
    CHK_EQ(c, a);
    CHK_EQ(free_bytes(), total - 2 * ALLOC);
    CHK(simcuda_now_ns() < MS); /* at once, not at the free's completion */
    use_for(c, MS, s2);         /* ordered after the free: no race */
    CHK_OK(cuMemFreeAsync(b, s2));
    CHK_OK(cuMemFreeAsync(c, s2));
    CHK_OK(cuCtxSynchronize());
    CHK_EQ(free_bytes(), total);
    return 0;
}

static void test_cross_stream_event(void **state) {
    (void)state;
    run_child("cross_event", c_cross_event, NULL);
    assert_int_equal(report("cross_event", "peak_device_bytes"), 2 * ALLOC);
    assert_int_equal(report("cross_event", "hazards"), 0);
}

/* The legacy stream is ordered after earlier work on blocking streams: an allocation on it
 * reuses a blocking stream's free at once (a non-blocking stream's only when complete). */
static int c_legacy(void) {
    ctx_up();
    CUstream blocking, nb = nb_stream();
    CHK_OK(cuStreamCreate(&blocking, 0));
    CUdeviceptr a = freed_on(blocking), b, c = freed_on(nb), d;
    CHK_OK(cuMemAllocAsync(&b, ALLOC, NULL));
    CHK_EQ(b, a);
    CHK_OK(cuMemAllocAsync(&d, ALLOC, NULL));
    CHK(d != c);
    CHK_OK(cuMemFreeAsync(b, NULL));
    CHK_OK(cuMemFreeAsync(d, NULL));
    CHK_OK(cuCtxSynchronize());
    return 0;
}

static void test_legacy_stream(void **state) {
    (void)state;
    run_child("legacy", c_legacy, NULL);
    assert_int_equal(report("legacy", "hazards"), 0);
}

/* ------------------------------------------------------------------ hazards */

/* The range is reused on s1 at once; a kernel on s2 that is not ordered after the free uses the
 * new allocation while s1's 1 ms use of the old one still runs: a race, as on a GPU. */
static int c_race(int other_stream) {
    ctx_up();
    CUstream s1 = nb_stream(), s2 = nb_stream();
    CUdeviceptr a = freed_on(s1), b;
    CHK_OK(cuMemAllocAsync(&b, ALLOC, s1));
    CHK_EQ(b, a);
    use_for(b, 1000, other_stream ? s2 : s1);
    CHK_OK(cuMemFreeAsync(b, s1));
    CHK_OK(cuCtxSynchronize());
    return 0;
}

static int c_race_other(void) {
    return c_race(1);
}
static int c_race_same(void) {
    return c_race(0);
}

static void test_race_on_reused_range(void **state) {
    (void)state;
    run_child("race_other", c_race_other, NULL);
    assert_int_equal(report("race_other", "hazards"), 1);
    assert_int_equal(report("race_other", "illegal_accesses"), 0);
    run_child("race_same", c_race_same, NULL);
    assert_int_equal(report("race_same", "hazards"), 0);
}

/* ------------------------------------------------------------------ pool attributes */

static CUmemoryPool new_pool(void) {
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    CUmemoryPool pool;
    CHK_OK(cuMemPoolCreate(&pool, &props));
    return pool;
}

static int pool_flag(CUmemoryPool p, CUmemPool_attribute a) {
    int v = -1;
    CHK_OK(cuMemPoolGetAttribute(p, a, &v));
    return v;
}

/* FOLLOW_EVENT_DEPENDENCIES off: an event no longer lets another stream reuse; the same stream
 * still does (stream order is not a policy). Memory goes back to its own pool only. */
static int c_no_follow(void) {
    ctx_up();
    CUstream s1 = nb_stream(), s2 = nb_stream();
    CUmemoryPool pool = new_pool(), def;
    CHK_OK(cuDeviceGetDefaultMemPool(&def, 0));
    CHK_EQ(pool_flag(pool, CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES), 1);
    CHK_EQ(pool_flag(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC), 1);
    CHK_EQ(pool_flag(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES), 1);
    int off = 0;
    CHK_OK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES, &off));
    CHK_EQ(pool_flag(pool, CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES), 0);
    CHK_EQ(pool_flag(def, CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES), 1);
    CUevent e;
    CHK_OK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    CUdeviceptr a, b, c, d;
    CHK_OK(cuMemAllocFromPoolAsync(&a, ALLOC, pool, s1));
    use_for(a, MS, s1);
    CHK_OK(cuMemFreeAsync(a, s1));
    CHK_OK(cuEventRecord(e, s1));
    CHK_OK(cuStreamWaitEvent(s2, e, 0));
    CHK_OK(cuMemAllocFromPoolAsync(&b, ALLOC, pool, s2));
    CHK(b != a);
    CHK_OK(cuMemAllocAsync(&c, ALLOC, s1)); /* the default pool: not where a went */
    CHK(c != a);
    CHK_OK(cuMemAllocFromPoolAsync(&d, ALLOC, pool, s1));
    CHK_EQ(d, a);
    CHK_OK(cuMemFreeAsync(b, s2));
    CHK_OK(cuMemFreeAsync(c, s1));
    CHK_OK(cuMemFreeAsync(d, s1));
    CHK_OK(cuCtxSynchronize());
    return 0;
}

static void test_no_follow_event_dependencies(void **state) {
    (void)state;
    run_child("no_follow", c_no_follow, NULL);
    assert_int_equal(report("no_follow", "hazards"), 0);
}

/* ALLOW_OPPORTUNISTIC: a completed free on another stream serves a 48 MiB allocation in a
 * 64 MiB device; off, not until a synchronising call. */
static int c_opportunistic(int on) {
    ctx_up();
    CUstream s1 = nb_stream(), s2 = nb_stream();
    CUmemoryPool pool = new_pool();
    int v = on;
    CHK_OK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &v));
    CUdeviceptr a, b = 42;
    CHK_OK(cuMemAllocFromPoolAsync(&a, 48 * MiB, pool, s1));
    use_for(a, 10000, s1);
    CHK_OK(cuMemFreeAsync(a, s1));
    while (cuStreamQuery(s1) == CUDA_ERROR_NOT_READY) {
    } /* the host clock passes the free's completion without synchronising */
    if (!on) {
        CHK_CU(CUDA_ERROR_OUT_OF_MEMORY, cuMemAllocFromPoolAsync(&b, 48 * MiB, pool, s2));
        CHK_EQ(b, 42);
        CHK_OK(cuStreamSynchronize(s1));
    }
    CHK_OK(cuMemAllocFromPoolAsync(&b, 48 * MiB, pool, s2));
    CHK_OK(cuMemFreeAsync(b, s2));
    CHK_OK(cuCtxSynchronize());
    return 0;
}

static int c_opportunistic_on(void) {
    return c_opportunistic(1);
}
static int c_opportunistic_off(void) {
    return c_opportunistic(0);
}

static void test_opportunistic(void **state) {
    (void)state;
    const char *env[] = {"SIMCUDA_DEVICE_MEM=64M", NULL};
    run_child("opportunistic_on", c_opportunistic_on, env);
    run_child("opportunistic_off", c_opportunistic_off, env);
    assert_int_equal(report("opportunistic_off", "peak_device_bytes"), 48 * MiB);
}

/* ------------------------------------------------------------------ what the pool keeps */

static cuuint64_t reserved(CUmemoryPool p) {
    cuuint64_t v = 0;
    CHK_OK(cuMemPoolGetAttribute(p, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v));
    return v;
}

/* A completed free's memory stays in its pool, not the device, until the next synchronising
 * call: the pool's allocations (any stream, opportunistically) may take it, an allocation
 * outside the pool may not; the synchronising call gives it back (release threshold 0). */
static int c_kept_until_sync(void) {
    ctx_up();
    CUstream s1 = nb_stream(), s2 = nb_stream();
    CUmemoryPool def;
    CHK_OK(cuDeviceGetDefaultMemPool(&def, 0));
    const size_t total = free_bytes();
    CUdeviceptr a, b, c = 42;
    CHK_OK(cuMemAllocAsync(&a, 48 * MiB, s1));
    use_for(a, 10000, s1);
    CHK_OK(cuMemFreeAsync(a, s1));
    while (cuStreamQuery(s1) == CUDA_ERROR_NOT_READY) {
    } /* the host clock passes the free's completion without synchronising */
    CHK_EQ(free_bytes(), total - 48 * MiB);
    CHK_EQ(reserved(def), 48 * MiB);
    CHK_CU(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&c, 48 * MiB));
    CHK_EQ(c, 42);
    CHK_OK(cuMemAllocAsync(&b, 48 * MiB, s2)); /* the pool's own: opportunistic reuse */
    CHK_EQ(free_bytes(), total - 48 * MiB);
    CHK_OK(cuMemFreeAsync(b, s2));
    CHK_OK(cuStreamSynchronize(s2));
    CHK_EQ(reserved(def), 0);
    CHK_EQ(free_bytes(), total);
    CHK_OK(cuMemAlloc(&c, 48 * MiB));
    CHK_OK(cuMemFree(c));
    return 0;
}

static void test_kept_until_sync(void **state) {
    (void)state;
    const char *env[] = {"SIMCUDA_DEVICE_MEM=64M", NULL};
    run_child("kept_until_sync", c_kept_until_sync, env);
    assert_int_equal(report("kept_until_sync", "peak_device_bytes"), 48 * MiB);
}

/* A release threshold keeps freed memory in the pool across synchronising calls; cuMemPoolTrimTo
 * gives it back. */
static int c_release_threshold(void) {
    ctx_up();
    CUstream s = nb_stream();
    CUmemoryPool pool = new_pool();
    cuuint64_t keep = 64 * MiB;
    CHK_OK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
    const size_t total = free_bytes();
    CUdeviceptr a, c = 42;
    CHK_OK(cuMemAllocFromPoolAsync(&a, 48 * MiB, pool, s));
    CHK_OK(cuMemFreeAsync(a, s));
    CHK_OK(cuCtxSynchronize());
    CHK_EQ(reserved(pool), 48 * MiB);
    CHK_CU(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&c, 48 * MiB));
    CHK_OK(cuMemPoolTrimTo(pool, 16 * MiB));
    CHK_EQ(reserved(pool), 16 * MiB);
    CHK_EQ(free_bytes(), total - 16 * MiB);
    CHK_OK(cuMemPoolTrimTo(pool, 0));
    CHK_EQ(free_bytes(), total);
    CHK_OK(cuMemAlloc(&c, 48 * MiB));
    CHK_OK(cuMemFree(c));
    return 0;
}

static void test_release_threshold(void **state) {
    (void)state;
    const char *env[] = {"SIMCUDA_DEVICE_MEM=64M", NULL};
    run_child("release_threshold", c_release_threshold, env);
}

/* On one stream the pool never holds more than the most its allocations were using at once:
 * an allocation handed a freed range whose bytes an earlier allocation took is covered by the
 * pool's other frees. A (8 MiB) freed; C (6 MiB) carved from its bytes; B (4 MiB) from the
 * rest and the device; B freed; D (8 MiB) handed A's range and B's bytes. In use: C and D. */
static int c_pool_bytes_cover(void) {
    ctx_up();
    CUstream s = nb_stream();
    const size_t total = free_bytes();
    CUdeviceptr a, b, c, d;
    CHK_OK(cuMemAllocAsync(&a, 8 * MiB, s));
    use_for(a, MS, s);
    CHK_OK(cuMemFreeAsync(a, s));
    CHK_OK(cuMemAllocAsync(&c, 6 * MiB, s));
    CHK(c != a);
    CHK_OK(cuMemAllocAsync(&b, 4 * MiB, s));
    use_for(b, MS, s);
    CHK_OK(cuMemFreeAsync(b, s));
    CHK_OK(cuMemAllocAsync(&d, 8 * MiB, s));
    CHK_EQ(d, a);
    CHK(simcuda_now_ns() < MS); /* none of the frees has run on the device yet */
    CHK_EQ(free_bytes(), total - 14 * MiB);
    use_for(d, MS, s);
    CHK_OK(cuMemFreeAsync(c, s));
    CHK_OK(cuMemFreeAsync(d, s));
    CHK_OK(cuStreamSynchronize(s));
    CHK_EQ(free_bytes(), total);
    return 0;
}

static void test_pool_bytes_cover(void **state) {
    (void)state;
    run_child("pool_bytes_cover", c_pool_bytes_cover, NULL);
    assert_int_equal(report("pool_bytes_cover", "peak_device_bytes"), 14 * MiB);
    assert_int_equal(report("pool_bytes_cover", "hazards"), 0);
}

/* ------------------------------------------------------------------ determinism */

/* A mix of streams, events, sizes and completed frees. Each allocation's address is written as
 * the index of the first allocation that had it (addresses themselves differ between processes),
 * into the shared page at `slot`. */
static int c_mix(int slot) {
    ctx_up();
    CUstream st[3] = {nb_stream(), nb_stream(), NULL};
    CHK_OK(cuStreamCreate(&st[2], 0));
    CUevent e;
    CHK_OK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    CUdeviceptr seen[120], live[4] = {0, 0, 0, 0};
    for (int i = 0; i < 120; i++) {
        CUstream s = st[i % 3];
        int k = i % 4;
        if (live[k] != 0) CHK_OK(cuMemFreeAsync(live[k], st[(i + 1) % 3]));
        if (i % 5 == 0) {
            CHK_OK(cuEventRecord(e, st[(i + 2) % 3]));
            CHK_OK(cuStreamWaitEvent(s, e, 0));
        }
        CHK_OK(cuMemAllocAsync(&live[k], (size_t)(1 + i % 3) * MiB, i % 7 == 0 ? NULL : s));
        use_for(live[k], (uint64_t)(i % 4) * 50000, s);
        seen[i] = live[k];
        int first = i;
        for (int j = 0; j < i; j++) {
            if (seen[j] == seen[i]) {
                first = j;
                break;
            }
        }
        g_shared[slot + i] = (uint64_t)first;
    }
    CHK_OK(cuCtxSynchronize());
    g_shared[slot + 120] = simcuda_now_ns();
    return 0;
}

static int c_mix_a(void) {
    return c_mix(0);
}
static int c_mix_b(void) {
    return c_mix(256);
}

static void test_deterministic(void **state) {
    (void)state;
    run_child("mix_a", c_mix_a, NULL);
    run_child("mix_b", c_mix_b, NULL);
    int reused = 0;
    for (int i = 0; i <= 120; i++) {
        assert_int_equal(g_shared[i], g_shared[256 + i]);
        if (i < 120 && g_shared[i] != (uint64_t)i) reused++;
    }
    assert_true(reused > 0); /* the mix does reuse addresses */
    assert_int_equal(report("mix_a", "virtual_ns"), report("mix_b", "virtual_ns"));
    assert_int_equal(report("mix_a", "peak_device_bytes"), report("mix_b", "peak_device_bytes"));
    assert_int_equal(report("mix_a", "hazards"), report("mix_b", "hazards"));
}

int main(void) {
    if (!suite_init("reuse")) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_stream),
        cmocka_unit_test(test_cross_stream_no_dependency),
        cmocka_unit_test(test_cross_stream_event),
        cmocka_unit_test(test_legacy_stream),
        cmocka_unit_test(test_race_on_reused_range),
        cmocka_unit_test(test_no_follow_event_dependencies),
        cmocka_unit_test(test_opportunistic),
        cmocka_unit_test(test_kept_until_sync),
        cmocka_unit_test(test_release_threshold),
        cmocka_unit_test(test_pool_bytes_cover),
        cmocka_unit_test(test_deterministic),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    remove_reports();
    return rc;
}
