/* VMM facts and driver costs of the GPU kit, measured through the driver API. Sections
 * (--sections, any of them, in this order):
 *
 *   facts   device attributes; a 2 MiB cuMemCreate at each location (DEVICE, HOST, HOST_NUMA)
 *           and each location's allocation granularity (minimum / recommended); what cuMemMap
 *           does with part of a handle (a prefix, a non-zero offset, pieces side by side), on
 *           the device and the host location. Always runs: the others need the host location
 *           it finds.
 *   calls   the per-call cost (median wall time) of cuMemCreate, cuMemMap, cuMemSetAccess,
 *           cuMemUnmap and cuMemRelease at 2, 64 and 512 MiB, for device- and host-located handles;
 *           and for host-located ones the engine's own remap: cuMemMap, cuMemSetAccess and
 *           cuMemUnmap of a second address for a handle pinned once and kept mapped at its own
 *           (what every eviction does with a pool slot; the first mapping is paid once a slot)
 *   bw      kernel read bandwidth from device memory, from a host-located VMM mapping (what a
 *           kernel sees when it touches an evicted buffer: the zero-copy rate) and from mapped
 *           pinned host memory; copy bandwidth between pinned host and device memory, H2D and D2H
 *           alone and both at once, and the engine's own copies (device <-> host-located mapping)
 *   costs   the rest of the simulator's cost table: cuMemAlloc/cuMemFree and cuMemHostAlloc/
 *           cuMemFreeHost at 2 and 64 MiB, the host cost of cuLaunchKernel, cuEventRecord,
 *           cuEventQuery and cuStreamWaitEvent, and the device-to-device copy rate
 *   queue   (vmmqueue.c) how many kernels one stream holds before a launch blocks the host (the
 *           simulator's SIMCUDA_LAUNCH_QUEUE), from the host time of each of thousands of
 *           launches of a 50 us kernel; and whether host-located cuMemMap, cuMemSetAccess and
 *           cuMemUnmap on one thread slow cuLaunchKernel on another (could the engine remap on a
 *           helper thread without slowing the application's launches?)
 *
 * The default is facts,calls,bw,queue (the GPU kit asks for its sections by name).
 *
 * Every figure is written to --json as soon as its section ends (the file is replaced
 * atomically, so it is always whole JSON); a failed driver call ends only its own section
 * ("error_<section>": what failed) and the next section runs. A figure never measured is absent,
 * never 0. Allocations stay under a sixteenth of the device's free memory; managed memory is never
 * asked for. Bandwidths are timed with CUDA events after one warm-up. On the simulator (no
 * --cubin) it is a smoke test: its numbers are the simulator's model (the queue section times
 * launches with the simulator's virtual host clock, so the depth is the modelled one).
 *
 *   vmmfacts [--cubin PATH] [--quick] [--sections LIST] [--bw-mib N] [--reps N] [--json PATH] */
#include "vmmfacts.h"

#include <getopt.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct vmmfacts_opt vf_opt = {.bw_mib = 1024, .reps = 5};

enum { SEC_FACTS = 1, SEC_CALLS = 2, SEC_BW = 4, SEC_COSTS = 8, SEC_QUEUE = 16 };
enum { NSECTIONS = 5 };
static const char *const section_names[NSECTIONS] = {"facts", "calls", "bw", "costs", "queue"};

static CUdevice dev;
struct kit_module vf_mod;
uint64_t vf_alloc_cap; /* the most one buffer may take: free device memory / 16 */

/* ------------------------------------------------------------------------------ JSON */

#define JSON_MAX 256
static struct {
    char key[64];
    char value[160];
} jv[JSON_MAX];
static int njv;

static void jput(const char *key, const char *value) {
    int i = 0;
    while (i < njv && strcmp(jv[i].key, key) != 0)
        i++;
    if (i == JSON_MAX) return;
    if (i == njv) njv++;
    snprintf(jv[i].key, sizeof jv[i].key, "%s", key);
    snprintf(jv[i].value, sizeof jv[i].value, "%s", value);
}

void vf_jnum(const char *key, double v) {
    if (!isfinite(v)) return; /* not measured: absent, never a made-up number */
    char s[64];
    snprintf(s, sizeof s, "%.12g", v);
    jput(key, s);
}

void vf_jstr(const char *key, const char *v) {
    char s[160];
    size_t n = 0;
    s[n++] = '"';
    for (const char *c = v; *c != '\0' && n < sizeof s - 3; c++) {
        if (*c == '"' || *c == '\\') s[n++] = '\\';
        s[n++] = (*c >= ' ' && *c < 127) ? *c : '?';
    }
    s[n++] = '"';
    s[n] = '\0';
    jput(key, s);
}

