/* The host pool: pinned host memory (host-located VMM handles, each mapped for the device at a
 * window of its own so copies reach it), created once and kept for the run (issue 13: pinning
 * costs ~100 us + ~115 us/MiB and unpinning ~23 us/MiB, so a slot made per eviction costs more
 * than the copy it serves).
 *
 * What the driver allows: cuMemMap's offset "currently must be zero" (cuda.h 13), so a handle
 * cannot be carved into pieces at offsets; but "offset + size must be less than the size of the
 * memory allocation", so a mapping of a handle's first bytes (a prefix) is documented, and
 * several handles may map adjacent parts of one reserved range, with one cuMemSetAccess over
 * all of it ("a fully mapped address range containing all allocations"). So a buffer on the host
 * is held by a slot of its span or larger (its address maps the slot's first span bytes), or by
 * up to HO_HOST_PIECES slots in address order: every one mapped whole but the last, which may
 * be a prefix. Its eviction copies each piece's bytes into that slot's window; its restore reads
 * its own address, so only its span (engine_move.c). Bytes past a buffer's span in its last
 * slot are never mapped at its address, copied or read.
 *
 * Decisions, each with its bound:
 *
 * - Waste: the slot bytes beyond what the buffers in them hold. They stay within
 *   HO_HOST_WASTE_DIV (1/40, 2.5%) of the bytes held on the host whenever a slot is taken: a
 *   slot larger than what it is to hold (a size class, or a larger idle slot) is used only if
 *   the waste then fits, else it is of the exact bytes. Waste only grows when a slot is taken, so
 *   it never exceeds 2.5% of the peak of held bytes.
 * - Size classes: a new slot is rounded up to the next multiple of 1/64 of the power of two at or
 *   below its size (at least the granularity the driver reports; arena.c asks it). With a
 *   power-of-two granularity, as drivers report, that wastes less than 1/64 (1.6%), and sizes
 *   within 1/64 of an octave share a class. Below 64 granules a class is the size itself.
 * - Hygiene: pinned bytes (held + waste + idle) stay within 1.25x of the most bytes buffers have
 *   held on the host (counting the one being placed): a new slot is made only after idle slots,
 *   least recently used first, are unpinned to that bound. That is always reachable: slots in
 *   use and the new one hold at most held + span + 2.5% of the peak (the waste bound covers the
 *   new slot's rounding too), within 1.025x of the peak; the other 22.5% is room for idle slots.
 *   So at the peak, pinned <= 1.25x what is held, rounding and idle slots included. It was
 *   1.05x: every slot unpinned to stay within it was pinned again when a later step's mix of
 *   sizes needed it (a pin costs ~100 us + 115 us/MiB, an unpin 23 us/MiB). With 64 pieces, on
 *   gpt2-1k.segment (c2c, 70%) lru unpinned 247 slots and pinned 640 in 8 steps, 1.25x: 8 and
 *   409, 1.5x: 0 and 390; lru's step 1573 -> 1337 -> 1314 ms, lookahead's 1581 -> 1390 -> 1366.
 *   On the tuning set (docs/policy-benchmark.md, 70%, both links) 1.25x made no lookahead row
 *   slower (resnet50.segment pcie5 1080 -> 960 ms, gpt2-1k.tensor c2c 920 -> 879). 1.25x keeps
 *   most of the gain for a fifth of the pinned bytes 1.5x would allow.
 * - The order a buffer is placed in (measured: docs/policy-benchmark.md, "The host pool"):
 *   1. an idle slot of exactly its span;
 *   2. the smallest larger idle slot whose waste fits;
 *   3. pieces: while what is left fits no idle slot (exact, or larger within the waste bound),
 *      the largest idle slot within it, whole, up to HO_HOST_PIECES - 1 of them; then for the
 *      rest an idle slot that fits or a new one (its class; idle slots unpinned first for the
 *      hygiene bound). With no idle slot at all that is one new slot of the buffer's class.
 *   Pieces are what lets a pool held within 1.25x of its peak serve a step whose mix of sizes on
 *   the host differs from the peak's: the idle bytes are there, in other sizes. A piece costs a
 *   map and an unmap per move (~6 us and ~57 us host-located), against ~100 us + 115 us/MiB to
 *   pin a slot and 23 us/MiB to unpin one. HO_HOST_PIECES (64) bounds the calls a move makes:
 *   at most ~4 ms of driver time, the price of pinning 35 MiB. It was 4; a caching allocator's
 *   segments (tens of sizes, 2 MiB to GiBs) then found too few pieces among the idle slots and
 *   pinned afresh, unpinning others for the hygiene bound: lru on gpt2-1k.segment (c2c, 70%)
 *   pinned 1,920 times in 8 steps (peak held 22 GB) and took 5.3 s a step. On the tuning set
 *   (docs/policy-benchmark.md, 70%, both links; lookahead ms a step, 4 -> 16 -> 32 -> 64):
 *   gpt2-1k.segment pcie5 4070 -> 3040 -> 2656 -> 2406, c2c 3176 -> 2199 -> 1797 -> 1581;
 *   gpt2-1k.tensor pcie5 1265 -> 1243, c2c 1094 -> 920; resnet50.segment 1089 -> 1080 and
 *   585 -> 573; resnet50.tensor pcie5 560 -> 538, and c2c 318 -> 365, the one row that lost
 *   (more pins, 45 against 33, and more evictions in the steps it learns). 128 gained 2% more
 *   on gpt2-1k.segment c2c; 64 was kept for the bound on a move's calls.
 *   Making a new slot whenever the hygiene bound leaves room for one, before larger slots and
 *   pieces, was measured too, and was slower: on the generated deepseek preset (pcie5, 70% of
 *   its peak) lru took 4.30 s a step against 4.0 s, lookahead 3.56 s against 3.4 s.
 * - HOSTOFF_HOST_LIMIT bounds pinned bytes, idle slots included: idle slots are unpinned for it,
 *   then a rounded slot that does not fit is made at the exact size, then the eviction is refused.
 * - A driver that refuses a prefix or piece mapping (engine_move.c finds out when an eviction's
 *   remap to such a layout is refused and rolls back; the buffer stays on the device and may move
 *   again): ho_host_layout_refused() turns classes, larger slots and pieces off for the run, so
 *   each buffer from then on takes one slot of its exact span, mapped whole.
 *
 * Callers hold eng.lock. */
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

