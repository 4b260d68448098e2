/* The simulator's memory family against the contract (issue 2, docs/simcuda.md) and the real
 * driver: linear allocations, capacity and its configuration, pinned and registered host memory,
 * pointer attributes, illegal accesses through freed pointers, stream-ordered allocation and
 * pools, and managed memory with prefetch and advice (both ABIs).
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

/* ------------------------------------------------------------------ linear device memory */

static int c_alloc_free(void) {
    ctx_up();
    CUdeviceptr a, b, c = 77;
    CHK_OK(cuMemAlloc(&a, 3 * MiB));
    CHK_OK(cuMemAlloc(&b, 1000));
    CHK(a % (2 * MiB) == 0); /* large allocations are 2 MiB aligned, like the driver's pages */
    CHK(b % 256 == 0);
    CHK(a + 3 * MiB <= b || b + 1000 <= a);
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemAlloc(&c, 0));
    CHK_EQ(c, 77);
    /* Device address == process address: the host reads what a kernel wrote, bit for bit. */
    fill(a, 0x12345678u, 3 * MiB / 4, NULL);
    CHK_OK(cuCtxSynchronize());
    const uint32_t *pa = (const uint32_t *)(uintptr_t)a;
    for (uint64_t i = 0; i < 3 * MiB / 4; i++)
        CHK_EQ(pa[i], 0x12345678u + (uint32_t)i);
    uint32_t *host = malloc(3 * MiB);
    CHK(host != NULL);
    CHK_OK(cuMemcpyDtoH(host, a, 3 * MiB));
    CHK(memcmp(host, pa, 3 * MiB) == 0);
    free(host);

    CUdeviceptr base = 0;
    size_t size = 0;
    CHK_OK(cuMemGetAddressRange(&base, &size, a + 12345));
    CHK_EQ(base, a);
    CHK_EQ(size, 3 * MiB);
    CHK_OK(cuMemGetAddressRange(&base, &size, b + 999));
    CHK_EQ(base, b);
    CHK_EQ(size, 1000);
    CHK_OK(cuMemGetAddressRange(NULL, &size, b)); /* either output may be NULL */
    CHK_CU(CUDA_ERROR_NOT_FOUND, cuMemGetAddressRange(&base, &size, b + 1000));

    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemFree(a + 4096)); /* not the base */
    CHK(host_readable(a));
    CHK_OK(cuMemFree(a));
    /* Freed memory is PROT_NONE, so a stale pointer faults instead of reading stale bytes. */
    CHK(!host_readable(a));
    CHK(!host_readable(a + 3 * MiB - 1));
    CHK_CU(CUDA_ERROR_NOT_FOUND, cuMemGetAddressRange(&base, &size, a));
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemFree(a)); /* double free */
    CHK_OK(cuMemFree(b));
    return 0;
}

static void test_alloc_free(void **state) {
    (void)state;
    run_child("alloc_free", c_alloc_free, NULL);
    assert_int_equal(report("alloc_free", "illegal_accesses"), 0);
}

static int c_alloc_pitch(void) {
    ctx_up();
    CUdeviceptr p, q, r = 5;
    size_t pitch = 0, base_size = 0;
    CUdeviceptr base;
    CHK_OK(cuMemAllocPitch(&p, &pitch, 1000, 7, 4));
    /* Rows are padded to the texture pitch alignment (512 bytes on the H200). */
    CHK(pitch >= 1000 && pitch % 512 == 0 && pitch < 1000 + 512);
    CHK_OK(cuMemGetAddressRange(&base, &base_size, p));
    CHK_EQ(base, p);
    CHK_EQ(base_size, pitch * 7);
    CHK_OK(cuMemAllocPitch(&q, &pitch, 512, 3, 16));
    CHK_EQ(pitch, 512);
    CHK_OK(cuMemAllocPitch(&q, &pitch, 513, 2, 8));
    CHK_EQ(pitch, 1024);
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemAllocPitch(&r, &pitch, 100, 2, 3));
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemAllocPitch(&r, NULL, 100, 2, 4));
    CHK_EQ(r, 5);
    /* Each row is usable up to the pitch: write the last byte of every row through a kernel. */
    fill(p + 6 * 1024 + 1020, 0xabcdef01u, 1, NULL);
    CHK_OK(cuCtxSynchronize());
    CHK_EQ(*(const uint32_t *)(uintptr_t)(p + 6 * 1024 + 1020), 0xabcdef01u);
    return 0;
}

static void test_alloc_pitch(void **state) {
    (void)state;
    run_child("alloc_pitch", c_alloc_pitch, NULL);
}

