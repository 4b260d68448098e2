/* The cost table, the SIMCUDA_COSTS file and the charge each call makes on the host clock.
 *
 * Why a table and not per-call constants: a GPU run (tests/gpu) measures every row and writes a
 * cost file, so one file recalibrates every simulated figure; the file's format is a contract
 * shared with that kit (docs/simcuda.md, "Cost file"). Each built-in value cites its source in
 * docs/simcuda.md, "Costs". */
#include "sim.h"

#include "cost_file.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cost {
    double fixed_ns, per_mib_ns;
    bool set; /* false: the `default` row's value for the same location applies */
};

struct row_def {
    const char *name;
    bool own; /* has built-in figures of its own (else inherits `default`) */
    struct cost device, host;
};

#define OWN(name, df, dm, hf, hm)                                                                  \
    {                                                                                              \
        name, true, {df, dm, true}, {                                                              \
            hf, hm, true                                                                           \
        }                                                                                          \
    }
#define INHERIT(name)                                                                              \
    {                                                                                              \
        name, false, {0, 0, false}, {                                                              \
            0, 0, false                                                                            \
        }                                                                                          \
    }

/* The table. Figures per call, in ns (fixed, per MiB), for device-located and host-located
 * memory; sources in docs/simcuda.md. cuMemHostAlloc and cuMemFreeHost always act on host
 * memory: both columns hold the host figure. The `default` row's fixed cost is SIMCUDA_LAUNCH_NS
 * (filled in at load). */
static const struct row_def rows[SIM_COST_ROWS] = {
    [SIM_COST_DEFAULT] = OWN("default", 2500, 0, 2500, 0),
    [SIM_COST_MEM_CREATE] = OWN("cuMemCreate", 30000, 0, 100000, 115000),
    [SIM_COST_MEM_MAP] = OWN("cuMemMap", 2000, 0, 6000, 0),
    [SIM_COST_MEM_SET_ACCESS] = OWN("cuMemSetAccess", 40000, 0, 98000, 9000),
    [SIM_COST_MEM_UNMAP] = OWN("cuMemUnmap", 30000, 0, 57000, 1200),
    [SIM_COST_MEM_RELEASE] = OWN("cuMemRelease", 23000, 0, 0, 23000),
    [SIM_COST_MEM_HOST_ALLOC] = OWN("cuMemHostAlloc", 100000, 115000, 100000, 115000),
    [SIM_COST_MEM_FREE_HOST] = OWN("cuMemFreeHost", 0, 23000, 0, 23000),
    [SIM_COST_MEM_HOST_REGISTER] = INHERIT("cuMemHostRegister"),
    [SIM_COST_MEM_HOST_UNREGISTER] = INHERIT("cuMemHostUnregister"),
    [SIM_COST_MEM_ALLOC] = INHERIT("cuMemAlloc"),
    [SIM_COST_MEM_FREE] = INHERIT("cuMemFree"),
    [SIM_COST_MEM_ALLOC_ASYNC] = INHERIT("cuMemAllocAsync"),
    [SIM_COST_MEM_FREE_ASYNC] = INHERIT("cuMemFreeAsync"),
    [SIM_COST_MEM_ADDRESS_RESERVE] = INHERIT("cuMemAddressReserve"),
    [SIM_COST_MEM_ADDRESS_FREE] = INHERIT("cuMemAddressFree"),
    [SIM_COST_LAUNCH_KERNEL] = INHERIT("cuLaunchKernel"),
    [SIM_COST_GRAPH_LAUNCH] = INHERIT("cuGraphLaunch"),
    [SIM_COST_MEMCPY] = INHERIT("cuMemcpy"),
    [SIM_COST_MEMCPY_ASYNC] = INHERIT("cuMemcpyAsync"),
    [SIM_COST_EVENT_RECORD] = INHERIT("cuEventRecord"),
    [SIM_COST_EVENT_QUERY] = INHERIT("cuEventQuery"),
    [SIM_COST_EVENT_SYNCHRONIZE] = INHERIT("cuEventSynchronize"),
    [SIM_COST_STREAM_WAIT_EVENT] = INHERIT("cuStreamWaitEvent"),
    [SIM_COST_STREAM_SYNCHRONIZE] = INHERIT("cuStreamSynchronize"),
    [SIM_COST_STREAM_QUERY] = INHERIT("cuStreamQuery"),
    [SIM_COST_CTX_SYNCHRONIZE] = INHERIT("cuCtxSynchronize"),
};
#undef OWN
#undef INHERIT

