/* The simulator's cost model against its contract (issue 13, docs/simcuda.md "Costs" and "Cost
 * file"): each driver call charges the host clock its own published cost, fixed plus per MiB,
 * by where the memory it acts on lives; SIMCUDA_COSTS replaces rows exactly and refuses malformed
 * files on one line naming the file and the line; kernels pay host-located operands over the link
 * at the zero-copy rate, sharing it with copies; host-located VMM memory answers for its own
 * granularity; the same calls give the same timeline.
 *
 * Every test runs in a forked child that has not initialised the simulator (simchild.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "simchild.h"

/* The documented defaults (docs/simcuda.md, "Costs"), in ns: fixed, per MiB. */
struct figure {
    double fixed, per_mib;
};
static const struct figure CREATE_DEV = {30000, 0}, CREATE_HOST = {100000, 115000};
static const struct figure MAP_DEV = {2000, 0}, MAP_HOST = {6000, 0};
static const struct figure ACCESS_DEV = {40000, 0}, ACCESS_HOST = {98000, 9000};
static const struct figure UNMAP_DEV = {30000, 0}, UNMAP_HOST = {57000, 1200};
static const struct figure RELEASE_DEV = {23000, 0}, RELEASE_HOST = {0, 23000};
static const struct figure HOST_ALLOC = {100000, 115000}, FREE_HOST = {0, 23000};
static const struct figure DEFAULT_CALL = {2500, 0};
#define ZEROCOPY_GBPS 35.0

static uint64_t cost(struct figure f, uint64_t bytes) {
    return (uint64_t)llround(f.fixed + f.per_mib * (double)bytes / (double)MiB);
}

/* What one call cost the host clock: CHARGED(cuMemMap(...)). The call must succeed. */
static uint64_t g_t0;

static uint64_t charged(CUresult rc, const char *what, int line) {
    if (rc != CUDA_SUCCESS) {
        fprintf(stderr, "%s:%d: %s returned %d\n", __FILE__, line, what, (int)rc);
        _exit(1);
    }
    return simcuda_now_ns() - g_t0;
}
#define CHARGED(call) (g_t0 = simcuda_now_ns(), charged((call), #call, __LINE__))

static CUmemAllocationProp prop_at(CUmemLocationType type) {
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = type;
    p.location.id = 0;
    return p;
}

static CUmemAccessDesc rw_device(void) {
    CUmemAccessDesc d;
    memset(&d, 0, sizeof d);
    d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    d.location.id = 0;
    d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return d;
}

/* One VMM round trip (create, map, set access, unmap, release) of `bytes` at `type`; each call's
 * charge against the figures given. */
static void vmm_round(CUmemLocationType type, uint64_t bytes, struct figure create,
                      struct figure map, struct figure access, struct figure unmap,
                      struct figure release) {
    CUdeviceptr va;
    CHK_OK(cuMemAddressReserve(&va, bytes, 0, 0, 0));
    CUmemAllocationProp p = prop_at(type);
    CUmemGenericAllocationHandle h;
    CHK_EQ(CHARGED(cuMemCreate(&h, bytes, &p, 0)), cost(create, bytes));
    CHK_EQ(CHARGED(cuMemMap(va, bytes, 0, h, 0)), cost(map, bytes));
    CUmemAccessDesc d = rw_device();
    CHK_EQ(CHARGED(cuMemSetAccess(va, bytes, &d, 1)), cost(access, bytes));
    CHK_EQ(CHARGED(cuMemUnmap(va, bytes)), cost(unmap, bytes));
    CHK_EQ(CHARGED(cuMemRelease(h)), cost(release, bytes));
    CHK_OK(cuMemAddressFree(va, bytes));
}

/* ------------------------------------------------------------------ the defaults */

