/* The device pool: physical device memory no buffer holds right now, kept mapped with device
 * access so that the next allocation or restore of the same size takes it without a driver call
 * (issue 13: a restore maps a chunk the pool holds instead of creating one; an eviction gives its
 * chunk back instead of releasing it).
 *
 * Where entries come from: a freed resident buffer (its handle, mapped at the buffer's address,
 * plus the copy window it may have), and a completed eviction (its handle, mapped at the window it
 * was restored through, or at one given to it then, once). Entries are kept by exact size.
 *
 * Why not size classes, larger chunks or pieces, as the host pool has (pool_host.c): device
 * bytes are the budget. A chunk larger than its buffer holds budget nobody uses, and every such
 * byte is one more that must leave and come back at the peak. And the calls it would save are
 * cheap: measured with tools/bench_pool.py (docs/policy-benchmark.md, "The host pool"), the
 * device-located creates and releases left per step are charged 14-98 ms of a 3-6 s step (30 us
 * and 23 us each; their window maps about as much again: at most ~5% of a step, on the moe-4k
 * recording, ~1% on the generated presets), while rounding to the host pool's classes (up to
 * 1.6%) at 70% of the generated deepseek's 110 GB peak would take up to 1.2 GB of budget: ~22 ms
 * more copying each way per step over PCIe Gen5. Kept exact; a per-workload measurement of a
 * rounded device pool is left to do.
 *
 * The budget: pooled bytes count as resident (they are device memory) and are the first thing
 * given up under pressure, before any buffer is evicted; d->cached says how many there are.
 * Callers hold eng.lock. */
#include "engine_internal.h"

#include "real.h"

#include <stdlib.h>

/* Undoes a pooled chunk: both its mappings, its address ranges, the handle. */
static void chunk_release(struct ho_dev *d, struct ho_cached *c) {
    ho_ctx_push(d);
    if (c->window != 0) ho_range_drop(c->window, c->span, 0, true);
    ho_range_drop(c->va, c->span, c->dev, true);
    ho_ctx_pop();
    d->cached -= c->span;
    d->resident -= c->span;
    free(c);
}

bool ho_cache_has(const struct ho_dev *d, uint64_t span) {
    HO_ASSERT_HELD(&eng.lock);
    for (const struct ho_cached *c = d->cache; c != NULL; c = c->next)
        if (c->span == span) return true;
    return false;
}

bool ho_room_for(const struct ho_dev *d, uint64_t span) {
    HO_ASSERT_HELD(&eng.lock);
    return d->resident + span <= d->budget || ho_cache_has(d, span);
}

/* Gives pooled device memory back until `need` more bytes fit under `limit` (or the pool is
 * empty). A chunk of exactly `need` bytes is kept: the caller takes it, and that needs no room. */
void ho_cache_trim(struct ho_dev *d, uint64_t need, uint64_t limit) {
    HO_ASSERT_HELD(&eng.lock);
    if (ho_cache_has(d, need)) return;
    while (d->cache != NULL && d->resident + need > limit) {
        struct ho_cached *c = d->cache;
        d->cache = c->next;
        chunk_release(d, c);
    }
}

bool ho_cache_take(struct ho_dev *d, uint64_t span, CUdeviceptr *va,
                   CUmemGenericAllocationHandle *dev, CUdeviceptr *window) {
    HO_ASSERT_HELD(&eng.lock);
    for (struct ho_cached **pp = &d->cache; *pp != NULL; pp = &(*pp)->next) {
        struct ho_cached *c = *pp;
        if (c->span != span) continue;
        *pp = c->next;
        *va = c->va;
        *dev = c->dev;
        *window = c->window;
        d->cached -= span; /* still resident: it now holds the new buffer */
        free(c);
        return true;
    }
    return false;
}

bool ho_cache_put(struct ho_dev *d, CUdeviceptr va, CUmemGenericAllocationHandle dev,
                  CUdeviceptr window, uint64_t span) {
    HO_ASSERT_HELD(&eng.lock);
    struct ho_cached *c = malloc(sizeof *c);
    if (c == NULL) return false;
    *c = (struct ho_cached){va, dev, window, span, d->cache};
    d->cache = c;
    d->cached += span;
    return true;
}

bool ho_cache_take_window(struct ho_dev *d, uint64_t span, CUmemGenericAllocationHandle *dev,
                          CUdeviceptr *window) {
    HO_ASSERT_HELD(&eng.lock);
    CUdeviceptr va, extra;
    if (!ho_cache_take(d, span, &va, dev, &extra)) return false;
    if (extra != 0) { /* a freed buffer's chunk: one mapping is enough for a copy target */
        ho_ctx_push(d);
        ho_range_drop(extra, span, 0, true);
        ho_ctx_pop();
    }
    *window = va;
    return true;
}
