/* The simulator's virtual memory management against the contract (issue 2, docs/simcuda.md) and
 * the real driver: granularity, reservations, DEVICE, HOST and HOST_NUMA handles, mapping,
 * access, unmapping, shared bytes between mappings of one handle, eviction the way the hostoff
 * engine does it (device bytes copied to a host-located handle, then that handle mapped at the
 * same address), use-after-unmap hazards, handle retention and properties, and capacity.
 *
 * Every test runs in a forked child that has not initialised the simulator: SIMCUDA_* is read once
 * per process, an illegal access is sticky for the process, and each child writes its own
 * SIMCUDA_REPORT, which the parent then reads. Inside a child, cmocka's assertions would jump back
 * into the copy of the test runner the child inherited, so children check with CHK*, which print
 * the failing line and end the child with status 1. */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/mman.h>

#include "simtest.h"

#include "simchild.h"

/* ------------------------------------------------------------------ VMM helpers */

static const CUmemLocation loc_device = {CU_MEM_LOCATION_TYPE_DEVICE, 0};

static CUmemAllocationProp prop_at(CUmemLocationType where) {
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = where;
    p.location.id = 0; /* device 0, or NUMA node 0 */
    return p;
}

static CUmemGenericAllocationHandle create(CUmemLocationType where, size_t bytes) {
    CUmemAllocationProp p = prop_at(where);
    CUmemGenericAllocationHandle h = 0;
    CHK_OK(cuMemCreate(&h, bytes, &p, 0));
    CHK(h != 0);
    return h;
}

static CUdeviceptr reserve(size_t bytes) {
    CUdeviceptr va = 0;
    CHK_OK(cuMemAddressReserve(&va, bytes, 0, 0, 0));
    CHK(va != 0 && va % (2 * MiB) == 0);
    return va;
}

static void set_access(CUdeviceptr va, size_t bytes, CUmemAccess_flags flags) {
    CUmemAccessDesc d = {loc_device, flags};
    CHK_OK(cuMemSetAccess(va, bytes, &d, 1));
}

static unsigned long long get_access(CUdeviceptr va) {
    unsigned long long flags = 0xdead;
    CHK_OK(cuMemGetAccess(&flags, &loc_device, va));
    return flags;
}

static CUmemLocationType g_where;

/* ------------------------------------------------------------------ granularity and attributes */