/* Replaces the JSON file with every figure so far (write, then rename: never half a file). */
void vf_jflush(void) {
    if (vf_opt.json == NULL) return;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", vf_opt.json);
    FILE *f = fopen(tmp, "w");
    if (f == NULL) {
        perror(tmp);
        return;
    }
    fprintf(f, "{");
    for (int i = 0; i < njv; i++)
        fprintf(f, "%s\n \"%s\": %s", i ? "," : "", jv[i].key, jv[i].value);
    fprintf(f, "\n}\n");
    if (fclose(f) != 0 || rename(tmp, vf_opt.json) != 0) perror(vf_opt.json);
}

/* ------------------------------------------------------------------- failure recovery */

static jmp_buf section_jmp;
static const char *section_now = "setup";

static void on_failure(CUresult rc, const char *what) {
    char key[64], msg[160];
    snprintf(key, sizeof key, "error_%s", section_now);
    snprintf(msg, sizeof msg, "%s: %s", what, kit_rc_name(rc));
    vf_jstr(key, msg);
    vf_jflush();
    longjmp(section_jmp, 1);
}

/* ------------------------------------------------------------------------ helpers */

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

const char *vf_loc_name(CUmemLocationType t) {
    return t == CU_MEM_LOCATION_TYPE_DEVICE ? "DEVICE"
           : t == CU_MEM_LOCATION_TYPE_HOST ? "HOST"
                                            : "HOST_NUMA";
}

static size_t round_up(size_t v, size_t g) {
    return (v + g - 1) / g * g;
}

const CUmemAccessDesc *vf_device_access(void) {
    static CUmemAccessDesc a;
    a = (CUmemAccessDesc){.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = (int)dev},
                          .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    return &a;
}

/* The location host buffers use: HOST, else HOST_NUMA, else 0 (none works). */
CUmemLocationType vf_host_loc;

/* ------------------------------------------------------------------ mapping facts */

/* What the engine's host pool (src/pool_host.c) relies on, asked of the driver for one location:
 * a mapping of a handle's first granule only (a prefix; cuda.h 13 documents "offset + size must
 * be less than the size of the memory allocation"), whether it reads and writes the handle's
 * first bytes, whether a non-zero offset is refused ("currently must be zero"), and two handles
 * mapped side by side in one reservation with one cuMemSetAccess over both (pieces), each then
 * unmapped on its own. Each answer is a fact in the JSON (map_prefix_<LOC>, map_prefix_data_<LOC>,
 * map_offset_<LOC>, map_pieces_<LOC>): whatever the driver says is recorded, none is a failure.
 * The engine needs no answer in advance: a refused prefix or piece mapping makes it fall back to
 * one exact slot per buffer at run time. */
static bool same_bytes(CUdeviceptr a, CUdeviceptr b) {
    unsigned char x[64], y[64];
    return cuMemcpyDtoH(x, a, 64) == CUDA_SUCCESS && cuMemcpyDtoH(y, b, 64) == CUDA_SUCCESS &&
           memcmp(x, y, 64) == 0;
}

