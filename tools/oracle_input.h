/* The oracle's plan for a trace (policy/oracle.h), as `hostoff replay --policy oracle` gives it
 * to the library: the trace's launches and allocations numbered as the engine will see them. */
#ifndef HOSTOFF_TOOLS_ORACLE_INPUT_H
#define HOSTOFF_TOOLS_ORACLE_INPUT_H

#include "trace_read.h"

#include <stddef.h>
#include <stdint.h>

/* Plans for the device budget (bytes) and host-to-device rate (GB/s) and writes the plan to path.
 * 0 on success, else -1 with the reason in err. */
/* min_bytes: the replay's HOSTOFF_MIN_BYTES (smaller allocations pass through to the driver:
 * never numbered, never moved). */
int oracle_write_plan(const struct trace *t, uint64_t budget, uint64_t min_bytes, double h2d_gbps,
                      const char *path, char *err, size_t errcap);

/* The most bytes the trace's allocations below min_bytes (and its managed-memory ones, which the
 * engine does not move either) hold at once: device memory the engine's budget cannot count on. */
uint64_t oracle_unmanaged_peak(const struct trace *t, uint64_t min_bytes);

/* The largest allocation the engine manages in the replay, as it maps it (whole 2 MiB granules);
 * 0 when none. */
uint64_t oracle_largest_taken(const struct trace *t, uint64_t min_bytes);

#endif
