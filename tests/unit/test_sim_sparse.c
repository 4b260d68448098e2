/* SIMCUDA_DATA=sparse against the contract (issue 2, docs/simcuda.md): workloads of 100+ GB
 * replay in little RAM (memory is reserved without backing, copies and memsets move no bytes,
 * kernel bodies do not run), yet every access is still checked (kernels, copies and memsets over
 * unmapped or inaccessible ranges are illegal accesses) and virtual time is exactly as in full
 * mode.
 *
 * Every test runs in a forked child that has not initialised the simulator: SIMCUDA_* is read once
 * per process, an illegal access is sticky for the process, and each child writes its own
 * SIMCUDA_REPORT, which the parent then reads. Inside a child, cmocka's assertions would jump back
 * into the copy of the test runner the child inherited, so children check with CHK*, which print
 * the failing line and end the child with status 1. */
#include <dirent.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/mman.h>

#include "simtest.h"

#include "simchild.h"

/* ------------------------------------------------------------------ helpers */

static uint64_t rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    CHK(f != NULL);
    unsigned long size = 0, resident = 0;
    CHK(fscanf(f, "%lu %lu", &size, &resident) == 2);
    fclose(f);
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* Host memory the driver does not know (pageable), without backing. */
static void *pageable_region(size_t n) {
    void *p =
        mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    CHK(p != MAP_FAILED);
    return p;
}

static uint64_t event_ns(CUevent a, CUevent b) {
    CHK_OK(cuEventSynchronize(b));
    float ms = 0;
    CHK_OK(cuEventElapsedTime(&ms, a, b));
    return (uint64_t)((double)ms * 1e6 + 0.5);
}

/* cuEventElapsedTime's float milliseconds resolve about 15 ns at 150 ms. */
#define SLACK 64

/* ceil(bytes / GB/s) in ns, as the simulator rounds. */
static uint64_t at_rate(uint64_t bytes, uint64_t gbps) {
    return (bytes + gbps - 1) / gbps;
}

static CUmemAllocationProp device_prop(void) {
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = 0;
    return p;
}

static void set_rw(CUdeviceptr va, size_t n) {
    CUmemAccessDesc d = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CHK_OK(cuMemSetAccess(va, n, &d, 1));
}

/* ------------------------------------------------------------------ 150 GB in little RAM */

#define NBUF       6
#define BUF_BYTES  (25 * GiB) /* 6 x 25 GiB = 150 GiB */
#define HOST_BYTES (8 * GiB)