static int c_get_info(void) {
    ctx_up();
    size_t fr, total, dev_total;
    CUdevice dev;
    CHK_OK(cuMemGetInfo(&fr, &total));
    CHK_OK(cuDeviceGet(&dev, 0));
    CHK_OK(cuDeviceTotalMem(&dev_total, dev));
    CHK_EQ(total, 141 * GiB);
    CHK_EQ(dev_total, total);
    CHK_EQ(fr, total);
    CUdeviceptr a, b, c;
    CHK_OK(cuMemAlloc(&a, 64 * MiB));
    CHK_EQ(free_bytes(), total - 64 * MiB);
    CHK_OK(cuMemAlloc(&b, 32 * MiB));
    CHK_EQ(free_bytes(), total - 96 * MiB);
    CHK_OK(cuMemFree(a));
    CHK_EQ(free_bytes(), total - 32 * MiB);
    CHK_OK(cuMemAlloc(&c, 16 * MiB));
    CHK_EQ(free_bytes(), total - 48 * MiB);
    /* Pinned host memory and reservations use no device memory. */
    void *h;
    CUdeviceptr va;
    CHK_OK(cuMemHostAlloc(&h, 64 * MiB, 0));
    CHK_OK(cuMemAddressReserve(&va, 64 * MiB, 0, 0, 0));
    CHK_EQ(free_bytes(), total - 48 * MiB);
    CHK_OK(cuMemFree(b));
    CHK_OK(cuMemFree(c));
    CHK_OK(cuMemFreeHost(h));
    CHK_OK(cuMemAddressFree(va, 64 * MiB));
    CHK_EQ(free_bytes(), total);
    return 0;
}

static void test_get_info_and_peak(void **state) {
    (void)state;
    run_child("get_info", c_get_info, NULL);
    assert_int_equal(report("get_info", "peak_device_bytes"), 96 * MiB);
}

static int c_capacity(void) {
    ctx_up();
    size_t fr, total;
    CHK_OK(cuMemGetInfo(&fr, &total));
    CHK_EQ(total, 64 * MiB);
    CUdeviceptr a, b, c, x = 42;
    size_t pitch;
    CHK_OK(cuMemAlloc(&a, 48 * MiB));
    CHK_CU(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&x, 32 * MiB));
    CHK_EQ(x, 42);
    CHK_CU(CUDA_ERROR_OUT_OF_MEMORY, cuMemAllocAsync(&x, 32 * MiB, NULL));
    CHK_CU(CUDA_ERROR_OUT_OF_MEMORY, cuMemAllocPitch(&x, &pitch, 4 * MiB, 8, 4));
    CHK_EQ(x, 42);
    CHK_OK(cuMemAlloc(&b, 16 * MiB)); /* exactly full */
    CHK_EQ(free_bytes(), 0);
    CHK_CU(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&x, 1));
    /* Freeing makes room. */
    CHK_OK(cuMemFree(a));
    CHK_EQ(free_bytes(), 48 * MiB);
    CHK_OK(cuMemAlloc(&c, 32 * MiB));
    CHK_EQ(free_bytes(), 16 * MiB);
    /* Managed memory never fails for lack of device room (pages would be evicted instead). */
    CHK_OK(cuMemAllocManaged(&x, 128 * MiB, CU_MEM_ATTACH_GLOBAL));
    CHK_OK(cuMemFree(x));
    CHK_OK(cuMemFree(b));
    CHK_OK(cuMemFree(c));
    return 0;
}

static void test_capacity(void **state) {
    (void)state;
    const char *env[] = {"SIMCUDA_DEVICE_MEM=64M", NULL};
    run_child("capacity", c_capacity, env);
    assert_int_equal(report("capacity", "peak_device_bytes"), 64 * MiB);
}

/* ------------------------------------------------------------------ configuration sizes */

static char g_stderr_path[600];
static unsigned long long g_expect_bytes;

static int c_malformed(void) {
    int fd = open(g_stderr_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHK(fd >= 0);
    dup2(fd, 2);
    close(fd);
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuInit(0));
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuInit(0)); /* stays failed, and says so only once */
    int count = 5;
    CUresult rc = cuDeviceGetCount(&count);
    CHK(rc != CUDA_SUCCESS);
    CUdeviceptr p;
    CHK(cuMemAlloc(&p, 4096) != CUDA_SUCCESS);
    return 0;
}

static void test_malformed_device_mem(void **state) {
    (void)state;
    static const char *const bad[] = {"SIMCUDA_DEVICE_MEM=12Q",  "SIMCUDA_DEVICE_MEM=-5G",
                                      "SIMCUDA_DEVICE_MEM=1.5G", "SIMCUDA_DEVICE_MEM=G",
                                      "SIMCUDA_DEVICE_MEM=0",    "SIMCUDA_DEVICE_MEM=99999999999T",
                                      "SIMCUDA_DEVICE_MEM=12 G"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(g_stderr_path, sizeof g_stderr_path, "%s/malformed.stderr", report_dir);
        const char *env[] = {bad[i], NULL};
        run_child("malformed", c_malformed, env);
        FILE *f = fopen(g_stderr_path, "r");
        assert_non_null(f);
        char text[4096];
        size_t n = fread(text, 1, sizeof text - 1, f);
        fclose(f);
        unlink(g_stderr_path);
        text[n] = '\0';
        int lines = 0;
        for (size_t k = 0; k < n; k++)
            lines += text[k] == '\n';
        if (lines != 1 || strstr(text, "SIMCUDA_DEVICE_MEM") == NULL)
            fail_msg("%s: expected one stderr line naming the variable, got \"%s\"", bad[i], text);
        /* No report: the program stopped at cuInit. */
        char path[512];
        report_path(path, sizeof path, "malformed");
        assert_int_equal(simtest_json_int(path, "virtual_ns"), -1);
    }
}

static int c_size_suffix(void) {
    ctx_up();
    size_t fr, total, dev_total;
    CUdevice dev;
    CHK_OK(cuDeviceGet(&dev, 0));
    CHK_OK(cuDeviceTotalMem(&dev_total, dev));
    CHK_OK(cuMemGetInfo(&fr, &total));
    CHK_EQ(dev_total, g_expect_bytes);
    CHK_EQ(total, g_expect_bytes);
    CHK_EQ(fr, g_expect_bytes);
    return 0;
}

