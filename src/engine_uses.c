/* Uses: the issuing section each call passes through (per-thread issue slots), the streams and
 * events each managed buffer was used on since its last move, the barrier that orders a move after
 * them, and the calls that bracket every launch or copy the hooks issue (ho_engine_prepare and
 * ho_engine_finish). The protocol that keeps remaps safe is described in engine.h. */
#include "engine_internal.h"

#include "real.h"
#include "thread_slots.h"
#include "trace.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* Each thread that issues uses has a slot whose counter is odd while it is between checking the
 * state of the buffers a call uses and having issued that call. A move starts by changing the
 * buffer's state, then waits until every slot that was odd has moved on: from then on no use that
 * saw the old state can still be on its way (the protocol in engine.h). An uncontended add and a
 * store per call, on a line only this thread writes: far cheaper than a locked add per buffer. */
struct issue_slot {
    struct ho_thread_slot slot; /* first: its place in the list (thread_slots.h) */
    _Atomic uint64_t seq;
};

static struct ho_thread_slots issue_slots = HO_THREAD_SLOTS(struct issue_slot);
static _Thread_local struct ho_thread_slot *my_slot;

static struct issue_slot *slot_get(void) {
    struct ho_thread_slot *s =
        my_slot != NULL ? my_slot : ho_thread_slot_take(&issue_slots, &my_slot);
    return (struct issue_slot *)s;
}

/* Enters the issuing section. A sequentially consistent add on a line only this thread writes
 * (cheap: never contended), then sequentially consistent loads of the states: against a move's
 * sequentially consistent state store and slot loads, one of the two sides sees the other. */
static void issue_begin(struct issue_slot *sl) {
    atomic_fetch_add_explicit(&sl->seq, 1, memory_order_seq_cst);
}

static void issue_end(struct issue_slot *sl) {
    uint64_t v = atomic_load_explicit(&sl->seq, memory_order_relaxed);
    atomic_store_explicit(&sl->seq, v + 1, memory_order_release);
}

/* Waits until no thread is in the middle of issuing a call that may have seen a state from
 * before now (eng.lock held; the caller changed a state just before). */
void ho_issue_wait(void) {
    HO_ASSERT_HELD(&eng.lock);
    for (struct ho_thread_slot *s = ho_thread_slots_first(&issue_slots); s != NULL; s = s->next) {
        if (s == my_slot) continue; /* this thread is not issuing: it is moving */
        struct issue_slot *sl = (struct issue_slot *)s;
        uint64_t v = atomic_load_explicit(&sl->seq, memory_order_seq_cst);
        if ((v & 1) == 0) continue;
        while (atomic_load_explicit(&sl->seq, memory_order_acquire) == v)
            sched_yield();
    }
}

static void users_lock(struct ho_managed *m) {
    while (atomic_flag_test_and_set_explicit(&m->users_lock, memory_order_acquire))
        sched_yield();
}

static void users_unlock(struct ho_managed *m) {
    atomic_flag_clear_explicit(&m->users_lock, memory_order_release);
}

/* Records that work using m is being queued on s. A per-thread default stream cannot be named
 * from another thread: those uses are recorded as events after the call (ho_engine_finish). */