static int c_big(void) {
    ctx_up();
    CHK_EQ(free_bytes(), 200 * GiB);
    CUdeviceptr buf[NBUF];
    for (int i = 0; i < NBUF; i++)
        CHK_OK(cuMemAlloc(&buf[i], BUF_BYTES));
    CHK_EQ(free_bytes(), 50 * GiB);
    CUdeviceptr extra;
    CHK_CU(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&extra, 51 * GiB)); /* capacity as in full mode */

    /* VMM: an 8 GiB reservation, its first 4 GiB mapped to a device handle. */
    CUdeviceptr va;
    CHK_OK(cuMemAddressReserve(&va, 8 * GiB, 0, 0, 0));
    CUmemAllocationProp prop = device_prop();
    CUmemGenericAllocationHandle h;
    CHK_OK(cuMemCreate(&h, 4 * GiB, &prop, 0));
    CHK_OK(cuMemMap(va, 4 * GiB, 0, h, 0));
    set_rw(va, 4 * GiB);
    CHK_EQ(free_bytes(), 46 * GiB);

    void *pinned;
    CHK_OK(cuMemHostAlloc(&pinned, HOST_BYTES, 0));
    unsigned char *pageable = pageable_region(HOST_BYTES);
    CUstream s;
    CHK_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUevent e[8];
    for (int i = 0; i < 8; i++)
        CHK_OK(cuEventCreate(&e[i], 0));

    /* Kernels over every buffer: mk_fill's body would write all 25 GiB if it ran. */
    for (int i = 0; i < NBUF; i++) {
        fill(buf[i], 1, BUF_BYTES / 4, s);
        use_for(buf[i], 1000000, s);
    }
    fill(va, 2, 4 * GiB / 4, s);

    /* Copies and memsets over all of it, timed as in full mode. */
    wait_for(10000, s);
    CHK_OK(cuEventRecord(e[0], s));
    CHK_OK(cuMemcpyHtoDAsync(buf[0], pinned, HOST_BYTES, s));
    CHK_OK(cuEventRecord(e[1], s));
    CHK_OK(cuMemcpyDtoDAsync(buf[1], buf[0], BUF_BYTES, s));
    CHK_OK(cuEventRecord(e[2], s));
    CHK_OK(cuMemsetD32Async(buf[2], 0xffffffffu, BUF_BYTES / 4, s));
    CHK_OK(cuEventRecord(e[3], s));
    CHK_OK(cuMemcpyDtoHAsync(pinned, buf[3], HOST_BYTES, s));
    CHK_OK(cuEventRecord(e[4], s));
    CHK_OK(cuMemcpyHtoDAsync(va, pinned, 4 * GiB, s));
    CHK_OK(cuEventRecord(e[5], s));
    CHK_NEAR(event_ns(e[0], e[1]), at_rate(HOST_BYTES, 55), SLACK);
    CHK_NEAR(event_ns(e[1], e[2]), at_rate(BUF_BYTES, 4300), SLACK);
    CHK_NEAR(event_ns(e[2], e[3]), at_rate(BUF_BYTES, 4300), SLACK);
    CHK_NEAR(event_ns(e[3], e[4]), at_rate(HOST_BYTES, 55), SLACK);
    CHK_NEAR(event_ns(e[4], e[5]), at_rate(4 * GiB, 55), SLACK);

    /* Synchronous copies with pageable memory, and a 2D copy, on other buffers. */
    CHK_OK(cuMemcpyHtoD(buf[4], pageable, HOST_BYTES));
    CHK_OK(cuMemcpyDtoH(pageable, buf[5], HOST_BYTES));
    CHK_OK(cuMemcpyDtoD(va + 2 * GiB, buf[5], 2 * GiB));
    CHK_OK(cuMemsetD8(buf[5], 0x7f, BUF_BYTES));
    CUDA_MEMCPY2D p;
    memset(&p, 0, sizeof p);
    p.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    p.srcDevice = buf[4];
    p.srcPitch = GiB;
    p.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    p.dstDevice = buf[5];
    p.dstPitch = GiB;
    p.WidthInBytes = GiB / 2;
    p.Height = 20;
    CHK_OK(cuMemcpy2D(&p));
    CHK_OK(cuCtxSynchronize());

    /* Nothing moved, nothing ran: the process stays small. */
    uint64_t rss = rss_bytes();
    if (rss >= GiB) fprintf(stderr, "rss %llu bytes\n", (unsigned long long)rss);
    CHK(rss < GiB);
    g_shared[0] = rss;

    CHK_OK(cuMemUnmap(va, 4 * GiB));
    CHK_OK(cuMemRelease(h));
    CHK_OK(cuMemAddressFree(va, 8 * GiB));
    for (int i = 0; i < NBUF; i++)
        CHK_OK(cuMemFree(buf[i]));
    CHK_OK(cuMemFreeHost(pinned));
    CHK_EQ(free_bytes(), 200 * GiB);
    for (int i = 0; i < 8; i++)
        CHK_OK(cuEventDestroy(e[i]));
    CHK_OK(cuStreamDestroy(s));
    munmap(pageable, HOST_BYTES);
    return 0;
}

static void test_big_workload_small_rss(void **state) {
    (void)state;
    const char *env[] = {"SIMCUDA_DATA=sparse", "SIMCUDA_DEVICE_MEM=200G", NULL};
    run_child("big", c_big, env);
    assert_int_equal(report("big", "illegal_accesses"), 0);
    assert_int_equal(report("big", "hazards"), 0);
    assert_int_equal(report("big", "launches"), 2 * NBUF + 2); /* and the wait */
    assert_int_equal(report("big", "peak_device_bytes"), 154 * GiB);
    assert_int_equal(report("big", "bytes_h2d"), 2 * HOST_BYTES + 4 * GiB);
    assert_int_equal(report("big", "bytes_d2h"), 2 * HOST_BYTES);
    assert_int_equal(report("big", "bytes_d2d"), BUF_BYTES + 2 * GiB + 10 * GiB);
    char data[16] = "";
    char path[512];
    report_path(path, sizeof path, "big");
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char text[4096];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *d = strstr(text, "\"data\": \"");
    assert_non_null(d);
    sscanf(d + 9, "%15[a-z]", data);
    assert_string_equal(data, "sparse");
}