static void test_size_suffixes(void **state) {
    (void)state;
    static const struct {
        const char *env;
        unsigned long long bytes;
    } cases[] = {
        {"SIMCUDA_DEVICE_MEM=1048576", 1048576ull}, {"SIMCUDA_DEVICE_MEM=64K", 64ull << 10},
        {"SIMCUDA_DEVICE_MEM=64k", 64ull << 10},    {"SIMCUDA_DEVICE_MEM=3M", 3ull << 20},
        {"SIMCUDA_DEVICE_MEM=80G", 80ull << 30},    {"SIMCUDA_DEVICE_MEM=2T", 2ull << 40},
        {"SIMCUDA_DEVICE_MEM=2GB", 2ull << 30},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        g_expect_bytes = cases[i].bytes;
        const char *env[] = {cases[i].env, NULL};
        run_child("size_suffix", c_size_suffix, env);
    }
}

/* ------------------------------------------------------------------ pinned and registered host
 * memory */

static int c_host_alloc(void) {
    ctx_up();
    size_t before = free_bytes();
    void *h, *h2;
    unsigned flags = CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE, got = 0;
    CHK_OK(cuMemHostAlloc(&h, MiB, flags));
    CHK_EQ(free_bytes(), before); /* pinned host memory is not device memory */
    CHK_OK(cuMemHostGetFlags(&got, h));
    CHK_EQ(got, flags);
    CUdeviceptr d = 0;
    CHK_OK(cuMemHostGetDevicePointer(&d, h, 0));
    CHK_EQ(d, (uintptr_t)h); /* unified addressing: the same address */
    CHK_OK(cuMemHostGetDevicePointer(&d, (char *)h + 100, 0));
    CHK_EQ(d, (uintptr_t)h + 100);
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemHostGetDevicePointer(&d, h, 1));
    /* The device reads and writes it in place (each such kernel is a remote access). */
    pattern(h, MiB, 1);
    CHK_EQ(device_hash((CUdeviceptr)(uintptr_t)h, MiB, NULL), fnv(h, MiB));
    fill((CUdeviceptr)(uintptr_t)h + 4, 7, 3, NULL);
    CHK_OK(cuCtxSynchronize());
    CHK_EQ(((uint32_t *)h)[1], 7);
    CHK_EQ(((uint32_t *)h)[3], 9);
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemHostAlloc(&h2, MiB, 0x80));
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemHostAlloc(&h2, 0, 0));
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemFreeHost((char *)h + 64));
    int local = 0;
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemFreeHost(&local));
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemHostGetDevicePointer(&d, &local, 0));
    CHK_OK(cuMemFreeHost(h));
    CHK(!host_readable((uintptr_t)h));
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemHostGetDevicePointer(&d, h, 0));
    CHK_OK(cuMemAllocHost(&h2, 100));
    memset(h2, 0x5a, 100);
    CHK_OK(cuMemHostGetDevicePointer(&d, h2, 0));
    CHK_OK(cuMemFreeHost(h2));
    return 0;
}

static void test_host_alloc(void **state) {
    (void)state;
    run_child("host_alloc", c_host_alloc, NULL);
    assert_int_equal(report("host_alloc", "remote_accesses"), 2);
    assert_int_equal(report("host_alloc", "illegal_accesses"), 0);
}

static int c_host_register(void) {
    ctx_up();
    const size_t n = 64 << 10;
    unsigned char *buf = aligned_alloc(4096, n);
    CHK(buf != NULL);
    pattern(buf, n, 2);
    uint64_t want = fnv(buf, n);
    CHK_OK(cuMemHostRegister(buf, n, CU_MEMHOSTREGISTER_DEVICEMAP));
    CUdeviceptr d = 0;
    CHK_OK(cuMemHostGetDevicePointer(&d, buf, 0));
    CHK_EQ(d, (uintptr_t)buf);
    CHK_CU(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, cuMemHostRegister(buf + 4096, 4096, 0));
    CHK_EQ(device_hash(d, n, NULL), want);
    /* Asynchronous copies use registered memory in place (no staging snapshot). */
    CUdeviceptr dev;
    CHK_OK(cuMemAlloc(&dev, n));
    CHK_OK(cuMemcpyHtoDAsync(dev, buf, n, NULL));
    CHK_OK(cuCtxSynchronize());
    CHK(memcmp((void *)(uintptr_t)dev, buf, n) == 0);
    fill(d, 100, 2, NULL);
    CHK_OK(cuCtxSynchronize());
    CHK_EQ(((uint32_t *)buf)[1], 101);
    CHK_OK(cuMemHostUnregister(buf));
    /* The memory is the application's: it stays readable and keeps its bytes. */
    CHK(host_readable((uintptr_t)buf));
    CHK_EQ(((uint32_t *)buf)[0], 100);
    CHK_CU(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, cuMemHostUnregister(buf));
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemHostGetDevicePointer(&d, buf, 0));
    free(buf);
    return 0;
}

static void test_host_register(void **state) {
    (void)state;
    run_child("host_register", c_host_register, NULL);
    assert_int_equal(report("host_register", "remote_accesses"), 2);
}

/* ------------------------------------------------------------------ pointer attributes */

