/* The oracle's plan for a trace (policy/oracle.h), as `hostoff replay --policy oracle` gives it
 * to the library: the trace's launches and allocations numbered as the engine will see them. */
#ifndef HOSTOFF_TOOLS_ORACLE_INPUT_H
#define HOSTOFF_TOOLS_ORACLE_INPUT_H

#include "trace_read.h"

#include <stddef.h>
#include <stdint.h>

/* Plans for the device budget (bytes) and host-to-device rate (GB/s) and writes the plan to path.
 * 0 on success, else -1 with the reason in err. */
int oracle_write_plan(const struct trace *t, uint64_t budget, double h2d_gbps, const char *path,
                      char *err, size_t errcap);

#endif
