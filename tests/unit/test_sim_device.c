/* simcuda: initialisation, devices and their attributes, configuration errors, primary and
 * created contexts, and CUDA after fork.
 *
 * Every test runs in a forked child of a parent that never calls cuInit: the simulator reads
 * SIMCUDA_* once per process, and a child of an initialised parent could not use CUDA at all. */
#include <errno.h>
#include <signal.h>

#include "simtest.h"

#define GIB (1024ull * 1024 * 1024)

static const char *const no_env[] = {NULL};

static void run_in_child(int (*fn)(void *), void *arg, const char *const *env) {
    int status = simtest_run_child(fn, arg, env);
    if (status != 0) fail_msg("child exited with status %d", status);
}

/* A kernel body used to prove a context really works: fills n u32 with a value. */
void simtest_dev_fill(void **params) {
    uint32_t *p = *(uint32_t **)params[0];
    uint32_t v = *(uint32_t *)params[1];
    uint64_t n = *(uint64_t *)params[2];
    for (uint64_t i = 0; i < n; i++)
        p[i] = v;
}

static const char fill_image[] = "simcuda-module 1\nkernel simtest_dev_fill ptr u32 u64\n";

/* Allocates, fills on the device, copies back and checks: the current context is usable. */
static int use_device(uint32_t value) {
    CUmodule mod;
    CUfunction f;
    CUdeviceptr d;
    uint32_t host[64];
    uint64_t n = 64;
    C_OK(cuModuleLoadData(&mod, fill_image));
    C_OK(cuModuleGetFunction(&f, mod, "simtest_dev_fill"));
    C_OK(cuMemAlloc(&d, sizeof host));
    void *args[] = {&d, &value, &n};
    C_OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    C_OK(cuMemcpyDtoH(host, d, sizeof host));
    for (int i = 0; i < 64; i++)
        C_CHECK(host[i] == value);
    C_OK(cuMemFree(d));
    C_OK(cuModuleUnload(mod));
    return 0;
}

/* ------------------------------------------------------------------ init and version */

static int child_init(void *arg) {
    (void)arg;
    int version = 0, count = -1;
    CUdevice dev;
    /* The version is answered before cuInit, as by the real driver. */
    C_OK(cuDriverGetVersion(&version));
    C_CHECK(version == 13000);
    C_EXPECT(CUDA_ERROR_INVALID_VALUE, cuDriverGetVersion(NULL));
    C_EXPECT(CUDA_ERROR_NOT_INITIALIZED, cuDeviceGetCount(&count));
    C_EXPECT(CUDA_ERROR_NOT_INITIALIZED, cuDeviceGet(&dev, 0));
    C_EXPECT(CUDA_ERROR_INVALID_VALUE, cuInit(1));
    C_EXPECT(CUDA_ERROR_INVALID_VALUE, cuInit(0x80000000u));
    C_EXPECT(CUDA_ERROR_NOT_INITIALIZED, cuDeviceGetCount(&count));
    C_OK(cuInit(0));
    C_OK(cuInit(0)); /* idempotent */
    C_OK(cuDeviceGetCount(&count));
    C_CHECK(count == 1);
    C_EXPECT(CUDA_ERROR_INVALID_VALUE, cuDeviceGetCount(NULL));
    return 0;
}

static void test_init_and_version(void **state) {
    (void)state;
    run_in_child(child_init, NULL, no_env);
}

/* ------------------------------------------------------------------ the default device */

static int attr(CUdevice_attribute a, CUdevice dev) {
    int v = -12345;
    if (cuDeviceGetAttribute(&v, a, dev) != CUDA_SUCCESS) return -12345;
    return v;
}

/* Deprecated since CUDA 5, still exported and still used by old programs. */
static CUresult compute_capability(int *major, int *minor, CUdevice dev) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    return cuDeviceComputeCapability(major, minor, dev);
#pragma GCC diagnostic pop
}