struct attrs {
    unsigned type;
    CUdeviceptr dptr;
    void *hptr;
    int managed, ordinal, mapped;
    CUcontext ctx;
    CUdeviceptr start;
    size_t size;
    unsigned long long id;
};

static CUresult get_attrs(CUdeviceptr p, struct attrs *a) {
    CUpointer_attribute which[] = {
        CU_POINTER_ATTRIBUTE_MEMORY_TYPE,    CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
        CU_POINTER_ATTRIBUTE_HOST_POINTER,   CU_POINTER_ATTRIBUTE_IS_MANAGED,
        CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_MAPPED,
        CU_POINTER_ATTRIBUTE_CONTEXT,        CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
        CU_POINTER_ATTRIBUTE_RANGE_SIZE,     CU_POINTER_ATTRIBUTE_BUFFER_ID,
    };
    void *data[] = {&a->type,   &a->dptr, &a->hptr,  &a->managed, &a->ordinal,
                    &a->mapped, &a->ctx,  &a->start, &a->size,    &a->id};
    memset(a, 0xee, sizeof *a); /* every field must be written */
    return cuPointerGetAttributes(10, which, data, p);
}

static int c_pointer_attributes(void) {
    CUcontext ctx = ctx_up();
    CUdeviceptr d, d2, m;
    void *h;
    CHK_OK(cuMemAlloc(&d, MiB));
    CHK_OK(cuMemAlloc(&d2, MiB));
    CHK_OK(cuMemHostAlloc(&h, MiB, 0));
    CHK_OK(cuMemAllocManaged(&m, MiB, CU_MEM_ATTACH_GLOBAL));
    unsigned char *reg = aligned_alloc(4096, 8192);
    CHK(reg != NULL);
    CHK_OK(cuMemHostRegister(reg, 8192, 0));

    /* Device memory. */
    struct attrs a;
    unsigned type = 0;
    void *hp = NULL;
    CHK_OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d + 16));
    CHK_EQ(type, CU_MEMORYTYPE_DEVICE);
    CHK_CU(CUDA_ERROR_INVALID_VALUE,
           cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, d));
    CHK_OK(get_attrs(d + 16, &a));
    CHK_EQ(a.type, CU_MEMORYTYPE_DEVICE);
    CHK_EQ(a.dptr, d + 16);
    CHK_EQ(a.managed, 0);
    CHK_EQ(a.ordinal, 0);
    CHK_EQ(a.mapped, 1);
    CHK(a.ctx == ctx);
    CHK_EQ(a.start, d);
    CHK_EQ(a.size, MiB);
    unsigned long long id1 = a.id, id2 = 0;
    CHK_OK(cuPointerGetAttribute(&id2, CU_POINTER_ATTRIBUTE_BUFFER_ID, d2));
    CHK(id1 != 0 && id2 != 0 && id1 != id2);
    int ipc = 0;
    CHK_OK(cuPointerGetAttribute(&ipc, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, d));
    CHK_EQ(ipc, 1);

    /* Pinned host memory: both pointers are the address itself. */
    CHK_OK(get_attrs((uintptr_t)h + 8, &a));
    CHK_EQ(a.type, CU_MEMORYTYPE_HOST);
    CHK_EQ(a.dptr, (uintptr_t)h + 8);
    CHK(a.hptr == (char *)h + 8);
    CHK_EQ(a.managed, 0);
    CHK_EQ(a.ordinal, 0);
    CHK(a.ctx == ctx);

    /* Registered memory. */
    CHK_OK(get_attrs((uintptr_t)reg + 4100, &a));
    CHK_EQ(a.type, CU_MEMORYTYPE_HOST);
    CHK_EQ(a.dptr, (uintptr_t)reg + 4100);
    CHK(a.hptr == reg + 4100);
    CHK_EQ(a.start, (uintptr_t)reg);
    CHK_EQ(a.size, 8192);

    /* Managed memory: IS_MANAGED, and a physical memory type (the driver reports device or
     * host, never CU_MEMORYTYPE_UNIFIED, which only names copy operands). */
    CHK_OK(get_attrs(m, &a));
    CHK_EQ(a.managed, 1);
    CHK_EQ(a.type, CU_MEMORYTYPE_DEVICE);
    CHK_EQ(a.dptr, m);
    CHK(a.hptr == (void *)(uintptr_t)m);
    int is_managed = 0;
    CHK_OK(cuPointerGetAttribute(&is_managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, m + 100));
    CHK_EQ(is_managed, 1);

    /* Unknown (pageable) memory: the single query fails, the batch one reads as empty. */
    int local = 0;
    CUdeviceptr lp = (uintptr_t)&local;
    CHK_CU(CUDA_ERROR_INVALID_VALUE,
           cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, lp));
    CHK_CU(CUDA_ERROR_INVALID_VALUE,
           cuPointerGetAttribute(&is_managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, lp));
    CHK_OK(get_attrs(lp, &a));
    CHK_EQ(a.type, 0);
    CHK_EQ(a.dptr, 0);
    CHK(a.hptr == NULL);
    CHK_EQ(a.managed, 0);
    CHK_EQ(a.ordinal, -2);
    CHK(a.ctx == NULL);

    /* A freed pointer is unknown again. */
    CHK_OK(cuMemFree(d2));
    CHK_CU(CUDA_ERROR_INVALID_VALUE,
           cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d2));
    CHK_OK(cuMemHostUnregister(reg));
    CHK_CU(CUDA_ERROR_INVALID_VALUE,
           cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (uintptr_t)reg));
    free(reg);
    return 0;
}

