/* Bounds on the bytes a replay must evict to keep a trace within a device budget, for the policy
 * benchmark's "moved" figures (tools/bench_policy.py). The E (the trace's peak less the
 * budget) is the trivial bound: at the peak, E bytes must be off the device. This one also counts
 * that the excess at different moments may need different buffers away: over the whole trace it
 * is never below E, and per step it may be well above it (a step's peak and its neighbour's are
 * each at most about E, and the buffers idle across both may be too few).
 *
 * The model: the trace's launches are positions; at each, the bytes of every live allocation above
 * the budget must be away (the managed ones counted as the engine maps them, in whole 2 MiB
 * granules). A buffer the engine manages (not managed memory, at least the replay's
 * HOSTOFF_MIN_BYTES) can be away only between two of its uses, before its first or after its
 * last, and each stretch it spends away begins with an eviction of all its bytes (the engine
 * makes every buffer on the device and moves whole buffers). A launch's own buffers are resident:
 * the engine's host-located mappings would let a kernel read them over the link, which it does
 * only when nothing else fits (a replay's remote_accesses), and those bytes are reported as
 * `uncovered` rather than bounded. A move's timing and the link are left out, which only lowers
 * the bound. Choosing the stretches is a covering problem; any solution of its linear
 * relaxation's dual bounds every schedule from below (weak duality), and a simple schedule of the
 * relaxation bounds its minimum from above (move_bound.c). */
#ifndef HOSTOFF_TOOLS_MOVE_BOUND_H
#define HOSTOFF_TOOLS_MOVE_BOUND_H

#include "trace_read.h"

#include <stdbool.h>
#include <stdint.h>

struct move_bound {
    uint64_t bytes;     /* no schedule within the budget evicts fewer bytes over the whole trace */
    uint64_t uncovered; /* the most bytes over the budget at a launch that the managed buffers
                         * which could be away there do not hold: no schedule keeps that launch
                         * within the budget, and the bounds leave those bytes out (0: none) */
    uint64_t cover;     /* what a simple schedule of the same relaxed problem evicts (greedy,
                         * move_bound.c): the relaxed minimum lies between `bytes` and this */
};

/* 0 on success, -1 when out of memory. budget: whole-device bytes. */
int move_bound(const struct trace *t, uint64_t budget, uint64_t min_bytes, struct move_bound *out);

#endif
