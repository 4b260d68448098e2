/* The engine's side of the policies: what a predicting policy says about next uses, the clocks
 * that let a move wait for a buffer's last use alone, planned evictions waiting for their launch,
 * prefetches waiting for room, the low watermark, and the step after every launch that asks the
 * policy what to move (ARCHITECTURE.md, "Planned moves"). Everything here runs under eng.lock. */
#include "real.h"
#include "engine_internal.h"
#include "policy.h"
#include "engine.h"
#include "stats.h"
#include "move_cost.h"

#include <stdlib.h>
#include <string.h>

/* Whether a policy predicts next uses now (lookahead once it trusts its step; the oracle always),
 * and its prediction for m: launches until m's next use. */
bool ho_predicting(void) {
    HO_ASSERT_HELD(&eng.lock);
    return eng.policy.ops->predicts(eng.policy.self);
}

uint64_t ho_predicted_next_use(const struct ho_managed *m) {
    HO_ASSERT_HELD(&eng.lock);
    return eng.policy.ops->next_use(eng.policy.self, &m->pol);
}

void ho_clock_put(struct ho_dev *d, struct ho_clock *c) {
    HO_ASSERT_HELD(&eng.lock);
    if (c == NULL || --c->refs > 0) return;
    ho_event_put(d, c->e);
    free(c);
}

/* Names m's latest use (seq, on stream s) by clock c. eng.lock held. */
static void clock_set(struct ho_managed *m, struct ho_clock *c, uint64_t seq, CUstream s) {
    HO_ASSERT_HELD(&eng.lock);
    struct ho_dev *d = dev_of(m);
    if (m->clock != c) { /* a buffer used twice since the last clock is named once */
        ho_clock_put(d, m->clock);
        c->refs++;
    }
    m->clock = c;
    m->clock_seq = seq;
    m->clock_stream = s;
}

/* Planned evictions wait on their device's list until the launch they follow has run
 * (engine_internal.h). eng.lock held for all three. */
void ho_defer_drop(struct ho_dev *d, struct ho_managed *m) {
    HO_ASSERT_HELD(&eng.lock);
    if (!m->deferred) return;
    for (size_t i = 0; i < d->ndefer; i++) {
        if (d->defer[i].m != m) continue;
        ho_event_put(d, d->defer[i].after);
        memmove(&d->defer[i], &d->defer[i + 1], (d->ndefer - i - 1) * sizeof *d->defer);
        d->ndefer--;
        atomic_fetch_sub(&eng.inflight, 1);
        break;
    }
    m->deferred = false;
}

/* False when it could not be listed: the caller evicts at once instead. */
static bool defer_add(struct ho_dev *d, struct ho_managed *m, CUstream s, bool per_thread) {
    HO_ASSERT_HELD(&eng.lock);
    if (m->deferred) return true;
    if (d->ndefer == d->capdefer) {
        size_t cap = d->capdefer ? d->capdefer * 2 : 64;
        struct ho_deferred *n = realloc(d->defer, cap * sizeof *n);
        if (n == NULL) return false;
        d->defer = n;
        d->capdefer = cap;
    }
    CUevent e = ho_event_get(d);
    if (e == NULL) return false;
    ho_ctx_push(d);
    CUresult rc = ho_event_record(e, s, per_thread);
    ho_ctx_pop();
    if (rc != CUDA_SUCCESS) {
        ho_event_put(d, e);
        return false;
    }
    d->defer[d->ndefer++] = (struct ho_deferred){m, e};
    m->deferred = true;
    atomic_fetch_add(&eng.inflight, 1); /* keeps progress points polling */
    return true;
}

/* Background evictions (planned, or keeping headroom) fill the link only this far ahead: the
 * copy queue is first come, first served, so a deep one would make an allocation that needs room
 * now wait behind moves that could have waited. 50 ms of link time once the link is measured, and
 * at most 1/32 of the budget (a sweep of 12, 25 and 50 ms on the policy benchmark's long-context
 * workloads, and the demo's smaller job, chose these). */
static uint64_t background_cap(const struct ho_dev *d) {
    double rate = eng.link_bytes_per_ns;
    uint64_t cap = rate > 0 ? (uint64_t)(rate * 50e6) : (512ull << 20);
    if (cap > d->budget / 32) cap = d->budget / 32;
    return cap < (64ull << 20) ? (64ull << 20) : cap;
}

/* Starts the planned evictions whose launch has run, oldest first, while the link has room. */
void ho_defer_poll(struct ho_dev *d) {
    HO_ASSERT_HELD(&eng.lock);
    while (d->ndefer > 0 && d->evicting < background_cap(d)) {
        if (ho_event_query(d, d->defer[0].after) == CUDA_ERROR_NOT_READY) return;
        /* Done (or the query failed: evicting now is still correct, the copy is ordered after
         * every queued use). */
        struct ho_managed *m = d->defer[0].m;
        ho_defer_drop(d, m);
        if (d->budget != UINT64_MAX && !m->pinned && m->tr == NULL &&
            atomic_load(&m->state) == HO_RESIDENT)
            ho_start_evict(m);
    }
}