static void test_pointer_attributes(void **state) {
    (void)state;
    run_child("pointer_attributes", c_pointer_attributes, NULL);
}

/* ------------------------------------------------------------------ illegal access through a freed
 * pointer */

static int c_freed_pointer(void) {
    ctx_up();
    CUdeviceptr d, other;
    CHK_OK(cuMemAlloc(&d, MiB));
    CHK_OK(cuMemAlloc(&other, MiB));
    CHK_OK(cuMemFree(d));
    /* Hold the executor so that both launches below are certainly queued before the fault. */
    launch("mk_block", NULL, NULL);
    void *args[] = {&d};
    CHK_OK(cuLaunchKernel(kfn("mk_touch"), 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    launch("mk_mark", NULL, NULL);
    atomic_store(&g_go, 1);
    /* The error surfaces at the next synchronising call and stays (sticky). */
    CHK_CU(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
    CHK_CU(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
    CHK_CU(CUDA_ERROR_ILLEGAL_ADDRESS, cuStreamSynchronize(NULL));
    CHK_EQ(atomic_load(&g_marked), 0); /* work queued after the fault does not run */
    CHK_CU(CUDA_ERROR_ILLEGAL_ADDRESS,
           cuLaunchKernel(kfn("mk_mark"), 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    unsigned char host[16];
    CHK_CU(CUDA_ERROR_ILLEGAL_ADDRESS, cuMemcpyDtoH(host, other, sizeof host));
    g_shared[0] = d + 100; /* mk_touch reads byte 100 */
    return 0;
}

static void test_freed_pointer_is_illegal(void **state) {
    (void)state;
    run_child("freed_pointer", c_freed_pointer, NULL);
    assert_int_equal(report("freed_pointer", "illegal_accesses"), 1);
    assert_int_equal(report("freed_pointer", "first_illegal_address"), g_shared[0]);
    assert_int_equal(report("freed_pointer", "launches"), 2); /* mk_block and mk_touch */
}

/* ------------------------------------------------------------------ stream-ordered allocation */

static int c_free_async(int correct) {
    ctx_up();
    CUstream s1, s2;
    CUevent e1, e2;
    CHK_OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CHK_OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CHK_OK(cuEventCreate(&e1, 0));
    CHK_OK(cuEventCreate(&e2, 0));
    size_t total_free = free_bytes();
    CUdeviceptr d;
    CHK_OK(cuMemAllocAsync(&d, MiB, s1));
    CHK_EQ(free_bytes(), total_free - MiB);
    fill(d, 1000, MiB / 4, s1);
    CHK_OK(cuEventRecord(e1, s1));
    CHK_OK(cuStreamWaitEvent(s2, e1, 0));
    use_for(d, 1000000, s2); /* 1 ms on s2 using d */
    void *pinned;
    CHK_OK(cuMemHostAlloc(&pinned, MiB, 0));
    CHK_OK(cuMemcpyDtoHAsync(pinned, d, MiB, s2));
    if (correct) {
        /* The free waits for s2's use through an event, as it must on a GPU. */
        CHK_OK(cuEventRecord(e2, s2));
        CHK_OK(cuStreamWaitEvent(s1, e2, 0));
    }
    uint64_t t_free = simcuda_now_ns();
    CHK_OK(cuMemFreeAsync(d, s1));
    CHK(simcuda_now_ns() - t_free < 1000000); /* stream-ordered: the host does not wait */
    CHK_OK(cuCtxSynchronize());
    for (uint32_t i = 0; i < MiB / 4; i++)
        CHK_EQ(((uint32_t *)pinned)[i], 1000 + i);
    CHK_EQ(free_bytes(), total_free);
    CUdeviceptr base;
    size_t size;
    CHK_CU(CUDA_ERROR_NOT_FOUND, cuMemGetAddressRange(&base, &size, d));
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemFreeAsync(d, s1));
    CHK_OK(cuMemFreeHost(pinned));
    CHK_OK(cuEventDestroy(e1));
    CHK_OK(cuEventDestroy(e2));
    CHK_OK(cuStreamDestroy(s1));
    CHK_OK(cuStreamDestroy(s2));
    return 0;
}

static int c_free_async_hazard(void) {
    return c_free_async(0);
}
static int c_free_async_ordered(void) {
    return c_free_async(1);
}

static void test_free_async_hazard(void **state) {
    (void)state;
    run_child("free_async_hazard", c_free_async_hazard, NULL);
    assert_true(report("free_async_hazard", "hazards") >= 1);
    run_child("free_async_ordered", c_free_async_ordered, NULL);
    assert_int_equal(report("free_async_ordered", "hazards"), 0);
    assert_int_equal(report("free_async_ordered", "illegal_accesses"), 0);
}

static cuuint64_t pool_attr(CUmemoryPool p, CUmemPool_attribute a) {
    cuuint64_t v = 0xdeadbeef;
    CHK_OK(cuMemPoolGetAttribute(p, a, &v));
    return v;
}

static int c_pools(void) {
    ctx_up();
    CUmemoryPool def, got, pool;
    CHK_OK(cuDeviceGetDefaultMemPool(&def, 0));
    CHK_OK(cuDeviceGetMemPool(&got, 0));
    CHK(def == got);
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    CHK_OK(cuMemPoolCreate(&pool, &props));
    CHK(pool != def);
    cuuint64_t thr = GiB;
    CHK_OK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr));
    CHK_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), GiB);
    CHK_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);

    CUstream s;
    CHK_OK(cuStreamCreate(&s, 0));
    CUdeviceptr a, b;
    CHK_OK(cuMemAllocFromPoolAsync(&a, MiB, pool, s));
    CHK_OK(cuMemAllocAsync(&b, 2 * MiB, s));
    CHK_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), MiB);
    CHK_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), MiB);
    CHK(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) >= MiB);
    CHK_EQ(pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 2 * MiB);
    CUmemoryPool owner = NULL;
    CHK_OK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, a));
    CHK(owner == pool);
    CHK_OK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, b + 5));
    CHK(owner == def);
    int ipc = 1;
    CHK_OK(cuPointerGetAttribute(&ipc, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, a));
    CHK_EQ(ipc, 0);
    /* Pool memory holds data like any device memory. */
    fill(a, 9, MiB / 4, s);
    uint32_t back[4];
    CHK_OK(cuMemcpyDtoHAsync(back, a + MiB - 16, 16, s));
    CHK_EQ(back[3], 9 + MiB / 4 - 1);

    CHK_OK(cuMemFreeAsync(a, s));
    CHK_OK(cuStreamSynchronize(s));
    CHK_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
    CHK_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), MiB);
    CHK_EQ(pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 2 * MiB);
    cuuint64_t zero = 0;
    CHK_OK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero));
    CHK_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 0);
    CHK_OK(cuMemFreeAsync(b, s));
    CHK_OK(cuStreamSynchronize(s));
    CHK_EQ(pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
    /* cuMemFree may free a stream-ordered allocation too (it synchronises). */
    CHK_OK(cuMemAllocFromPoolAsync(&a, 3 * MiB, pool, s));
    CHK_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 3 * MiB);
    CHK_OK(cuMemFree(a));
    CHK_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
    /* Destroying a pool with an allocation outstanding: the allocation stays usable and its
     * free still works (the pool's bookkeeping goes with it). */
    CHK_OK(cuMemAllocFromPoolAsync(&a, MiB, pool, s));
    CHK_OK(cuMemPoolDestroy(pool));
    fill(a, 4, 4, s);
    CHK_OK(cuMemFreeAsync(a, s));
    CHK_OK(cuStreamSynchronize(s));
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemPoolDestroy(def));
    props.location.id = 7;
    CHK_CU(CUDA_ERROR_INVALID_DEVICE, cuMemPoolCreate(&pool, &props));
    return 0;
}

