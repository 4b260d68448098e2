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

/* ------------------------------------------------------------------ child-side checks */

#define CHK(cond)                                                                                  \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            _exit(1);                                                                              \
        }                                                                                          \
    } while (0)
#define CHK_CU(want, call)                                                                         \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != (want)) {                                                                        \
            fprintf(stderr, "%s:%d: %s returned %d, expected %d\n", __FILE__, __LINE__, #call,     \
                    (int)r_, (int)(want));                                                         \
            _exit(1);                                                                              \
        }                                                                                          \
    } while (0)
#define CHK_OK(call) CHK_CU(CUDA_SUCCESS, call)
#define CHK_EQ(a, b)                                                                               \
    do {                                                                                           \
        unsigned long long a_ = (unsigned long long)(a), b_ = (unsigned long long)(b);             \
        if (a_ != b_) {                                                                            \
            fprintf(stderr, "%s:%d: %s is %llu (0x%llx), expected %s = %llu (0x%llx)\n", __FILE__, \
                    __LINE__, #a, a_, a_, #b, b_, b_);                                             \
            _exit(1);                                                                              \
        }                                                                                          \
    } while (0)

/* |a - b| <= tol, for virtual times read back through cuEventElapsedTime's float milliseconds. */
#define CHK_NEAR(a, b, tol)                                                                        \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (a_ - b_ > (long long)(tol) || b_ - a_ > (long long)(tol)) {                            \
            fprintf(stderr, "%s:%d: %s is %lld, expected %s = %lld +- %lld\n", __FILE__, __LINE__, \
                    #a, a_, #b, b_, (long long)(tol));                                             \
            _exit(1);                                                                              \
        }                                                                                          \
    } while (0)

/* ------------------------------------------------------------------ running children */

static char report_dir[256];
/* A MAP_SHARED page: children hand values (addresses they were given) back to the parent. */
static volatile uint64_t *g_shared;

struct child_fn {
    int (*fn)(void);
};

static int child_entry(void *arg) {
    int code = ((struct child_fn *)arg)->fn();
    exit(code); /* exit, not _exit: the simulator writes its report from an atexit handler */
}

static void report_path(char *out, size_t n, const char *name) {
    snprintf(out, n, "%s/%s.json", report_dir, name);
}

/* Runs fn in a fresh child with SIMCUDA_REPORT=<dir>/<name>.json plus env (NULL-ended, may be
 * NULL); fails the test unless the child exits 0. */
static void run_child(const char *name, int (*fn)(void), const char *const *env) {
    char path[512], assign[600];
    report_path(path, sizeof path, name);
    unlink(path);
    snprintf(assign, sizeof assign, "SIMCUDA_REPORT=%s", path);
    const char *all[16];
    size_t n = 0;
    all[n++] = assign;
    for (const char *const *e = env; e != NULL && *e != NULL && n < 15; e++)
        all[n++] = *e;
    all[n] = NULL;
    struct child_fn c = {fn};
    int status = simtest_run_child(child_entry, &c, all);
    if (status != 0) fail_msg("child '%s' exited with status %d", name, status);
}

static long long report(const char *name, const char *key) {
    char path[512];
    report_path(path, sizeof path, name);
    long long v = simtest_json_int(path, key);
    if (v < 0) fail_msg("report %s has no key %s", path, key);
    return v;
}

static void remove_reports(void) {
    DIR *d = opendir(report_dir);
    if (d == NULL) return;
    struct dirent *e;
    char path[600];
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", report_dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(report_dir);
}

/* ------------------------------------------------------------------ helpers for children */

/* Each suite uses some of these helpers. */
#define MAYBE_UNUSED __attribute__((unused))

MAYBE_UNUSED static CUcontext ctx_up(void) {
    CUdevice dev;
    CUcontext ctx;
    CHK_OK(cuInit(0));
    CHK_OK(cuDeviceGet(&dev, 0));
    CHK_OK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHK_OK(cuCtxSetCurrent(ctx));
    return ctx;
}

/* Kernels: bodies are the functions below (found by dlsym); nobody_* have no body, only a
 * duration, and their pointer parameter is what hazard detection sees. */