/* PCIe Gen5 x16 (docs/simcuda.md, "Costs"). */
static const struct sim_link builtin_link = {
    .h2d = 55, .d2h = 55, .h2d_duplex = 35, .d2h_duplex = 53, .zerocopy = 35, .hbm = 4300};

static struct cost table[SIM_COST_ROWS][2];
/* Calls charged per row and location, for the report (the first column counts calls without a
 * row of their own under `default`). */
static _Atomic uint64_t calls[SIM_COST_ROWS][2];
static struct sim_link link;

struct link_field {
    const char *name;
    size_t offset;
};

static const struct link_field link_fields[] = {
    {"h2d", offsetof(struct sim_link, h2d)},
    {"d2h", offsetof(struct sim_link, d2h)},
    {"h2d_duplex", offsetof(struct sim_link, h2d_duplex)},
    {"d2h_duplex", offsetof(struct sim_link, d2h_duplex)},
    {"zerocopy", offsetof(struct sim_link, zerocopy)},
    {"hbm", offsetof(struct sim_link, hbm)},
};
#define NLINK (sizeof link_fields / sizeof link_fields[0])

const char *sim_cost_name(enum sim_cost_row row) {
    return rows[row].name;
}

const struct sim_link *sim_link(void) {
    return &link;
}

uint64_t sim_cost_ns(enum sim_cost_row row, enum sim_where where, uint64_t bytes) {
    const struct cost *c = &table[row][where];
    if (!c->set) c = &table[SIM_COST_DEFAULT][where];
    double ns = c->fixed_ns + c->per_mib_ns * ((double)bytes / (double)(1u << 20));
    return (uint64_t)llround(ns);
}

void sim_cost_figures(enum sim_cost_row row, enum sim_where where, double *fixed_ns,
                      double *per_mib_ns) {
    const struct cost *c = &table[row][where];
    if (!c->set) c = &table[SIM_COST_DEFAULT][where];
    *fixed_ns = c->fixed_ns;
    *per_mib_ns = c->per_mib_ns;
}

/* ------------------------------------------------------------------ charging */

static _Thread_local struct {
    bool set;
    enum sim_cost_row row;
    enum sim_where where;
    uint64_t bytes;
} pending;

void sim_bill(enum sim_cost_row row, enum sim_where where, uint64_t bytes) {
    pending.set = true;
    pending.row = row;
    pending.where = where;
    pending.bytes = bytes;
}