/* Prefetches the plan asked for but that had no room yet: they start, oldest first, as evictions
 * complete, so a prefetch never makes the application wait for room. eng.lock held. */
void ho_want_drop(struct ho_dev *d, struct ho_managed *m) {
    HO_ASSERT_HELD(&eng.lock);
    if (!m->wanted) return;
    for (size_t i = 0; i < d->nwant; i++) {
        if (d->want[i] != m) continue;
        memmove(&d->want[i], &d->want[i + 1], (d->nwant - i - 1) * sizeof *d->want);
        d->nwant--;
        break;
    }
    m->wanted = false;
}

static void want_add(struct ho_dev *d, struct ho_managed *m) {
    HO_ASSERT_HELD(&eng.lock);
    if (m->wanted) return;
    if (d->nwant == d->capwant) {
        size_t cap = d->capwant ? d->capwant * 2 : 64;
        struct ho_managed **n = realloc(d->want, cap * sizeof *n);
        if (n == NULL) return; /* not queued: a demand restore will fetch it */
        d->want = n;
        d->capwant = cap;
    }
    d->want[d->nwant++] = m;
    m->wanted = true;
}

void ho_want_start(struct ho_dev *d) {
    HO_ASSERT_HELD(&eng.lock);
    while (d->nwant > 0) {
        struct ho_managed *m = d->want[0];
        if (atomic_load(&m->state) == HO_HOST && m->tr == NULL) {
            /* Cached memory of freed buffers counts as resident: it gives way first. */
            if (!ho_room_for(d, m->span)) ho_cache_trim(d, m->span, d->budget);
            if (!ho_room_for(d, m->span)) {
                /* In order: wait for more room. Room is made by evicting buffers needed later
                 * than this one (furthest first), never by waiting: the evictions land, and
                 * progress starts this prefetch then. */
                if (ho_predicting() && atomic_load(&eng.capturing) == 0) {
                    bool host_full = false;
                    ho_evict_for(d, m->span, NULL, 0, ho_predicted_next_use(m), &host_full);
                }
                return;
            }
            uint64_t stall = 0;
            if (ho_start_restore(m, NULL, 0, &stall)) ho_count(&ho_stats.counts_prefetches, 1);
            ho_count_stall(stall);
        }
        ho_want_drop(d, m);
    }
}

/* Once the lookahead policy predicts, the engine keeps a little of the budget free ahead of need
 * (a low watermark, as a kernel's page reclaim does): it starts evicting the buffers needed
 * furthest ahead whenever less than HEADROOM_SHARE of the budget is free, without waiting for
 * them. An allocation or a prefetch then finds room at once instead of waiting for a copy, and
 * the host keeps running ahead of the device. eng.lock held. */
#define HEADROOM_SHARE 16 /* 1/16 of the budget */
static void keep_headroom(struct ho_dev *d) {
    HO_ASSERT_HELD(&eng.lock);
    if (d->budget == UINT64_MAX || !ho_predicting() || eng.policy.ops->complete_plan) return;
    uint64_t headroom = d->budget / HEADROOM_SHARE;
    ho_defer_poll(d);
    if (d->resident - d->evicting + headroom <= d->budget || d->evicting >= background_cap(d))
        return;
    bool host_full = false;
    ho_evict_for(d, headroom, NULL, 0, 0, &host_full);
}

/* Clocks launches so that moving one of their buffers later waits for that buffer's last use,
 * not for everything queued on its stream since (the host may be far ahead of the device). One
 * event every CLOCK_EVERY launches on a stream names the uses since the previous one: a move waits
 * at most that many launches longer than it must, and the event costs a fraction of a launch. A
 * launch on another stream, or a full list, records the pending clock first. eng.lock held. */
#define CLOCK_EVERY                                                                                \
    4 /* by a sweep of 1, 2, 4 and 8 (tests/bench/bench_interpose with a budget,                   \
         tools/bench_policy.py): past 4 the policy loses; below it, launches pay */

void ho_clock_flush(void) {
    HO_ASSERT_HELD(&eng.lock);
    if (eng.npend == 0) return;
    struct ho_dev *d = eng.pend_dev;
    struct ho_clock *c = malloc(sizeof *c);
    bool ok = false;
    if (c != NULL) {
        c->refs = 0;
        c->e = ho_event_get(d);
        ho_ctx_push(d);
        ok = c->e != NULL && ho_real.cuEventRecord(c->e, eng.pend_stream) == CUDA_SUCCESS;
        ho_ctx_pop();
    }
    /* Without a clock the buffers' moves wait for their whole streams instead: still correct. */
    for (int i = 0; ok && i < eng.npend; i++)
        clock_set(eng.pend[i].m, c, eng.pend[i].seq, eng.pend_stream);
    if (c != NULL && c->refs == 0) {
        ho_event_put(d, c->e);
        free(c);
    }
    eng.npend = 0;
    eng.pend_launches = 0;
}