static int c_granularity(void) {
    ctx_up();
    const CUmemLocationType where[] = {CU_MEM_LOCATION_TYPE_DEVICE, CU_MEM_LOCATION_TYPE_HOST,
                                       CU_MEM_LOCATION_TYPE_HOST_NUMA};
    for (size_t i = 0; i < 3; i++) {
        CUmemAllocationProp p = prop_at(where[i]);
        size_t g = 0;
        CHK_OK(cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
        CHK_EQ(g, 2 * MiB);
        g = 0;
        CHK_OK(cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
        CHK_EQ(g, 2 * MiB);
    }
    /* hostoff checks these before it relies on host-located handles (DESIGN fact 4). */
    CUdevice dev;
    CHK_OK(cuDeviceGet(&dev, 0));
    const CUdevice_attribute attrs[] = {
        CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
        CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
        CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
    };
    for (size_t i = 0; i < 3; i++) {
        int v = 0;
        CHK_OK(cuDeviceGetAttribute(&v, attrs[i], dev));
        CHK_EQ(v, 1);
    }
    return 0;
}

static void test_granularity(void **state) {
    (void)state;
    run_child("granularity", c_granularity, NULL);
}

/* ------------------------------------------------------------------ the lifecycle, per location */

static int c_lifecycle(void) {
    ctx_up();
    const bool on_device = g_where == CU_MEM_LOCATION_TYPE_DEVICE;
    const size_t before = free_bytes();
    CUdeviceptr va = reserve(8 * MiB);
    CHK(!host_readable(va));
    unsigned type = 0;
    CHK_CU(CUDA_ERROR_INVALID_VALUE,
           cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va));
    CHK_EQ(free_bytes(), before); /* a reservation is address space only */

    CUmemGenericAllocationHandle h = create(g_where, 4 * MiB);
    CHK_EQ(free_bytes(), before - (on_device ? 4 * MiB : 0));
    CUmemAllocationProp bad = prop_at(g_where);
    CUmemGenericAllocationHandle none = 0;
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemCreate(&none, MiB, &bad, 0)); /* not a granule */
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemCreate(&none, 2 * MiB, &bad, 1));
    CHK_EQ(none, 0);

    const CUdeviceptr m = va + 2 * MiB;
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemMap(va + 4096, 4 * MiB, 0, h, 0));    /* unaligned */
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemMap(va + 6 * MiB, 4 * MiB, 0, h, 0)); /* past the end */
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemMap(va, 6 * MiB, 0, h, 0)); /* past the handle */
    /* The offset "currently must be zero" (cuda.h 13): any other is refused, even within it. */
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemMap(m, 2 * MiB, 2 * MiB, h, 0));
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemMap(m, MiB, 0, h, 0));
    /* A prefix (offset 0, less than the handle) is legal at every location. */
    CHK_OK(cuMemMap(va, 2 * MiB, 0, h, 0));
    CHK_OK(cuMemUnmap(va, 2 * MiB));
    CHK_OK(cuMemMap(m, 4 * MiB, 0, h, 0));
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemMap(va, 4 * MiB, 0, h, 0)); /* overlaps */

    /* Mapped but not yet accessible, as on the device. */
    CHK(!host_readable(m));
    CHK_EQ(get_access(m), CU_MEM_ACCESS_FLAGS_PROT_NONE);
    set_access(m, 4 * MiB, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CHK(host_readable(m) && host_readable(m + 4 * MiB - 1));
    CHK(!host_readable(va) && !host_readable(m + 4 * MiB));
    CHK_EQ(get_access(m + 3 * MiB), CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CHK_CU(CUDA_ERROR_INVALID_VALUE,
           cuMemSetAccess(va, 2 * MiB,
                          &(CUmemAccessDesc){loc_device, CU_MEM_ACCESS_FLAGS_PROT_READWRITE}, 1));

    /* A kernel writes it; the host and a copy read the same bytes. */
    fill(m, 0x600d0000u, 4 * MiB / 4, NULL);
    CHK_OK(cuCtxSynchronize());
    const uint32_t *w = (const uint32_t *)(uintptr_t)m;
    for (uint32_t i = 0; i < 4 * MiB / 4; i += 4097)
        CHK_EQ(w[i], 0x600d0000u + i);
    uint32_t *back = malloc(4 * MiB);
    CHK(back != NULL);
    CHK_OK(cuMemcpyDtoH(back, m, 4 * MiB));
    CHK(memcmp(back, w, 4 * MiB) == 0);
    free(back);

    CUdeviceptr base = 0;
    size_t size = 0;
    CHK_OK(cuMemGetAddressRange(&base, &size, m + 3 * MiB));
    CHK_EQ(base, m);
    CHK_EQ(size, 4 * MiB);
    if (on_device) {
        CHK_OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, m));
        CHK_EQ(type, CU_MEMORYTYPE_DEVICE);
    }

    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemUnmap(m, 2 * MiB)); /* part of a mapping */
    CHK_OK(cuMemUnmap(m, 4 * MiB));
    CHK(!host_readable(m));
    unsigned long long fl;
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemGetAccess(&fl, &loc_device, m));
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemUnmap(m, 4 * MiB));
    /* The handle still holds its memory until released. */
    CHK_EQ(free_bytes(), before - (on_device ? 4 * MiB : 0));
    CHK_OK(cuMemRelease(h));
    CHK_EQ(free_bytes(), before);
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemAddressFree(va, 4 * MiB)); /* size must match */
    CHK_OK(cuMemAddressFree(va, 8 * MiB));
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemAddressFree(va, 8 * MiB));
    return 0;
}