uint64_t ho_host_class(uint64_t span, uint64_t granule) {
    if (granule == 0 || span == 0) return span;
    uint64_t pow2 = 1;
    while (pow2 <= span / 2)
        pow2 *= 2;
    uint64_t step = pow2 / HO_HOST_CLASSES;
    step = step <= granule ? granule : (step + granule - 1) / granule * granule;
    return (span + step - 1) / step * step;
}

/* Whether a slot of `slot` bytes may hold `bytes`: exact, or its extra bytes keep the waste
 * within the bound of what will then be held. */
static bool waste_fits(uint64_t slot, uint64_t bytes) {
    if (slot == bytes) return true;
    if (slot < bytes || eng.host_exact) return false;
    return (eng.host_waste + slot - bytes) * HO_HOST_WASTE_DIV <= eng.host_used + bytes;
}

static void slot_release(struct ho_host_slot *s) {
    ho_real.cuMemUnmap(s->window, s->span);
    ho_va_put(s->window, s->span);
    ho_real.cuMemRelease(s->handle);
    free(s);
    ho_count(&ho_stats.counts_host_unpins, 1);
}

/* Unpins idle slots, least recently used first, while `over` says the pool holds too much. */
static void trim_idle(uint64_t slot, uint64_t bytes, bool (*over)(uint64_t slot, uint64_t bytes)) {
    while (eng.host_pool != NULL && over(slot, bytes)) {
        struct ho_host_slot **pp = &eng.host_pool;
        while ((*pp)->next != NULL)
            pp = &(*pp)->next;
        struct ho_host_slot *s = *pp;
        *pp = NULL;
        eng.host_pooled -= s->span;
        slot_release(s);
    }
}

/* A new slot of `slot` bytes for `bytes` more held would take pinned bytes past 1.25x the most
 * buffers have held on the host (counting these): past the target at a peak. */
static bool over_hygiene(uint64_t slot, uint64_t bytes) {
    uint64_t held =
        eng.host_used + bytes > eng.host_peak_used ? eng.host_used + bytes : eng.host_peak_used;
    return (pinned() + slot) * 4 > held * 5;
}

static bool over_limit(uint64_t slot, uint64_t bytes) {
    (void)bytes;
    return pinned() + slot > eng.host_limit;
}

/* Counts s (just taken or made) as holding `bytes`. */
static struct ho_host_slot *hold(struct ho_host_slot *s, uint64_t bytes) {
    s->next = NULL;
    s->held = bytes;
    eng.host_used += bytes;
    eng.host_waste += s->span - bytes;
    note_used();
    return s;
}

/* Takes the idle slot *pp to hold `bytes`. */
static struct ho_host_slot *take(struct ho_host_slot **pp, uint64_t bytes) {
    struct ho_host_slot *s = *pp;
    *pp = s->next;
    eng.host_pooled -= s->span;
    return hold(s, bytes);
}

/* The idle slot of exactly `bytes` (larger: false) or the smallest larger one whose waste fits
 * (larger: true), as the link that points at it; NULL when there is none. */