static int c_defaults(void) {
    ctx_up();
    vmm_round(CU_MEM_LOCATION_TYPE_DEVICE, 4 * MiB, CREATE_DEV, MAP_DEV, ACCESS_DEV, UNMAP_DEV,
              RELEASE_DEV);
    vmm_round(CU_MEM_LOCATION_TYPE_HOST, 4 * MiB, CREATE_HOST, MAP_HOST, ACCESS_HOST, UNMAP_HOST,
              RELEASE_HOST);
    vmm_round(CU_MEM_LOCATION_TYPE_HOST_NUMA, 64 * MiB, CREATE_HOST, MAP_HOST, ACCESS_HOST,
              UNMAP_HOST, RELEASE_HOST);
    /* A host-located create of 64 MiB pins for about 7.5 ms, as measured. */
    CHK_EQ(cost(CREATE_HOST, 64 * MiB), 7460000);

    void *pinned;
    CHK_EQ(CHARGED(cuMemHostAlloc(&pinned, 3 * MiB, 0)), cost(HOST_ALLOC, 3 * MiB));
    CHK_EQ(CHARGED(cuMemFreeHost(pinned)), cost(FREE_HOST, 3 * MiB));
    CHK_EQ(CHARGED(cuMemAllocHost(&pinned, MiB)), cost(HOST_ALLOC, MiB));
    CHK_EQ(CHARGED(cuMemFreeHost(pinned)), cost(FREE_HOST, MiB));

    /* Everything else: the default row, SIMCUDA_LAUNCH_NS. */
    CUdeviceptr d;
    CHK_EQ(CHARGED(cuMemAlloc(&d, MiB)), cost(DEFAULT_CALL, 0));
    CHK_EQ(CHARGED(cuMemFree(d)), cost(DEFAULT_CALL, 0));
    CUstream s;
    CHK_EQ(CHARGED(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)), cost(DEFAULT_CALL, 0));
    uint64_t ns = 5;
    void *args[] = {&ns};
    CUfunction f = kfn("nobody_wait");
    CHK_EQ(CHARGED(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL)), cost(DEFAULT_CALL, 0));
    return 0;
}

/* SIMCUDA_LAUNCH_NS still sets the default row, and only it. */
static int c_launch_ns(void) {
    ctx_up();
    CUdeviceptr d;
    CHK_EQ(CHARGED(cuMemAlloc(&d, MiB)), 700);
    vmm_round(CU_MEM_LOCATION_TYPE_DEVICE, 2 * MiB, CREATE_DEV, MAP_DEV, ACCESS_DEV, UNMAP_DEV,
              RELEASE_DEV);
    return 0;
}

static void test_defaults(void **state) {
    (void)state;
    run_child("defaults", c_defaults, NULL);
    const char *env[] = {"SIMCUDA_LAUNCH_NS=700", NULL};
    run_child("launch_ns", c_launch_ns, env);
}

/* ------------------------------------------------------------------ the cost file */

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static char g_costs_env[600];

static const char override_file[] = "# measured on nothing: the cost-file test\n"
                                    "call.default 1000   # every call without a row\n"
                                    "\n"
                                    "call.cuMemMap.host 7777 100\n"
                                    "call.cuLaunchKernel 500\n"
                                    "call.cuMemCreate.device 12345 10\n"
                                    "call.cuMemRelease 4000 0.5\n";

static int c_override(void) {
    ctx_up();
    const struct figure def = {1000, 0};
    CUdeviceptr d;
    CHK_EQ(CHARGED(cuMemAlloc(&d, MiB)), cost(def, 0));
    const struct figure create = {12345, 10}, map_host = {7777, 100}, release = {4000, 0.5};
    /* Rows the file names change exactly; their other location and other rows keep their
     * defaults. */
    vmm_round(CU_MEM_LOCATION_TYPE_DEVICE, 4 * MiB, create, MAP_DEV, ACCESS_DEV, UNMAP_DEV,
              release);
    vmm_round(CU_MEM_LOCATION_TYPE_HOST, 4 * MiB, CREATE_HOST, map_host, ACCESS_HOST, UNMAP_HOST,
              release);
    CUstream s;
    CHK_EQ(CHARGED(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)), cost(def, 0));
    uint64_t ns = 5;
    void *args[] = {&ns};
    CUfunction f = kfn("nobody_wait");
    CHK_EQ(CHARGED(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL)), 500);
    return 0;
}