static void test_pools(void **state) {
    (void)state;
    run_child("pools", c_pools, NULL);
    assert_int_equal(report("pools", "hazards"), 0);
}

/* ------------------------------------------------------------------ managed memory */

/* The pre-13.0 ABIs, exported under these names; cuda.h maps the names to the _v2 variants. */
#undef cuMemPrefetchAsync
#undef cuMemAdvise
CUresult cuMemPrefetchAsync(CUdeviceptr ptr, size_t bytes, CUdevice dst, CUstream s);
CUresult cuMemAdvise(CUdeviceptr ptr, size_t bytes, CUmem_advise advice, CUdevice dev);

#define MANAGED_BYTES MiB /* 16 pages of 64 KiB */
#define MANAGED_PAGES 16

static const CUmemLocation loc_device = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
static const CUmemLocation loc_host = {CU_MEM_LOCATION_TYPE_HOST, 0};

static CUdeviceptr managed_with_pattern(uint32_t seed) {
    CUdeviceptr m;
    CHK_OK(cuMemAllocManaged(&m, MANAGED_BYTES, CU_MEM_ATTACH_GLOBAL));
    pattern((void *)(uintptr_t)m, MANAGED_BYTES, seed); /* the host writes it directly */
    return m;
}

static uint64_t host_hash(CUdeviceptr m) {
    return fnv((const void *)(uintptr_t)m, MANAGED_BYTES);
}

/* Virtual duration of a hash kernel over m, measured between events behind a long wait so
 * neither event's time depends on the host clock. */
static uint64_t timed_hash(CUdeviceptr m, CUstream s) {
    CUevent a, b;
    CHK_OK(cuEventCreate(&a, 0));
    CHK_OK(cuEventCreate(&b, 0));
    wait_for(1000000, s);
    CHK_OK(cuEventRecord(a, s));
    uint64_t n = MANAGED_BYTES;
    void *args[] = {&m, &n};
    launch("mk_hash", s, args);
    CHK_OK(cuEventRecord(b, s));
    CHK_OK(cuEventSynchronize(b));
    CHK_EQ(atomic_load(&g_hash), host_hash(m));
    float ms = 0;
    CHK_OK(cuEventElapsedTime(&ms, a, b));
    CHK_OK(cuEventDestroy(a));
    CHK_OK(cuEventDestroy(b));
    return (uint64_t)((double)ms * 1e6 + 0.5);
}

