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

/* Whether work s enqueues from now on is ordered after free r, for an allocation from `pool`. */
static bool ordered_after(const struct sim_release *r, const struct sim_stream *s,
                          unsigned long long pool, bool follow_events) {
    if (r->pool != pool || r->stream == 0) return false;
    if (r->stream == s->id) return true; /* stream order */
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
    struct sim_release r = {.bytes = bytes, .at_ns = at_ns, .va = va, .va_size = va_size};
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
    for (size_t i = 0; i < dev->nreleases; i++) {
        struct sim_release *r = &dev->releases[i];
        if (r->at_ns <= now && r->va != NULL) {
            sim_va_recycle(r->va, r->va_size);
            r->va = NULL;
        }
        /* Opportunistic reuse off: the pool keeps the bytes until a synchronising call, where
         * (release threshold 0) it gives them back. */
        uint64_t by = sim_pool_opportunistic(r->pool) ? now : dev->synced_ns;
        if (!r->given && r->at_ns <= by) {
            sim_capacity_give(dev, r->bytes);
            r->given = true;
        }
        if (!r->given || r->va != NULL) dev->releases[w++] = *r;
    }
    dev->nreleases = w;
}

/* Hands free i's address range to an allocation of `bytes`, when it fits the capacity. */
static bool hand_over(struct sim_device *dev, size_t i, uint64_t bytes, uint64_t *out) {
    const struct sim_release r = dev->releases[i];
    uint64_t held = r.given ? 0 : r.bytes;
    if (dev->used_bytes - held + bytes > sim.cfg.device_mem) return false;
    if (!sim_va_commit(r.va, r.va_size)) return false;
    struct sim_range *nr =
        sim_range_add((uint64_t)(uintptr_t)r.va, bytes, SIM_R_DEVICE, dev->ordinal);
    if (nr == NULL) {
        sim_va_close(r.va, r.va_size);
        return false;
    }
    /* Dropped before the capacity calls: they apply releases, which compacts the array. */
    release_drop(dev, i);
    sim_capacity_give(dev, held);
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
            ordered_after(r, s, pool, follow_events) && hand_over(dev, i, bytes, out))
            return CUDA_SUCCESS;
    }
    /* Otherwise ordered frees' bytes, oldest first, until they cover the allocation: the pool
     * carves it from them (their address ranges wait for their time). */
    uint64_t covered = 0;
    for (size_t i = 0; i < dev->nreleases && covered < bytes; i++) {
        struct sim_release *r = &dev->releases[i];
        if (r->given || !ordered_after(r, s, pool, follow_events)) continue;
        sim_capacity_give(dev, r->bytes);
        r->given = true;
        covered += r->bytes;
    }
    return sim_device_alloc(dev, bytes, true, out);
}