static const char image[] = "simcuda-module 1\n"
                            "kernel mk_fill ptr u32 u64 ns=2000\n"
                            "kernel mk_hash ptr u64\n"
                            "kernel mk_touch ptr\n"
                            "kernel mk_mark\n"
                            "kernel mk_block\n"
                            "kernel nobody_use ptr u64 ns=param:1\n"
                            "kernel nobody_wait u64 ns=param:0\n";

MAYBE_UNUSED static CUfunction kfn(const char *name) {
    static CUmodule mod;
    if (mod == NULL) CHK_OK(cuModuleLoadData(&mod, image));
    CUfunction f;
    CHK_OK(cuModuleGetFunction(&f, mod, name));
    return f;
}

MAYBE_UNUSED static void launch(const char *name, CUstream s, void **args) {
    CHK_OK(cuLaunchKernel(kfn(name), 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
}

MAYBE_UNUSED static uint64_t fnv(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

MAYBE_UNUSED static void pattern(void *p, size_t n, uint32_t seed) {
    unsigned char *b = p;
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        b[i] = (unsigned char)x;
    }
}

static _Atomic uint64_t g_hash;
static atomic_int g_marked, g_go;

void mk_fill(void **params) {
    uint32_t *p, v;
    uint64_t n;
    memcpy(&p, params[0], sizeof p);
    memcpy(&v, params[1], sizeof v);
    memcpy(&n, params[2], sizeof n);
    for (uint64_t i = 0; i < n; i++)
        p[i] = v + (uint32_t)i;
}

void mk_hash(void **params) {
    const void *p;
    uint64_t n;
    memcpy(&p, params[0], sizeof p);
    memcpy(&n, params[1], sizeof n);
    atomic_store(&g_hash, fnv(p, n));
}

void mk_touch(void **params) {
    const volatile unsigned char *p;
    memcpy(&p, params[0], sizeof p);
    (void)p[100];
}

void mk_mark(void **params) {
    (void)params;
    atomic_store(&g_marked, 1);
}

/* Holds the executor (wall clock) until the host says go: makes "queued, not yet run" certain. */
void mk_block(void **params) {
    (void)params;
    while (!atomic_load(&g_go))
        usleep(200);
}

MAYBE_UNUSED static void fill(CUdeviceptr p, uint32_t v, uint64_t words, CUstream s) {
    void *args[] = {&p, &v, &words};
    launch("mk_fill", s, args);
}

MAYBE_UNUSED static uint64_t device_hash(CUdeviceptr p, uint64_t n, CUstream s) {
    void *args[] = {&p, &n};
    launch("mk_hash", s, args);
    CHK_OK(cuStreamSynchronize(s));
    return atomic_load(&g_hash);
}

MAYBE_UNUSED static void use_for(CUdeviceptr p, uint64_t ns, CUstream s) {
    void *args[] = {&p, &ns};
    launch("nobody_use", s, args);
}

MAYBE_UNUSED static void wait_for(uint64_t ns, CUstream s) {
    void *args[] = {&ns};
    launch("nobody_wait", s, args);
}

/* Whether the host may read addr (from /proc/self/maps: PROT_NONE ranges show "---p"). */
MAYBE_UNUSED static bool host_readable(uint64_t addr) {
    FILE *f = fopen("/proc/self/maps", "r");
    CHK(f != NULL);
    char line[512];
    bool readable = false;
    while (fgets(line, sizeof line, f) != NULL) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && addr >= lo && addr < hi) {
            readable = perms[0] == 'r';
            break;
        }
    }
    fclose(f);
    return readable;
}

MAYBE_UNUSED static size_t free_bytes(void) {
    size_t fr, total;
    CHK_OK(cuMemGetInfo(&fr, &total));
    return fr;
}

#define MiB (1ull << 20)
#define GiB (1ull << 30)

/* The parent's setup: a directory for the children's reports and the shared page. */
static bool suite_init(const char *suite) {
    const char *tmp = getenv("TMPDIR");
    snprintf(report_dir, sizeof report_dir, "%s/simtest-%s-XXXXXX",
             tmp != NULL && *tmp != '\0' ? tmp : "/tmp", suite);
    if (mkdtemp(report_dir) == NULL) {
        perror("mkdtemp");
        return false;
    }
    void *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) return false;
    g_shared = shared;
    return true;
}

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
