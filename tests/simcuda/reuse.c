/* Stream-ordered reuse: what a cuMemFreeAsync gives back, and to whom.
 *
 * NVIDIA's stream-ordered allocator reuses freed memory under three policies, each a pool
 * attribute enabled by default (docs/simcuda.md cites them):
 * - a later allocation on the freeing stream may take it at once: stream order already puts the
 *   free before any use of the allocation (not an attribute: always);
 * - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: an allocation on another stream may take it
 *   once that stream is ordered after the free, through event waits or the legacy stream;
 * - CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC: anyone may take it once the free has completed
 *   (here: in virtual time). Off, the pool keeps it until a synchronising call after that.
 *
 * Every decision is taken on the host, after the executor has caught up (wall clock only), from
 * what the calls so far ordered: the same calls give the same addresses and the same timeline.
 * Callers hold sim.lock. */
#include "sim.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ event ordering */

static void order_put(struct sim_order *o, unsigned long long stream, uint64_t seq) {
    for (int i = 0; i < o->n; i++) {
        if (o->e[i].stream == stream) {
            if (seq > o->e[i].seq) o->e[i].seq = seq;
            return;
        }
    }
    if (o->n < SIM_ORDER_MAX) {
        o->e[o->n].stream = stream;
        o->e[o->n].seq = seq;
        o->n++;
        return;
    }
    /* Full: the oldest knowledge goes. Forgetting an ordering only loses reuse. */
    int oldest = 0;
    for (int i = 1; i < o->n; i++)
        if (o->e[i].seq < o->e[oldest].seq) oldest = i;
    if (seq > o->e[oldest].seq) {
        o->e[oldest].stream = stream;
        o->e[oldest].seq = seq;
    }
}

void sim_order_note_record(struct sim_event *e, struct sim_stream *s, uint64_t seq) {
    e->order = s->order;
    order_put(&e->order, s->id, seq);
}

void sim_order_note_wait(struct sim_stream *s, const struct sim_event *e) {
    for (int i = 0; i < e->order.n; i++)
        if (e->order.e[i].stream != s->id)
            order_put(&s->order, e->order.e[i].stream, e->order.e[i].seq);
}

static bool order_covers(const struct sim_order *o, unsigned long long stream, uint64_t seq) {
    for (int i = 0; i < o->n; i++)
        if (o->e[i].stream == stream) return o->e[i].seq >= seq;
    return false;
}

/* Whether an allocation from `pool` on stream s may take free r's memory: work s enqueues from
 * now on is ordered after the free, or the free has completed and the pool reuses
 * opportunistically. */
static bool ordered_after(const struct sim_release *r, const struct sim_stream *s,
                          unsigned long long pool, bool follow_events) {
    if (r->pool != pool || r->stream == 0) return false;
    if (r->stream == s->id) return true; /* stream order */
    if (r->at_ns <= sim_now() && sim_pool_opportunistic(pool)) return true;
    if (!follow_events) return false;
    if (r->ctx == s->ctx) {
        /* The legacy stream waits for earlier work on blocking streams, and they for it. */
        bool s_blocking = !s->legacy && !(s->flags & CU_STREAM_NON_BLOCKING);
        if ((s->legacy && r->blocking) || (s_blocking && r->legacy)) return true;
    }
    return order_covers(&s->order, r->stream, r->seq);
}

/* ------------------------------------------------------------------ the releases */

void sim_release_add(struct sim_device *dev, const struct sim_op *free_op, uint64_t bytes, void *va,
                     uint64_t va_size, uint64_t at_ns) {
    if (dev->nreleases == dev->cap_releases) {
        size_t cap = dev->cap_releases ? dev->cap_releases * 2 : 64;
        struct sim_release *n = realloc(dev->releases, cap * sizeof *n);
        if (n == NULL) {
            sim_capacity_give(dev, bytes); /* early rather than never; the range is not reused */
            return;
        }
        dev->releases = n;
        dev->cap_releases = cap;
    }
    struct sim_release r = {
        .bytes = bytes, .held = bytes, .at_ns = at_ns, .va = va, .va_size = va_size};
    const struct sim_stream *s = free_op->stream_ordered ? free_op->stream : NULL;
    if (s != NULL) {
        r.stream = s->id;
        r.legacy = s->legacy;
        r.blocking = !s->legacy && !(s->flags & CU_STREAM_NON_BLOCKING);
        r.ctx = s->ctx;
    }
    r.seq = free_op->seq;
    r.pool = free_op->u.free.pool;
    dev->releases[dev->nreleases++] = r;
}

static void release_drop(struct sim_device *dev, size_t i) {
    memmove(&dev->releases[i], &dev->releases[i + 1],
            (dev->nreleases - i - 1) * sizeof *dev->releases);
    dev->nreleases--;
}