static void mapping_facts(CUmemLocationType loc) {
    CUmemAllocationProp p = prop_for(loc), pd = prop_for(CU_MEM_LOCATION_TYPE_DEVICE);
    size_t g = 2 * KIT_MIB, gh = 0, gd = 0; /* the address must suit both locations */
    if (cuMemGetAllocationGranularity(&gh, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == 0 && gh > g)
        g = gh;
    if (cuMemGetAllocationGranularity(&gd, &pd, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == 0 && gd > g)
        g = gd;
    char key[64];
    CUmemGenericAllocationHandle h = 0, h2 = 0;
    CUdeviceptr whole = 0, part = 0; /* part: 3 granules, for the prefix and the pieces */
    CUresult rc = cuMemCreate(&h, 2 * g, &p, 0);
    if (rc == CUDA_SUCCESS) rc = cuMemCreate(&h2, g, &p, 0);
    if (rc == CUDA_SUCCESS) rc = cuMemAddressReserve(&whole, 2 * g, 0, 0, 0);
    if (rc == CUDA_SUCCESS) rc = cuMemAddressReserve(&part, 3 * g, 0, 0, 0);
    if (rc == CUDA_SUCCESS) rc = cuMemMap(whole, 2 * g, 0, h, 0);
    if (rc == CUDA_SUCCESS) rc = cuMemSetAccess(whole, 2 * g, vf_device_access(), 1);
    if (rc == CUDA_SUCCESS) rc = cuMemsetD8(whole, 0x11, g);
    if (rc == CUDA_SUCCESS) rc = cuMemsetD8(whole + g, 0x33, g);
    if (rc == CUDA_SUCCESS) rc = cuCtxSynchronize();
    snprintf(key, sizeof key, "map_setup_%s", vf_loc_name(loc));
    vf_jstr(key, kit_rc_name(rc));
    if (rc == CUDA_SUCCESS) {
        /* The prefix: the handle's first granule. A write through it must land in the handle's
         * first bytes, not in its second granule. */
        CUresult pre = cuMemMap(part, g, 0, h, 0);
        if (pre == CUDA_SUCCESS) pre = cuMemSetAccess(part, g, vf_device_access(), 1);
        const char *data = "differ";
        if (pre == CUDA_SUCCESS && same_bytes(part, whole) &&
            cuMemsetD8(part, 0x22, 64) == CUDA_SUCCESS && cuCtxSynchronize() == CUDA_SUCCESS &&
            same_bytes(part, whole) && !same_bytes(whole + g, part))
            data = "same";
        if (pre == CUDA_SUCCESS) cuMemUnmap(part, g);
        /* A non-zero offset: the handle's second granule. */
        CUresult off = cuMemMap(part, g, g, h, 0);
        if (off == CUDA_SUCCESS) cuMemUnmap(part, g);
        /* Pieces: h whole, then h2 right after it, one cuMemSetAccess over both; each unmapped
         * on its own. */
        bool m1 = false, m2 = false;
        CUresult pcs = cuMemMap(part, 2 * g, 0, h, 0);
        m1 = pcs == CUDA_SUCCESS;
        if (pcs == CUDA_SUCCESS) m2 = (pcs = cuMemMap(part + 2 * g, g, 0, h2, 0)) == CUDA_SUCCESS;
        if (pcs == CUDA_SUCCESS) pcs = cuMemSetAccess(part, 3 * g, vf_device_access(), 1);
        if (pcs == CUDA_SUCCESS) pcs = cuMemsetD8(part + 2 * g, 0x44, g);
        if (pcs == CUDA_SUCCESS) pcs = cuCtxSynchronize();
        CUresult u1 = m1 ? cuMemUnmap(part, 2 * g) : CUDA_SUCCESS;
        if (m2) cuMemUnmap(part + 2 * g, g);
        if (pcs == CUDA_SUCCESS) pcs = u1;
        printf("%-34s %-28s %-8s %-28s %s\n", vf_loc_name(loc), kit_rc_name(pre),
               pre == CUDA_SUCCESS ? data : "n/a", kit_rc_name(off), kit_rc_name(pcs));
        snprintf(key, sizeof key, "map_prefix_%s", vf_loc_name(loc));
        vf_jstr(key, kit_rc_name(pre));
        snprintf(key, sizeof key, "map_prefix_data_%s", vf_loc_name(loc));
        if (pre == CUDA_SUCCESS) vf_jstr(key, data);
        snprintf(key, sizeof key, "map_offset_%s", vf_loc_name(loc));
        vf_jstr(key, kit_rc_name(off));
        snprintf(key, sizeof key, "map_pieces_%s", vf_loc_name(loc));
        vf_jstr(key, kit_rc_name(pcs));
    }
    if (whole != 0) cuMemUnmap(whole, 2 * g);
    if (whole != 0) cuMemAddressFree(whole, 2 * g);
    if (part != 0) cuMemAddressFree(part, 3 * g);
    if (h != 0) cuMemRelease(h);
    if (h2 != 0) cuMemRelease(h2);
}

/* ------------------------------------------------------------------------- facts */

static void section_facts(void) {
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
        vf_jnum(key, v);
    }
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
        if (rc == CUDA_SUCCESS && locs[i] != CU_MEM_LOCATION_TYPE_DEVICE && vf_host_loc == 0)
            vf_host_loc = locs[i];
        char key[64], gm[24] = "n/a", gr[24] = "n/a";
        if (g1 == CUDA_SUCCESS) snprintf(gm, sizeof gm, "%zu", gmin);
        if (g2 == CUDA_SUCCESS) snprintf(gr, sizeof gr, "%zu", grec);
        printf("%-34s %-28s %12s %12s\n", vf_loc_name(locs[i]), kit_rc_name(rc), gm, gr);
        snprintf(key, sizeof key, "create_%s", vf_loc_name(locs[i]));
        vf_jstr(key, kit_rc_name(rc));
        snprintf(key, sizeof key, "granularity_min_%s", vf_loc_name(locs[i]));
        if (g1 == CUDA_SUCCESS) vf_jnum(key, (double)gmin);
        snprintf(key, sizeof key, "granularity_rec_%s", vf_loc_name(locs[i]));
        if (g2 == CUDA_SUCCESS) vf_jnum(key, (double)grec);
    }
    vf_jstr("host_location", vf_host_loc ? vf_loc_name(vf_host_loc) : "none");
    printf("\n%-34s %-28s %-8s %-28s %s\n", "cuMemMap of part of a handle", "prefix", "bytes",
           "offset != 0", "pieces");
    mapping_facts(CU_MEM_LOCATION_TYPE_DEVICE);
    if (vf_host_loc != 0) mapping_facts(vf_host_loc);
}

/* ------------------------------------------------------------------------- calls */

/* The row label, the allocation properties and the size (mib rounded up to the location's
 * granularity) of one measurement; false (and a "skipped" line) when it would take more than the
 * kit allows itself of the device's free memory. */