static int c_managed_faults_once(void) {
    ctx_up();
    size_t before = free_bytes();
    CUdeviceptr m = managed_with_pattern(3);
    CHK_EQ(free_bytes(), before); /* nothing resident on the device yet */
    /* The first kernel faults all 16 pages in: 1 MiB at 55 GB/s plus 2 us per page on top of
     * the kernel's own 1000 ns. The second finds them resident. */
    uint64_t first = timed_hash(m, NULL);
    uint64_t expect = 1000 + (MANAGED_BYTES + 54) / 55 + MANAGED_PAGES * 2000;
    CHK_NEAR(first, expect, 2);
    CHK_EQ(free_bytes(), before - MANAGED_BYTES); /* resident pages are device footprint */
    uint64_t second = timed_hash(m, NULL);
    CHK_NEAR(second, 1000, 2);
    CHK_OK(cuMemFree(m));
    CHK_EQ(free_bytes(), before);
    return 0;
}

/* Virtual ns of one prefetch, between events behind a long wait. */
static uint64_t timed_prefetch(CUdeviceptr m, size_t n, CUmemLocation to, CUstream s) {
    CUevent a, b;
    CHK_OK(cuEventCreate(&a, 0));
    CHK_OK(cuEventCreate(&b, 0));
    wait_for(1000000, s);
    CHK_OK(cuEventRecord(a, s));
    CHK_OK(cuMemPrefetchAsync_v2(m, n, to, 0, s));
    CHK_OK(cuEventRecord(b, s));
    CHK_OK(cuEventSynchronize(b));
    float ms = 0;
    CHK_OK(cuEventElapsedTime(&ms, a, b));
    CHK_OK(cuEventDestroy(a));
    CHK_OK(cuEventDestroy(b));
    return (uint64_t)((double)ms * 1e6 + 0.5);
}

static int c_managed_prefetch_v2(void) {
    ctx_up();
    size_t before = free_bytes();
    CUdeviceptr m = managed_with_pattern(4);
    CUstream s;
    CHK_OK(cuStreamCreate(&s, 0));
    /* A prefetch moves the non-resident pages at the copy rate; pages already there cost
     * nothing (the driver only migrates what is elsewhere). */
    CHK_EQ(timed_prefetch(m, MANAGED_BYTES / 2, loc_device, s), (MANAGED_BYTES / 2 + 54) / 55);
    CHK_EQ(timed_prefetch(m, MANAGED_BYTES / 2, loc_device, s), 0);
    CHK_EQ(timed_prefetch(m, MANAGED_BYTES, loc_device, s), (MANAGED_BYTES / 2 + 54) / 55);
    uint64_t t = timed_hash(m, s); /* no faults: only the kernel's own time */
    CHK_NEAR(t, 1000, 2);
    CHK_EQ(free_bytes(), before - MANAGED_BYTES);
    /* Back to the CPU: the device footprint goes, and the next kernel faults again. */
    CHK_EQ(timed_prefetch(m, MANAGED_BYTES, loc_host, s), (MANAGED_BYTES + 54) / 55);
    CHK_EQ(timed_prefetch(m, MANAGED_BYTES, loc_host, s), 0);
    CHK_EQ(free_bytes(), before);
    pattern((void *)(uintptr_t)m, MANAGED_BYTES, 5);
    CHK_EQ(device_hash(m, MANAGED_BYTES, s), host_hash(m));
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemPrefetchAsync_v2(m, 0, loc_device, 0, s));
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemPrefetchAsync_v2(m, MANAGED_BYTES, loc_device, 1, s));
    CUdeviceptr d;
    CHK_OK(cuMemAlloc(&d, MiB));
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemPrefetchAsync_v2(d, MiB, loc_device, 0, s));
    return 0;
}

static int c_managed_prefetch_v1(void) {
    ctx_up();
    CUdeviceptr m = managed_with_pattern(6);
    CUstream s;
    CHK_OK(cuStreamCreate(&s, 0));
    CHK_OK(cuMemPrefetchAsync(m, MANAGED_BYTES, 0, s));     /* device 0 */
    CHK_EQ(device_hash(m, MANAGED_BYTES, s), host_hash(m)); /* no faults */
    CHK_OK(cuMemPrefetchAsync(m, MANAGED_BYTES, CU_DEVICE_CPU, s));
    CHK_EQ(device_hash(m, MANAGED_BYTES, s), host_hash(m)); /* 16 faults */
    CHK_OK(cuMemPrefetchAsync(m, MANAGED_BYTES, CU_DEVICE_CPU, s));
    CHK_OK(cuMemPrefetchAsync(m, MANAGED_BYTES / 2, 0, s)); /* the first 8 pages */
    CHK_EQ(device_hash(m, MANAGED_BYTES, s), host_hash(m)); /* 8 faults */
    CHK_CU(CUDA_ERROR_INVALID_DEVICE, cuMemPrefetchAsync(m, MANAGED_BYTES, 5, s));
    return 0;
}

static int c_managed_advise_v2(void) {
    ctx_up();
    size_t before = free_bytes();
    CUdeviceptr m = managed_with_pattern(7);
    CHK_OK(cuMemAdvise_v2(m, MANAGED_BYTES, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, loc_host));
    CHK_OK(cuMemAdvise_v2(m, MANAGED_BYTES, CU_MEM_ADVISE_SET_ACCESSED_BY, loc_device));
    /* Read remotely over the link: no faults, no migration, no device footprint. */
    uint64_t t = timed_hash(m, NULL);
    CHK_NEAR(t, 1000, 2);
    CHK_EQ(device_hash(m, MANAGED_BYTES, NULL), host_hash(m));
    CHK_EQ(free_bytes(), before);
    CUdeviceptr d;
    CHK_OK(cuMemAlloc(&d, MiB));
    CHK_CU(CUDA_ERROR_INVALID_VALUE,
           cuMemAdvise_v2(d, MiB, CU_MEM_ADVISE_SET_ACCESSED_BY, loc_device));
    return 0;
}

