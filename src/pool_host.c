/* The host pool: pinned host memory (host-located VMM handles, each mapped for the device at a
 * window of its own so copies reach it), created once and kept for the run (issue 13: pinning
 * costs ~100 us + ~115 us/MiB and unpinning ~23 us/MiB, so a slot made per eviction costs more
 * than the copy it serves).
 *
 * Slots, not one large chunk: a buffer's address must map a host handle while it is away, and
 * cuMemMap's offset "currently must be zero" (cuda.h 13), so a handle cannot be carved into
 * pieces at offsets. But the same note says "offset + size must be less than the size of the
 * memory allocation": a mapping of a handle's first `size` bytes (a prefix) is documented. So a
 * slot of span S serves any buffer of span <= S: its address maps the slot's first m->span bytes,
 * the eviction copies m->span bytes into the slot's window and the restore reads m->span bytes
 * back (engine_move.c); the bytes past the buffer's span are never read or mapped at its address.
 *
 * Decisions, each with its bound:
 *
 * - Waste: the slot bytes beyond the spans of the buffers they hold. They stay within
 *   HO_HOST_WASTE (1/40, 2.5%) of the bytes held on the host whenever a slot is taken: a slot
 *   larger than its buffer (a size class, or a larger idle slot) is used only if the waste then
 *   fits, else the slot is of the buffer's exact span. Waste only grows when a slot is taken, so
 *   it never exceeds 2.5% of the peak of held bytes.
 * - Size classes: a new slot is rounded up to the next multiple of 1/64 of the power of two at or
 *   below its span (at least the granularity the driver reports; arena.c asks it). With a
 *   power-of-two granularity, as drivers report, that wastes less than 1/64 (1.6%) of the span,
 *   and spans within 1/64 of an octave share a class. Spans below 64 granules round to the
 *   granularity itself: exact.
 * - Reuse, best fit: an idle slot of exactly the span is taken first; else the smallest idle slot
 *   larger than the span whose extra bytes fit the waste bound. A new slot is made only when none
 *   fits.
 * - Hygiene, as before: before a new slot is made, idle slots are unpinned, least recently used
 *   first, until pinned bytes (held + waste + idle + the new slot) are within 1.05x of the most
 *   bytes buffers have held on the host (counting this one). That is reachable whenever slots
 *   in use plus the new one fit: held + waste + new <= held + span + 2.5% of the peak + 1.6% of
 *   span <= 1.05x the peak. So pinned <= 1.05x the peak at every moment, and at the peak itself
 *   pinned <= 1.05x what is held, the rounding and the idle slots included.
 * - HOSTOFF_HOST_LIMIT bounds pinned bytes, idle slots included: idle slots are unpinned for it,
 *   then a rounded slot that does not fit is made at the exact span, then the eviction is refused.
 * - A driver that refuses prefix mappings (engine_move.c finds out when an eviction's remap to a
 *   larger slot is refused and rolls back; the buffer stays on the device and may move again):
 *   ho_host_prefix_refused() turns classes and larger-slot reuse off for the run, so every slot
 *   from then on serves only its exact span, as before prefix mappings were used.
 *
 * So a workload that repeats its sizes, as training steps do, never pins or unpins again once its
 * peak is reached, and one whose activations come in many sizes finds a slot among the idle ones
 * much more often than by exact size. Callers hold eng.lock. */
#include "engine_internal.h"

#include "log.h"
#include "real.h"
#include "stats.h"

#include <stdlib.h>

#define HO_HOST_WASTE_DIV 40 /* waste <= held / 40 (2.5%) */
#define HO_HOST_CLASSES   64 /* size classes per power of two */

static void note_used(void) {
    if (eng.host_used <= eng.host_peak_used) return;
    eng.host_peak_used = eng.host_used;
    ho_peak(&ho_stats.bytes_peak_host_held, eng.host_used);
}

static uint64_t pinned(void) {
    return eng.host_used + eng.host_waste + eng.host_pooled;
}

/* The size class of `span` (a granule multiple): the next multiple of a 1/64 of the power of two
 * at or below it, the step a granule multiple. */
uint64_t ho_host_class(uint64_t span, uint64_t granule) {
    if (granule == 0 || span == 0) return span;
    uint64_t pow2 = 1;
    while (pow2 <= span / 2)
        pow2 *= 2;
    uint64_t step = pow2 / HO_HOST_CLASSES;
    step = step <= granule ? granule : (step + granule - 1) / granule * granule;
    return (span + step - 1) / step * step;
}

/* Whether a slot of `slot` bytes may hold a buffer of `span`: exact, or its extra bytes keep the
 * waste within the bound of what will then be held. */
static bool waste_fits(uint64_t slot, uint64_t span) {
    if (slot == span) return true;
    if (slot < span || eng.host_exact) return false;
    return (eng.host_waste + slot - span) * HO_HOST_WASTE_DIV <= eng.host_used + span;
}

