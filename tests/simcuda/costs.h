/* The simulator's cost model: what each driver call charges the host clock, and the link rates.
 *
 * One table (costs.c) holds a row per entry point that has a cost of its own, each with a value
 * for device-located and host-located memory (a DEVICE vs HOST/HOST_NUMA VMM handle, device vs
 * pinned host memory): fixed ns per call plus ns per MiB of the size the call acts on. Rows
 * without a figure of their own charge the `default` row (SIMCUDA_LAUNCH_NS). Built-in values are
 * published measurements, cited in docs/simcuda.md; SIMCUDA_COSTS=path replaces any of them
 * (format: docs/simcuda.md, "Cost file"); explicitly set SIMCUDA_* variables win over both. */
#ifndef SIMCUDA_COSTS_H
#define SIMCUDA_COSTS_H

#include <stdbool.h>
#include <stdint.h>

struct sim_config;

/* Where the memory a call acts on lives. Calls that act on no memory use SIM_AT_DEVICE. */
enum sim_where { SIM_AT_DEVICE, SIM_AT_HOST };

/* The rows: one per entry point (base name as in cuda.h) with a cost of its own. */
enum sim_cost_row {
    SIM_COST_DEFAULT,
    SIM_COST_MEM_CREATE,
    SIM_COST_MEM_MAP,
    SIM_COST_MEM_SET_ACCESS,
    SIM_COST_MEM_UNMAP,
    SIM_COST_MEM_RELEASE,
    SIM_COST_MEM_HOST_ALLOC,
    SIM_COST_MEM_FREE_HOST,
    SIM_COST_MEM_HOST_REGISTER,
    SIM_COST_MEM_HOST_UNREGISTER,
    SIM_COST_MEM_ALLOC,
    SIM_COST_MEM_FREE,
    SIM_COST_MEM_ALLOC_ASYNC,
    SIM_COST_MEM_FREE_ASYNC,
    SIM_COST_MEM_ADDRESS_RESERVE,
    SIM_COST_MEM_ADDRESS_FREE,
    SIM_COST_LAUNCH_KERNEL,
    SIM_COST_GRAPH_LAUNCH,
    SIM_COST_MEMCPY,
    SIM_COST_MEMCPY_ASYNC,
    SIM_COST_EVENT_RECORD,
    SIM_COST_EVENT_QUERY,
    SIM_COST_EVENT_SYNCHRONIZE,
    SIM_COST_STREAM_WAIT_EVENT,
    SIM_COST_STREAM_SYNCHRONIZE,
    SIM_COST_STREAM_QUERY,
    SIM_COST_CTX_SYNCHRONIZE,
    SIM_COST_ROWS
};

/* The link between host and device, in GB/s (1 GB = 1e9 bytes, so GB/s == bytes per ns). */
struct sim_link {
    double h2d, d2h;               /* each direction alone */
    double h2d_duplex, d2h_duplex; /* each direction while the other also runs */
    double zerocopy;               /* a kernel reading or writing host-located memory */
    double hbm;                    /* device-to-device copies and memsets */
};

/* Builds the table: built-in rows, then the SIMCUDA_COSTS file, then explicitly set SIMCUDA_*
 * variables (cfg). On a bad file prints one line naming it and returns false. */
bool sim_costs_load(struct sim_config *cfg);
/* The link rates in force (after sim_costs_load). */
const struct sim_link *sim_link(void);
/* What one call of `row` acting on `bytes` at `where` costs, in ns. */
uint64_t sim_cost_ns(enum sim_cost_row row, enum sim_where where, uint64_t bytes);
/* The figures `row` charges at `where`, as in force (a row without figures of its own: the
 * `default` row's), for the report: fixed ns per call, ns per MiB. */
void sim_cost_figures(enum sim_cost_row row, enum sim_where where, double *fixed_ns,
                      double *per_mib_ns);
/* Names the row the calling thread's next sim_enter() charges (else `default`). Set it just
 * before the entry point's sim_enter / sim_require_ctx; it is consumed there. */
void sim_bill(enum sim_cost_row row, enum sim_where where, uint64_t bytes);
/* Charges the pending row (or `default`) on the host clock and clears it (state.c calls it). */
void sim_charge_pending(void);
/* Calls charged so far under `row` at `where` (calls without a row of their own count under
 * `default`, device). */
uint64_t sim_cost_calls(enum sim_cost_row row, enum sim_where where);
/* The row name as a cost file spells it ("cuMemCreate"). */
const char *sim_cost_name(enum sim_cost_row row);

#endif
