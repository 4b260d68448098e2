/* A lower bound on a step's time under a budget that counts the order in which the bytes must
 * cross the link, for the policy benchmark's "ordered limit" (tools/bench_policy.py).
 *
 * The physical limit of issue 14, max(T, E / d2h, E / h2d, 2E / duplex), lets the E bytes that
 * leave before a step's peak and the E that come back after it share the link both ways at once.
 * They can only where the buffers' uses allow it. In a training step the buffers away at the peak
 * are mostly activations: each leaves after its forward use and must be back before its backward
 * use, so every restore is due before the next step's evictions may start, and the two directions
 * take turns.
 *
 * The argument, between the peaks p and p' of two consecutive steps (the launches with the most
 * bytes over the budget, stretches.h's model): let A and A' be the buffers away there, holding at
 * least the excess at each. Each buffer of A comes back after p starts and before its next use;
 * each of A' leaves after its last use before p' and is away before p' starts. For any launch q in
 * between, the buffers of A next used at or before q (their restores end before q starts) and
 * those of A' last used at or after q (their evictions begin after q ends) cross the link in two
 * stretches of time that do not overlap, so the time from p to p' is at least
 *
 *     R(q) / h2d + V(q) / d2h
 *
 * where R(q) is the least such restore traffic any A covering the excess at p has (the buffers not
 * due by q cover what they can, the rest must be due), and V(q) likewise for A'. The bound for the
 * interval is the most of that over q, and at least the kernels' device time from p to p'. Copies
 * are whole buffers at the link's one-way rates; a buffer that has not been written since its
 * allocation leaves without a copy, and one that is freed or never used again does not come back.
 * It assumes the launches run in their order (a single stream: with launches on several streams it
 * is not computed), and says nothing of the steps before the first peak or after the last.
 *
 * A step is reported as the mean over the intervals: the time from one step's peak to the next is
 * one step of a job whose steps repeat. */
#ifndef HOSTOFF_TOOLS_LINK_BOUND_H
#define HOSTOFF_TOOLS_LINK_BOUND_H

#include "trace_read.h"

#include <stddef.h>
#include <stdint.h>

struct link_bound {
    uint64_t step_ns; /* the mean of the intervals' bounds */
    uint64_t link_ns; /* the mean of their link part alone (R / h2d + V / d2h) */
    size_t intervals; /* steps less one; 0: not computed (fewer than two steps, or launches on
                       * several streams) */
};

/* 0 on success (out->intervals 0 when it does not apply), -1 when out of memory. budget:
 * whole-device bytes; rates in GB/s (bytes per ns). */
int link_bound(const struct trace *t, uint64_t budget, uint64_t min_bytes, double h2d_gbps,
               double d2h_gbps, struct link_bound *out);

#endif
