/* The stretches a trace's managed buffers could spend off the device, and each launch's excess
 * over a budget: the model both bounds of a replay share (move_bound.h: bytes; link_bound.h:
 * time). A buffer the engine manages (not managed memory, at least the replay's
 * HOSTOFF_MIN_BYTES, counted as the engine maps it, in whole 2 MiB granules) can be away only
 * between two of its uses, before its first or after its last. Positions are launches, counted in
 * the trace's order. */
#ifndef HOSTOFF_TOOLS_STRETCHES_H
#define HOSTOFF_TOOLS_STRETCHES_H

#include "trace_read.h"

#include <stdbool.h>
#include <stdint.h>

struct stretch {
    uint64_t lo, hi; /* launches it covers, inclusive */
    uint64_t bytes;
    uint32_t chosen; /* move_bound.c: launches of its set Q it covers */
    /* Whether being away there takes a copy each way: an eviction after the use at lo - 1 (not
     * so for a stretch from the buffer's allocation, whose bytes nothing has written yet) and a
     * restore before the use at hi + 1 (not so for one that ends at the free, or the trace's
     * end). */
    bool evicts, restores;
};

struct stretches {
    struct stretch *s;
    size_t n, cap;
};

/* Fills over[0..t->launches) with each launch's live bytes less the budget (all live allocations,
 * the managed ones as mapped) and g with every managed buffer's stretches. False when out of
 * memory. */
bool stretches_collect(const struct trace *t, uint64_t budget, uint64_t min_bytes, int64_t *over,
                       struct stretches *g);

/* Lowers each launch's excess to what the stretches covering it hold (no schedule keeps a launch
 * within the budget when they hold less: its own buffers are on the device), and sets *uncovered
 * to the most it lowered one by: the bytes no schedule can cover (0: none). False when out of
 * memory (nothing changed). */
bool stretches_cap(int64_t *over, const struct stretches *g, size_t nl, uint64_t *uncovered);

void stretches_free(struct stretches *g);

#endif