static int child_h200(void *arg) {
    (void)arg;
    CUdevice dev;
    char name[256];
    size_t total = 0;
    int major = -1, minor = -1, v = 0;
    C_OK(cuInit(0));
    C_OK(cuDeviceGet(&dev, 0));
    C_CHECK(dev == 0);
    C_OK(cuDeviceGetName(name, sizeof name, dev));
    C_CHECK(strcmp(name, "NVIDIA H200 (simulated)") == 0);
    /* A short buffer gets a truncated, terminated name. */
    C_OK(cuDeviceGetName(name, 7, dev));
    C_CHECK(strcmp(name, "NVIDIA") == 0);
    C_EXPECT(CUDA_ERROR_INVALID_VALUE, cuDeviceGetName(NULL, 10, dev));
    C_OK(compute_capability(&major, &minor, dev));
    C_CHECK(major == 9 && minor == 0);
    C_CHECK(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) == 9);
    C_CHECK(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) == 0);
    C_CHECK(attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) == 132);
    C_CHECK(attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE, dev) == 32);
    C_CHECK(attr(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, dev) == 1);
    C_CHECK(attr(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) == 1);
    C_CHECK(attr(CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) == 1);
    C_CHECK(attr(CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) == 1);
    C_CHECK(attr(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, dev) == 1);
    C_CHECK(attr(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, dev) == 1);
    C_CHECK(attr(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, dev) == 1);
    C_OK(cuDeviceTotalMem(&total, dev));
    C_CHECK(total == 141 * GIB);
    /* Invalid attributes and devices. */
    C_EXPECT(CUDA_ERROR_INVALID_VALUE, cuDeviceGetAttribute(&v, (CUdevice_attribute)0, dev));
    C_EXPECT(CUDA_ERROR_INVALID_VALUE, cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, dev));
    C_EXPECT(CUDA_ERROR_INVALID_VALUE, cuDeviceGetAttribute(&v, (CUdevice_attribute)-3, dev));
    C_EXPECT(CUDA_ERROR_INVALID_VALUE,
             cuDeviceGetAttribute(NULL, CU_DEVICE_ATTRIBUTE_WARP_SIZE, dev));
    C_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet(&dev, 1));
    C_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet(&dev, -1));
    C_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 1));
    C_EXPECT(CUDA_ERROR_INVALID_DEVICE,
             cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, -1));
    C_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetName(name, sizeof name, 1));
    C_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDeviceTotalMem(&total, 1));
    C_EXPECT(CUDA_ERROR_INVALID_DEVICE, compute_capability(&major, &minor, 7));
    /* cuMemGetInfo reports the same capacity, all of it free. */
    CUcontext ctx;
    size_t free_b = 0, total_b = 0;
    C_OK(cuDevicePrimaryCtxRetain(&ctx, dev));
    C_OK(cuCtxSetCurrent(ctx));
    C_OK(cuMemGetInfo(&free_b, &total_b));
    C_CHECK(total_b == 141 * GIB && free_b == total_b);
    return 0;
}

static void test_h200_attributes(void **state) {
    (void)state;
    run_in_child(child_h200, NULL, no_env);
}

static int child_two_devices(void *arg) {
    (void)arg;
    int count = 0, can = -1;
    size_t total = 0;
    char bus0[32], bus1[32];
    CUdevice dev, found;
    C_OK(cuInit(0));
    C_OK(cuDeviceGetCount(&count));
    C_CHECK(count == 2);
    for (int i = 0; i < 2; i++) {
        char name[64];
        C_OK(cuDeviceGet(&dev, i));
        C_CHECK(dev == i);
        C_OK(cuDeviceGetName(name, sizeof name, dev));
        C_CHECK(strcmp(name, "NVIDIA H200 (simulated)") == 0);
        C_OK(cuDeviceTotalMem(&total, dev));
        C_CHECK(total == 80 * GIB);
        C_CHECK(attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) == 132);
    }
    C_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet(&dev, 2));
    C_OK(cuDeviceGetPCIBusId(bus0, sizeof bus0, 0));
    C_OK(cuDeviceGetPCIBusId(bus1, sizeof bus1, 1));
    C_CHECK(strcmp(bus0, bus1) != 0);
    C_OK(cuDeviceGetByPCIBusId(&found, bus1));
    C_CHECK(found == 1);
    C_OK(cuDeviceCanAccessPeer(&can, 0, 1));
    C_CHECK(can == 1);
    C_OK(cuDeviceCanAccessPeer(&can, 0, 0));
    C_CHECK(can == 0);
    /* Each device's memory is its own: its primary context sees its own capacity. */
    CUcontext ctx;
    CUdeviceptr d;
    size_t free0 = 0, free1 = 0;
    C_OK(cuDevicePrimaryCtxRetain(&ctx, 1));
    C_OK(cuCtxSetCurrent(ctx));
    C_OK(cuMemAlloc(&d, 1 << 20));
    C_OK(cuMemGetInfo(&free1, &total));
    C_CHECK(total == 80 * GIB && free1 == 80 * GIB - (1 << 20));
    C_OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    C_OK(cuCtxSetCurrent(ctx));
    C_OK(cuMemGetInfo(&free0, &total));
    C_CHECK(free0 == 80 * GIB);
    return 0;
}

