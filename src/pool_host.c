/* The host pool: pinned host memory (host-located VMM handles, each mapped for the device at a
 * window of its own so copies reach it), created once and kept for the run (issue 13: pinning
 * costs ~100 us + ~115 us/MiB and unpinning ~23 us/MiB, so a slot made per eviction costs more
 * than the copy it serves).
 *
 * Slots, not one large chunk: a buffer's address must map a host handle while it is away, and
 * cuMemMap maps a handle only whole (its offset "currently must be zero", cuda.h 13); carving a
 * large handle would take one map per piece and break the few-calls-per-move rule. So each slot
 * is one handle of a buffer's span, a multiple of the host granularity the driver reports
 * (arena.c asks it), kept by exact size after its buffer comes back.
 *
 * Hygiene: pinned bytes stay within 1.05x of the most bytes buffers have held on the host at
 * once, so at that peak they are within 1.05x of what is held. A slot of the size asked for is
 * reused whenever one is idle; a new one is made only after idle slots of other sizes, beyond
 * that bound, are unpinned. So a workload that repeats its sizes, as training steps do, never
 * pins or unpins again once its peak is reached; one whose sizes at other moments do not fit
 * in 1.05x of its peak unpins and pins again (a slot cannot serve another size: a handle maps
 * only whole). HOSTOFF_HOST_LIMIT bounds pinned bytes, idle slots
 * included. Callers hold eng.lock. */
#include "engine_internal.h"

#include "real.h"
#include "stats.h"

#include <stdlib.h>

static void note_used(void) {
    if (eng.host_used <= eng.host_peak_used) return;
    eng.host_peak_used = eng.host_used;
    ho_peak(&ho_stats.bytes_peak_host_held, eng.host_used);
}

static void slot_release(struct ho_host_slot *s) {
    ho_real.cuMemUnmap(s->window, s->span);
    ho_va_put(s->window, s->span);
    ho_real.cuMemRelease(s->handle);
    free(s);
}

/* Unpins idle slots, oldest first, while `over` says the pool holds too much. */
static void trim_idle(uint64_t span, bool (*over)(uint64_t span)) {
    while (eng.host_pool != NULL && over(span)) {
        struct ho_host_slot **pp = &eng.host_pool;
        while ((*pp)->next != NULL)
            pp = &(*pp)->next;
        struct ho_host_slot *s = *pp;
        *pp = NULL;
        eng.host_pooled -= s->span;
        slot_release(s);
    }
}

/* A new slot of `span` would take pinned bytes past 1.05x the most buffers have held on the host
 * (counting this one): past the target at a peak. */
static bool over_hygiene(uint64_t span) {
    uint64_t held =
        eng.host_used + span > eng.host_peak_used ? eng.host_used + span : eng.host_peak_used;
    return (eng.host_used + eng.host_pooled + span) * 20 > held * 21;
}

static bool over_limit(uint64_t span) {
    return eng.host_used + eng.host_pooled + span > eng.host_limit;
}

struct ho_host_slot *ho_host_slot_get(struct ho_dev *d, uint64_t span) {
    HO_ASSERT_HELD(&eng.lock);
    for (struct ho_host_slot **pp = &eng.host_pool; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->span == span) {
            struct ho_host_slot *s = *pp;
            *pp = s->next;
            eng.host_pooled -= span;
            eng.host_used += span;
            note_used();
            return s;
        }
    }
    trim_idle(span, over_hygiene);
    trim_idle(span, over_limit);
    if (over_limit(span)) return NULL;
    struct ho_host_slot *s = calloc(1, sizeof *s);
    if (s == NULL) return NULL;
    s->span = span;
    int device = (int)(d - eng.dev);
    if (ho_real.cuMemCreate(&s->handle, span, &d->host_prop, 0) != CUDA_SUCCESS) {
        free(s);
        return NULL;
    }
    s->window = ho_va_get(span);
    if (s->window == 0 || !ho_map_rw(d, s->window, span, s->handle, device)) {
        if (s->window != 0) ho_va_put(s->window, span);
        ho_real.cuMemRelease(s->handle);
        free(s);
        return NULL;
    }
    eng.host_used += span;
    note_used();
    return s;
}

void ho_host_slot_put(struct ho_host_slot *s) {
    HO_ASSERT_HELD(&eng.lock);
    eng.host_used -= s->span;
    s->next = eng.host_pool;
    eng.host_pool = s;
    eng.host_pooled += s->span;
}