/* ------------------------------------------------------------------ accesses are still checked */

static const char *const sparse_env[] = {"SIMCUDA_DATA=sparse", "SIMCUDA_DEVICE_MEM=200G", NULL};

static CUdeviceptr half_mapped(size_t bytes, bool access) {
    CUdeviceptr va;
    CHK_OK(cuMemAddressReserve(&va, 2 * bytes, 0, 0, 0));
    CUmemAllocationProp prop = device_prop();
    CUmemGenericAllocationHandle h;
    CHK_OK(cuMemCreate(&h, bytes, &prop, 0));
    CHK_OK(cuMemMap(va, bytes, 0, h, 0));
    if (access) set_rw(va, bytes);
    return va;
}

static int c_kernel_unmapped(void) {
    ctx_up();
    CUdeviceptr va = half_mapped(4 * GiB, true);
    use_for(va + 123, 1000, NULL); /* mapped: fine */
    CHK_OK(cuCtxSynchronize());
    const CUdeviceptr bad = va + 4 * GiB + 123;
    use_for(bad, 1000, NULL);
    CHK_CU(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
    g_shared[0] = bad;
    return 0;
}

static int c_kernel_no_access(void) {
    ctx_up();
    CUdeviceptr va = half_mapped(4 * GiB, false);
    fill(va, 1, 4 * GiB / 4, NULL);
    CHK_CU(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
    g_shared[0] = va;
    return 0;
}

static int c_copy_unmapped(void) {
    ctx_up();
    CUdeviceptr va = half_mapped(4 * GiB, true);
    void *pinned;
    CHK_OK(cuMemHostAlloc(&pinned, GiB, 0));
    CHK_OK(cuMemcpyHtoDAsync(va + 3 * GiB, pinned, GiB, NULL)); /* inside the mapping */
    CHK_OK(cuCtxSynchronize());
    /* From the mapped half into the unmapped one. */
    CHK_OK(cuMemcpyHtoDAsync(va + 4 * GiB - 4096, pinned, GiB, NULL));
    CHK_CU(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
    g_shared[0] = va + 4 * GiB;
    return 0;
}

static int c_memset_unmapped(void) {
    ctx_up();
    CUdeviceptr va = half_mapped(2 * GiB, true);
    CHK_OK(cuMemsetD32Async(va + 2 * GiB + 64, 0, 16, NULL));
    CHK_CU(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
    g_shared[0] = va + 2 * GiB + 64;
    return 0;
}

static void expect_one_illegal(const char *name, int (*fn)(void)) {
    run_child(name, fn, sparse_env);
    assert_int_equal(report(name, "illegal_accesses"), 1);
    assert_int_equal(report(name, "first_illegal_address"), g_shared[0]);
}

static void test_unmapped_is_illegal(void **state) {
    (void)state;
    expect_one_illegal("kernel_unmapped", c_kernel_unmapped);
    assert_int_equal(report("kernel_unmapped", "launches"), 1);
    expect_one_illegal("kernel_no_access", c_kernel_no_access);
    expect_one_illegal("copy_unmapped", c_copy_unmapped);
    expect_one_illegal("memset_unmapped", c_memset_unmapped);
}

/* ------------------------------------------------------------------ the same timeline as full mode
 */

#define NPOINTS 24

/* A mixed workload of moderate size (full mode really moves its bytes); records the host clock
 * and event intervals in g_shared[1..NPOINTS]. */
static int c_timeline(void) {
    ctx_up();
    int k = 1;
#define POINT(v) (g_shared[k++] = (v))
    const size_t n = 55000000; /* 1 ms at 55 GB/s */
    CUdeviceptr a, b, m;
    CHK_OK(cuMemAlloc(&a, n));
    CHK_OK(cuMemAlloc(&b, n));
    CHK_OK(cuMemAllocManaged(&m, 4 * MiB, CU_MEM_ATTACH_GLOBAL));
    void *pinned;
    CHK_OK(cuMemHostAlloc(&pinned, n, 0));
    unsigned char *pageable = malloc(n);
    CHK(pageable != NULL);
    memset(pageable, 1, n);
    CUstream s1, s2;
    CHK_OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CHK_OK(cuStreamCreate(&s2, 0));
    CUevent e[6];
    for (int i = 0; i < 6; i++)
        CHK_OK(cuEventCreate(&e[i], 0));

    wait_for(100000, s1); /* e[0] and what follows start when this ends, not at enqueue */
    CHK_OK(cuEventRecord(e[0], s1));
    fill(a, 3, n / 4, s1);
    use_for(a, 250000, s1);
    CHK_OK(cuMemcpyHtoDAsync(b, pinned, n, s1));
    CHK_OK(cuEventRecord(e[1], s1));
    CHK_OK(cuStreamWaitEvent(s2, e[1], 0));
    CHK_OK(cuMemcpyDtoHAsync(pinned, a, n, s2));
    CHK_OK(cuMemcpyHtoDAsync(a, pageable, n, s1)); /* overlaps the D2H: duplex */
    CHK_OK(cuEventRecord(e[2], s1));
    CHK_OK(cuEventRecord(e[3], s2));
    POINT(simcuda_now_ns());
    CHK_OK(
        cuMemPrefetchAsync_v2(m, 2 * MiB, (CUmemLocation){CU_MEM_LOCATION_TYPE_DEVICE, 0}, 0, s2));
    use_for(m, 1000, s2); /* faults in the other 2 MiB */
    CHK_OK(cuMemsetD8Async(b, 0, n, s2));
    CHK_OK(cuMemcpyDtoDAsync(a, b, n, s2));
    CHK_OK(cuEventRecord(e[4], s2));
    CHK_OK(cuMemcpyDtoH(pageable, b, n)); /* legacy: waits for s2 (blocking), not s1 */
    POINT(simcuda_now_ns());
    CHK_OK(cuMemcpyHtoD(a, pageable, n));
    POINT(simcuda_now_ns());
    CHK_OK(cuEventRecord(e[5], s1));
    CHK_OK(cuCtxSynchronize());
    POINT(simcuda_now_ns());
    for (int i = 1; i < 6; i++)
        POINT(event_ns(e[0], e[i]));
    POINT(simcuda_now_ns());
    g_shared[0] = (uint64_t)k;
    for (int i = 0; i < 6; i++)
        CHK_OK(cuEventDestroy(e[i]));
    CHK_OK(cuStreamDestroy(s1));
    CHK_OK(cuStreamDestroy(s2));
    free(pageable);
#undef POINT
    return 0;
}

static void test_timeline_matches_full(void **state) {
    (void)state;
    uint64_t full[NPOINTS + 1];
    const char *full_env[] = {"SIMCUDA_DATA=full", NULL};
    run_child("timeline_full", c_timeline, full_env);
    int points = (int)g_shared[0];
    assert_true(points > 1 && points <= NPOINTS);
    for (int i = 1; i < points; i++)
        full[i] = g_shared[i];
    run_child("timeline_sparse", c_timeline, sparse_env);
    assert_int_equal(g_shared[0], points);
    for (int i = 1; i < points; i++) {
        if (g_shared[i] != full[i])
            fail_msg("point %d: sparse %llu, full %llu", i, (unsigned long long)g_shared[i],
                     (unsigned long long)full[i]);
    }
    const char *keys[] = {"virtual_ns", "managed_faults", "remote_accesses", "hazards",
                          "bytes_h2d",  "bytes_d2h",      "bytes_d2d",       "launches"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        assert_int_equal(report("timeline_sparse", keys[i]), report("timeline_full", keys[i]));
    assert_int_equal(report("timeline_full", "managed_faults"), 32); /* the unprefetched 2 MiB */
    /* e[1] - e[0]: the fill (2 us), the 250 us use and the 1 ms H2D copy, all on s1. */
    assert_int_equal(full[5], 2000 + 250000 + 1000000);
}

int main(void) {
    if (!suite_init("sparse")) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_big_workload_small_rss),
        cmocka_unit_test(test_unmapped_is_illegal),
        cmocka_unit_test(test_timeline_matches_full),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    remove_reports();
    return rc;
}