static void test_two_devices(void **state) {
    (void)state;
    static const char *const env[] = {"SIMCUDA_DEVICES=2", "SIMCUDA_DEVICE_MEM=80G", NULL};
    run_in_child(child_two_devices, NULL, env);
}

static int child_size_suffixes(void *arg) {
    const uint64_t *want = arg;
    size_t total = 0;
    C_OK(cuInit(0));
    C_OK(cuDeviceTotalMem(&total, 0));
    C_CHECK(total == *want);
    return 0;
}

/* Sizes accept K, M, G, T suffixes in powers of 1024. */
static void test_size_suffixes(void **state) {
    (void)state;
    static const struct {
        const char *env;
        uint64_t bytes;
    } cases[] = {
        {"SIMCUDA_DEVICE_MEM=4096", 4096},     {"SIMCUDA_DEVICE_MEM=64K", 64ull << 10},
        {"SIMCUDA_DEVICE_MEM=3M", 3ull << 20}, {"SIMCUDA_DEVICE_MEM=2G", 2 * GIB},
        {"SIMCUDA_DEVICE_MEM=1T", 1ull << 40},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *env[] = {cases[i].env, NULL};
        uint64_t want = cases[i].bytes;
        if (simtest_run_child(child_size_suffixes, &want, env) != 0)
            fail_msg("%s was not read as %llu bytes", cases[i].env,
                     (unsigned long long)cases[i].bytes);
    }
}

/* ------------------------------------------------------------------ malformed configuration */

struct stderr_child {
    int fd; /* write end of the pipe the child's stderr goes to */
};

static int child_malformed(void *arg) {
    struct stderr_child *c = arg;
    dup2(c->fd, STDERR_FILENO);
    close(c->fd);
    int count = 0;
    CUresult rc = cuInit(0);
    if (rc != CUDA_ERROR_INVALID_VALUE) return 10;
    /* Nothing works afterwards either: the program stops at cuInit. */
    if (cuDeviceGetCount(&count) == CUDA_SUCCESS) return 11;
    if (cuInit(0) != CUDA_ERROR_INVALID_VALUE) return 12;
    return 0;
}

/* Runs cuInit with one malformed variable; returns what the child wrote on stderr. */
static void expect_malformed(const char *assignment, char *out, size_t cap) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    struct stderr_child c = {fds[1]};
    const char *env[] = {assignment, NULL};
    int status = simtest_run_child(child_malformed, &c, env);
    close(fds[1]);
    size_t n = 0;
    ssize_t got;
    while (n + 1 < cap && (got = read(fds[0], out + n, cap - 1 - n)) > 0)
        n += (size_t)got;
    out[n] = '\0';
    close(fds[0]);
    if (status != 0)
        fail_msg("%s: cuInit did not fail cleanly (child status %d)", assignment, status);
}

