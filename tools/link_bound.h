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
/*
 * The remap bound: the host's part. The engine keeps every address valid (DESIGN.md, facts 4 and
 * 6: a pointer the library cannot see, in a kernel's pointer array, reads an evicted buffer where
 * it is), so each eviction maps the buffer's whole range to host memory and sets its access there
 * (cuMemSetAccess on a host-located range is charged per MiB), and each restore unmaps that range
 * (charged per MiB too). All of a process's calls are charged on one host clock (the simulator's;
 * docs/simcuda.md), so a job's steps together last at least the host time of their launches and
 * of the remaps of the bytes each interval must move, however the moves are chosen:
 *
 *     launches x (a launch's cost) + leave x (map + set-access per MiB, host-located)
 *                                  + back x (unmap per MiB, host-located)
 *
 * per interval, on average. The fixed parts of those calls, every other call of the trace and of
 * the engine, and a pinned buffer's first pinning are left out, which only lowers it. hostoff
 * replay computes it with the figures its simulator charged (its report's cost rows) and prints
 * the most of it and the ordered bound as `remap_bound_step_ns`. */
#ifndef HOSTOFF_TOOLS_LINK_BOUND_H
#define HOSTOFF_TOOLS_LINK_BOUND_H

#include "trace_read.h"

#include <stddef.h>
#include <stdint.h>

struct link_bound {
    uint64_t step_ns; /* the mean of the intervals' bounds */
    uint64_t link_ns; /* the mean of their link part alone (R / h2d + V / d2h) */
    /* For the remap bound (below), means over the intervals: the least bytes that must leave the
     * device (an eviction that begins after p) and come back (a restore that ends before p'), and
     * the launches from one peak to the next. */
    uint64_t leave_bytes, back_bytes;
    double launches;
    size_t intervals; /* steps less one; 0: not computed (fewer than two steps, or launches on
                       * several streams) */
};

/* 0 on success (out->intervals 0 when it does not apply), -1 when out of memory. budget:
 * whole-device bytes; rates in GB/s (bytes per ns). */
int link_bound(const struct trace *t, uint64_t budget, uint64_t min_bytes, double h2d_gbps,
               double d2h_gbps, struct link_bound *out);

#endif