void sim_charge_pending(void) {
    uint64_t ns = pending.set ? sim_cost_ns(pending.row, pending.where, pending.bytes)
                              : sim_cost_ns(SIM_COST_DEFAULT, SIM_AT_DEVICE, 0);
    if (pending.set)
        atomic_fetch_add_explicit(&calls[pending.row][pending.where], 1, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(&calls[SIM_COST_DEFAULT][SIM_AT_DEVICE], 1, memory_order_relaxed);
    pending.set = false;
    atomic_fetch_add_explicit(&sim.host_ns, ns, memory_order_relaxed);
}

uint64_t sim_cost_calls(enum sim_cost_row row, enum sim_where where) {
    return atomic_load_explicit(&calls[row][where], memory_order_relaxed);
}

/* ------------------------------------------------------------------ the cost file */

/* The file is read by the one reader of its format (src/cost_file.c, shared with the hostoff
 * command); its names are this table's (tests/unit/test_sim_costs.c checks the two agree). */

static int find_row(const char *name) {
    for (int i = 0; i < SIM_COST_ROWS; i++)
        if (strcmp(rows[i].name, name) == 0) return i;
    return -1;
}

static void apply_row(void *ctx, const struct ho_cost_row *r) {
    (void)ctx;
    if (r->link) {
        for (size_t i = 0; i < NLINK; i++)
            if (strcmp(r->name, link_fields[i].name) == 0)
                *(double *)(void *)((char *)&link + link_fields[i].offset) = r->gbps;
        return;
    }
    int row = find_row(r->name);
    if (row < 0) return;
    for (int w = SIM_AT_DEVICE; w <= SIM_AT_HOST; w++)
        if (r->where == HO_COST_BOTH || (int)r->where == w)
            table[row][w] = (struct cost){r->fixed_ns, r->per_mib_ns, true};
}

static bool load_file(const char *path) {
    char err[1400];
    if (ho_cost_file_read(path, apply_row, NULL, err, sizeof err)) return true;
    fprintf(stderr, "simcuda: SIMCUDA_COSTS=%s\n", err);
    return false;
}

/* SIMCUDA_DUPLEX_GBPS (both directions together, the older variable) splits into the two
 * per-direction duplex rates in the proportion of those in force, each at most its direction's
 * rate alone; what one direction cannot use goes to the other. */
static void split_duplex(double total) {
    double sum = link.h2d_duplex + link.d2h_duplex;
    double h = total * link.h2d_duplex / sum, d = total * link.d2h_duplex / sum;
    if (h > link.h2d) {
        h = link.h2d;
        d = fmin(link.d2h, total - h);
    } else if (d > link.d2h) {
        d = link.d2h;
        h = fmin(link.h2d, total - d);
    }
    link.h2d_duplex = h;
    link.d2h_duplex = d;
}

/* A rate variable, when set: a positive finite number of GB/s (one line naming it otherwise). */
static bool env_rate(const char *name, double *out) {
    const char *v = getenv(name);
    if (v == NULL) return true;
    char *end = NULL;
    errno = 0;
    double r = strtod(v, &end);
    bool digits = v[0] >= '0' && v[0] <= '9' && strpbrk(v, "xX") == NULL;
    if (!digits || errno != 0 || end == v || *end != '\0' || !isfinite(r) || r <= 0) {
        fprintf(stderr, "simcuda: %s=\"%s\": expected a rate in GB/s above 0\n", name, v);
        return false;
    }
    *out = r;
    return true;
}

bool sim_costs_load(struct sim_config *cfg) {
    for (int i = 0; i < SIM_COST_ROWS; i++) {
        table[i][SIM_AT_DEVICE] = rows[i].device;
        table[i][SIM_AT_HOST] = rows[i].host;
    }
    link = builtin_link;
    for (int w = SIM_AT_DEVICE; w <= SIM_AT_HOST; w++)
        table[SIM_COST_DEFAULT][w].fixed_ns = (double)cfg->launch_ns;
    /* The reader's names are this table's, in its order: a row added to one and not the other
     * would make every cuInit fail here, not a cost file silently ignored. */
    bool agree = ho_cost_nentries == SIM_COST_ROWS;
    for (int i = 0; agree && i < SIM_COST_ROWS; i++)
        agree = strcmp(rows[i].name, ho_cost_entries[i]) == 0;
    for (size_t i = 0; agree && i < NLINK; i++)
        agree =
            i < ho_cost_nlink_fields && strcmp(link_fields[i].name, ho_cost_link_fields[i]) == 0;
    if (!agree || ho_cost_nlink_fields != NLINK) {
        fprintf(stderr, "simcuda: the cost table (costs.c) and the cost file reader "
                        "(src/cost_file.c) name different rows\n");
        return false;
    }
    const char *path = getenv("SIMCUDA_COSTS");
    if (path != NULL && *path != '\0' && !load_file(path)) return false;
    /* Explicitly set variables win over the file: a test or benchmark that names one means it. */
    if (getenv("SIMCUDA_LAUNCH_NS") != NULL) {
        for (int w = SIM_AT_DEVICE; w <= SIM_AT_HOST; w++)
            table[SIM_COST_DEFAULT][w] = (struct cost){(double)cfg->launch_ns, 0, true};
    }
    if (getenv("SIMCUDA_H2D_GBPS") != NULL) link.h2d = cfg->h2d_gbps;
    if (getenv("SIMCUDA_D2H_GBPS") != NULL) link.d2h = cfg->d2h_gbps;
    if (getenv("SIMCUDA_HBM_GBPS") != NULL) link.hbm = cfg->hbm_gbps;
    if (getenv("SIMCUDA_DUPLEX_GBPS") != NULL) split_duplex(cfg->duplex_gbps);
    /* Each direction's rate while both run, when known (NVLink-C2C's are not PCIe's 35:53). */
    if (!env_rate("SIMCUDA_H2D_DUPLEX_GBPS", &link.h2d_duplex) ||
        !env_rate("SIMCUDA_D2H_DUPLEX_GBPS", &link.d2h_duplex))
        return false;
    /* The rest of the simulator reads these. */
    cfg->launch_ns = (uint64_t)llround(table[SIM_COST_DEFAULT][SIM_AT_DEVICE].fixed_ns);
    cfg->h2d_gbps = link.h2d;
    cfg->d2h_gbps = link.d2h;
    cfg->hbm_gbps = link.hbm;
    cfg->duplex_gbps = link.h2d_duplex + link.d2h_duplex;
    return true;
}