static struct ho_host_slot **idle_fit(uint64_t bytes, bool larger) {
    struct ho_host_slot **best = NULL;
    for (struct ho_host_slot **pp = &eng.host_pool; *pp != NULL; pp = &(*pp)->next) {
        uint64_t s = (*pp)->span;
        if (!larger && s == bytes) return pp;
        if (larger && s > bytes && waste_fits(s, bytes) && (best == NULL || s < (*best)->span))
            best = pp;
    }
    return best;
}

/* The largest idle slot of at most `bytes`, as the link that points at it; NULL when none. */
static struct ho_host_slot **idle_within(uint64_t bytes) {
    struct ho_host_slot **best = NULL;
    for (struct ho_host_slot **pp = &eng.host_pool; *pp != NULL; pp = &(*pp)->next)
        if ((*pp)->span <= bytes && (best == NULL || (*pp)->span > (*best)->span)) best = pp;
    return best;
}

/* Pins a new slot of `slot` bytes, mapped at a window of its own; NULL: the driver refused. */
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

/* The size a new slot for `bytes` gets: its class when the waste fits, else exact. */
static uint64_t new_size(uint64_t bytes) {
    uint64_t slot = ho_host_class(bytes, eng.granule);
    return waste_fits(slot, bytes) ? slot : bytes;
}

/* A new slot for `bytes`, after unpinning idle slots for the hygiene target and the limit
 * (exact when its class does not fit them); NULL: over HOSTOFF_HOST_LIMIT, or refused. */
static struct ho_host_slot *make(struct ho_dev *d, uint64_t bytes) {
    uint64_t slot = new_size(bytes);
    trim_idle(slot, bytes, over_hygiene);
    trim_idle(slot, bytes, over_limit);
    if (over_hygiene(slot, bytes) || over_limit(slot, bytes)) slot = bytes;
    if (over_limit(slot, bytes)) return NULL;
    struct ho_host_slot *s = slot_create(d, slot);
    return s != NULL ? hold(s, bytes) : NULL;
}

/* Pieces for `span` (step 4 of the order above): whole idle slots, then one for the rest. */
static struct ho_host_slot *pieces(struct ho_dev *d, uint64_t span) {
    struct ho_host_slot *head = NULL, **tail = &head;
    uint64_t need = span;
    struct ho_host_slot **pp = NULL;
    for (int n = 0; n < HO_HOST_PIECES - 1; n++) {
        pp = idle_fit(need, false);
        if (pp == NULL && n > 0) pp = idle_fit(need, true);
        if (pp != NULL) break; /* the rest fits one idle slot */
        pp = idle_within(need);
        if (pp == NULL) break;
        need -= (*pp)->span;
        *tail = take(pp, (*pp)->span);
        tail = &(*tail)->next;
        pp = NULL;
    }
    if (pp == NULL) pp = idle_fit(need, false);
    if (pp == NULL) pp = idle_fit(need, true);
    struct ho_host_slot *last = pp != NULL ? take(pp, need) : make(d, need);
    if (last == NULL) {
        if (head != NULL) ho_host_slot_put(head);
        return NULL;
    }
    *tail = last;
    return head;
}

struct ho_host_slot *ho_host_slot_get(struct ho_dev *d, uint64_t span) {
    HO_ASSERT_HELD(&eng.lock);
    struct ho_host_slot **pp = idle_fit(span, false);
    if (pp != NULL) return take(pp, span);
    if (eng.host_exact) return make(d, span);
    pp = idle_fit(span, true);
    if (pp != NULL) return take(pp, span);
    return pieces(d, span);
}

void ho_host_slot_put(struct ho_host_slot *s) {
    HO_ASSERT_HELD(&eng.lock);
    while (s != NULL) {
        struct ho_host_slot *next = s->next;
        eng.host_used -= s->held;
        eng.host_waste -= s->span - s->held;
        s->held = 0;
        s->next = eng.host_pool;
        eng.host_pool = s;
        eng.host_pooled += s->span;
        s = next;
    }
}

struct ho_layout ho_host_layout(const struct ho_host_slot *s) {
    struct ho_layout l = {0};
    for (; s != NULL && l.n < HO_HOST_PIECES; s = s->next, l.n++) {
        l.h[l.n] = s->handle;
        l.len[l.n] = s->held;
    }
    return l;
}

bool ho_host_one_whole(const struct ho_host_slot *s) {
    return s->next == NULL && s->held == s->span;
}

void ho_host_layout_refused(void) {
    HO_ASSERT_HELD(&eng.lock);
    if (eng.host_exact) return;
    eng.host_exact = true;
    ho_log(HO_LOG_WARN, "the driver refused to map a buffer onto part of a pinned host slot or "
                        "onto several: each buffer takes one slot of its own size from now on");
}