/* An explicitly set SIMCUDA_LAUNCH_NS wins over the file's default row. */
static int c_override_env(void) {
    ctx_up();
    CUdeviceptr d;
    CHK_EQ(CHARGED(cuMemAlloc(&d, MiB)), 700);
    return 0;
}

/* A figure of the report's `group` object ("cost_fixed_ns", "cost_per_mib_ns"), whose keys
 * are also the "calls" object's: looked up after the group's name. */
static long long report_cost(const char *name, const char *group, const char *key) {
    char path[512], buf[16384], pat[128];
    report_path(path, sizeof path, name);
    FILE *f = fopen(path, "r");
    if (f == NULL) fail_msg("no report %s", path);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    snprintf(pat, sizeof pat, "\"%s\":", group);
    const char *g = strstr(buf, pat);
    if (g == NULL) fail_msg("report %s has no %s", path, group);
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(g, pat);
    if (p == NULL) fail_msg("report %s has no %s in %s", path, key, group);
    return strtoll(p + strlen(pat), NULL, 10);
}

static void test_cost_file(void **state) {
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/override.txt", report_dir);
    write_file(path, override_file);
    snprintf(g_costs_env, sizeof g_costs_env, "SIMCUDA_COSTS=%s", path);
    const char *env[] = {g_costs_env, NULL};
    run_child("override", c_override, env);
    /* The report gives the figures in force, each row and location resolved: the file's rows,
     * the file's default for rows without figures of their own, the built-in rest. */
    assert_int_equal(report_cost("override", "cost_fixed_ns", "cuMemMap.host"), 7777);
    assert_int_equal(report_cost("override", "cost_per_mib_ns", "cuMemMap.host"), 100);
    assert_int_equal(report_cost("override", "cost_fixed_ns", "cuMemMap.device"), 2000);
    assert_int_equal(report_cost("override", "cost_fixed_ns", "cuLaunchKernel.device"), 500);
    assert_int_equal(report_cost("override", "cost_fixed_ns", "cuMemAllocAsync.device"), 1000);
    assert_int_equal(report_cost("override", "cost_fixed_ns", "cuMemSetAccess.host"), 98000);
    assert_int_equal(report_cost("override", "cost_per_mib_ns", "cuMemSetAccess.host"), 9000);
    assert_int_equal(report_cost("override", "cost_per_mib_ns", "cuMemUnmap.host"), 1200);
    const char *env2[] = {g_costs_env, "SIMCUDA_LAUNCH_NS=700", NULL};
    run_child("override_env", c_override_env, env2);
}

struct stderr_child {
    int fd;
};

static int child_refused(void *arg) {
    struct stderr_child *c = arg;
    dup2(c->fd, STDERR_FILENO);
    close(c->fd);
    if (cuInit(0) != CUDA_ERROR_INVALID_VALUE) return 10;
    int count = 0;
    if (cuDeviceGetCount(&count) == CUDA_SUCCESS) return 11;
    return 0;
}

/* Runs cuInit on a cost file holding `text`; checks it is refused with one line on stderr that
 * names the file and, when line > 0, "line <line>". */