static void slot_release(struct ho_host_slot *s) {
    ho_real.cuMemUnmap(s->window, s->span);
    ho_va_put(s->window, s->span);
    ho_real.cuMemRelease(s->handle);
    free(s);
    ho_count(&ho_stats.counts_host_unpins, 1);
}

/* Unpins idle slots, least recently used first, while `over` says the pool holds too much. */
static void trim_idle(uint64_t slot, uint64_t span, bool (*over)(uint64_t slot, uint64_t span)) {
    while (eng.host_pool != NULL && over(slot, span)) {
        struct ho_host_slot **pp = &eng.host_pool;
        while ((*pp)->next != NULL)
            pp = &(*pp)->next;
        struct ho_host_slot *s = *pp;
        *pp = NULL;
        eng.host_pooled -= s->span;
        slot_release(s);
    }
}

/* A new slot of `slot` bytes for a buffer of `span` would take pinned bytes past 1.05x the most
 * buffers have held on the host (counting this one): past the target at a peak. */
static bool over_hygiene(uint64_t slot, uint64_t span) {
    uint64_t held =
        eng.host_used + span > eng.host_peak_used ? eng.host_used + span : eng.host_peak_used;
    return (pinned() + slot) * 20 > held * 21;
}

static bool over_limit(uint64_t slot, uint64_t span) {
    (void)span;
    return pinned() + slot > eng.host_limit;
}

/* Takes s (idle, at *pp) for a buffer of `span`. */
static struct ho_host_slot *take(struct ho_host_slot **pp, uint64_t span) {
    struct ho_host_slot *s = *pp;
    *pp = s->next;
    s->next = NULL;
    eng.host_pooled -= s->span;
    s->held = span;
    eng.host_used += span;
    eng.host_waste += s->span - span;
    note_used();
    return s;
}

/* The idle slot of exactly `span` (larger: false) or the smallest larger one whose waste fits
 * (larger: true), as the link that points at it; NULL when there is none. */
static struct ho_host_slot **idle_fit(uint64_t span, bool larger) {
    struct ho_host_slot **best = NULL;
    for (struct ho_host_slot **pp = &eng.host_pool; *pp != NULL; pp = &(*pp)->next) {
        uint64_t s = (*pp)->span;
        if (!larger && s == span) return pp;
        if (larger && s > span && waste_fits(s, span) && (best == NULL || s < (*best)->span))
            best = pp;
    }
    return best;
}

static struct ho_host_slot *slot_create(struct ho_dev *d, uint64_t slot) {
    struct ho_host_slot *s = calloc(1, sizeof *s);
    if (s == NULL) return NULL;
    s->span = slot;
    int device = (int)(d - eng.dev);
    if (ho_real.cuMemCreate(&s->handle, slot, &d->host_prop, 0) != CUDA_SUCCESS) {
        free(s);
        return NULL;
    }
    ho_count(&ho_stats.counts_host_pins, 1);
    s->window = ho_va_get(slot);
    if (s->window == 0 || !ho_map_rw(d, s->window, slot, s->handle, device)) {
        if (s->window != 0) ho_va_put(s->window, slot);
        ho_real.cuMemRelease(s->handle);
        ho_count(&ho_stats.counts_host_unpins, 1);
        free(s);
        return NULL;
    }
    return s;
}

struct ho_host_slot *ho_host_slot_get(struct ho_dev *d, uint64_t span) {
    HO_ASSERT_HELD(&eng.lock);
    struct ho_host_slot **pp = idle_fit(span, false);
    if (pp != NULL) return take(pp, span);
    uint64_t slot = ho_host_class(span, eng.granule);
    if (!waste_fits(slot, span)) slot = span;
    /* A larger idle slot only when a new one would cost idle slots their pinning: borrowing one
     * while there is room leaves its next buffer without it, and a pool that has room for every
     * size a step needs settles with exact fits, as it did before larger slots were used. */
    if (over_hygiene(slot, span) || over_limit(slot, span)) {
        pp = idle_fit(span, true);
        if (pp != NULL) return take(pp, span);
    }
    trim_idle(slot, span, over_hygiene);
    trim_idle(slot, span, over_limit);
    if (over_hygiene(slot, span) || over_limit(slot, span)) slot = span;
    if (over_limit(slot, span)) return NULL;
    struct ho_host_slot *s = slot_create(d, slot);
    if (s == NULL) return NULL;
    s->held = span;
    eng.host_used += span;
    eng.host_waste += slot - span;
    note_used();
    return s;
}

void ho_host_slot_put(struct ho_host_slot *s) {
    HO_ASSERT_HELD(&eng.lock);
    eng.host_used -= s->held;
    eng.host_waste -= s->span - s->held;
    s->held = 0;
    s->next = eng.host_pool;
    eng.host_pool = s;
    eng.host_pooled += s->span;
}

void ho_host_prefix_refused(void) {
    HO_ASSERT_HELD(&eng.lock);
    if (eng.host_exact) return;
    eng.host_exact = true;
    ho_log(HO_LOG_WARN, "the driver refused to map a buffer onto part of a larger pinned host "
                        "slot: host slots serve only their own size from now on");
}