static void clock_launch(const struct ho_engine_touch *t, CUstream s, bool per_thread) {
    HO_ASSERT_HELD(&eng.lock);
    struct ho_dev *d0 = dev_of(t->m[0]);
    if (d0->budget == UINT64_MAX || implicit_per_thread(s, per_thread)) return;
    CUstream cs = s != NULL ? s : CU_STREAM_LEGACY;
    if (eng.npend > 0 &&
        (cs != eng.pend_stream || d0 != eng.pend_dev || eng.npend + t->n > HO_CLOCK_PENDING))
        ho_clock_flush();
    eng.pend_stream = cs;
    eng.pend_dev = d0;
    for (int i = 0; i < t->n; i++)
        if (dev_of(t->m[i]) == d0) eng.pend[eng.npend++] = (struct ho_pending_use){t->m[i], t->seq};
    if (++eng.pend_launches >= CLOCK_EVERY) ho_clock_flush();
}

/* A freed buffer leaves the pending uses. eng.lock held. */
void ho_clock_forget(struct ho_managed *m) {
    HO_ASSERT_HELD(&eng.lock);
    for (int i = 0; i < eng.npend;)
        if (eng.pend[i].m == m)
            eng.pend[i] = eng.pend[--eng.npend];
        else
            i++;
}

/* After a launch: tell the policy, then start the moves it asks for. Proactive moves only happen
 * under a budget (without one nothing needs the room), never during capture, and a prefetch only
 * takes room that is free now: it must not make the application wait. */
#define MOVE_COST_EVERY 256

void ho_plan_after_launch(const struct ho_engine_touch *t, CUstream s, bool per_thread) {
    const struct ho_policy *p = &eng.policy;
    struct ho_policy_actions a;
    uint64_t ids_inline[HO_TOUCH_INLINE], *ids = ids_inline;
    /* The policy hears of every buffer when there is room for the list, else of the first ones. */
    int n = t->n;
    if (n > HO_TOUCH_INLINE && (ids = malloc((size_t)n * sizeof *ids)) == NULL) {
        ids = ids_inline;
        n = HO_TOUCH_INLINE;
    }
    /* What identifies a point in the step: the function, and the sizes of the buffers it gets
     * (a generic kernel launched throughout a step is told apart by its operands). */
    uint64_t sig = t->func * 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < n; i++) {
        ids[i] = policy_id(t->m[i]);
        sig = (sig ^ t->m[i]->span) * 0xBF58476D1CE4E5B9ull;
    }
    ho_mutex_lock(&eng.lock);
    if (!eng.policy_budget_given) {
        /* The plan is for one device's budget: the first one the policy sees a launch on. */
        p->ops->set_budget(p->self, dev_of(t->m[0])->budget);
        eng.policy_budget_given = true;
    }
    /* A move's fixed cost, published at first, then measured (move_cost.h): told again every
     * MOVE_COST_EVERY launches, which costs one call where a launch costs thousands. */
    if (eng.policy_launches++ % MOVE_COST_EVERY == 0)
        p->ops->set_move_fixed(p->self, ho_move_fixed_ns());
    uint64_t launch = p->ops->launch(p->self, sig, ids, (size_t)n, &a);
    if (t->timing_before != NULL)
        ho_timing_add(dev_of(t->m[0]), t->timing_before, launch, s, per_thread);
    atomic_store_explicit(&eng.timing, p->ops->wants_timing(p->self), memory_order_relaxed);
    clock_launch(t, s, per_thread);
    if (atomic_load(&eng.capturing) == 0) {
        for (size_t i = 0; i < a.nevict; i++) {
            struct ho_managed *m = policy_buffer(a.evict[i]);
            if (dev_of(m)->budget == UINT64_MAX || m->pinned || m->tr != NULL ||
                atomic_load(&m->state) != HO_RESIDENT)
                continue;
            if (!defer_add(dev_of(m), m, s, per_thread)) ho_start_evict(m);
        }
        keep_headroom(dev_of(t->m[0]));
        for (size_t i = 0; i < a.nrestore; i++) {
            struct ho_managed *m = policy_buffer(a.restore[i]);
            struct ho_dev *d = dev_of(m);
            if (d->budget == UINT64_MAX || m->pinned) continue;
            /* The plan wants it back before its eviction has run: the host is further ahead of
             * the device than the gap is long. The gap is gone; the buffer stays, and the
             * eviction is called off (waiting for the device to reach its launch, or copying),
             * as a use would call it off: left to run, it would take the buffer away after the
             * restore's turn had passed, and its next use would fetch it on demand. */
            ho_defer_drop(d, m);
            if (atomic_load(&m->state) == HO_EVICTING) atomic_store(&m->state, HO_RESIDENT);
            if (m->tr != NULL || atomic_load(&m->state) != HO_HOST) continue;
            want_add(d, m);
            ho_want_start(d);
        }
    }
    ho_mutex_unlock(&eng.lock);
    if (ids != ids_inline) free(ids);
}
