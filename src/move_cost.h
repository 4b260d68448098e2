/* What a move costs beyond its copy: the fixed time of the driver calls that remap a buffer, and
 * the smallest buffer worth moving because of it, for the report (a guide to HOSTOFF_MIN_BYTES).
 * From a table of published figures (below), then from the engine's own measurement of its remaps
 * on the driver's clock (ho_clock_ns: the simulator's virtual clock under simcuda, CLOCK_MONOTONIC
 * on a GPU). */
#ifndef HOSTOFF_MOVE_COST_H
#define HOSTOFF_MOVE_COST_H

#include <stdbool.h>
#include <stdint.h>

/* Published figures, per call at the 2 MiB granularity (vAttention, arXiv 2405.04437, Table 3,
 * for device-located handles; a CUDA 13 VMM latency study quoted in issue 13 for host-located
 * ones; docs/simcuda.md "Costs" cites the same). An eviction remaps the buffer's address from its
 * device handle to a host one: cuMemUnmap (device, 30 us), cuMemMap (host, 6 us), cuMemSetAccess
 * (host, 98 us + 9 us/MiB). A restore: cuMemUnmap (host, 57 us + 1.2 us/MiB), cuMemMap (device,
 * 2 us), cuMemSetAccess (device, 40 us). The fixed parts of a round trip add up to 233 us. */
#define HO_PUBLISHED_EVICT_REMAP_NS   (30000u + 6000u + 98000u)
#define HO_PUBLISHED_RESTORE_REMAP_NS (57000u + 2000u + 40000u)
/* PCIe Gen5 x16, one direction (nvbandwidth reports): 55 GB/s, i.e. bytes per ns. */
#define HO_PUBLISHED_LINK_BYTES_PER_NS 55.0

/* HOSTOFF_MIN_BYTES=auto (the default): the smallest buffer worth moving, fixed when the
 * library starts, before it has timed a remap or a copy. A buffer whose round trip costs more in
 * fixed driver time than its bytes take on the link is not worth moving: in that time the link
 * could have moved as many bytes of a larger buffer. So: the published fixed parts of a round
 * trip's remap calls (233 us, above) times the published link rate (PCIe Gen5, 55 GB/s):
 * 12,815,000 bytes (12.2 MiB). The engine knows no faster link at start (on a GH200's NVLink-C2C,
 * 345 GB/s, the same rule gives 80 MB: set HOSTOFF_MIN_BYTES there). Inline: the hostoff command
 * (replay) computes the same value. */
static inline uint64_t ho_min_bytes_auto(void) {
    return (uint64_t)((double)(HO_PUBLISHED_EVICT_REMAP_NS + HO_PUBLISHED_RESTORE_REMAP_NS) *
                      HO_PUBLISHED_LINK_BYTES_PER_NS);
}

/* A remap of `span` bytes took `ns` on the driver's clock (evict: to host; else to device); the
 * report's time_ns.move_fixed and bytes.move_worth follow (link_bytes_per_ns: as below). */
void ho_move_cost_note(bool evict, uint64_t span, uint64_t ns, double link_bytes_per_ns);

/* The fixed driver time of a round trip (evict + restore remap), ns: once both kinds were
 * measured, the fastest remap of the smallest buffer of each (an upper bound of the fixed part:
 * the per-MiB part is never negative), else the published figures. */
uint64_t ho_move_fixed_ns(void);

/* The smallest buffer worth moving: one whose bytes take the link at least as long as its round
 * trip's fixed driver time (below that, the time spent remapping it would have moved more bytes
 * of a larger buffer). link_bytes_per_ns: the measured rate, or 0 for the published one. */
uint64_t ho_move_worth_bytes(double link_bytes_per_ns);

#endif