static void test_malformed_environment(void **state) {
    (void)state;
    static const char *const cases[] = {
        "SIMCUDA_DEVICE_MEM=lots",
        "SIMCUDA_DEVICE_MEM=0",
        "SIMCUDA_DEVICE_MEM=12Q",
        "SIMCUDA_DEVICE_MEM=-1G",
        "SIMCUDA_DEVICE_MEM= -1G",
        "SIMCUDA_DEVICE_MEM=",
        "SIMCUDA_DEVICE_MEM=99999999999T",
        "SIMCUDA_DEVICES=0",
        "SIMCUDA_DEVICES=17",
        "SIMCUDA_DEVICES=two",
        "SIMCUDA_DEVICES=2x",
        "SIMCUDA_LAUNCH_NS=fast",
        "SIMCUDA_LAUNCH_NS=-1",
        "SIMCUDA_LAUNCH_NS= -1",
        "SIMCUDA_LAUNCH_NS=1.5",
        "SIMCUDA_H2D_GBPS=0",
        "SIMCUDA_H2D_GBPS=-55",
        "SIMCUDA_H2D_GBPS=fast",
        "SIMCUDA_D2H_GBPS=nan",
        "SIMCUDA_D2H_GBPS=inf",
        "SIMCUDA_DUPLEX_GBPS=",
        "SIMCUDA_DUPLEX_GBPS=88x",
        "SIMCUDA_HBM_GBPS=4.3T",
        "SIMCUDA_DATA=dense",
        "SIMCUDA_DATA=",
        "SIMCUDA_FAIL=cuMemAlloc_v2",
        "SIMCUDA_FAIL=cuMemAlloc_v2:0",
        "SIMCUDA_FAIL=cuMemAlloc_v2:x",
        "SIMCUDA_FAIL=cuMemAlloc_v2:-1",
        "SIMCUDA_FAIL=:2",
        "SIMCUDA_FAIL=cuMemAlloc_v2:2:oom",
        "SIMCUDA_FAIL=cuMemAlloc_v2:1,cuMemCreate",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[4096];
        expect_malformed(cases[i], err, sizeof err);
        char name[64];
        size_t len = strcspn(cases[i], "=");
        snprintf(name, sizeof name, "%.*s", (int)len, cases[i]);
        if (strstr(err, name) == NULL)
            fail_msg("%s: stderr does not name the variable: \"%s\"", cases[i], err);
        const char *nl = strchr(err, '\n');
        if (nl == NULL || nl[1] != '\0')
            fail_msg("%s: expected exactly one line on stderr, got \"%s\"", cases[i], err);
    }
}

/* ------------------------------------------------------------------ primary contexts */

static int child_primary(void *arg) {
    (void)arg;
    CUcontext a, b, cur;
    unsigned flags = 99;
    int active = 99;
    C_OK(cuInit(0));
    C_OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    C_CHECK(flags == 0 && active == 0);
    C_EXPECT(CUDA_ERROR_INVALID_VALUE, cuDevicePrimaryCtxGetState(0, NULL, &active));
    C_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDevicePrimaryCtxGetState(1, &flags, &active));
    /* Flags may be set before the context is active... */
    C_OK(cuDevicePrimaryCtxSetFlags(0, CU_CTX_SCHED_BLOCKING_SYNC));
    C_OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    C_CHECK(flags == CU_CTX_SCHED_BLOCKING_SYNC && active == 0);
    /* ...but not to anything the driver does not define. */
    C_EXPECT(CUDA_ERROR_INVALID_VALUE,
             cuDevicePrimaryCtxSetFlags(0, CU_CTX_SCHED_SPIN | CU_CTX_SCHED_YIELD));
    C_EXPECT(CUDA_ERROR_INVALID_VALUE, cuDevicePrimaryCtxSetFlags(0, 0x100));
    C_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDevicePrimaryCtxSetFlags(3, 0));
    C_OK(cuDevicePrimaryCtxRetain(&a, 0));
    C_OK(cuDevicePrimaryCtxRetain(&b, 0));
    C_CHECK(a != NULL && a == b);
    C_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDevicePrimaryCtxRetain(&b, 1));
    C_EXPECT(CUDA_ERROR_INVALID_VALUE, cuDevicePrimaryCtxRetain(NULL, 0));
    C_OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    C_CHECK(active == 1 && flags == CU_CTX_SCHED_BLOCKING_SYNC);
    /* Retaining does not make it current. */
    C_OK(cuCtxGetCurrent(&cur));
    C_CHECK(cur == NULL);
    C_OK(cuCtxSetCurrent(a));
    C_OK(cuCtxGetCurrent(&cur));
    C_CHECK(cur == a);
    C_OK(cuCtxGetFlags(&flags));
    C_CHECK((flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC);
    /* The flags of an active primary context can be changed (the _v2 ABI). */
    C_OK(cuDevicePrimaryCtxSetFlags(0, CU_CTX_SCHED_SPIN));
    C_OK(cuCtxGetFlags(&flags));
    C_CHECK((flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_SPIN);
    if (use_device(7) != 0) return 20;
    C_OK(cuDevicePrimaryCtxRelease(0));
    C_OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    C_CHECK(active == 1);
    C_OK(cuDevicePrimaryCtxRelease(0));
    C_OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    C_CHECK(active == 0);
    C_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuDevicePrimaryCtxRelease(0));
    C_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDevicePrimaryCtxRelease(1));
    /* A primary context is not destroyed with cuCtxDestroy. */
    C_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuCtxDestroy(a));
    return 0;
}

