/* VMM facts of the GPU kit: what the engine relies on, measured through the driver API.
 *
 *   - host-located cuMemCreate: the device attributes, a 2 MiB trial for each location (DEVICE,
 *     HOST, HOST_NUMA) and each location's allocation granularity (minimum / recommended);
 *   - the per-call cost (median wall time) of cuMemCreate, cuMemMap, cuMemSetAccess, cuMemUnmap
 *     and cuMemRelease at 2, 64 and 512 MiB, for device- and host-located handles;
 *   - kernel read bandwidth from device memory, from a host-located VMM mapping (what a kernel
 *     sees when it touches an evicted buffer) and from pinned host memory (cuMemHostAlloc);
 *   - copy bandwidth between pinned host and device memory, H2D and D2H alone and both at once,
 *     and the engine's own copies (device <-> host-located mapping, cuMemcpyDtoDAsync).
 * Bandwidths are timed with CUDA events, after one warm-up. Printed as a table; --json PATH
 * writes the same figures. On the simulator (no --cubin) it is a smoke test: its numbers are
 * the simulator's model (virtual time), not hardware.
 *
 *   vmmfacts [--cubin PATH] [--quick] [--bw-mib N] [--reps N] [--json PATH] */
#include "kit.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
    const char *cubin, *json;
    bool quick;
    uint64_t bw_mib;
    int reps;
} opt = {.bw_mib = 1024, .reps = 5};

static CUdevice dev;
static struct kit_module mod;
static FILE *json;
static bool json_first = true;

static void jnum(const char *key, double v) {
    if (json == NULL) return;
    fprintf(json, "%s\"%s\": %.12g", json_first ? "{" : ", ", key, v);
    json_first = false;
}

static void jstr(const char *key, const char *v) {
    if (json == NULL) return;
    fprintf(json, "%s\"%s\": \"%s\"", json_first ? "{" : ", ", key, v);
    json_first = false;
}

static int attr(CUdevice_attribute a) {
    int v = -1;
    if (cuDeviceGetAttribute(&v, a, dev) != CUDA_SUCCESS) v = -1;
    return v;
}

static CUmemAllocationProp prop_for(CUmemLocationType type) {
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = type;
    p.location.id = 0;
    if (type == CU_MEM_LOCATION_TYPE_DEVICE) p.location.id = (int)dev;
    if (type == CU_MEM_LOCATION_TYPE_HOST_NUMA) {
        int numa = attr(CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID);
        p.location.id = numa < 0 ? 0 : numa;
    }
    return p;
}