static void expect_refused(const char *text, int line) {
    char path[512], env[600], want[64], err[4096];
    snprintf(path, sizeof path, "%s/bad.txt", report_dir);
    if (text != NULL)
        write_file(path, text);
    else
        unlink(path);
    snprintf(env, sizeof env, "SIMCUDA_COSTS=%s", path);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    struct stderr_child c = {fds[1]};
    const char *envs[] = {env, NULL};
    int status = simtest_run_child(child_refused, &c, envs);
    close(fds[1]);
    size_t n = 0;
    ssize_t got;
    while (n + 1 < sizeof err && (got = read(fds[0], err + n, sizeof err - 1 - n)) > 0)
        n += (size_t)got;
    err[n] = '\0';
    close(fds[0]);
    if (status != 0) fail_msg("\"%s\": cuInit did not fail cleanly (status %d)", text, status);
    if (strstr(err, path) == NULL) fail_msg("\"%s\": stderr does not name the file: %s", text, err);
    snprintf(want, sizeof want, "line %d:", line);
    if (line > 0 && strstr(err, want) == NULL)
        fail_msg("\"%s\": stderr does not name %s: %s", text, want, err);
    const char *nl = strchr(err, '\n');
    if (nl == NULL || nl[1] != '\0') fail_msg("\"%s\": expected one line, got \"%s\"", text, err);
}