static void test_primary_context(void **state) {
    (void)state;
    run_in_child(child_primary, NULL, no_env);
}

/* ------------------------------------------------------------------ created contexts and the stack
 */

static int child_ctx_stack(void *arg) {
    (void)arg;
    CUcontext primary, created, cur, popped;
    CUdevice dev = -1;
    unsigned long long id_p = 0, id_c = 0, id = 0;
    unsigned flags = 0;
    C_OK(cuInit(0));
    C_OK(cuCtxGetCurrent(&cur));
    C_CHECK(cur == NULL);
    C_EXPECT(CUDA_ERROR_INVALID_VALUE, cuCtxGetCurrent(NULL));
    C_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuCtxPopCurrent(&popped));
    C_OK(cuDevicePrimaryCtxRetain(&primary, 0));

    /* cuCtxCreate makes a new context on the given device and pushes it. */
    C_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuCtxCreate(&created, NULL, 0, 2));
    C_EXPECT(CUDA_ERROR_INVALID_VALUE, cuCtxCreate(NULL, NULL, 0, 1));
    C_EXPECT(CUDA_ERROR_INVALID_VALUE,
             cuCtxCreate(&created, NULL, CU_CTX_SCHED_SPIN | CU_CTX_SCHED_BLOCKING_SYNC, 1));
    C_OK(cuCtxCreate(&created, NULL, CU_CTX_SCHED_YIELD, 1));
    C_CHECK(created != NULL && created != primary);
    C_OK(cuCtxGetCurrent(&cur));
    C_CHECK(cur == created);
    C_OK(cuCtxGetDevice(&dev));
    C_CHECK(dev == 1);
    C_OK(cuCtxGetFlags(&flags));
    C_CHECK((flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_YIELD);
    C_OK(cuCtxGetDevice_v2(&dev, primary)); /* a context that is not current */
    C_CHECK(dev == 0);
    C_OK(cuCtxGetDevice_v2(&dev, NULL)); /* NULL: the current one */
    C_CHECK(dev == 1);
    C_OK(cuCtxGetId(primary, &id_p));
    C_OK(cuCtxGetId(created, &id_c));
    C_CHECK(id_p != id_c);
    C_OK(cuCtxGetId(NULL, &id));
    C_CHECK(id == id_c);
    C_OK(cuCtxGetId(created, &id));
    C_CHECK(id == id_c); /* stable */
    if (use_device(11) != 0) return 20;

    /* Push and pop. */
    C_OK(cuCtxPushCurrent(primary));
    C_OK(cuCtxGetCurrent(&cur));
    C_CHECK(cur == primary);
    C_OK(cuCtxGetDevice(&dev));
    C_CHECK(dev == 0);
    C_OK(cuCtxPopCurrent(&popped));
    C_CHECK(popped == primary);
    C_OK(cuCtxGetCurrent(&cur));
    C_CHECK(cur == created);
    C_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuCtxPushCurrent(NULL));

    /* cuCtxSetCurrent replaces the top; NULL pops it. */
    C_OK(cuCtxSetCurrent(primary));
    C_OK(cuCtxGetCurrent(&cur));
    C_CHECK(cur == primary);
    C_OK(cuCtxSetCurrent(NULL));
    C_OK(cuCtxGetCurrent(&cur));
    C_CHECK(cur == NULL);
    C_OK(cuCtxSetCurrent(NULL)); /* empty stack: a no-op */

    /* Destroying a context pops it from this thread's stack. */
    C_OK(cuCtxPushCurrent(primary));
    C_OK(cuCtxPushCurrent(created));
    C_OK(cuCtxDestroy(created));
    C_OK(cuCtxGetCurrent(&cur));
    C_CHECK(cur == primary);
    C_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuCtxGetId(created, &id));
    C_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuCtxDestroy(created));
    C_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuCtxPushCurrent(created));
    C_OK(cuCtxPopCurrent(NULL));
    C_OK(cuCtxGetCurrent(&cur));
    C_CHECK(cur == NULL);

    /* A destroyed context's queued work completes first: cuCtxDestroy synchronises. */
    CUcontext c2;
    C_OK(cuCtxCreate(&c2, NULL, 0, 0));
    if (use_device(12) != 0) return 21;
    C_OK(cuCtxDestroy(c2));
    return 0;
}