void sim_releases_apply(struct sim_device *dev) {
    uint64_t now = sim_now();
    size_t w = 0;
    unsigned long long pool = 0; /* the pool `excess` was counted for */
    uint64_t excess = 0;         /* what it holds beyond what its release threshold keeps */
    for (size_t i = 0; i < dev->nreleases; i++) {
        struct sim_release *r = &dev->releases[i];
        if (r->at_ns <= now && r->va != NULL) {
            sim_va_recycle(r->va, r->va_size);
            r->va = NULL;
        }
        /* A pool keeps what a completed free gave it (its allocations, on any stream when it
         * reuses opportunistically, may take it) until the first synchronising call after the
         * free completed, where it gives back to the device what it holds beyond its release
         * threshold (0 by default: everything). Memory freed with cuMemFreeAsync outside a pool
         * (pool 0) goes back at completion. */
        uint64_t by = r->pool == 0 ? now : dev->synced_ns;
        if (r->held > 0 && r->at_ns <= by) {
            uint64_t give = r->held;
            uint64_t keep = r->pool != 0 ? sim_pool_keeps(r->pool) : 0;
            if (keep > 0) {
                if (r->pool != pool) {
                    uint64_t held = sim_pool_held(dev, r->pool);
                    pool = r->pool;
                    excess = held > keep ? held - keep : 0;
                }
                if (give > excess) give = excess;
                excess -= give;
            }
            sim_capacity_give(dev, give);
            r->held -= give;
        }
        if (r->held > 0 || r->va != NULL) dev->releases[w++] = *r;
    }
    dev->nreleases = w;
}

uint64_t sim_pool_held(const struct sim_device *dev, unsigned long long pool) {
    uint64_t held = 0;
    for (size_t i = 0; i < dev->nreleases; i++)
        if (dev->releases[i].pool == pool) held += dev->releases[i].held;
    return held;
}

void sim_pool_trim(struct sim_device *dev, unsigned long long pool, uint64_t keep) {
    uint64_t held = sim_pool_held(dev, pool), now = sim_now();
    for (size_t i = 0; i < dev->nreleases && held > keep; i++) {
        struct sim_release *r = &dev->releases[i];
        if (r->pool != pool || r->held == 0 || r->at_ns > now) continue;
        uint64_t t = r->held < held - keep ? r->held : held - keep;
        r->held -= t;
        held -= t;
        sim_capacity_give(dev, t);
    }
}

/* Takes up to `want` bytes the pool holds from frees an allocation on s may reuse, oldest first,
 * except release `skip`; with `take` false only counts them. */
static uint64_t cover(struct sim_device *dev, const struct sim_stream *s, unsigned long long pool,
                      bool follow_events, size_t skip, uint64_t want, bool take) {
    uint64_t got = 0;
    for (size_t i = 0; i < dev->nreleases && got < want; i++) {
        struct sim_release *r = &dev->releases[i];
        if (i == skip || r->held == 0 || !ordered_after(r, s, pool, follow_events)) continue;
        uint64_t t = r->held < want - got ? r->held : want - got;
        if (take) r->held -= t;
        got += t;
    }
    return got;
}

/* Hands free i's address range to an allocation of `bytes` on s, when it fits the capacity. Its
 * bytes come from what the pool holds of that free, then of the other frees the allocation may
 * reuse (an earlier allocation may have taken the first's), and only then from the device. */
static bool hand_over(struct sim_device *dev, const struct sim_stream *s, unsigned long long pool,
                      bool follow_events, size_t i, uint64_t bytes, uint64_t *out) {
    const struct sim_release r = dev->releases[i];
    uint64_t own = r.held < bytes ? r.held : bytes;
    uint64_t others = cover(dev, s, pool, follow_events, i, bytes - own, false);
    /* The free's own bytes beyond the allocation go back to the device with it. */
    if (dev->used_bytes - r.held - others + bytes > sim.cfg.device_mem) return false;
    if (!sim_va_commit(r.va, r.va_size)) return false;
    struct sim_range *nr =
        sim_range_add((uint64_t)(uintptr_t)r.va, bytes, SIM_R_DEVICE, dev->ordinal);
    if (nr == NULL) {
        sim_va_close(r.va, r.va_size);
        return false;
    }
    /* Taken and dropped before the capacity calls: they apply releases, which compacts the
     * array. */
    cover(dev, s, pool, follow_events, i, bytes - own, true);
    release_drop(dev, i);
    sim_capacity_give(dev, r.held + others);
    sim_capacity_take(dev, bytes); /* fits: checked above */
    nr->from_pool = true;
    nr->reused_until_ns = r.at_ns;
    sim.stats.reuse_handovers++;
    *out = nr->base;
    return true;
}

CUresult sim_reuse_alloc(struct sim_device *dev, struct sim_stream *s, unsigned long long pool,
                         bool follow_events, uint64_t bytes, uint64_t *out) {
    if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    sim_capacity_settle(dev); /* every free enqueued so far has run and is recorded */
    const uint64_t vsz = sim_alloc_va_size(bytes), align = sim_alloc_align(bytes);
    /* The oldest ordered free of the same extent gives its address range. */
    for (size_t i = 0; i < dev->nreleases; i++) {
        const struct sim_release *r = &dev->releases[i];
        if (r->va != NULL && r->va_size == vsz && ((uintptr_t)r->va & (align - 1)) == 0 &&
            ordered_after(r, s, pool, follow_events) &&
            hand_over(dev, s, pool, follow_events, i, bytes, out))
            return CUDA_SUCCESS;
    }
    /* Otherwise the bytes the pool holds of the frees it may reuse, oldest first, as far as they
     * go: the pool carves the allocation from them (their address ranges wait for their time),
     * and only the rest comes from the device. */
    uint64_t covered = cover(dev, s, pool, follow_events, SIZE_MAX, bytes, false);
    if (dev->used_bytes - covered + bytes > sim.cfg.device_mem) return CUDA_ERROR_OUT_OF_MEMORY;
    cover(dev, s, pool, follow_events, SIZE_MAX, bytes, true);
    sim_capacity_give(dev, covered);
    return sim_device_alloc(dev, bytes, true, out);
}