static const char *loc_name(CUmemLocationType t) {
    return t == CU_MEM_LOCATION_TYPE_DEVICE ? "DEVICE"
           : t == CU_MEM_LOCATION_TYPE_HOST ? "HOST"
                                            : "HOST_NUMA";
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static size_t round_up(size_t v, size_t g) {
    return (v + g - 1) / g * g;
}

/* The location host buffers use: HOST, else HOST_NUMA, else 0 (none works). */
static CUmemLocationType host_loc;

static void location_facts(void) {
    static const CUmemLocationType locs[3] = {
        CU_MEM_LOCATION_TYPE_DEVICE, CU_MEM_LOCATION_TYPE_HOST, CU_MEM_LOCATION_TYPE_HOST_NUMA};
    printf("\n%-34s %-28s %12s %12s\n", "cuMemCreate 2 MiB, location", "result", "gran. min",
           "gran. rec.");
    for (int i = 0; i < 3; i++) {
        CUmemAllocationProp p = prop_for(locs[i]);
        size_t gmin = 0, grec = 0;
        CUresult g1 = cuMemGetAllocationGranularity(&gmin, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
        CUresult g2 =
            cuMemGetAllocationGranularity(&grec, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
        CUmemGenericAllocationHandle h;
        size_t size = round_up(2 * KIT_MIB, gmin ? gmin : 2 * KIT_MIB);
        CUresult rc = cuMemCreate(&h, size, &p, 0);
        if (rc == CUDA_SUCCESS) cuMemRelease(h);
        if (rc == CUDA_SUCCESS && locs[i] != CU_MEM_LOCATION_TYPE_DEVICE && host_loc == 0)
            host_loc = locs[i];
        char key[64];
        printf("%-34s %-28s %12zu %12zu\n", loc_name(locs[i]), kit_rc_name(rc),
               g1 == CUDA_SUCCESS ? gmin : 0, g2 == CUDA_SUCCESS ? grec : 0);
        snprintf(key, sizeof key, "create_%s", loc_name(locs[i]));
        jstr(key, kit_rc_name(rc));
        snprintf(key, sizeof key, "granularity_min_%s", loc_name(locs[i]));
        jnum(key, g1 == CUDA_SUCCESS ? (double)gmin : 0);
        snprintf(key, sizeof key, "granularity_rec_%s", loc_name(locs[i]));
        jnum(key, g2 == CUDA_SUCCESS ? (double)grec : 0);
    }
    jstr("host_location", host_loc ? loc_name(host_loc) : "none");
}

/* Median per-call cost in microseconds of the five VMM calls for one location and size. */
static void call_costs(CUmemLocationType loc, uint64_t mib, int reps) {
    CUmemAllocationProp p = prop_for(loc);
    size_t gran = 0;
    if (cuMemGetAllocationGranularity(&gran, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM) !=
            CUDA_SUCCESS ||
        gran == 0)
        gran = 2 * KIT_MIB;
    size_t size = round_up(mib * KIT_MIB, gran);
    CUdeviceptr va;
    KIT_CK(cuMemAddressReserve(&va, size, 0, 0, 0));
    CUmemAccessDesc access = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = (int)dev},
                              .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    double t[5][16];
    int n = 0;
    CUresult rc = CUDA_SUCCESS;
    for (int r = 0; r <= reps && rc == CUDA_SUCCESS; r++) { /* r == 0: warm-up */
        CUmemGenericAllocationHandle h;
        double a = kit_now();
        rc = cuMemCreate(&h, size, &p, 0);
        double b = kit_now();
        if (rc != CUDA_SUCCESS) break;
        rc = cuMemMap(va, size, 0, h, 0);
        double c = kit_now();
        if (rc == CUDA_SUCCESS) rc = cuMemSetAccess(va, size, &access, 1);
        double d = kit_now();
        CUresult u = cuMemUnmap(va, size);
        double e = kit_now();
        CUresult rel = cuMemRelease(h);
        double f = kit_now();
        if (rc == CUDA_SUCCESS) rc = u != CUDA_SUCCESS ? u : rel;
        if (r > 0 && rc == CUDA_SUCCESS && n < 16) {
            t[0][n] = b - a;
            t[1][n] = c - b;
            t[2][n] = d - c;
            t[3][n] = e - d;
            t[4][n] = f - e;
            n++;
        }
    }
    cuMemAddressFree(va, size);
    char label[64];
    snprintf(label, sizeof label, "%s %llu MiB", loc_name(loc), (unsigned long long)mib);
    if (rc != CUDA_SUCCESS || n == 0) {
        printf("%-22s %s\n", label, kit_rc_name(rc));
        return;
    }
    static const char *names[5] = {"create", "map", "set_access", "unmap", "release"};
    printf("%-22s", label);
    for (int k = 0; k < 5; k++) {
        double us = 1e6 * median(t[k], n);
        printf(" %11.1f", us);
        char key[96];
        snprintf(key, sizeof key, "us_%s_%s_%lluMiB", names[k], loc_name(loc),
                 (unsigned long long)mib);
        jnum(key, us);
    }
    printf("   (median of %d)\n", n);
}

/* GB/s of `reps` launches of kit_read over `bytes` at `buf`, timed with events. */
static double read_bw(CUdeviceptr buf, uint64_t bytes, CUdeviceptr sink, int reps) {
    CUevent a, b;
    KIT_CK(cuEventCreate(&a, CU_EVENT_DEFAULT));
    KIT_CK(cuEventCreate(&b, CU_EVENT_DEFAULT));
    KIT_CK(kit_read_launch(&mod, NULL, buf, bytes, sink)); /* warm-up */
    KIT_CK(cuEventRecord(a, NULL));
    for (int r = 0; r < reps; r++)
        KIT_CK(kit_read_launch(&mod, NULL, buf, bytes, sink));
    KIT_CK(cuEventRecord(b, NULL));
    KIT_CK(cuEventSynchronize(b));
    float ms = 0;
    KIT_CK(cuEventElapsedTime(&ms, a, b));
    cuEventDestroy(a);
    cuEventDestroy(b);
    return ms > 0 ? (double)bytes * reps / (ms * 1e-3) / 1e9 : 0;
}

enum dir { H2D, D2H, DTOD };

/* One asynchronous copy of `bytes` on s. */
static CUresult copy(enum dir d, CUdeviceptr dst, CUdeviceptr src, void *host, uint64_t bytes,
                     CUstream s) {
    switch (d) {
    case H2D:
        return cuMemcpyHtoDAsync(dst, host, bytes, s);
    case D2H:
        return cuMemcpyDtoHAsync(host, src, bytes, s);
    default:
        return cuMemcpyDtoDAsync(dst, src, bytes, s);
    }
}

struct xfer {
    enum dir d;
    CUdeviceptr dst, src;
    void *host;
};

/* Copies x[0] (and x[1] when two) `reps` times, each on its own stream, started together;
 * returns each one's GB/s in gbps[] and the sum of bytes over the longest time. */
static double copy_bw(const struct xfer *x, int nx, uint64_t bytes, int reps, double *gbps) {
    CUstream s[2];
    CUevent start, end[2];
    for (int i = 0; i < nx; i++) {
        KIT_CK(cuStreamCreate(&s[i], CU_STREAM_NON_BLOCKING));
        KIT_CK(cuEventCreate(&end[i], CU_EVENT_DEFAULT));
        KIT_CK(copy(x[i].d, x[i].dst, x[i].src, x[i].host, bytes, s[i])); /* warm-up */
    }
    for (int i = 0; i < nx; i++)
        KIT_CK(cuStreamSynchronize(s[i]));
    KIT_CK(cuEventCreate(&start, CU_EVENT_DEFAULT));
    KIT_CK(cuEventRecord(start, s[0]));
    if (nx > 1) KIT_CK(cuStreamWaitEvent(s[1], start, 0));
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < nx; i++)
            KIT_CK(copy(x[i].d, x[i].dst, x[i].src, x[i].host, bytes, s[i]));
    float longest = 0;
    for (int i = 0; i < nx; i++)
        KIT_CK(cuEventRecord(end[i], s[i]));
    for (int i = 0; i < nx; i++) {
        float ms = 0;
        KIT_CK(cuEventSynchronize(end[i]));
        KIT_CK(cuEventElapsedTime(&ms, start, end[i]));
        gbps[i] = ms > 0 ? (double)bytes * reps / (ms * 1e-3) / 1e9 : 0;
        if (ms > longest) longest = ms;
        cuEventDestroy(end[i]);
        cuStreamDestroy(s[i]);
    }
    cuEventDestroy(start);
    return longest > 0 ? (double)bytes * reps * nx / (longest * 1e-3) / 1e9 : 0;
}

static void bandwidths(void) {
    uint64_t bytes = opt.bw_mib * KIT_MIB;
    int reps = opt.reps;
    CUdeviceptr d1, d2, sink;
    KIT_CK(cuMemAlloc(&d1, bytes));
    KIT_CK(cuMemAlloc(&d2, bytes));
    KIT_CK(cuMemAlloc(&sink, 4096));
    KIT_CK(cuMemsetD8(d1, 0x5a, bytes));
    KIT_CK(cuMemsetD8(d2, 0xa5, bytes));
    void *h1 = NULL, *h2 = NULL;
    KIT_CK(cuMemHostAlloc(&h1, bytes, CU_MEMHOSTALLOC_DEVICEMAP));
    KIT_CK(cuMemHostAlloc(&h2, bytes, CU_MEMHOSTALLOC_DEVICEMAP));
    memset(h1, 0x3c, bytes);
    memset(h2, 0xc3, bytes);

    /* A host-located VMM mapping, as the engine maps an evicted buffer. */
    CUdeviceptr hv = 0;
    CUmemGenericAllocationHandle hh = 0;
    size_t hsize = 0;
    if (host_loc != 0) {
        CUmemAllocationProp p = prop_for(host_loc);
        size_t gran = 2 * KIT_MIB;
        cuMemGetAllocationGranularity(&gran, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
        hsize = round_up(bytes, gran ? gran : 2 * KIT_MIB);
        CUmemAccessDesc access = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = (int)dev},
                                  .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
        KIT_CK(cuMemAddressReserve(&hv, hsize, 0, 0, 0));
        KIT_CK(cuMemCreate(&hh, hsize, &p, 0));
        KIT_CK(cuMemMap(hv, hsize, 0, hh, 0));
        KIT_CK(cuMemSetAccess(hv, hsize, &access, 1));
        KIT_CK(cuMemsetD8(hv, 0x69, bytes));
        KIT_CK(cuCtxSynchronize());
    }

    printf("\n%-52s %10s\n", "kernel read bandwidth, GB/s", "GB/s");
    double r_dev = read_bw(d1, bytes, sink, reps);
    printf("%-52s %10.1f\n", "device memory (cuMemAlloc)", r_dev);
    jnum("read_gbps_device", r_dev);
    if (hv != 0) {
        double r = read_bw(hv, bytes, sink, reps);
        char label[96];
        snprintf(label, sizeof label, "host-located VMM mapping (%s handle)", loc_name(host_loc));
        printf("%-52s %10.1f\n", label, r);
        jnum("read_gbps_host_vmm", r);
    } else {
        printf("%-52s %10s\n", "host-located VMM mapping", "n/a");
    }
    CUdeviceptr hp = 0;
    if (cuMemHostGetDevicePointer(&hp, h1, 0) == CUDA_SUCCESS) {
        double r = read_bw(hp, bytes, sink, reps);
        printf("%-52s %10.1f\n", "pinned host memory (cuMemHostAlloc, mapped)", r);
        jnum("read_gbps_pinned_host", r);
    }

    double g[2], sum;
    printf("\n%-52s %10s %10s %10s\n", "copy bandwidth, GB/s", "first", "second", "together");
    struct xfer h2d = {H2D, d1, 0, h1}, d2h = {D2H, 0, d2, h2};
    sum = copy_bw(&h2d, 1, bytes, reps, g);
    printf("%-52s %10.1f\n", "H2D alone (pinned host -> device)", g[0]);
    jnum("copy_gbps_h2d", g[0]);
    sum = copy_bw(&d2h, 1, bytes, reps, g);
    printf("%-52s %10.1f\n", "D2H alone (device -> pinned host)", g[0]);
    jnum("copy_gbps_d2h", g[0]);
    struct xfer both[2] = {h2d, d2h};
    sum = copy_bw(both, 2, bytes, reps, g);
    printf("%-52s %10.1f %10.1f %10.1f\n", "H2D and D2H at once (H2D, D2H, sum)", g[0], g[1], sum);
    jnum("copy_gbps_both_h2d", g[0]);
    jnum("copy_gbps_both_d2h", g[1]);
    jnum("copy_gbps_both_sum", sum);
    if (hv != 0) {
        struct xfer evict = {DTOD, hv, d1, NULL}, restore = {DTOD, d2, hv, NULL};
        sum = copy_bw(&evict, 1, bytes, reps, g);
        printf("%-52s %10.1f\n", "engine evict (device -> host VMM mapping)", g[0]);
        jnum("copy_gbps_evict", g[0]);
        sum = copy_bw(&restore, 1, bytes, reps, g);
        printf("%-52s %10.1f\n", "engine restore (host VMM mapping -> device)", g[0]);
        jnum("copy_gbps_restore", g[0]);
        /* Both at once need two host ranges: evict into the mapping's first half while
         * restoring from its second half. */
        uint64_t half = bytes / 2 / 4096 * 4096;
        struct xfer pair[2] = {{DTOD, hv, d1, NULL}, {DTOD, d2, hv + half, NULL}};
        sum = copy_bw(pair, 2, half, reps, g);
        printf("%-52s %10.1f %10.1f %10.1f\n", "engine evict and restore at once", g[0], g[1], sum);
        jnum("copy_gbps_evict_restore_evict", g[0]);
        jnum("copy_gbps_evict_restore_restore", g[1]);
        jnum("copy_gbps_evict_restore_sum", sum);
        KIT_CK(cuMemUnmap(hv, hsize));
        KIT_CK(cuMemRelease(hh));
        KIT_CK(cuMemAddressFree(hv, hsize));
    }
    (void)sum;
    KIT_CK(cuMemFreeHost(h1));
    KIT_CK(cuMemFreeHost(h2));
    KIT_CK(cuMemFree(d1));
    KIT_CK(cuMemFree(d2));
    KIT_CK(cuMemFree(sink));
}

static void usage(FILE *f) {
    fprintf(f, "usage: vmmfacts [--cubin PATH] [--quick] [--bw-mib N] [--reps N] [--json PATH]\n"
               "Host-located VMM support and granularity, per-call VMM costs at 2, 64 and 512 "
               "MiB,\nkernel read and copy bandwidths (--bw-mib, default 1024; --reps, default "
               "5).\n--quick: 2 and 64 MiB only, 32 MiB bandwidth buffers, 2 repetitions (the "
               "simulator smoke test).\nWithout --cubin the kernels are the simulator's text "
               "image.\n");
}

int main(int argc, char **argv) {
    static const struct option longs[] = {
        {"cubin", required_argument, NULL, 'c'},
        {"quick", no_argument, NULL, 'q'},
        {"bw-mib", required_argument, NULL, 'b'},
        {"reps", required_argument, NULL, 'r'},
        {"json", required_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    bool bw_set = false, reps_set = false;
    while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        switch (c) {
        case 'c':
            opt.cubin = optarg;
            break;
        case 'q':
            opt.quick = true;
            break;
        case 'b':
            opt.bw_mib = strtoull(optarg, NULL, 10);
            bw_set = true;
            break;
        case 'r':
            opt.reps = atoi(optarg);
            reps_set = true;
            break;
        case 'j':
            opt.json = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (opt.quick) {
        if (!bw_set) opt.bw_mib = 32;
        if (!reps_set) opt.reps = 2;
    }
    if (optind != argc || opt.bw_mib < 2 || opt.reps < 1 || opt.reps > 15) {
        usage(stderr);
        return 2;
    }
    if (opt.json != NULL && (json = fopen(opt.json, "w")) == NULL) {
        perror(opt.json);
        return 1;
    }
    kit_primary(&dev);
    kit_load(&mod, opt.cubin);
    char name[256] = "";
    size_t total = 0;
    int driver = 0;
    cuDeviceGetName(name, sizeof name, dev);
    cuDeviceTotalMem(&total, dev);
    cuDriverGetVersion(&driver);
    printf("VMM facts: %s, compute capability %d.%d, %d SMs, %.1f GiB, driver API %d, kernels "
           "from %s\n",
           name, attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
           attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR), mod.sms, (double)total / (1u << 30),
           driver, mod.image);
    jstr("device", name);
    jnum("driver_version", driver);
    jnum("total_bytes", (double)total);

    static const struct {
        const char *name;
        CUdevice_attribute a;
    } attrs[] = {
        {"VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED",
         CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED},
        {"HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED",
         CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED},
        {"HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED",
         CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED},
        {"HOST_NUMA_ID", CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID},
        {"PAGEABLE_MEMORY_ACCESS", CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS},
        {"CONCURRENT_MANAGED_ACCESS", CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS},
        {"MEMORY_POOLS_SUPPORTED", CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED},
        {"ASYNC_ENGINE_COUNT", CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT},
        {"GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED",
         CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED},
    };
    printf("\n%-52s %10s\n", "device attribute", "value");
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
        int v = attr(attrs[i].a);
        printf("%-52s %10d\n", attrs[i].name, v);
        char key[96];
        snprintf(key, sizeof key, "attr_%s", attrs[i].name);
        jnum(key, v);
    }

    location_facts();

    printf("\n%-22s %11s %11s %11s %11s %11s\n", "per-call cost, us", "create", "map", "set-access",
           "unmap", "release");
    static const uint64_t sizes[3] = {2, 64, 512};
    static const int reps_full[3] = {8, 5, 3};
    int nsizes = opt.quick ? 2 : 3;
    for (int s = 0; s < nsizes; s++) {
        int reps = opt.quick ? 2 : reps_full[s];
        call_costs(CU_MEM_LOCATION_TYPE_DEVICE, sizes[s], reps);
        if (host_loc != 0) call_costs(host_loc, sizes[s], reps);
    }

    bandwidths();
    KIT_CK(cuCtxSynchronize());
    if (json != NULL) {
        fprintf(json, "%s}\n", json_first ? "{" : "");
        fclose(json);
    }
    printf("\nvmmfacts: ok\n");
    return 0;
}