static void test_lifecycle(void **state) {
    (void)state;
    g_where = CU_MEM_LOCATION_TYPE_DEVICE;
    run_child("lifecycle_device", c_lifecycle, NULL);
    assert_int_equal(report("lifecycle_device", "remote_accesses"), 0);
    assert_int_equal(report("lifecycle_device", "peak_device_bytes"), 4 * MiB);
    g_where = CU_MEM_LOCATION_TYPE_HOST;
    run_child("lifecycle_host", c_lifecycle, NULL);
    assert_int_equal(report("lifecycle_host", "remote_accesses"), 1);
    assert_int_equal(report("lifecycle_host", "peak_device_bytes"), 0);
    g_where = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    run_child("lifecycle_host_numa", c_lifecycle, NULL);
    assert_int_equal(report("lifecycle_host_numa", "remote_accesses"), 1);
    assert_int_equal(report("lifecycle_host_numa", "illegal_accesses"), 0);
}

/* ------------------------------------------------------------------ access is enforced */

static int c_no_access(void) {
    ctx_up();
    CUdeviceptr va = reserve(2 * MiB);
    CUmemGenericAllocationHandle h = create(CU_MEM_LOCATION_TYPE_DEVICE, 2 * MiB);
    CHK_OK(cuMemMap(va, 2 * MiB, 0, h, 0));
    void *args[] = {&va};
    CHK_OK(cuLaunchKernel(kfn("mk_touch"), 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    CHK_CU(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
    g_shared[0] = va + 100;
    return 0;
}

static int c_read_only(void) {
    ctx_up();
    CUdeviceptr va = reserve(2 * MiB);
    CUmemGenericAllocationHandle h = create(CU_MEM_LOCATION_TYPE_DEVICE, 2 * MiB);
    CHK_OK(cuMemMap(va, 2 * MiB, 0, h, 0));
    set_access(va, 2 * MiB, CU_MEM_ACCESS_FLAGS_PROT_READ);
    CHK_EQ(get_access(va), CU_MEM_ACCESS_FLAGS_PROT_READ);
    unsigned char zeros[64] = {0};
    CHK_EQ(device_hash(va, 64, NULL), fnv(zeros, 64)); /* reading is allowed */
    fill(va, 1, 1, NULL);                              /* writing is not */
    CHK_CU(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
    g_shared[0] = va;
    return 0;
}

static void test_access_enforced(void **state) {
    (void)state;
    run_child("no_access", c_no_access, NULL);
    assert_int_equal(report("no_access", "illegal_accesses"), 1);
    assert_int_equal(report("no_access", "first_illegal_address"), g_shared[0]);
    run_child("read_only", c_read_only, NULL);
    assert_int_equal(report("read_only", "illegal_accesses"), 1);
    assert_int_equal(report("read_only", "first_illegal_address"), g_shared[0]);
}

/* ------------------------------------------------------------------ one handle, several mappings
 */

static int c_shared_bytes(void) {
    ctx_up();
    CUmemGenericAllocationHandle h = create(CU_MEM_LOCATION_TYPE_DEVICE, 4 * MiB);
    CUdeviceptr a = reserve(4 * MiB), b = reserve(4 * MiB), c = reserve(2 * MiB);
    CHK_OK(cuMemMap(a, 4 * MiB, 0, h, 0));
    CHK_OK(cuMemMap(b, 4 * MiB, 0, h, 0));
    CHK_OK(cuMemMap(c, 2 * MiB, 0, h, 0)); /* a prefix: the handle's first half */
    set_access(a, 4 * MiB, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    set_access(b, 4 * MiB, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    set_access(c, 2 * MiB, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    /* The handle is released while mapped: the bytes live on with the mappings. */
    CHK_OK(cuMemRelease(h));
    fill(a, 77, 4 * MiB / 4, NULL);
    CHK_OK(cuCtxSynchronize());
    CHK(memcmp((void *)(uintptr_t)a, (void *)(uintptr_t)b, 4 * MiB) == 0);
    CHK(memcmp((void *)(uintptr_t)a, (void *)(uintptr_t)c, 2 * MiB) == 0);
    CHK_EQ(device_hash(b, 4 * MiB, NULL), fnv((void *)(uintptr_t)a, 4 * MiB));
    fill(c + 8, 0xfeedu, 1, NULL);
    CHK_OK(cuCtxSynchronize());
    CHK_EQ(*(const uint32_t *)(uintptr_t)(a + 8), 0xfeedu);
    CHK_EQ(*(const uint32_t *)(uintptr_t)(b + 8), 0xfeedu);
    size_t before_unmap = free_bytes();
    CHK_OK(cuMemUnmap(a, 4 * MiB));
    CHK_OK(cuMemUnmap(c, 2 * MiB));
    CHK_EQ(*(const uint32_t *)(uintptr_t)(b + 8), 0xfeedu);
    CHK_EQ(free_bytes(), before_unmap);
    CHK_OK(cuMemUnmap(b, 4 * MiB)); /* the last mapping: the memory goes */
    CHK_EQ(free_bytes(), before_unmap + 4 * MiB);
    return 0;
}

static void test_shared_bytes(void **state) {
    (void)state;
    run_child("shared_bytes", c_shared_bytes, NULL);
    assert_int_equal(report("shared_bytes", "hazards"), 0);
}

/* ------------------------------------------------------------------ eviction and restore */

/* Virtual ns of a copy of n bytes from src to dst on s, between events behind a long wait. */
static uint64_t timed_copy(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
    CUevent a, b;
    CHK_OK(cuEventCreate(&a, 0));
    CHK_OK(cuEventCreate(&b, 0));
    wait_for(1000000, s);
    CHK_OK(cuEventRecord(a, s));
    CHK_OK(cuMemcpyDtoDAsync(dst, src, n, s));
    CHK_OK(cuEventRecord(b, s));
    CHK_OK(cuEventSynchronize(b));
    float ms = 0;
    CHK_OK(cuEventElapsedTime(&ms, a, b));
    CHK_OK(cuEventDestroy(a));
    CHK_OK(cuEventDestroy(b));
    return (uint64_t)((double)ms * 1e6 + 0.5);
}

static int c_evict_restore(void) {
    ctx_up();
    const size_t n = 4 * MiB;
    const size_t before = free_bytes();
    CUstream s;
    CHK_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

    /* A resident buffer at A, written by a kernel. */
    CUdeviceptr a = reserve(n);
    CUmemGenericAllocationHandle dev_h = create(CU_MEM_LOCATION_TYPE_DEVICE, n);
    CHK_OK(cuMemMap(a, n, 0, dev_h, 0));
    set_access(a, n, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    fill(a, 0xc0ffee00u, n / 4, s);
    CHK_OK(cuStreamSynchronize(s));
    const uint64_t want = fnv((void *)(uintptr_t)a, n);

    /* Evict: copy the bytes into a host-located handle through a staging view of it. The copy
     * goes over the link to host memory, so it moves at the D2H rate, not at HBM rate. */
    CUmemGenericAllocationHandle host_h = create(CU_MEM_LOCATION_TYPE_HOST, n);
    CUdeviceptr stage = reserve(n);
    CHK_OK(cuMemMap(stage, n, 0, host_h, 0));
    set_access(stage, n, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CHK_EQ(timed_copy(stage, a, n, s), (n + 54) / 55);
    CHK_OK(cuMemUnmap(a, n)); /* nothing queued uses A any more: no hazard */
    CHK_OK(cuMemRelease(dev_h));
    CHK_EQ(free_bytes(), before); /* the device memory is given back */
    CHK_OK(cuMemMap(a, n, 0, host_h, 0));
    set_access(a, n, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    /* Same pointer, same bytes; the kernel now reads host memory remotely. */
    CHK_EQ(device_hash(a, n, s), want);
    CUmemGenericAllocationHandle got = 0;
    CHK_OK(cuMemRetainAllocationHandle(&got, (void *)(uintptr_t)(a + 100)));
    CHK(got == host_h);
    CUmemAllocationProp prop;
    CHK_OK(cuMemGetAllocationPropertiesFromHandle(&prop, got));
    CHK_EQ(prop.location.type, CU_MEM_LOCATION_TYPE_HOST);
    CHK_OK(cuMemRelease(got));

    /* Restore: a fresh device handle filled from the host copy (H2D rate), then mapped at A. */
    CUmemGenericAllocationHandle dev2 = create(CU_MEM_LOCATION_TYPE_DEVICE, n);
    CUdeviceptr stage2 = reserve(n);
    CHK_OK(cuMemMap(stage2, n, 0, dev2, 0));
    set_access(stage2, n, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CHK_EQ(timed_copy(stage2, a, n, s), (n + 54) / 55);
    CHK_OK(cuMemUnmap(a, n));
    CHK_OK(cuMemMap(a, n, 0, dev2, 0));
    set_access(a, n, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CHK_EQ(device_hash(a, n, s), want); /* local again */
    CHK_EQ(free_bytes(), before - n);
    CHK_OK(cuMemUnmap(stage, n));
    CHK_OK(cuMemUnmap(stage2, n));
    CHK_OK(cuMemRelease(host_h));
    CHK_OK(cuMemRelease(dev2));
    CHK_OK(cuMemUnmap(a, n));
    CHK_EQ(free_bytes(), before);
    return 0;
}

static void test_evict_restore(void **state) {
    (void)state;
    run_child("evict", c_evict_restore, NULL);
    assert_int_equal(report("evict", "remote_accesses"), 1);
    assert_int_equal(report("evict", "hazards"), 0);
    assert_int_equal(report("evict", "illegal_accesses"), 0);
    assert_int_equal(report("evict", "peak_device_bytes"), 4 * MiB);
    assert_int_equal(report("evict", "bytes_d2h"), 4 * MiB);
    assert_int_equal(report("evict", "bytes_h2d"), 4 * MiB);
}

/* ------------------------------------------------------------------ use after unmap */

static int c_unmap_hazard(int ordered) {
    ctx_up();
    const size_t n = 2 * MiB;
    CUstream s;
    CUevent done;
    CHK_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHK_OK(cuEventCreate(&done, 0));
    CUdeviceptr a = reserve(n), b = reserve(n);
    CUmemGenericAllocationHandle ha = create(CU_MEM_LOCATION_TYPE_DEVICE, n);
    CUmemGenericAllocationHandle hb = create(CU_MEM_LOCATION_TYPE_DEVICE, n);
    CHK_OK(cuMemMap(a, n, 0, ha, 0));
    CHK_OK(cuMemMap(b, n, 0, hb, 0));
    CHK_OK(cuMemRelease(ha)); /* the mappings hold the memory now */
    CHK_OK(cuMemRelease(hb));
    set_access(a, n, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    set_access(b, n, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);

    /* A 1 ms kernel that uses A, still running in virtual time when the host unmaps. */
    use_for(a + 4096, 1000000, s);
    const uint64_t kernel_end = simcuda_now_ns() + 1000000;
    if (ordered) {
        CHK_OK(cuEventRecord(done, s));
        CHK_OK(cuEventSynchronize(done));
        CHK(simcuda_now_ns() >= kernel_end);
    }
    CHK_OK(cuMemUnmap(a, n));
    /* cuMemUnmap does not wait for queued work (DESIGN fact 5). */
    if (!ordered) CHK(simcuda_now_ns() < kernel_end);

    /* Same with a copy into B in flight: 2 MiB at 55 GB/s is about 38 us. */
    void *pinned;
    CHK_OK(cuMemHostAlloc(&pinned, n, 0));
    pattern(pinned, n, 11);
    CHK_OK(cuMemcpyHtoDAsync(b, pinned, n, s));
    if (ordered) {
        CHK_OK(cuEventRecord(done, s));
        CHK_OK(cuEventSynchronize(done));
    }
    CHK_OK(cuMemUnmap(b, n));
    CHK_OK(cuStreamSynchronize(s));
    CHK_OK(cuMemFreeHost(pinned));
    CHK_OK(cuEventDestroy(done));
    CHK_OK(cuStreamDestroy(s));
    CHK_OK(cuMemAddressFree(a, n));
    CHK_OK(cuMemAddressFree(b, n));
    return 0;
}

static int c_unmap_unordered(void) {
    return c_unmap_hazard(0);
}
static int c_unmap_ordered(void) {
    return c_unmap_hazard(1);
}

static void test_unmap_hazard(void **state) {
    (void)state;
    run_child("unmap_unordered", c_unmap_unordered, NULL);
    assert_int_equal(report("unmap_unordered", "hazards"), 2);
    run_child("unmap_ordered", c_unmap_ordered, NULL);
    assert_int_equal(report("unmap_ordered", "hazards"), 0);
    assert_int_equal(report("unmap_ordered", "illegal_accesses"), 0);
}

/* ------------------------------------------------------------------ handles and properties */

static int c_retain_props(void) {
    ctx_up();
    const size_t before = free_bytes();
    CUmemAllocationProp p = prop_at(CU_MEM_LOCATION_TYPE_DEVICE);
    p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    CUmemGenericAllocationHandle h, r = 0;
    CHK_OK(cuMemCreate(&h, 2 * MiB, &p, 0));
    CUdeviceptr va = reserve(4 * MiB);
    CHK_CU(CUDA_ERROR_INVALID_VALUE,
           cuMemRetainAllocationHandle(&r, (void *)(uintptr_t)va)); /* nothing mapped */
    CHK_OK(cuMemMap(va, 2 * MiB, 0, h, 0));
    set_access(va, 2 * MiB, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CHK_OK(cuMemRetainAllocationHandle(&r, (void *)(uintptr_t)(va + 4096)));
    CHK(r == h);
    CUmemAllocationProp got;
    memset(&got, 0xff, sizeof got);
    CHK_OK(cuMemGetAllocationPropertiesFromHandle(&got, r));
    CHK_EQ(got.type, CU_MEM_ALLOCATION_TYPE_PINNED);
    CHK_EQ(got.location.type, CU_MEM_LOCATION_TYPE_DEVICE);
    CHK_EQ(got.location.id, 0);
    CHK_EQ(got.requestedHandleTypes, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CHK_CU(CUDA_ERROR_INVALID_VALUE,
           cuMemRetainAllocationHandle(&r, (void *)(uintptr_t)(va + 2 * MiB)));
    CUdeviceptr lin;
    CHK_OK(cuMemAlloc(&lin, MiB));
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemRetainAllocationHandle(&r, (void *)(uintptr_t)lin));
    /* Two references (create + retain): both must be released; the mapping keeps the bytes. */
    CHK_OK(cuMemRelease(h));
    CHK_OK(cuMemRelease(r));
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemRelease(h));
    fill(va, 5, 4, NULL);
    CHK_OK(cuCtxSynchronize());
    CHK_EQ(((const uint32_t *)(uintptr_t)va)[3], 8);
    CHK_EQ(free_bytes(), before - 2 * MiB - MiB);
    CHK_OK(cuMemUnmap(va, 2 * MiB));
    CHK_EQ(free_bytes(), before - MiB);

    /* Host-located handles report where they live. */
    CUmemGenericAllocationHandle hh = create(CU_MEM_LOCATION_TYPE_HOST_NUMA, 2 * MiB);
    CHK_OK(cuMemGetAllocationPropertiesFromHandle(&got, hh));
    CHK_EQ(got.location.type, CU_MEM_LOCATION_TYPE_HOST_NUMA);
    CHK_OK(cuMemRelease(hh));
    return 0;
}

static void test_retain_and_properties(void **state) {
    (void)state;
    run_child("retain_props", c_retain_props, NULL);
}

/* ------------------------------------------------------------------ capacity */

static int c_capacity(void) {
    ctx_up();
    CHK_EQ(free_bytes(), 64 * MiB);
    CUmemGenericAllocationHandle d1 = create(CU_MEM_LOCATION_TYPE_DEVICE, 48 * MiB), x = 0;
    CUmemAllocationProp p = prop_at(CU_MEM_LOCATION_TYPE_DEVICE);
    CHK_CU(CUDA_ERROR_OUT_OF_MEMORY, cuMemCreate(&x, 32 * MiB, &p, 0));
    CHK_EQ(x, 0);
    /* Host-located handles are host memory: they do not count against the device. */
    CUmemGenericAllocationHandle h1 = create(CU_MEM_LOCATION_TYPE_HOST, 128 * MiB);
    CUmemGenericAllocationHandle h2 = create(CU_MEM_LOCATION_TYPE_HOST_NUMA, 128 * MiB);
    CHK_EQ(free_bytes(), 16 * MiB);
    CUdeviceptr lin;
    CHK_OK(cuMemAlloc(&lin, 16 * MiB));
    CHK_CU(CUDA_ERROR_OUT_OF_MEMORY, cuMemCreate(&x, 2 * MiB, &p, 0));
    CHK_OK(cuMemRelease(d1));
    CHK_EQ(free_bytes(), 48 * MiB);
    CHK_OK(cuMemCreate(&x, 32 * MiB, &p, 0));
    CHK_OK(cuMemRelease(x));
    CHK_OK(cuMemRelease(h1));
    CHK_OK(cuMemRelease(h2));
    CHK_OK(cuMemFree(lin));
    CHK_EQ(free_bytes(), 64 * MiB);
    return 0;
}

static void test_capacity(void **state) {
    (void)state;
    const char *env[] = {"SIMCUDA_DEVICE_MEM=64M", NULL};
    run_child("capacity", c_capacity, env);
    assert_int_equal(report("capacity", "peak_device_bytes"), 64 * MiB);
}

/* ------------------------------------------------------------------ host handles need a context */

static void *no_ctx_thread(void *arg) {
    CUmemGenericAllocationHandle *h = arg;
    CUmemAllocationProp p = prop_at(CU_MEM_LOCATION_TYPE_HOST);
    CUresult rc = cuMemCreate(h, 2 * MiB, &p, 0);
    return (void *)(uintptr_t)rc;
}

static int c_host_handle_no_context(void) {
    CUmemAllocationProp p = prop_at(CU_MEM_LOCATION_TYPE_HOST);
    CUmemGenericAllocationHandle h = 0;
    CHK_CU(CUDA_ERROR_NOT_INITIALIZED, cuMemCreate(&h, 2 * MiB, &p, 0));
    CHK_OK(cuInit(0));
    /* Initialised, but no context is current: a clean error, no handle, no crash. */
    CHK_CU(CUDA_ERROR_INVALID_CONTEXT, cuMemCreate(&h, 2 * MiB, &p, 0));
    p.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    CHK_CU(CUDA_ERROR_INVALID_CONTEXT, cuMemCreate(&h, 2 * MiB, &p, 0));
    CHK_EQ(h, 0);
    /* With a context on this thread it works; another thread without one still fails. */
    ctx_up();
    pthread_t t;
    void *rc = NULL;
    CHK(pthread_create(&t, NULL, no_ctx_thread, &h) == 0);
    CHK(pthread_join(t, &rc) == 0);
    CHK_EQ((uintptr_t)rc, CUDA_ERROR_INVALID_CONTEXT);
    CHK_EQ(h, 0);
    CHK_OK(cuMemCreate(&h, 2 * MiB, &p, 0));
    CHK_OK(cuMemRelease(h));
    return 0;
}

static void test_host_handle_needs_context(void **state) {
    (void)state;
    run_child("host_no_ctx", c_host_handle_no_context, NULL);
}

int main(void) {
    if (!suite_init("vmm")) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_granularity),
        cmocka_unit_test(test_lifecycle),
        cmocka_unit_test(test_access_enforced),
        cmocka_unit_test(test_shared_bytes),
        cmocka_unit_test(test_evict_restore),
        cmocka_unit_test(test_unmap_hazard),
        cmocka_unit_test(test_retain_and_properties),
        cmocka_unit_test(test_capacity),
        cmocka_unit_test(test_host_handle_needs_context),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    remove_reports();
    return rc;
}