static int c_managed_advise_v1(void) {
    ctx_up();
    CUdeviceptr m = managed_with_pattern(8);
    CHK_OK(cuMemAdvise(m, MANAGED_BYTES, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, CU_DEVICE_CPU));
    CHK_OK(cuMemAdvise(m, MANAGED_BYTES, CU_MEM_ADVISE_SET_ACCESSED_BY, 0));
    CHK_EQ(device_hash(m, MANAGED_BYTES, NULL), host_hash(m)); /* remote */
    CHK_OK(cuMemAdvise(m, MANAGED_BYTES, CU_MEM_ADVISE_UNSET_ACCESSED_BY, 0));
    CHK_EQ(device_hash(m, MANAGED_BYTES, NULL), host_hash(m)); /* faults: 16 */
    return 0;
}

static int c_managed_accessed_by(void) {
    ctx_up();
    CUdeviceptr m = managed_with_pattern(10);
    /* Accessed-by alone maps the CPU-resident pages for the device: read remotely. */
    CHK_OK(cuMemAdvise_v2(m, MANAGED_BYTES, CU_MEM_ADVISE_SET_ACCESSED_BY, loc_device));
    CHK_EQ(device_hash(m, MANAGED_BYTES, NULL), host_hash(m));
    /* With the device as preferred home, its access migrates the pages (16 faults). */
    CHK_OK(cuMemAdvise_v2(m, MANAGED_BYTES, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, loc_device));
    CHK_EQ(device_hash(m, MANAGED_BYTES, NULL), host_hash(m));
    /* Preference dropped, pages back on the CPU: remote again. */
    CHK_OK(cuMemAdvise_v2(m, MANAGED_BYTES, CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, loc_device));
    CHK_OK(cuMemPrefetchAsync_v2(m, MANAGED_BYTES, loc_host, 0, NULL));
    CHK_EQ(device_hash(m, MANAGED_BYTES, NULL), host_hash(m));
    return 0;
}

static int c_managed_advise_prefetched(void) {
    ctx_up();
    CUdeviceptr m = managed_with_pattern(9);
    CHK_OK(cuMemAdvise_v2(m, MANAGED_BYTES, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, loc_host));
    CHK_OK(cuMemAdvise_v2(m, MANAGED_BYTES, CU_MEM_ADVISE_SET_ACCESSED_BY, loc_device));
    /* An explicit prefetch migrates whatever the preference; the device then reads locally. */
    CHK_OK(cuMemPrefetchAsync_v2(m, MANAGED_BYTES, loc_device, 0, NULL));
    CHK_EQ(device_hash(m, MANAGED_BYTES, NULL), host_hash(m));
    return 0;
}

static void test_managed(void **state) {
    (void)state;
    run_child("managed_once", c_managed_faults_once, NULL);
    assert_int_equal(report("managed_once", "managed_faults"), MANAGED_PAGES);
    assert_int_equal(report("managed_once", "remote_accesses"), 0);
    assert_int_equal(report("managed_once", "peak_device_bytes"), MANAGED_BYTES);

    run_child("managed_prefetch_v2", c_managed_prefetch_v2, NULL);
    assert_int_equal(report("managed_prefetch_v2", "managed_faults"), MANAGED_PAGES);

    run_child("managed_prefetch_v1", c_managed_prefetch_v1, NULL);
    assert_int_equal(report("managed_prefetch_v1", "managed_faults"), MANAGED_PAGES * 3 / 2);

    run_child("managed_advise_v2", c_managed_advise_v2, NULL);
    assert_int_equal(report("managed_advise_v2", "managed_faults"), 0);
    assert_int_equal(report("managed_advise_v2", "remote_accesses"), 2);

    run_child("managed_advise_v1", c_managed_advise_v1, NULL);
    assert_int_equal(report("managed_advise_v1", "managed_faults"), MANAGED_PAGES);
    assert_int_equal(report("managed_advise_v1", "remote_accesses"), 1);

    run_child("managed_accessed_by", c_managed_accessed_by, NULL);
    assert_int_equal(report("managed_accessed_by", "managed_faults"), MANAGED_PAGES);
    assert_int_equal(report("managed_accessed_by", "remote_accesses"), 2);

    run_child("managed_advise_prefetched", c_managed_advise_prefetched, NULL);
    assert_int_equal(report("managed_advise_prefetched", "managed_faults"), 0);
    assert_int_equal(report("managed_advise_prefetched", "remote_accesses"), 0);
}

int main(void) {
    if (!suite_init("memory")) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_free),
        cmocka_unit_test(test_alloc_pitch),
        cmocka_unit_test(test_get_info_and_peak),
        cmocka_unit_test(test_capacity),
        cmocka_unit_test(test_malformed_device_mem),
        cmocka_unit_test(test_size_suffixes),
        cmocka_unit_test(test_host_alloc),
        cmocka_unit_test(test_host_register),
        cmocka_unit_test(test_pointer_attributes),
        cmocka_unit_test(test_freed_pointer_is_illegal),
        cmocka_unit_test(test_free_async_hazard),
        cmocka_unit_test(test_pools),
        cmocka_unit_test(test_managed),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    remove_reports();
    return rc;
}