static void test_context_stack(void **state) {
    (void)state;
    static const char *const env[] = {"SIMCUDA_DEVICES=2", NULL};
    run_in_child(child_ctx_stack, NULL, env);
}

static int child_limits(void *arg) {
    (void)arg;
    CUcontext ctx;
    size_t v = 0;
    int least = 99, greatest = 99;
    unsigned version = 0;
    C_OK(cuInit(0));
    C_OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    C_OK(cuCtxSetCurrent(ctx));
    C_OK(cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE));
    C_CHECK(v == 1024);
    C_OK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 4096));
    C_OK(cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE));
    C_CHECK(v == 4096);
    C_OK(cuCtxGetLimit(&v, CU_LIMIT_MALLOC_HEAP_SIZE));
    C_CHECK(v == 8u << 20);
    C_EXPECT(CUDA_ERROR_INVALID_VALUE, cuCtxGetLimit(&v, CU_LIMIT_MAX));
    C_EXPECT(CUDA_ERROR_INVALID_VALUE, cuCtxGetLimit(NULL, CU_LIMIT_STACK_SIZE));
    C_EXPECT(CUDA_ERROR_INVALID_VALUE, cuCtxSetLimit(CU_LIMIT_MAX, 1));
    C_OK(cuCtxGetStreamPriorityRange(&least, &greatest));
    C_CHECK(least == 0 && greatest == -5);
    C_OK(cuCtxGetStreamPriorityRange(NULL, &greatest)); /* either pointer may be NULL */
    C_OK(cuCtxGetApiVersion(ctx, &version));
    C_CHECK(version >= 3020);
    C_OK(cuCtxSynchronize());
    return 0;
}

static void test_limits_and_priorities(void **state) {
    (void)state;
    run_in_child(child_limits, NULL, no_env);
}

void simtest_dev_nop(void **params) {
    (void)params;
}