bool vf_measurement(CUmemLocationType loc, uint64_t mib, const char *what, char *label,
                    size_t labcap, CUmemAllocationProp *p, size_t *size) {
    snprintf(label, labcap, "%s %llu MiB%s", vf_loc_name(loc), (unsigned long long)mib, what);
    if (mib * KIT_MIB > vf_alloc_cap) {
        printf("%-22s skipped: over a sixteenth of free device memory\n", label);
        return false;
    }
    *p = prop_for(loc);
    size_t gran = 0;
    if (cuMemGetAllocationGranularity(&gran, p, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS ||
        gran == 0)
        gran = 2 * KIT_MIB;
    *size = round_up(mib * KIT_MIB, gran);
    return true;
}

/* One row of the calls table and its JSON figures: the median of each call's n times, in
 * microseconds ("us_<stem><call>_<LOC>_<N>MiB"), under the table's columns (a remap has no
 * create: its first column is blank); or, when the calls failed, what failed
 * ("<stem or calls_>failed_<LOC>_<N>MiB"). */
static void report(CUmemLocationType loc, uint64_t mib, const char *label, const char *stem,
                   CUresult rc, double t[][16], int n, const char *const *names, int ncalls) {
    char key[96];
    if (rc != CUDA_SUCCESS || n == 0) {
        printf("%-22s %s\n", label, kit_rc_name(rc));
        snprintf(key, sizeof key, "%sfailed_%s_%lluMiB", *stem ? stem : "calls_", vf_loc_name(loc),
                 (unsigned long long)mib);
        vf_jstr(key, kit_rc_name(rc));
        return;
    }
    printf("%-22s", label);
    if (ncalls < 5) printf(" %11s", "");
    for (int k = 0; k < ncalls; k++) {
        double us = 1e6 * kit_median(t[k], n);
        printf(" %11.1f", us);
        snprintf(key, sizeof key, "us_%s%s_%s_%lluMiB", stem, names[k], vf_loc_name(loc),
                 (unsigned long long)mib);
        vf_jnum(key, us);
    }
    printf("   (median of %d)\n", n);
}

/* Maps h at va, gives the device access to it and unmaps it, each call timed (seconds, in t[0],
 * t[1], t[2]); the first failure, else the unmap's result. */
CUresult vf_timed_map_access_unmap(CUdeviceptr va, size_t size, CUmemGenericAllocationHandle h,
                                   double t[3]) {
    double a = kit_now();
    CUresult rc = cuMemMap(va, size, 0, h, 0);
    double b = kit_now();
    if (rc == CUDA_SUCCESS) rc = cuMemSetAccess(va, size, vf_device_access(), 1);
    double c = kit_now();
    CUresult u = cuMemUnmap(va, size);
    double d = kit_now();
    t[0] = b - a;
    t[1] = c - b;
    t[2] = d - c;
    return rc != CUDA_SUCCESS ? rc : u;
}

/* Median per-call cost in microseconds of the five VMM calls for one location and size. */
static void call_costs(CUmemLocationType loc, uint64_t mib, int reps) {
    char label[64];
    CUmemAllocationProp p;
    size_t size;
    if (!vf_measurement(loc, mib, "", label, sizeof label, &p, &size)) return;
    CUdeviceptr va;
    KIT_CK(cuMemAddressReserve(&va, size, 0, 0, 0));
    double t[5][16];
    int n = 0;
    CUresult rc = CUDA_SUCCESS;
    for (int r = 0; r <= reps && rc == CUDA_SUCCESS; r++) { /* r == 0: warm-up */
        CUmemGenericAllocationHandle h;
        double a = kit_now();
        rc = cuMemCreate(&h, size, &p, 0);
        double b = kit_now();
        if (rc != CUDA_SUCCESS) break;
        double m[3];
        rc = vf_timed_map_access_unmap(va, size, h, m);
        double e = kit_now();
        CUresult rel = cuMemRelease(h);
        double f = kit_now();
        if (rc == CUDA_SUCCESS) rc = rel;
        if (r > 0 && rc == CUDA_SUCCESS && n < 16) {
            t[0][n] = b - a;
            for (int k = 0; k < 3; k++)
                t[1 + k][n] = m[k];
            t[4][n] = f - e;
            n++;
        }
    }
    cuMemAddressFree(va, size);
    static const char *const names[5] = {"create", "map", "set_access", "unmap", "release"};
    report(loc, mib, label, "", rc, t, n, names, 5);
}

CUresult vf_slot_open(struct vf_slot *s, const CUmemAllocationProp *p, size_t size) {
    memset(s, 0, sizeof *s);
    s->size = size;
    KIT_CK(cuMemAddressReserve(&s->window, size, 0, 0, 0));
    KIT_CK(cuMemAddressReserve(&s->va, size, 0, 0, 0));
    CUresult rc = cuMemCreate(&s->h, size, p, 0);
    s->made = rc == CUDA_SUCCESS;
    if (s->made) rc = cuMemMap(s->window, size, 0, s->h, 0);
    s->at_window = s->made && rc == CUDA_SUCCESS;
    if (s->at_window) rc = cuMemSetAccess(s->window, size, vf_device_access(), 1);
    return rc;
}

void vf_slot_close(struct vf_slot *s) {
    if (s->at_window) cuMemUnmap(s->window, s->size);
    if (s->made) cuMemRelease(s->h);
    if (s->va != 0) cuMemAddressFree(s->va, s->size);
    if (s->window != 0) cuMemAddressFree(s->window, s->size);
    memset(s, 0, sizeof *s);
}

/* Median cost in microseconds of an eviction's remap onto a pinned slot: the handle is created
 * and mapped (with access) at a window once, as the engine's host pool does, then mapped at a
 * second address, given access and unmapped `reps` times. */
static void remap_costs(CUmemLocationType loc, uint64_t mib, int reps) {
    char label[64];
    CUmemAllocationProp p;
    size_t size;
    if (!vf_measurement(loc, mib, " remap", label, sizeof label, &p, &size)) return;
    struct vf_slot slot;
    CUresult rc = vf_slot_open(&slot, &p, size);
    double t[3][16];
    int n = 0;
    for (int r = 0; r <= reps && rc == CUDA_SUCCESS; r++) { /* r == 0: warm-up */
        double m[3];
        rc = vf_timed_map_access_unmap(slot.va, size, slot.h, m);
        if (r > 0 && rc == CUDA_SUCCESS && n < 16) {
            for (int k = 0; k < 3; k++)
                t[k][n] = m[k];
            n++;
        }
    }
    vf_slot_close(&slot);
    static const char *const names[3] = {"map", "set_access", "unmap"};
    report(loc, mib, label, "remap_", rc, t, n, names, 3);
}

static void section_calls(void) {
    printf("\n%-22s %11s %11s %11s %11s %11s\n", "per-call cost, us", "create", "map", "set-access",
           "unmap", "release");
    static const uint64_t sizes[3] = {2, 64, 512};
    static const int reps_full[3] = {8, 5, 3};
    int nsizes = vf_opt.quick ? 2 : 3;
    for (int s = 0; s < nsizes; s++) {
        int reps = vf_opt.quick ? 2 : reps_full[s];
        call_costs(CU_MEM_LOCATION_TYPE_DEVICE, sizes[s], reps);
        vf_jflush();
        if (vf_host_loc != 0) call_costs(vf_host_loc, sizes[s], reps);
        vf_jflush();
    }
    for (int s = 0; vf_host_loc != 0 && s < nsizes; s++) {
        remap_costs(vf_host_loc, sizes[s], vf_opt.quick ? 2 : reps_full[s]);
        vf_jflush();
    }
}

/* --------------------------------------------------------------------------- bw */

double vf_events_ms(CUstream s, int reps, CUresult (*launch)(void *arg, CUstream s), void *arg) {
    CUevent a, b;
    KIT_CK(cuEventCreate(&a, CU_EVENT_DEFAULT));
    KIT_CK(cuEventCreate(&b, CU_EVENT_DEFAULT));
    KIT_CK(cuEventRecord(a, s));
    for (int r = 0; r < reps; r++)
        KIT_CK(launch(arg, s));
    KIT_CK(cuEventRecord(b, s));
    KIT_CK(cuEventSynchronize(b));
    float ms = 0;
    KIT_CK(cuEventElapsedTime(&ms, a, b));
    cuEventDestroy(a);
    cuEventDestroy(b);
    return (double)ms;
}

struct read_args {
    CUdeviceptr buf, sink;
    uint64_t bytes;
};

static CUresult read_once(void *arg, CUstream s) {
    const struct read_args *r = arg;
    return kit_read_launch(&vf_mod, s, r->buf, r->bytes, r->sink);
}

/* GB/s of `reps` launches of kit_read over `bytes` at `buf`, timed with events. */
static double read_bw(CUdeviceptr buf, uint64_t bytes, CUdeviceptr sink, int reps) {
    struct read_args r = {buf, sink, bytes};
    KIT_CK(read_once(&r, NULL)); /* warm-up */
    double ms = vf_events_ms(NULL, reps, read_once, &r);
    return ms > 0 ? (double)bytes * reps / (ms * 1e-3) / 1e9 : NAN;
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
        gbps[i] = ms > 0 ? (double)bytes * reps / (ms * 1e-3) / 1e9 : NAN;
        if (ms > longest) longest = ms;
        cuEventDestroy(end[i]);
        cuStreamDestroy(s[i]);
    }
    cuEventDestroy(start);
    return longest > 0 ? (double)bytes * reps * nx / (longest * 1e-3) / 1e9 : NAN;
}