void ho_users_add(struct ho_managed *m, CUstream s, bool per_thread, uint64_t seq) {
    atomic_store_explicit(&m->last_use, seq, memory_order_relaxed);
    if (implicit_per_thread(s, per_thread)) return;
    if (s == NULL) s = CU_STREAM_LEGACY;
    /* Usually the stream is known already: a lock-free scan. The list is only cleared by a move's
     * barrier, which runs after this call has been issued (ho_issue_wait), so a stream seen here
     * stays covered. */
    int n = atomic_load_explicit(&m->nusers, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if (atomic_load_explicit(&m->users[i], memory_order_relaxed) == s) return;
    users_lock(m);
    n = atomic_load_explicit(&m->nusers, memory_order_relaxed);
    bool known = false;
    for (int i = 0; i < n && !known; i++)
        known = atomic_load_explicit(&m->users[i], memory_order_relaxed) == s;
    if (!known) {
        if (n < HO_MAX_USERS) {
            atomic_store_explicit(&m->users[n], s, memory_order_relaxed);
            atomic_store_explicit(&m->nusers, n + 1, memory_order_release);
        } else {
            m->users_overflow = true;
        }
    }
    users_unlock(m);
}

/* The use sequence: recency for LRU, and the name of a use for the clocks (so each number is
 * drawn once). */
uint64_t ho_use_seq_next(void) {
    return atomic_fetch_add_explicit(&eng.use_seq, 1, memory_order_relaxed) + 1;
}

/* Whether any use of m is listed (queued since its last move's barrier). */
bool ho_users_queued(struct ho_managed *m) {
    users_lock(m);
    bool any = atomic_load(&m->nusers) > 0 || m->nuse_events > 0 || m->users_overflow;
    users_unlock(m);
    return any;
}

/* Records event e (from the pool, or NULL) on s now and keeps it as a use of m. False when it
 * could not be recorded or m's list is full: e is back in the pool and the caller covers the use
 * another way. */
bool ho_users_add_event(struct ho_managed *m, CUevent e, CUstream s, bool per_thread) {
    bool kept = false;
    if (e != NULL && ho_event_record(e, s, per_thread) == CUDA_SUCCESS) {
        users_lock(m);
        if (m->nuse_events < HO_MAX_USERS) {
            m->use_events[m->nuse_events++] = e;
            kept = true;
        }
        users_unlock(m);
    }
    if (!kept) ho_event_put(dev_of(m), e);
    return kept;
}

/* Takes stream s off m's list; false when it was not on it. */
bool ho_users_drop_stream(struct ho_managed *m, CUstream s) {
    users_lock(m);
    int n = atomic_load(&m->nusers), at = -1;
    for (int i = 0; i < n && at < 0; i++)
        if (atomic_load(&m->users[i]) == s) at = i;
    if (at >= 0) {
        /* Swap the last entry into its place: the list is unordered. */
        atomic_store(&m->users[at], atomic_load(&m->users[n - 1]));
        atomic_store(&m->nusers, n - 1);
    }
    users_unlock(m);
    return at >= 0;
}

/* Makes copy queue q of m's device wait for every use of m queued so far (eng.lock held, the
 * device context current). Those uses are then covered: the list starts afresh. */
void ho_barrier(struct ho_managed *m, int q) {
    ho_barrier_on(m, dev_of(m)->stream[q]);
}

void ho_barrier_on(struct ho_managed *m, CUstream to) {
    HO_ASSERT_HELD(&eng.lock);
    struct ho_dev *d = dev_of(m);
    ho_unseen_wait(to); /* whatever it touched, it may have touched m */
    users_lock(m);
    int n = atomic_load(&m->nusers), ne = m->nuse_events;
    bool overflow = m->users_overflow;
    CUstream users[HO_MAX_USERS];
    CUevent events[HO_MAX_USERS];
    for (int i = 0; i < n; i++)
        users[i] = atomic_load(&m->users[i]);
    memcpy(events, m->use_events, sizeof events);
    atomic_store(&m->nusers, 0);
    m->nuse_events = 0;
    m->users_overflow = false;
    users_unlock(m);
    if (m->clock != NULL && m->clock_seq == atomic_load(&m->last_use) && !overflow && ne == 0 &&
        n == 1 && users[0] == m->clock_stream &&
        ho_real.cuStreamWaitEvent(to, m->clock->e, 0) == CUDA_SUCCESS) {
        /* Its latest use, the only stream it was used on, is clocked: wait for that launch. */
        return;
    }
    if (overflow) {
        /* More streams than tracked, or a use no event could name (a per-thread stream of
         * another device's context): wait for every device (rare; correct, slow). */
        ho_sync_all_devices();
    }
    for (int i = 0; i < n; i++) {
        /* A stream of another device (peer access) takes an event of its own context: one of
         * m's device would be refused, and waiting for m's device would not cover it. */
        ho_order_after_stream(d, to, users[i]);
    }
    for (int i = 0; i < ne; i++) {
        if (ho_real.cuStreamWaitEvent(to, events[i], 0) != CUDA_SUCCESS)
            ho_event_wait(events[i], NULL); /* retried, then widened */
        ho_event_put(d, events[i]);
    }
}

/* ----------------------------------------------------------------- prepare and finish a call */

/* Makes m usable for a use about to be issued (eng.lock held): cancels a move out, waits for a
 * move in, or brings it back on demand. */
static void settle(struct ho_managed *m, bool restore, struct ho_managed *const *protect,
                   int nprotect) {
    HO_ASSERT_HELD(&eng.lock);
    bool capturing = atomic_load(&eng.capturing) > 0;
    /* A launch found it still on its way back, or queued for a prefetch that had no room yet:
     * the plan brought it too late. (One the plan never asked for is not late: it is unplanned.) */
    bool demand = m->tr != NULL && m->tr->demand; /* ho_demand_restores started it for this use */
    if (restore && !demand &&
        (atomic_load(&m->state) == HO_RESTORING ||
         (m->wanted && atomic_load(&m->state) == HO_HOST)))
        eng.policy.ops->late(eng.policy.self, &m->pol);
    ho_want_drop(dev_of(m), m);
    switch (atomic_load(&m->state)) {
    case HO_EVICTING:
        atomic_store(&m->state, HO_RESIDENT); /* cancel: the device copy stays current */
        break;
    case HO_RESTORING:
        if (capturing) {
            atomic_store(&m->state, HO_HOST); /* cancel: no waiting during capture */
        } else {
            if (demand) ho_trace_demand(m->id);
            ho_count_stall(ho_wait_move(m));
            if (m->tr != NULL) /* the wait failed: cancel, the host copy stays the buffer's */
                atomic_store(&m->state, HO_HOST);
        }
        break;
    default:
        break;
    }
    if (atomic_load(&m->state) == HO_HOST && restore && !capturing && m->tr == NULL && !m->pinned)
        ho_demand_restore(m, protect, nprotect);
}

/* The protocol (engine.h): enter the issuing section, then check the state of each buffer. If all
 * are resident the call is covered as it stands: a move starting now waits for this call to be
 * issued, then orders its copy after it. Otherwise leave the section before taking eng.lock (a
 * thread holding it may be waiting for this one), settle the buffers, and enter again under the
 * lock, where no move can start. */
void ho_engine_prepare(struct ho_buffer *const *bufs, int n, CUstream s, bool per_thread,
                       bool restore, struct ho_engine_touch *t) {
    ho_engine_prepare_ex(bufs, n, s, per_thread, restore, false, t);
}

/* The managed buffers among bufs, into t->m (on the heap past HO_TOUCH_INLINE). False when the
 * heap refused: the caller then treats the call as unattributed. */
static bool collect(struct ho_buffer *const *bufs, int n, struct ho_engine_touch *t) {
    t->m = t->m_inline;
    int count = 0;
    for (int i = 0; i < n; i++)
        count += bufs[i]->engine != NULL;
    if (count > HO_TOUCH_INLINE && (t->m = malloc((size_t)count * sizeof *t->m)) == NULL) {
        t->m = t->m_inline;
        for (int i = 0; i < n && t->n < HO_TOUCH_INLINE; i++)
            if (bufs[i]->engine != NULL) t->m[t->n++] = bufs[i]->engine;
        return false;
    }
    for (int i = 0; i < n; i++)
        if (bufs[i]->engine != NULL) t->m[t->n++] = bufs[i]->engine;
    return true;
}

void ho_engine_prepare_ex(struct ho_buffer *const *bufs, int n, CUstream s, bool per_thread,
                          bool restore, bool unseen, struct ho_engine_touch *t) {
    t->n = 0;
    t->slot = NULL;
    t->locked = false;
    t->func = 0;
    t->timing_before = NULL;
    if (!collect(bufs, n, t)) unseen = true; /* the overflow is a barrier */
    t->unseen = unseen;
    if (t->n == 0 && !unseen) return;
    struct issue_slot *sl = slot_get();
    uint64_t seq = ho_use_seq_next();
    t->seq = seq;
    bool resident = sl != NULL;
    if (sl != NULL) {
        issue_begin(sl);
        /* An unattributed use may touch any buffer: it must not be issued while a move is
         * between copy and remap (engine_unseen.c). */
        if (unseen) resident = atomic_load_explicit(&eng.moving, memory_order_seq_cst) == 0;
        for (int i = 0; i < t->n && resident; i++)
            resident = atomic_load_explicit(&t->m[i]->state, memory_order_seq_cst) == HO_RESIDENT;
        if (resident) {
            for (int i = 0; i < t->n; i++)
                ho_users_add(t->m[i], s, per_thread, seq);
            t->slot = sl;
            if (t->n > 0 && atomic_load_explicit(&eng.timing, memory_order_relaxed))
                t->timing_before = ho_timing_event(dev_of(t->m[0]), s, per_thread);
            return;
        }
        issue_end(sl);
    }
    ho_mutex_lock(&eng.lock);
    if (unseen) ho_unseen_cancel_moves();
    if (restore && t->n > 1 && atomic_load(&eng.capturing) == 0) ho_demand_restores(t->m, t->n);
    for (int i = 0; i < t->n; i++)
        settle(t->m[i], restore, t->m, t->n);
    /* Making room for a later one may have started evicting one settled before it (a reclaim
     * after the driver refused a restore's create, a planned eviction): it gives way as well, or
     * its copy, taken before this call writes it, would become the buffer once it lands. */
    for (int i = 0; i < t->n; i++)
        if (atomic_load(&t->m[i]->state) == HO_EVICTING) atomic_store(&t->m[i]->state, HO_RESIDENT);
    /* Making room for those may have started evictions: they give way too. */
    if (unseen) ho_unseen_cancel_moves();
    for (int i = 0; i < t->n; i++)
        ho_users_add(t->m[i], s, per_thread, seq);
    if (t->n > 0 && atomic_load_explicit(&eng.timing, memory_order_relaxed))
        t->timing_before = ho_timing_event(dev_of(t->m[0]), s, per_thread);
    if (sl != NULL) {
        issue_begin(sl);
        t->slot = sl;
        ho_mutex_unlock(&eng.lock);
    } else {
        t->locked = true; /* no slot: hold eng.lock until the call is issued */
    }
}

void ho_engine_unseen_also(struct ho_engine_touch *t, CUstream s, bool per_thread) {
    if (t->unseen) ho_unseen_record(s, per_thread);
}

void ho_engine_finish(struct ho_engine_touch *t, CUstream s, bool per_thread, bool issued) {
    if (t->n == 0 && !t->unseen) return;
    /* Named before the call leaves the issuing section: a move that waited for the section
     * finds it (engine_unseen.c). A call that failed may still have queued part of its work. */
    if (t->unseen) ho_unseen_record(s, per_thread);
    if (issued && implicit_per_thread(s, per_thread)) {
        /* Name the use by an event on this thread's per-thread stream, recorded now, before the
         * call leaves the issuing section. Only the event pool's lock is taken: eng.lock may be
         * held by a thread waiting for this call. */
        for (int i = 0; i < t->n; i++) {
            struct ho_managed *m = t->m[i];
            if (!ho_users_add_event(m, ho_event_get(dev_of(m)), s, per_thread)) {
                /* Unnamed: a move of m waits for the whole device instead. */
                users_lock(m);
                m->users_overflow = true;
                users_unlock(m);
            }
        }
    }
    if (t->slot != NULL) issue_end(t->slot);
    if (t->locked) ho_mutex_unlock(&eng.lock);
    /* The policies plan for a budget: without one nothing moves ahead of need. */
    if (t->n == 0) {
        /* unseen only: nothing to plan */
    } else if (eng.policy.ops->plans && issued && t->func != 0 && dev_of(t->m[0])->budgeted) {
        ho_plan_after_launch(t, s, per_thread);
    } else if (t->timing_before != NULL) {
        ho_timing_drop(dev_of(t->m[0]), t->timing_before); /* not a launch, or not issued */
    }
    if (t->m != t->m_inline) free(t->m);
    t->m = t->m_inline;
    t->n = 0;
}