static int child_no_context(void *arg) {
    (void)arg;
    CUdeviceptr d;
    CUstream s;
    CUevent e;
    CUmodule mod;
    CUlibrary lib;
    CUkernel k;
    CUdevice dev;
    CUcontext ctx;
    size_t v, free_b, total;
    unsigned flags;
    C_OK(cuInit(0));
    C_OK(cuDeviceGet(&dev, 0)); /* device queries need no context */
    /* Libraries are context-independent: loading one works without a context. */
    C_OK(cuLibraryLoadData(&lib, "simcuda-module 1\nkernel simtest_dev_nop\n", NULL, NULL, 0, NULL,
                           NULL, 0));
    C_OK(cuLibraryGetKernel(&k, lib, "simtest_dev_nop"));
    for (int round = 0; round < 2; round++) {
        C_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuMemAlloc(&d, 256));
        C_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuMemGetInfo(&free_b, &total));
        C_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuStreamCreate(&s, 0));
        C_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuEventCreate(&e, 0));
        C_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuCtxSynchronize());
        C_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuCtxGetDevice(&dev));
        C_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuCtxGetFlags(&flags));
        C_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE));
        C_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuModuleLoadData(&mod, fill_image));
        C_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuStreamSynchronize(NULL));
        C_EXPECT(CUDA_ERROR_INVALID_CONTEXT,
                 cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
        /* Making a context current and unbinding it again leaves the thread without one. */
        C_OK(cuDevicePrimaryCtxRetain(&ctx, 0));
        C_OK(cuCtxSetCurrent(ctx));
        C_OK(cuCtxGetDevice(&dev));
        C_OK(cuCtxSetCurrent(NULL));
    }
    C_OK(cuLibraryUnload(lib));
    return 0;
}

static void test_calls_without_context(void **state) {
    (void)state;
    run_in_child(child_no_context, NULL, no_env);
}

/* ------------------------------------------------------------------ fork */

static int grandchild_unusable(void) {
    int count = 0;
    CUdeviceptr d;
    CUcontext ctx;
    /* As on a GPU: the child of a process that initialised CUDA cannot use it. */
    if (cuInit(0) == CUDA_SUCCESS) return 30;
    if (cuDeviceGetCount(&count) == CUDA_SUCCESS) return 31;
    if (cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS) return 32;
    if (cuMemAlloc(&d, 256) == CUDA_SUCCESS) return 33;
    if (cuCtxSynchronize() == CUDA_SUCCESS) return 34;
    return 0;
}

static int wait_child(pid_t pid) {
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int child_fork_after_init(void *arg) {
    (void)arg;
    CUcontext ctx;
    C_OK(cuInit(0));
    C_OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    C_OK(cuCtxSetCurrent(ctx));
    if (use_device(3) != 0) return 20; /* the executor thread exists now */
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) _exit(grandchild_unusable());
    C_CHECK(pid > 0);
    int status = wait_child(pid);
    if (status != 0) {
        fprintf(stderr, "fork child of an initialised process: status %d\n", status);
        return 40;
    }
    /* The parent keeps working. */
    if (use_device(4) != 0) return 21;
    return 0;
}

static void test_fork_after_init(void **state) {
    (void)state;
    run_in_child(child_fork_after_init, NULL, no_env);
}

static int grandchild_usable(void) {
    CUcontext ctx;
    if (cuInit(0) != CUDA_SUCCESS) return 50;
    if (cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS) return 51;
    if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS) return 52;
    return use_device(5) == 0 ? 0 : 53;
}

static int child_fork_before_init(void *arg) {
    (void)arg;
    int version = 0;
    C_OK(cuDriverGetVersion(&version)); /* legal before cuInit; initialises nothing */
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) _exit(grandchild_usable());
    C_CHECK(pid > 0);
    int status = wait_child(pid);
    if (status != 0) {
        fprintf(stderr, "fork child of an uninitialised process: status %d\n", status);
        return 40;
    }
    /* And the parent can still initialise afterwards. */
    CUcontext ctx;
    C_OK(cuInit(0));
    C_OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    C_OK(cuCtxSetCurrent(ctx));
    return use_device(6);
}

static void test_fork_before_init(void **state) {
    (void)state;
    run_in_child(child_fork_before_init, NULL, no_env);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_and_version),      cmocka_unit_test(test_h200_attributes),
        cmocka_unit_test(test_two_devices),           cmocka_unit_test(test_size_suffixes),
        cmocka_unit_test(test_malformed_environment), cmocka_unit_test(test_primary_context),
        cmocka_unit_test(test_context_stack),         cmocka_unit_test(test_limits_and_priorities),
        cmocka_unit_test(test_calls_without_context), cmocka_unit_test(test_fork_after_init),
        cmocka_unit_test(test_fork_before_init),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