static void print_bw(const char *label, const char *key, double v) {
    printf("%-52s %10.1f\n", label, v);
    vf_jnum(key, v);
}

/* The bandwidth buffers: at most a sixteenth of free device memory each. */
static uint64_t bw_bytes(void) {
    uint64_t bytes = vf_opt.bw_mib * KIT_MIB;
    if (bytes > vf_alloc_cap) bytes = vf_alloc_cap / (2 * KIT_MIB) * (2 * KIT_MIB);
    if (bytes < 2 * KIT_MIB) bytes = 2 * KIT_MIB;
    return bytes;
}

static void section_bw(void) {
    uint64_t bytes = bw_bytes();
    int reps = vf_opt.reps;
    vf_jnum("bw_bytes", (double)bytes);
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

    printf("\n%-52s %10s\n", "kernel read bandwidth, GB/s", "GB/s");
    print_bw("device memory (cuMemAlloc)", "read_gbps_device", read_bw(d1, bytes, sink, reps));
    CUdeviceptr hp = 0;
    if (cuMemHostGetDevicePointer(&hp, h1, 0) == CUDA_SUCCESS)
        print_bw("pinned host memory (cuMemHostAlloc, mapped)", "read_gbps_pinned_host",
                 read_bw(hp, bytes, sink, reps));

    double g[2], sum;
    printf("\n%-52s %10s %10s %10s\n", "copy bandwidth, GB/s", "first", "second", "together");
    struct xfer h2d = {H2D, d1, 0, h1}, d2h = {D2H, 0, d2, h2};
    copy_bw(&h2d, 1, bytes, reps, g);
    print_bw("H2D alone (pinned host -> device)", "copy_gbps_h2d", g[0]);
    copy_bw(&d2h, 1, bytes, reps, g);
    print_bw("D2H alone (device -> pinned host)", "copy_gbps_d2h", g[0]);
    struct xfer both[2] = {h2d, d2h};
    sum = copy_bw(both, 2, bytes, reps, g);
    printf("%-52s %10.1f %10.1f %10.1f\n", "H2D and D2H at once (H2D, D2H, sum)", g[0], g[1], sum);
    vf_jnum("copy_gbps_both_h2d", g[0]);
    vf_jnum("copy_gbps_both_d2h", g[1]);
    vf_jnum("copy_gbps_both_sum", sum);
    vf_jflush();

    /* A host-located VMM mapping, as the engine maps an evicted buffer. */
    if (vf_host_loc != 0) {
        CUmemAllocationProp p = prop_for(vf_host_loc);
        size_t gran = 2 * KIT_MIB;
        cuMemGetAllocationGranularity(&gran, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
        size_t hsize = round_up(bytes, gran ? gran : 2 * KIT_MIB);
        CUdeviceptr hv = 0;
        CUmemGenericAllocationHandle hh = 0;
        KIT_CK(cuMemAddressReserve(&hv, hsize, 0, 0, 0));
        KIT_CK(cuMemCreate(&hh, hsize, &p, 0));
        KIT_CK(cuMemMap(hv, hsize, 0, hh, 0));
        KIT_CK(cuMemSetAccess(hv, hsize, vf_device_access(), 1));
        KIT_CK(cuMemsetD8(hv, 0x69, bytes));
        KIT_CK(cuCtxSynchronize());
        char label[96];
        snprintf(label, sizeof label, "kernel read, host-located VMM mapping (%s)",
                 vf_loc_name(vf_host_loc));
        print_bw(label, "read_gbps_host_vmm", read_bw(hv, bytes, sink, reps));
        struct xfer evict = {DTOD, hv, d1, NULL}, restore = {DTOD, d2, hv, NULL};
        copy_bw(&evict, 1, bytes, reps, g);
        print_bw("engine evict (device -> host VMM mapping)", "copy_gbps_evict", g[0]);
        copy_bw(&restore, 1, bytes, reps, g);
        print_bw("engine restore (host VMM mapping -> device)", "copy_gbps_restore", g[0]);
        /* Both at once need two host ranges: evict into the mapping's first half while
         * restoring from its second half. */
        uint64_t half = bytes / 2 / 4096 * 4096;
        struct xfer pair[2] = {{DTOD, hv, d1, NULL}, {DTOD, d2, hv + half, NULL}};
        sum = copy_bw(pair, 2, half, reps, g);
        printf("%-52s %10.1f %10.1f %10.1f\n", "engine evict and restore at once", g[0], g[1], sum);
        vf_jnum("copy_gbps_evict_restore_evict", g[0]);
        vf_jnum("copy_gbps_evict_restore_restore", g[1]);
        vf_jnum("copy_gbps_evict_restore_sum", sum);
        KIT_CK(cuMemUnmap(hv, hsize));
        KIT_CK(cuMemRelease(hh));
        KIT_CK(cuMemAddressFree(hv, hsize));
    } else {
        printf("%-52s %10s\n", "host-located VMM mapping", "n/a");
    }
    KIT_CK(cuMemFreeHost(h1));
    KIT_CK(cuMemFreeHost(h2));
    KIT_CK(cuMemFree(d1));
    KIT_CK(cuMemFree(d2));
    KIT_CK(cuMemFree(sink));
}

/* ------------------------------------------------------------------------- costs */

/* Median microseconds of an allocate/free pair at `mib`, over reps after a warm-up. */
static void alloc_costs(bool host, uint64_t mib, int reps) {
    uint64_t bytes = mib * KIT_MIB;
    if (!host && bytes > vf_alloc_cap) return;
    double ta[16], tf[16];
    int n = 0;
    for (int r = 0; r <= reps && n < 16; r++) {
        CUdeviceptr d = 0;
        void *h = NULL;
        double a = kit_now();
        KIT_CK(host ? cuMemHostAlloc(&h, bytes, 0) : cuMemAlloc(&d, bytes));
        double b = kit_now();
        KIT_CK(host ? cuMemFreeHost(h) : cuMemFree(d));
        double c = kit_now();
        if (r > 0) {
            ta[n] = b - a;
            tf[n++] = c - b;
        }
    }
    char ka[64], kf[64];
    snprintf(ka, sizeof ka, "us_%s_%lluMiB", host ? "hostalloc" : "memalloc",
             (unsigned long long)mib);
    snprintf(kf, sizeof kf, "us_%s_%lluMiB", host ? "freehost" : "memfree",
             (unsigned long long)mib);
    double ua = 1e6 * kit_median(ta, n), uf = 1e6 * kit_median(tf, n);
    printf("%-34s %3llu MiB %12.1f %12.1f\n",
           host ? "cuMemHostAlloc / cuMemFreeHost" : "cuMemAlloc / cuMemFree",
           (unsigned long long)mib, ua, uf);
    vf_jnum(ka, ua);
    vf_jnum(kf, uf);
}

enum hostcall { LAUNCH, RECORD, QUERY, WAIT };

/* Median microseconds per call of one host-side call, over 5 batches of `batch` calls. */
static double per_call(enum hostcall what, CUstream s, CUevent e, CUdeviceptr sink, int batch) {
    double t[5];
    for (int k = 0; k < 5; k++) {
        double a = kit_now();
        for (int i = 0; i < batch; i++) {
            switch (what) {
            case LAUNCH:
                KIT_CK(kit_read_launch(&vf_mod, s, sink, 0, sink)); /* an empty kernel */
                break;
            case RECORD:
                KIT_CK(cuEventRecord(e, s));
                break;
            case QUERY:
                (void)cuEventQuery(e); /* a completed event: CUDA_SUCCESS */
                break;
            case WAIT:
                KIT_CK(cuStreamWaitEvent(s, e, 0));
                break;
            }
        }
        t[k] = (kit_now() - a) / batch;
        KIT_CK(cuStreamSynchronize(s));
        if (what == QUERY) KIT_CK(cuEventSynchronize(e));
    }
    return 1e6 * kit_median(t, 5);
}

static void section_costs(void) {
    printf("\n%-34s %7s %12s %12s\n", "allocation, us", "size", "alloc", "free");
    int reps = vf_opt.quick ? 2 : 5;
    alloc_costs(false, 2, reps);
    alloc_costs(false, 64, reps);
    alloc_costs(true, 2, reps);
    alloc_costs(true, 64, vf_opt.quick ? 2 : 3);
    vf_jflush();

    CUstream s;
    CUevent e;
    CUdeviceptr sink;
    KIT_CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    KIT_CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    KIT_CK(cuMemAlloc(&sink, 4096));
    int batch = vf_opt.quick ? 50 : 400;
    KIT_CK(cuEventRecord(e, s));
    KIT_CK(cuStreamSynchronize(s));
    static const struct {
        enum hostcall what;
        const char *label, *key;
    } calls[] = {
        {LAUNCH, "cuLaunchKernel (empty kernel), host", "us_launch"},
        {RECORD, "cuEventRecord", "us_event_record"},
        {QUERY, "cuEventQuery (completed event)", "us_event_query"},
        {WAIT, "cuStreamWaitEvent", "us_stream_wait_event"},
    };
    printf("\n%-52s %10s\n", "host cost per call, us", "us");
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        double us = per_call(calls[i].what, s, e, sink, batch);
        printf("%-52s %10.2f\n", calls[i].label, us);
        vf_jnum(calls[i].key, us);
    }
    vf_jflush();

    uint64_t bytes = bw_bytes();
    CUdeviceptr d1, d2;
    KIT_CK(cuMemAlloc(&d1, bytes));
    KIT_CK(cuMemAlloc(&d2, bytes));
    KIT_CK(cuMemsetD8(d1, 0x5a, bytes));
    double g[1];
    struct xfer dtod = {DTOD, d2, d1, NULL};
    copy_bw(&dtod, 1, bytes, vf_opt.reps, g);
    print_bw("device -> device copy (cuMemcpyDtoDAsync), GB/s", "copy_gbps_dtod", g[0]);
    KIT_CK(cuMemFree(d1));
    KIT_CK(cuMemFree(d2));
    KIT_CK(cuMemFree(sink));
    cuEventDestroy(e);
    cuStreamDestroy(s);
}