static void test_malformed_files(void **state) {
    (void)state;
    static const struct {
        const char *text;
        int line;
    } cases[] = {
        {"call.cuMemFoo 1\n", 1},                        /* unknown entry */
        {"# fine\ncall.cuMemMap 1\nlink.h2d fast\n", 3}, /* malformed number */
        {"call.cuMemMap\n", 1},                          /* missing field */
        {"link.d2h\n", 1},
        {"call.cuMemMap.gpu 1\n", 1}, /* unknown location */
        {"link.h2d 0\n", 1},          /* a rate must be positive */
        {"link.h2d 10 20\n", 1},
        {"call.cuMemMap -5\n", 1},
        {"call.cuMemMap 1 2 3\n", 1},
        {"call.cuMemMap nan\n", 1},
        {"call.cuMemMap inf\n", 1},
        {"call.cuMemMap 0x10\n", 1},
        {"call.cuMemMap 1e999\n", 1},
        {"link.pcie 5\n", 1},
        {"cuMemMap 5\n", 1},
        {"\n\n\ncall.cuMemCreate.host 100000 115000 # fine\ncall.cuMemcreate 1\n", 5},
        {NULL, 0}, /* no such file */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_refused(cases[i].text, cases[i].line);
}

/* The committed GH200 NVLink-C2C rows load and set the link. */
static int c_c2c(void) {
    ctx_up();
    CUdeviceptr d;
    void *pinned;
    const uint64_t bytes = 345000000; /* 1 ms at 345 GB/s */
    CHK_OK(cuMemAlloc(&d, bytes));
    CHK_OK(cuMemHostAlloc(&pinned, bytes, 0));
    uint64_t t0 = simcuda_now_ns();
    CHK_OK(cuMemcpyHtoD(d, pinned, bytes));
    uint64_t took = simcuda_now_ns() - t0;
    CHK(took >= 1000000 && took < 1000000 + 20000);
    t0 = simcuda_now_ns();
    CHK_OK(cuMemcpyDtoH(pinned, d, 300000000)); /* 1 ms at 300 GB/s */
    took = simcuda_now_ns() - t0;
    CHK(took >= 1000000 && took < 1000000 + 20000);
    return 0;
}

static void test_c2c_file(void **state) {
    (void)state;
    const char *dir = getenv("SIMCUDA_SOURCE_DIR");
    if (dir == NULL) skip();
    static char env[600];
    snprintf(env, sizeof env, "SIMCUDA_COSTS=%s/costs-gh200-c2c.txt", dir);
    const char *envs[] = {env, "SIMCUDA_DATA=sparse", NULL};
    run_child("c2c", c_c2c, envs);
}

/* Each direction's rate while both run: a copy each way released at the same instant; the one
 * issued second is timed at its direction's duplex rate for the overlap (copy.c), sized to take
 * 1 ms at SIMCUDA_H2D_DUPLEX_GBPS / SIMCUDA_D2H_DUPLEX_GBPS (20 and 40 here: not the 35:53 split
 * of SIMCUDA_DUPLEX_GBPS, which they win over, nor 55 alone). */
/* A fresh host-located handle of `bytes`, mapped read-write for the device at a new
 * reservation (*h: the handle, for the caller to unmap and release). */
static CUdeviceptr host_mapped(uint64_t bytes, CUmemGenericAllocationHandle *h) {
    CUdeviceptr va;
    CHK_OK(cuMemAddressReserve(&va, bytes, 0, 0, 0));
    CUmemAllocationProp p = prop_at(CU_MEM_LOCATION_TYPE_HOST);
    CHK_OK(cuMemCreate(h, bytes, &p, 0));
    CHK_OK(cuMemMap(va, bytes, 0, *h, 0));
    CUmemAccessDesc d = rw_device();
    CHK_OK(cuMemSetAccess(va, bytes, &d, 1));
    return va;
}

/* Two streams released at one instant: both wait for event g, recorded on a gate stream after
 * 100 us of work, so what the caller queues on them starts together; e is the caller's. */
struct gated {
    CUstream s1, s2;
    CUevent g, e;
};

static struct gated gated_pair(void) {
    struct gated p;
    CUstream gate;
    CHK_OK(cuStreamCreate(&gate, CU_STREAM_NON_BLOCKING));
    CHK_OK(cuStreamCreate(&p.s1, CU_STREAM_NON_BLOCKING));
    CHK_OK(cuStreamCreate(&p.s2, CU_STREAM_NON_BLOCKING));
    CHK_OK(cuEventCreate(&p.g, 0));
    CHK_OK(cuEventCreate(&p.e, 0));
    wait_for(100000, gate);
    CHK_OK(cuEventRecord(p.g, gate));
    CHK_OK(cuStreamWaitEvent(p.s1, p.g, 0));
    CHK_OK(cuStreamWaitEvent(p.s2, p.g, 0));
    return p;
}

static uint64_t second_of_pair(bool up_second) {
    const uint64_t up = 20000000, down = 40000000; /* 1 ms at 20 and at 40 GB/s */
    CUdeviceptr d;
    void *pinned;
    CHK_OK(cuMemAlloc(&d, up + down));
    CHK_OK(cuMemHostAlloc(&pinned, up + down, 0));
    struct gated gp = gated_pair();
    CUstream s1 = gp.s1, s2 = gp.s2;
    CUevent g = gp.g, e = gp.e;
    if (up_second) {
        CHK_OK(cuMemcpyDtoHAsync((char *)pinned + up, d + up, down, s1));
        CHK_OK(cuMemcpyHtoDAsync(d, pinned, up, s2));
    } else {
        CHK_OK(cuMemcpyHtoDAsync(d, pinned, up, s1));
        CHK_OK(cuMemcpyDtoHAsync((char *)pinned + up, d + up, down, s2));
    }
    CHK_OK(cuEventRecord(e, s2));
    CHK_OK(cuCtxSynchronize());
    float ms = 0;
    CHK_OK(cuEventElapsedTime(&ms, g, e));
    CHK_OK(cuMemFree(d));
    CHK_OK(cuMemFreeHost(pinned));
    return (uint64_t)((double)ms * 1e6 + 0.5);
}

static int c_duplex_env(void) {
    ctx_up();
    CHK_NEAR(second_of_pair(false), 1000000, 2000); /* device-to-host at 40 */
    CHK_NEAR(second_of_pair(true), 1000000, 2000);  /* host-to-device at 20 */
    return 0;
}

static void test_duplex_variables(void **state) {
    (void)state;
    const char *envs[] = {"SIMCUDA_DUPLEX_GBPS=88", "SIMCUDA_H2D_DUPLEX_GBPS=20",
                          "SIMCUDA_D2H_DUPLEX_GBPS=40", "SIMCUDA_DATA=sparse", NULL};
    run_child("duplex_env", c_duplex_env, envs);
}

/* ------------------------------------------------------------------ zero-copy kernels */

static uint64_t zc_ns(uint64_t bytes, double gbps) {
    return (uint64_t)ceil((double)bytes / gbps);
}

/* A kernel's duration between events on its stream, behind a wait so the host clock is out of
 * the picture. */
static CUfunction g_two_use;

static uint64_t kernel_ns(CUdeviceptr a, CUdeviceptr b, uint64_t ns) {
    CUstream s;
    CUevent e0, e1;
    CHK_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHK_OK(cuEventCreate(&e0, 0));
    CHK_OK(cuEventCreate(&e1, 0));
    wait_for(100000, s);
    CHK_OK(cuEventRecord(e0, s));
    void *args[] = {&a, &b, &ns};
    CHK_OK(cuLaunchKernel(g_two_use, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    CHK_OK(cuEventRecord(e1, s));
    CHK_OK(cuEventSynchronize(e1));
    float ms = 0;
    CHK_OK(cuEventElapsedTime(&ms, e0, e1));
    CHK_OK(cuStreamDestroy(s));
    return (uint64_t)((double)ms * 1e6 + 0.5);
}

static int c_zerocopy(void) {
    ctx_up();
    CUmodule mod;
    CHK_OK(cuModuleLoadData(&mod, "simcuda-module 1\nkernel two_use ptr ptr u64 ns=param:2\n"));
    CHK_OK(cuModuleGetFunction(&g_two_use, mod, "two_use"));
    const uint64_t bytes = 4 * MiB;
    CUmemGenericAllocationHandle h;
    CUdeviceptr va = host_mapped(bytes, &h);
    void *pinned;
    CHK_OK(cuMemHostAlloc(&pinned, MiB, 0));
    CUdeviceptr dev;
    CHK_OK(cuMemAlloc(&dev, bytes));

    /* Device memory only: the kernel's own duration. */
    CHK_NEAR(kernel_ns(dev, dev, 1000), 1000, 1);
    /* A host-located mapping: its extent crosses the link once per launch, however many
     * pointers fall in it; a short kernel waits for its bytes. */
    CHK_NEAR(kernel_ns(va, va + MiB, 1000), zc_ns(bytes, ZEROCOPY_GBPS), 1);
    /* Pinned host memory too, plus the mapping: both extents. */
    CHK_NEAR(kernel_ns(va, (CUdeviceptr)(uintptr_t)pinned, 1000), zc_ns(bytes + MiB, ZEROCOPY_GBPS),
             1);
    /* A long kernel hides its traffic. */
    CHK_NEAR(kernel_ns(va, dev, 10000000), 10000000, 1);

    /* It shares the host-to-device direction with copies: behind a copy released at the same
     * instant, its bytes move after the copy's. */
    struct gated gp = gated_pair();
    CUstream s1 = gp.s1, s2 = gp.s2;
    CUevent g = gp.g, e = gp.e;
    CHK_OK(cuMemcpyHtoDAsync(dev, pinned, MiB, s1));
    uint64_t ns = 1000;
    void *args[] = {&va, &va, &ns};
    CHK_OK(cuLaunchKernel(g_two_use, 1, 1, 1, 1, 1, 1, 0, s2, args, NULL));
    CHK_OK(cuEventRecord(e, s2));
    CHK_OK(cuEventSynchronize(e));
    float ms = 0;
    CHK_OK(cuEventElapsedTime(&ms, g, e));
    CHK_NEAR((uint64_t)((double)ms * 1e6 + 0.5), zc_ns(MiB, 55) + zc_ns(bytes, ZEROCOPY_GBPS), 2);
    return 0;
}

void two_use(void **params) {
    (void)params;
}

static void test_zerocopy(void **state) {
    (void)state;
    run_child("zerocopy", c_zerocopy, NULL);
    assert_int_equal(report("zerocopy", "bytes_zerocopy"), (4 + 5 + 4 + 4) * MiB);
    assert_int_equal(report("zerocopy", "remote_accesses"), 4);
}

/* ------------------------------------------------------------------ granularity */

static int c_granularity(void) {
    ctx_up();
    const CUmemLocationType types[] = {CU_MEM_LOCATION_TYPE_DEVICE, CU_MEM_LOCATION_TYPE_HOST,
                                       CU_MEM_LOCATION_TYPE_HOST_NUMA};
    for (int i = 0; i < 3; i++) {
        CUmemAllocationProp p = prop_at(types[i]);
        size_t g = 0;
        CHK_OK(cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
        CHK_EQ(g, 2 * MiB);
        CHK_OK(cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
        CHK_EQ(g, 2 * MiB);
        CHK_CU(CUDA_ERROR_INVALID_VALUE,
               cuMemGetAllocationGranularity(&g, &p, (CUmemAllocationGranularity_flags)7));
        /* A size that is not a multiple of it is refused. */
        CUmemGenericAllocationHandle h;
        CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemCreate(&h, 3 * MiB, &p, 0));
    }
    CUmemAllocationProp bad = prop_at(CU_MEM_LOCATION_TYPE_INVALID);
    size_t g = 0;
    CHK_CU(CUDA_ERROR_INVALID_VALUE,
           cuMemGetAllocationGranularity(&g, &bad, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    return 0;
}

static void test_granularity(void **state) {
    (void)state;
    run_child("granularity", c_granularity, NULL);
}

/* ------------------------------------------------------------------ determinism */

/* Moves a buffer out and back as an offloading library would, with copies both ways at once;
 * the timeline must be the same in every run. */
static int c_timeline(void) {
    ctx_up();
    const uint64_t bytes = 8 * MiB;
    CUstream s1, s2;
    CHK_OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CHK_OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CUdeviceptr a, b;
    CHK_OK(cuMemAlloc(&a, bytes));
    CHK_OK(cuMemAlloc(&b, bytes));
    for (int step = 0; step < 4; step++) {
        CUmemGenericAllocationHandle h;
        CUdeviceptr va = host_mapped(bytes, &h);
        CHK_OK(cuMemcpyDtoDAsync(va, a, bytes, s1)); /* out: device to host */
        CHK_OK(cuMemcpyDtoDAsync(b, va, bytes, s2)); /* in: host to device */
        use_for(va, 3000, s2);
        CHK_OK(cuCtxSynchronize());
        CHK_OK(cuMemUnmap(va, bytes));
        CHK_OK(cuMemRelease(h));
        CHK_OK(cuMemAddressFree(va, bytes));
    }
    return 0;
}

static void test_determinism(void **state) {
    (void)state;
    run_child("timeline_a", c_timeline, NULL);
    run_child("timeline_b", c_timeline, NULL);
    long long a = report("timeline_a", "virtual_ns"), b = report("timeline_b", "virtual_ns");
    assert_int_equal(a, b);
    /* Four host-located round trips of 8 MiB cost at least their creates. */
    assert_true(a > 4 * (long long)cost(CREATE_HOST, 8 * MiB));
    assert_int_equal(report("timeline_a", "bytes_zerocopy"), 4 * 8 * MiB);
    /* The report counts the calls by row and location. */
    assert_int_equal(report("timeline_a", "cuMemCreate.host"), 4);
    assert_int_equal(report("timeline_a", "cuMemMap.host"), 4);
    assert_int_equal(report("timeline_a", "cuMemSetAccess.host"), 4);
    assert_int_equal(report("timeline_a", "cuMemUnmap.host"), 4);
    assert_int_equal(report("timeline_a", "cuMemRelease.host"), 4);
    assert_int_equal(report("timeline_a", "cuMemAlloc.device"), 2);
    assert_int_equal(report("timeline_a", "cuMemcpyAsync.device"), 8);
}

int main(void) {
    if (!suite_init("costs")) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),        cmocka_unit_test(test_cost_file),
        cmocka_unit_test(test_malformed_files), cmocka_unit_test(test_c2c_file),
        cmocka_unit_test(test_zerocopy),        cmocka_unit_test(test_granularity),
        cmocka_unit_test(test_determinism),     cmocka_unit_test(test_duplex_variables),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    remove_reports();
    return rc;
}
