/* Stream-ordered reuse: the device memory of a buffer freed with cuMemFreeAsync on a stream serves
 * the next cuMemAllocAsync of the same span on that same stream at once, without an event and
 * without a driver call, as the driver's own pools do (CUDA Programming Guide, "Stream Ordered
 * Memory Allocator": memory freed in a stream is available to allocations in that stream
 * immediately; other streams need an ordering). PyTorch's cudaMallocAsync backend, which the
 * library chooses for PyTorch (interpose/framework_env.c), makes one such pair per tensor, and
 * before this each pair cost the engine an event record, a stream wait, a query and the
 * context switches around them: about 11 driver calls (bench_move, last lines).
 *
 * Why it is safe:
 * - For the application, the stream orders the new buffer's work after the old one's, exactly
 *   as for the driver's own reuse; work of the old buffer on other streams had to be ordered
 *   before the free by the application (cuMemFreeAsync's contract).
 * - For the engine, the new buffer inherits the old one's list of uses (the streams it was used
 *   on and the use events): a move of the new buffer barriers on them (engine_uses.c:
 *   ho_barrier), so no eviction copies or remaps the memory while the old buffer's kernels may
 *   still touch it, though they use the same address. Unseen uses are waited for as for any
 *   move.
 * - Only a free that could have completed plainly takes this path: a resident buffer with no move
 *   in flight, on the vmm backend, on a stream the engine can name (not an implicit per-thread
 *   stream), outside any capture.
 *
 * The memory stays counted as resident (it is held for reuse, like the cache in pool_device.c)
 * and is given up before anything is evicted: ho_make_room and ho_reclaim_device hand every held
 * buffer to the ordinary stream-ordered free first (ho_sfree_flush), as does an allocation of
 * the span on another stream or without one. At most HO_SFREE_MAX buffers wait per device, so
 * sizes that never come back do not pile up. Callers hold eng.lock. */
#include "engine_internal.h"

#include "stats.h"

#include <stdlib.h>
#include <string.h>

/* Enough for the tensors of a layer freed before the next layer's allocations; the oldest goes to
 * the ordinary free beyond it. */
#define HO_SFREE_MAX 64

/* The stream as the use lists name it (ho_users_add). */
static CUstream stream_key(CUstream s) {
    return s == NULL ? CU_STREAM_LEGACY : s;
}

static void unlink_all(struct ho_managed *m) {
    for (struct ho_managed **pp = &eng.all; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == m) {
            *pp = m->next;
            return;
        }
    }
}

/* Hands m (held, already unlinked) to the ordinary stream-ordered free. */
static void release_held(struct ho_dev *d, struct ho_managed *m) {
    d->nsfree--;
    d->sfree_bytes -= m->span;
    ho_device_bytes((int64_t)m->span); /* complete_free takes it off again */
    ho_start_free(m);
}

bool ho_sfree_put(struct ho_managed *m, CUstream s, bool per_thread) {
    HO_ASSERT_HELD(&eng.lock);
    struct ho_dev *d = dev_of(m);
    if (eng.backend != HO_BACKEND_VMM || implicit_per_thread(s, per_thread) || per_thread ||
        atomic_load(&eng.capturing) > 0 || atomic_load(&m->state) != HO_RESIDENT || m->tr != NULL ||
        m->pinned || m->dev == 0)
        return false;
    unlink_all(m);
    ho_clock_put(d, m->clock);
    m->clock = NULL;
    ho_device_bytes(-(int64_t)m->span);
    m->free_stream = stream_key(s);
    m->next = d->sfree;
    d->sfree = m;
    d->nsfree++;
    d->sfree_bytes += m->span;
    if (d->nsfree > HO_SFREE_MAX) {
        struct ho_managed **pp = &d->sfree;
        while ((*pp)->next != NULL)
            pp = &(*pp)->next;
        struct ho_managed *oldest = *pp;
        *pp = NULL;
        release_held(d, oldest);
    }
    return true;
}

bool ho_sfree_take(struct ho_dev *d, struct ho_managed *m, CUstream s, bool per_thread) {
    HO_ASSERT_HELD(&eng.lock);
    if (d->sfree == NULL || per_thread || implicit_per_thread(s, per_thread)) return false;
    CUstream key = stream_key(s);
    for (struct ho_managed **pp = &d->sfree; *pp != NULL; pp = &(*pp)->next) {
        struct ho_managed *o = *pp;
        if (o->span != m->span || o->free_stream != key) continue;
        *pp = o->next;
        d->nsfree--;
        d->sfree_bytes -= o->span;
        m->va = o->va;
        m->dev = o->dev;
        m->dev_window = o->dev_window;
        /* The old buffer's uses become the new one's: its moves wait for them. Nothing else can
         * reach either list now (the old buffer left the registry at its free, after every call
         * that could see it had issued; the new one is not published yet). */
        int n = atomic_load(&o->nusers);
        for (int i = 0; i < n; i++)
            atomic_store(&m->users[i], atomic_load(&o->users[i]));
        atomic_store(&m->nusers, n);
        m->users_overflow = o->users_overflow;
        m->nuse_events = o->nuse_events;
        memcpy(m->use_events, o->use_events, sizeof m->use_events);
        free(o);
        ho_count(&ho_stats.counts_reused_on_stream, 1);
        return true;
    }
    return false;
}

void ho_sfree_flush(struct ho_dev *d, uint64_t span) {
    HO_ASSERT_HELD(&eng.lock);
    struct ho_managed **pp = &d->sfree;
    while (*pp != NULL) {
        struct ho_managed *o = *pp;
        if (span != 0 && o->span != span) {
            pp = &o->next;
            continue;
        }
        *pp = o->next;
        release_held(d, o);
    }
}