/* ------------------------------------------------------------------------- main */

static void usage(FILE *f) {
    fprintf(f, "usage: vmmfacts [--cubin PATH] [--quick] [--sections LIST] [--bw-mib N] "
               "[--reps N] [--json PATH]\n"
               "Sections (default facts,calls,bw,queue): facts (attributes, host-located VMM, "
               "granularity),\ncalls (VMM per-call costs at 2, 64, 512 MiB), bw (kernel read and "
               "copy bandwidths,\n--bw-mib default 1024, --reps default 5), costs (allocation, "
               "launch and event host\ncosts, device-to-device copies), queue (one stream's "
               "launch queue depth; launches\nwhile another thread remaps host-located memory). "
               "--quick: 2 and 64 MiB only, 32 MiB\nbandwidth buffers, 2 repetitions, fewer "
               "launches (the simulator smoke test). Without\n--cubin the kernels are the "
               "simulator's text image.\n");
}

static unsigned parse_sections(const char *list) {
    unsigned mask = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        unsigned bit = 0;
        for (unsigned i = 0; i < NSECTIONS; i++)
            if (strcmp(tok, section_names[i]) == 0) bit = 1u << i;
        if (bit == 0) return 0;
        mask |= bit;
    }
    return mask;
}

int main(int argc, char **argv) {
    static const struct option longs[] = {
        {"cubin", required_argument, NULL, 'c'},    {"quick", no_argument, NULL, 'q'},
        {"sections", required_argument, NULL, 's'}, {"bw-mib", required_argument, NULL, 'b'},
        {"reps", required_argument, NULL, 'r'},     {"json", required_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0},
    };
    int c;
    bool bw_set = false, reps_set = false;
    vf_opt.sections = SEC_FACTS | SEC_CALLS | SEC_BW | SEC_QUEUE;
    while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        switch (c) {
        case 'c':
            vf_opt.cubin = optarg;
            break;
        case 'q':
            vf_opt.quick = true;
            break;
        case 's':
            vf_opt.sections = parse_sections(optarg);
            if (vf_opt.sections == 0) {
                fprintf(stderr,
                        "vmmfacts: --sections %s: expected facts, calls, bw, costs or queue\n",
                        optarg);
                return 2;
            }
            vf_opt.sections |= SEC_FACTS;
            break;
        case 'b':
            vf_opt.bw_mib = strtoull(optarg, NULL, 10);
            bw_set = true;
            break;
        case 'r':
            vf_opt.reps = atoi(optarg);
            reps_set = true;
            break;
        case 'j':
            vf_opt.json = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (vf_opt.quick) {
        if (!bw_set) vf_opt.bw_mib = 32;
        if (!reps_set) vf_opt.reps = 2;
    }
    if (optind != argc || vf_opt.bw_mib < 2 || vf_opt.reps < 1 || vf_opt.reps > 15) {
        usage(stderr);
        return 2;
    }
    vf_jstr("sections_done", "");
    vf_jflush(); /* a whole (if empty) file from the start */
    kit_primary(&dev);
    kit_load(&vf_mod, vf_opt.cubin);
    char name[256] = "";
    size_t total = 0, free_mem = 0;
    int driver = 0;
    cuDeviceGetName(name, sizeof name, dev);
    cuDeviceTotalMem(&total, dev);
    cuDriverGetVersion(&driver);
    if (cuMemGetInfo(&free_mem, &total) != CUDA_SUCCESS) free_mem = total;
    vf_alloc_cap = free_mem / 16;
    printf("VMM facts: %s, compute capability %d.%d, %d SMs, %.1f GiB (%.1f free), driver API %d, "
           "kernels from %s\n",
           name, attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
           attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR), vf_mod.sms,
           (double)total / (1u << 30), (double)free_mem / (1u << 30), driver, vf_mod.image);
    vf_jstr("device", name);
    vf_jnum("driver_version", driver);
    vf_jnum("total_bytes", (double)total);
    vf_jnum("free_bytes", (double)free_mem);
    vf_jflush();

    static void (*const run[NSECTIONS])(void) = {section_facts, section_calls, section_bw,
                                                 section_costs, vf_section_queue};
    char done[64] = "", failed[64] = "";
    kit_on_failure = on_failure;
    for (unsigned i = 0; i < NSECTIONS; i++) {
        if (!(vf_opt.sections & (1u << i))) continue;
        section_now = section_names[i];
        fflush(stdout);
        char *list = done;
        if (setjmp(section_jmp) == 0) {
            run[i]();
            KIT_CK(cuCtxSynchronize());
        } else {
            printf("vmmfacts: section %s FAILED (the figures before the failure are kept)\n",
                   section_names[i]);
            list = failed;
        }
        snprintf(list + strlen(list), sizeof done - strlen(list), "%s%s", *list ? "," : "",
                 section_names[i]);
        vf_jstr("sections_done", done);
        vf_jstr("sections_failed", failed);
        vf_jflush();
    }
    kit_on_failure = NULL;
    printf("\nvmmfacts: %s\n", failed[0] ? "FAILED" : "ok");
    return failed[0] ? 1 : 0;
}
