/* The residency engine: managed buffers, their moves, and the calls the hooks make.
 * The state machine and the protocol that keeps remaps safe are described in engine.h. */
#include "engine_internal.h"

#include "real.h"
#include "log.h"
#include "lookahead.h"
#include "site.h"
#include "policy.h"
#include "stats.h"
#include "trace.h"

#include <dlfcn.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct ho_engine eng = {.lock = PTHREAD_MUTEX_INITIALIZER, .granule = 2u << 20};

/* ------------------------------------------------------------------------------ the clock */

typedef uint64_t (*sim_clock_fn)(void);
static sim_clock_fn sim_clock;
static bool sim_clock_probed;

uint64_t ho_clock_ns(void) {
    if (!sim_clock_probed) {
        /* Under the simulator, stalls are measured in its virtual time, like everything else. */
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        void *f = h != NULL ? ho_real_dlsym_fn(h, "simcuda_now_ns") : NULL;
        sim_clock = (sim_clock_fn)(uintptr_t)f;
        sim_clock_probed = true;
    }
    if (sim_clock != NULL) return sim_clock();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const char *ho_engine_backend_name(void) {
    return eng.backend == HO_BACKEND_AUTO ? "none" : ho_backend_name(eng.backend);
}

bool ho_engine_active(void) {
    return eng.active;
}

void ho_engine_init(const struct ho_options *o) {
    eng.backend = o->backend;
    eng.min_bytes = o->min_bytes;
    eng.host_limit = ho_amount_resolve(&o->host_limit, UINT64_MAX);
    bool oracle = o->policy == HO_CHOOSE_ORACLE && ho_oracle_load(o->oracle_plan);
    if (o->policy == HO_CHOOSE_LOOKAHEAD || (o->policy == HO_CHOOSE_ORACLE && !oracle)) {
        /* The first lead: 8 launches; late restores double it per buffer role. */
        eng.la = ho_la_create(8);
        if (eng.la == NULL)
            ho_log(HO_LOG_WARN, "out of memory for the lookahead policy: using lru");
    }
    eng.active = true;
}

/* -------------------------------------------------------------------------- accounting */

static void device_bytes(int64_t delta) {
    uint64_t now = atomic_fetch_add(&ho_stats.bytes_device_now, (uint64_t)delta) + (uint64_t)delta;
    if (delta > 0) ho_peak(&ho_stats.bytes_peak_device, now);
}

static void note_host_peak(void) {
    ho_peak(&ho_stats.bytes_peak_host, eng.host_used + eng.host_pooled);
}

/* ---------------------------------------------------------------------------- uses */

/* Each thread that issues uses has a slot whose counter is odd while it is between checking the
 * state of the buffers a call uses and having issued that call. A move starts by changing the
 * buffer's state, then waits until every slot that was odd has moved on: from then on no use that
 * saw the old state can still be on its way (the protocol in engine.h). An uncontended add and a
 * store per call, on a line only this thread writes: far cheaper than a locked add per buffer. */
struct issue_slot {
    _Atomic uint64_t seq;
    _Atomic bool free; /* its thread has exited */
    struct issue_slot *next;
};

static _Atomic(struct issue_slot *) issue_slots;
static _Thread_local struct issue_slot *my_slot;
static pthread_key_t slot_key;
static pthread_once_t slot_key_once = PTHREAD_ONCE_INIT;

static void slot_release(void *p) {
    struct issue_slot *sl = p;
    my_slot = NULL;
    atomic_store_explicit(&sl->free, true, memory_order_release);
}

static void slot_key_make(void) {
    pthread_key_create(&slot_key, slot_release);
}

static struct issue_slot *slot_get(void) {
    if (my_slot != NULL) return my_slot;
    pthread_once(&slot_key_once, slot_key_make);
    struct issue_slot *sl;
    for (sl = atomic_load(&issue_slots); sl != NULL; sl = sl->next) {
        bool was_free = true;
        if (atomic_compare_exchange_strong(&sl->free, &was_free, false)) break;
    }
    if (sl == NULL) {
        sl = calloc(1, sizeof *sl);
        if (sl == NULL) return NULL;
        sl->next = atomic_load(&issue_slots);
        while (!atomic_compare_exchange_weak(&issue_slots, &sl->next, sl)) {
        }
    }
    pthread_setspecific(slot_key, sl);
    my_slot = sl;
    return sl;
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
static void wait_issuing(void) {
    for (struct issue_slot *sl = atomic_load(&issue_slots); sl != NULL; sl = sl->next) {
        if (sl == my_slot) continue; /* this thread is not issuing: it is moving */
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
static void add_user(struct ho_managed *m, CUstream s, bool per_thread, uint64_t seq) {
    atomic_store_explicit(&m->last_use, seq, memory_order_relaxed);
    if (implicit_per_thread(s, per_thread)) return;
    if (s == NULL) s = CU_STREAM_LEGACY;
    /* Usually the stream is known already: a lock-free scan. The list is only cleared by a move's
     * barrier, which runs after this call has been issued (wait_issuing), so a stream seen here
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
static uint64_t next_use(void) {
    return atomic_fetch_add_explicit(&eng.use_seq, 1, memory_order_relaxed) + 1;
}

/* Waits until no use of m is being issued. Called with eng.lock held, after m's state changed
 * away from what the fast path accepts: uses that saw the old state finish issuing first. */
static void wait_pending(struct ho_managed *m) {
    (void)m;
    wait_issuing();
}

/* Makes copy queue q of m's device wait for every use of m queued so far (eng.lock held, the
 * device context current). Those uses are then covered: the list starts afresh. */
static void barrier(struct ho_managed *m, int q) {
    struct ho_dev *d = dev_of(m);
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
        ho_real.cuStreamWaitEvent(d->stream[q], m->clock->e, 0) == CUDA_SUCCESS) {
        /* Its latest use, the only stream it was used on, is clocked: wait for that launch. */
        return;
    }
    if (overflow) {
        /* More streams than tracked: wait for the whole device (rare; correct, slow). */
        ho_real.cuCtxSynchronize();
    }
    for (int i = 0; i < n; i++) {
        CUevent e = ho_event_get(d);
        if (e == NULL || ho_real.cuEventRecord(e, users[i]) != CUDA_SUCCESS ||
            ho_real.cuStreamWaitEvent(d->stream[q], e, 0) != CUDA_SUCCESS) {
            /* Cannot order after that stream: wait for the device instead. */
            ho_real.cuCtxSynchronize();
        }
        ho_event_put(d, e);
    }
    for (int i = 0; i < ne; i++) {
        if (ho_real.cuStreamWaitEvent(d->stream[q], events[i], 0) != CUDA_SUCCESS)
            ho_real.cuCtxSynchronize();
        ho_event_put(d, events[i]);
    }
}

/* ------------------------------------------------------------------------------- moves */

static void enqueue(struct ho_dev *d, int q, struct ho_transition *tr) {
    tr->next = NULL;
    if (d->tail[q] != NULL)
        d->tail[q]->next = tr;
    else
        d->head[q] = tr;
    d->tail[q] = tr;
    atomic_fetch_add(&eng.inflight, 1);
}

/* Records the end of a move's copy and queues it (eng.lock held, context current). */
static bool finish_submit(struct ho_dev *d, int q, struct ho_transition *tr) {
    tr->done = ho_event_get(d);
    if (tr->done == NULL || ho_real.cuEventRecord(tr->done, d->stream[q]) != CUDA_SUCCESS) {
        /* No event: wait for the copy now, so completion can proceed at once. */
        ho_real.cuStreamSynchronize(d->stream[q]);
        if (tr->done != NULL) {
            ho_event_put(d, tr->done);
            tr->done = NULL;
        }
    }
    tr->m->tr = tr;
    tr->start_ns = ho_clock_ns();
    enqueue(d, q, tr);
    return true;
}

bool ho_start_evict(struct ho_managed *m) {
    struct ho_dev *d = dev_of(m);
    struct ho_transition *tr = calloc(1, sizeof *tr);
    if (tr == NULL) return false;
    tr->kind = HO_TR_EVICT;
    tr->m = m;
    ho_ctx_push(d);
    if (eng.backend == HO_BACKEND_VMM) {
        tr->host = ho_host_slot_get(d, m->span);
        if (tr->host == NULL) {
            ho_ctx_pop();
            free(tr);
            return false;
        }
        note_host_peak();
    }
    atomic_store(&m->state, HO_EVICTING);
    wait_pending(m);
    barrier(m, HO_Q_EVICT);
    CUresult rc;
    if (eng.backend == HO_BACKEND_VMM) {
        rc = ho_real.cuMemcpyDtoDAsync_v2(tr->host->window, m->va, m->span, d->stream[HO_Q_EVICT]);
    } else {
        CUmemLocation host = {.type = CU_MEM_LOCATION_TYPE_HOST};
        rc = ho_real.cuMemPrefetchAsync_v2(m->va, m->span, host, 0, d->stream[HO_Q_EVICT]);
    }
    if (rc != CUDA_SUCCESS) {
        ho_log(HO_LOG_WARN, "evicting a %llu-byte buffer failed (error %d): it stays on the device",
               (unsigned long long)m->size, (int)rc);
        atomic_store(&m->state, HO_RESIDENT);
        if (tr->host != NULL) ho_host_slot_put(tr->host);
        ho_ctx_pop();
        free(tr);
        return false;
    }
    finish_submit(d, HO_Q_EVICT, tr);
    d->evicting += m->span;
    ho_ctx_pop();
    return true;
}

/* Maps va to handle h with device access; on failure maps `fallback` back (the handle that still
 * holds the bytes). */
static bool remap(struct ho_managed *m, CUmemGenericAllocationHandle h,
                  CUmemGenericAllocationHandle fallback) {
    struct ho_dev *d = dev_of(m);
    if (ho_real.cuMemUnmap(m->va, m->span) != CUDA_SUCCESS) return false;
    if (ho_map_rw(d, m->va, m->span, h, m->device)) return true;
    if (!ho_map_rw(d, m->va, m->span, fallback, m->device))
        ho_log(HO_LOG_ERROR,
               "cannot map a buffer back at %#llx: its bytes are safe in handle %#llx "
               "but the address is unmapped",
               (unsigned long long)m->va, (unsigned long long)fallback);
    return false;
}

static void start_free(struct ho_managed *m);

static void complete_evict(struct ho_transition *tr) {
    struct ho_managed *m = tr->m;
    struct ho_dev *d = dev_of(m);
    d->evicting -= m->span;
    if (atomic_load(&m->state) != HO_EVICTING) { /* cancelled: the device copy is current */
        if (tr->host != NULL) ho_host_slot_put(tr->host);
        ho_trace_move(HO_MOVE_EVICT, m->id, m->span, tr->start_ns, true);
        return;
    }
    if (eng.backend == HO_BACKEND_VMM) {
        if (!remap(m, tr->host->handle, m->dev)) {
            atomic_store(&m->state, HO_RESIDENT);
            ho_host_slot_put(tr->host);
            return;
        }
        ho_real.cuMemRelease(m->dev);
        m->dev = 0;
        m->host = tr->host;
    }
    d->resident -= m->span;
    device_bytes(-(int64_t)m->span);
    atomic_store(&m->state, HO_HOST);
    ho_count(&ho_stats.counts_evictions, 1);
    ho_count(&ho_stats.bytes_to_host, m->span);
    ho_trace_move(HO_MOVE_EVICT, m->id, m->span, tr->start_ns, false);
}

static void complete_restore(struct ho_transition *tr) {
    struct ho_managed *m = tr->m;
    struct ho_dev *d = dev_of(m);
    if (tr->timed[0] != NULL && tr->timed[1] != NULL && eng.la != NULL) {
        /* The fastest restore is the link's own rate: slower ones shared it with evictions. */
        uint64_t ns = ho_timing_read(d, tr->timed[0], tr->timed[1]);
        double rate = ns > 0 ? (double)m->span / (double)ns : 0;
        if (rate > eng.link_bytes_per_ns) {
            eng.link_bytes_per_ns = rate;
            ho_la_set_link(eng.la, rate * 1e9);
        }
    }
    ho_timing_drop(d, tr->timed[0]);
    ho_timing_drop(d, tr->timed[1]);
    bool ok = atomic_load(&m->state) == HO_RESTORING;
    if (ok && eng.backend == HO_BACKEND_VMM) ok = remap(m, tr->dev, m->host->handle);
    if (!ok) { /* cancelled, or the remap failed: the host copy is current */
        if (eng.backend == HO_BACKEND_VMM) {
            ho_real.cuMemUnmap(tr->window, m->span);
            ho_va_put(tr->window, m->span);
            ho_real.cuMemRelease(tr->dev);
        }
        d->resident -= m->span;
        device_bytes(-(int64_t)m->span);
        atomic_store(&m->state, HO_HOST);
        ho_trace_move(HO_MOVE_RESTORE, m->id, m->span, tr->start_ns, true);
        return;
    }
    if (eng.backend == HO_BACKEND_VMM) {
        ho_real.cuMemUnmap(tr->window, m->span);
        ho_va_put(tr->window, m->span);
        ho_host_slot_put(m->host);
        m->host = NULL;
        m->dev = tr->dev;
    }
    atomic_store(&m->state, HO_RESIDENT);
    ho_count(&ho_stats.counts_restores, 1);
    ho_count(&ho_stats.bytes_to_device, m->span);
    ho_trace_move(HO_MOVE_RESTORE, m->id, m->span, tr->start_ns, false);
}

static void complete_free(struct ho_transition *tr) {
    struct ho_managed *m = tr->m;
    struct ho_dev *d = dev_of(m);
    ho_clock_put(d, m->clock);
    m->clock = NULL;
    bool on_device = atomic_load(&m->state) == HO_RESIDENT;
    struct ho_cached *c =
        on_device && eng.backend == HO_BACKEND_VMM && m->dev != 0 ? malloc(sizeof *c) : NULL;
    if (c != NULL) {
        /* Keep the mapped device memory for the next allocation of this size. */
        *c = (struct ho_cached){m->va, m->dev, m->span, d->cache};
        d->cache = c;
        d->cached += m->span;
        device_bytes(-(int64_t)m->span);
    } else if (eng.backend == HO_BACKEND_VMM) {
        ho_real.cuMemUnmap(m->va, m->span);
        if (m->dev != 0) ho_real.cuMemRelease(m->dev);
        if (m->host != NULL) ho_host_slot_put(m->host);
        ho_va_put(m->va, m->span);
    } else {
        ho_real.cuMemFree_v2(m->va);
    }
    if (on_device && c == NULL) {
        d->resident -= m->span;
        device_bytes(-(int64_t)m->span);
    }
    for (struct ho_managed **pp = &eng.all; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == m) {
            *pp = m->next;
            break;
        }
    }
}

/* Completes the head of queue q (its copy is done). eng.lock held. */
static void complete_head(struct ho_dev *d, int q) {
    struct ho_transition *tr = d->head[q];
    d->head[q] = tr->next;
    if (d->head[q] == NULL) d->tail[q] = NULL;
    atomic_fetch_sub(&eng.inflight, 1);
    struct ho_managed *m = tr->m;
    ho_ctx_push(d);
    switch (tr->kind) {
    case HO_TR_EVICT:
        complete_evict(tr);
        break;
    case HO_TR_RESTORE:
        complete_restore(tr);
        break;
    case HO_TR_FREE:
        complete_free(tr);
        break;
    }
    ho_event_put(d, tr->done);
    ho_ctx_pop();
    bool freed = tr->kind == HO_TR_FREE;
    free(tr);
    if (freed) {
        free(m);
        return;
    }
    m->tr = NULL;
    if (m->free_requested) start_free(m);
}

/* Waits for the move in flight on m (if any) and completes it and everything queued before it on
 * the same queue. Returns the stall in ns. eng.lock held. */
static uint64_t wait_move(struct ho_managed *m) {
    struct ho_transition *tr = m->tr;
    if (tr == NULL) return 0;
    struct ho_dev *d = dev_of(m);
    int q = tr->kind == HO_TR_RESTORE ? HO_Q_RESTORE
                                      : (tr->kind == HO_TR_FREE ? HO_Q_FREE : HO_Q_EVICT);
    uint64_t t0 = ho_clock_ns();
    if (tr->done != NULL) {
        ho_ctx_push(d);
        ho_real.cuEventSynchronize(tr->done);
        ho_ctx_pop();
    }
    uint64_t stall = ho_clock_ns() - t0;
    ho_trace_stall(m->id, stall, q == HO_Q_RESTORE ? HO_MOVE_RESTORE : HO_MOVE_EVICT);
    struct ho_transition *last = tr;
    while (d->head[q] != NULL) {
        bool stop = d->head[q] == last;
        complete_head(d, q);
        if (stop) break;
    }
    return stall;
}

static bool has_queued_uses(struct ho_managed *m) {
    users_lock(m);
    bool any = atomic_load(&m->nusers) > 0 || m->nuse_events > 0 || m->users_overflow;
    users_unlock(m);
    return any;
}

static void start_free(struct ho_managed *m) {
    struct ho_dev *d = dev_of(m);
    m->free_requested = false;
    if (!has_queued_uses(m)) {
        /* Every use was covered by an earlier move that has completed: nothing can still be
         * queued against it, so it can go now, without an event round trip. */
        struct ho_transition t = {.kind = HO_TR_FREE, .m = m};
        ho_ctx_push(d);
        complete_free(&t);
        ho_ctx_pop();
        free(m);
        return;
    }
    struct ho_transition *tr = calloc(1, sizeof *tr);
    if (tr == NULL) {
        /* Out of memory: free synchronously instead, after the device is idle. */
        ho_ctx_push(d);
        ho_real.cuCtxSynchronize();
        ho_ctx_pop();
        struct ho_transition t = {.kind = HO_TR_FREE, .m = m};
        complete_free(&t);
        free(m);
        return;
    }
    tr->kind = HO_TR_FREE;
    tr->m = m;
    ho_ctx_push(d);
    barrier(m, HO_Q_FREE);
    finish_submit(d, HO_Q_FREE, tr);
    ho_ctx_pop();
}

/* ------------------------------------------------------------------------------- room */

/* Gives cached device memory back until `need` more bytes fit under `limit` (or the cache is
 * empty). eng.lock held. */
void ho_cache_trim(struct ho_dev *d, uint64_t need, uint64_t limit) {
    while (d->cache != NULL && d->resident + need > limit) {
        struct ho_cached *c = d->cache;
        d->cache = c->next;
        ho_ctx_push(d);
        ho_real.cuMemUnmap(c->va, c->span);
        ho_real.cuMemRelease(c->dev);
        ho_ctx_pop();
        ho_va_put(c->va, c->span);
        d->cached -= c->span;
        d->resident -= c->span;
        free(c);
    }
}

/* Takes cached device memory of exactly `span` bytes, still mapped, or returns false. */
static bool cache_take(struct ho_dev *d, uint64_t span, CUdeviceptr *va,
                       CUmemGenericAllocationHandle *dev) {
    for (struct ho_cached **pp = &d->cache; *pp != NULL; pp = &(*pp)->next) {
        struct ho_cached *c = *pp;
        if (c->span != span) continue;
        *pp = c->next;
        *va = c->va;
        *dev = c->dev;
        d->cached -= span; /* still resident: it now holds the new buffer */
        free(c);
        return true;
    }
    return false;
}

enum room { ROOM_OK, ROOM_OVER_LIMIT, ROOM_NONE };

static bool protected_buf(const struct ho_managed *m, struct ho_managed *const *protect, int n) {
    for (int i = 0; i < n; i++)
        if (protect[i] == m) return true;
    return false;
}

/* Starts evicting the least valuable movable buffers of device d until `need` more bytes would
 * fit (eng.lock held). Returns how many evictions it started; sets *host_full when the host side
 * refused one. Least valuable: once the lookahead policy predicts, the buffer needed furthest
 * ahead (only those needed later than `beyond` launches from now are candidates); else the least
 * recently used. */
size_t ho_evict_for(struct ho_dev *d, uint64_t need, struct ho_managed *const *protect,
                    int nprotect, uint64_t beyond, bool *host_full) {
    bool predicts = ho_predicting();
    size_t started = 0;
    while (d->resident - d->evicting + need > d->budget && !*host_full) {
        size_t n = 0, cap = 0;
        for (struct ho_managed *m = eng.all; m != NULL; m = m->next)
            cap++;
        struct ho_policy_candidate *c = calloc(cap ? cap : 1, sizeof *c);
        struct ho_managed **by_id = calloc(cap ? cap : 1, sizeof *by_id);
        uint64_t *victims = calloc(cap ? cap : 1, sizeof *victims);
        size_t k = 0, round = 0;
        if (c != NULL && by_id != NULL && victims != NULL) {
            for (struct ho_managed *m = eng.all; m != NULL; m = m->next) {
                if (dev_of(m) != d || m->pinned || m->tr != NULL ||
                    atomic_load(&m->state) != HO_RESIDENT || protected_buf(m, protect, nprotect))
                    continue;
                uint64_t next = predicts ? ho_predicted_next_use(m) : HO_NEXT_USE_UNKNOWN;
                if (predicts && next <= beyond) continue;
                /* The candidate's id is its index here, so a victim is found without a search. */
                by_id[n] = m;
                c[n] = (struct ho_policy_candidate){n, m->span, atomic_load(&m->last_use), next};
                n++;
            }
            uint64_t over = d->resident - d->evicting + need - d->budget;
            k = ho_policy_victims(predicts ? HO_POLICY_FURTHEST : HO_POLICY_LRU, over, c, n,
                                  victims, n);
            for (size_t i = 0; i < k && !*host_full; i++) {
                if (ho_start_evict(by_id[victims[i]]))
                    round++;
                else
                    *host_full = true;
            }
        }
        free(c);
        free(by_id);
        free(victims);
        started += round;
        if (round == 0) break;
    }
    return started;
}

/* Makes `need` more bytes fit device d's budget: evicts, then waits for the copies that free the
 * memory. Moves in flight hold their buffers (they are no candidates): when nothing else is left,
 * wait for the oldest of them to land and try again. eng.lock held. */
static enum room make_room(struct ho_dev *d, uint64_t need, struct ho_managed *const *protect,
                           int nprotect, uint64_t *stall) {
    if (d->budget == UINT64_MAX || need > d->budget) return need > d->budget ? ROOM_NONE : ROOM_OK;
    ho_cache_trim(d, need, d->budget);
    if (atomic_load(&eng.capturing) > 0) return ROOM_OVER_LIMIT; /* nothing moves meanwhile */
    ho_defer_poll(d); /* planned evictions that can start now come first */
    bool host_full = false;
    /* A move can fail (the driver refused a copy or a remap: the buffer then stays where it was),
     * so try again while attempts still start moves, a bounded number of times. */
    for (int attempt = 0; attempt < 16; attempt++) {
        size_t started = ho_evict_for(d, need, protect, nprotect, 0, &host_full);
        bool waited = false;
        /* Evictions first (they run at the link's pace), then frees (they wait for the device to
         * reach the buffers' last uses). */
        while (d->resident + need > d->budget &&
               (d->head[HO_Q_EVICT] != NULL || d->head[HO_Q_FREE] != NULL)) {
            int q = d->head[HO_Q_EVICT] != NULL ? HO_Q_EVICT : HO_Q_FREE;
            *stall += wait_move(d->head[q]->m);
            ho_cache_trim(d, need, d->budget); /* a completed free may have landed in the cache */
            waited = true;
        }
        if (d->resident + need <= d->budget) return ROOM_OK;
        if (host_full) break;
        /* Still short: moves that landed (a prefetch, or an eviction a use cancelled) left
         * candidates behind; go round again unless this round changed nothing. */
        if (d->head[HO_Q_RESTORE] != NULL)
            *stall += wait_move(d->head[HO_Q_RESTORE]->m);
        else if (started == 0 && !waited)
            break;
    }
    if (!host_full && ho_log_enabled(HO_LOG_DEBUG)) {
        unsigned moving = 0, held = 0, resident = 0;
        for (struct ho_managed *m = eng.all; m != NULL; m = m->next) {
            if (dev_of(m) != d || atomic_load(&m->state) != HO_RESIDENT) continue;
            resident++;
            if (m->tr != NULL)
                moving++;
            else if (m->pinned || protected_buf(m, protect, nprotect))
                held++;
        }
        ho_log(HO_LOG_DEBUG,
               "no room for %llu bytes: %llu resident of a %llu budget (%llu cached, %llu "
               "leaving); %u resident buffers: %u with a move in flight, %u pinned or in use",
               (unsigned long long)need, (unsigned long long)d->resident,
               (unsigned long long)d->budget, (unsigned long long)d->cached,
               (unsigned long long)d->evicting, resident, moving, held);
    }
    return host_full ? ROOM_OVER_LIMIT : ROOM_NONE;
}

/* A device allocation failed for lack of memory: finish what is on its way out, then evict more.
 * Returns true when something was freed. eng.lock held. */
static bool reclaim_device(struct ho_dev *d, uint64_t need, uint64_t *stall) {
    uint64_t before = d->resident;
    ho_cache_trim(d, UINT64_MAX / 2, 0); /* all of it */
    if (d->resident < before) return true;
    for (int q = HO_Q_EVICT; q < HO_NQUEUES; q++)
        while (q != HO_Q_RESTORE && d->head[q] != NULL)
            *stall += wait_move(d->head[q]->m);
    if (d->resident < before) return true;
    uint64_t saved = d->budget;
    d->budget = d->resident > need ? d->resident - need : 0;
    make_room(d, need, NULL, 0, stall);
    d->budget = saved;
    return d->resident < before;
}

void ho_count_stall(uint64_t ns) {
    if (ns > 0) ho_count(&ho_stats.time_ns_stall, ns);
}

/* ----------------------------------------------------------------------- allocate, free */

static CUresult create_device_handle(struct ho_dev *d, uint64_t span,
                                     CUmemGenericAllocationHandle *h, uint64_t *stall) {
    for (;;) {
        CUresult rc = ho_real.cuMemCreate(h, span, &d->dev_prop, 0);
        if (rc != CUDA_ERROR_OUT_OF_MEMORY) return rc;
        if (!reclaim_device(d, span, stall)) return CUDA_ERROR_OUT_OF_MEMORY;
    }
}

static CUresult alloc_locked(struct ho_dev *d, struct ho_managed *m, uint64_t *stall) {
    CUresult rc;
    if (eng.backend == HO_BACKEND_VMM && cache_take(d, m->span, &m->va, &m->dev)) {
        /* Same size as a freed buffer: its memory, still mapped and already counted as
         * resident, serves at once. */
        device_bytes((int64_t)m->span);
        goto ready;
    }
    enum room room = make_room(d, m->span, NULL, 0, stall);
    if (room == ROOM_NONE) return CUDA_ERROR_OUT_OF_MEMORY;
    ho_ctx_push(d);
    if (eng.backend == HO_BACKEND_VMM) {
        rc = create_device_handle(d, m->span, &m->dev, stall);
        if (rc == CUDA_SUCCESS) {
            m->va = ho_va_get(m->span);
            if (m->va == 0 || !ho_map_rw(d, m->va, m->span, m->dev, m->device)) {
                if (m->va != 0) ho_va_put(m->va, m->span);
                ho_real.cuMemRelease(m->dev);
                /* The driver refused a step of the engine's own: let it allocate plainly, so the
                 * application sees only what it would have seen without the library. */
                rc = CUDA_ERROR_NOT_SUPPORTED;
            }
        } else {
            /* No device memory for a handle even after reclaiming: a plain allocation gets the
             * driver's own answer (out of memory too when the device is really full). */
            rc = CUDA_ERROR_NOT_SUPPORTED;
        }
    } else {
        rc = ho_real.cuMemAllocManaged(&m->va, m->span, CU_MEM_ATTACH_GLOBAL);
        while (rc == CUDA_ERROR_OUT_OF_MEMORY && reclaim_device(d, m->span, stall))
            rc = ho_real.cuMemAllocManaged(&m->va, m->span, CU_MEM_ATTACH_GLOBAL);
        if (rc == CUDA_SUCCESS) {
            CUmemLocation here = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = m->device};
            ho_real.cuMemPrefetchAsync_v2(m->va, m->span, here, 0, d->stream[HO_Q_RESTORE]);
        }
    }
    ho_ctx_pop();
    if (rc != CUDA_SUCCESS) return rc;
    d->resident += m->span;
    device_bytes((int64_t)m->span);
ready:
    atomic_store(&m->state, HO_RESIDENT);
    m->next = eng.all;
    eng.all = m;
    return CUDA_SUCCESS;
}

CUresult ho_engine_alloc(CUdeviceptr *dptr, size_t bytes, enum ho_buffer_kind kind) {
    if (!eng.active || bytes < eng.min_bytes || dptr == NULL) return CUDA_ERROR_NOT_SUPPORTED;
    CUdevice device;
    if (ho_real.cuCtxGetDevice(&device) != CUDA_SUCCESS || device < 0 || device >= HO_MAX_DEVICES)
        return CUDA_ERROR_NOT_SUPPORTED; /* no context: the driver gives its own answer */
    struct ho_managed *m = calloc(1, sizeof *m);
    if (m != NULL) m->ordinal = UINT64_MAX;
    if (m == NULL) return CUDA_ERROR_NOT_SUPPORTED;
    m->device = device;
    m->size = bytes;
    atomic_flag_clear(&m->users_lock);
    uint64_t stall = 0;
    pthread_mutex_lock(&eng.lock);
    CUresult rc = CUDA_ERROR_NOT_SUPPORTED;
    if (ho_dev_setup(device)) {
        m->span = (bytes + eng.granule - 1) / eng.granule * eng.granule;
        rc = alloc_locked(&eng.dev[device], m, &stall);
    }
    pthread_mutex_unlock(&eng.lock);
    ho_count_stall(stall);
    if (rc != CUDA_SUCCESS) {
        free(m);
        return rc;
    }
    /* The registry is written outside eng.lock: launches hold its read side while they take the
     * engine lock, so the opposite order would deadlock. */
    m->site = ho_site_capture();
    struct ho_buffer *b = ho_registry_add(m->va, bytes, device, kind);
    if (b == NULL) {
        pthread_mutex_lock(&eng.lock);
        start_free(m);
        pthread_mutex_unlock(&eng.lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    m->id = b->id;
    b->site = m->site;
    m->record = b;
    b->engine = m;
    if (eng.la != NULL || ho_oracle_on()) {
        pthread_mutex_lock(&eng.lock);
        if (eng.la != NULL) ho_la_alloc(eng.la, policy_id(m), m->span, m->site);
        if (ho_oracle_on()) ho_oracle_alloc(m);
        pthread_mutex_unlock(&eng.lock);
    }
    ho_count(&ho_stats.counts_allocs, 1);
    ho_count(&ho_stats.bytes_allocated, bytes);
    *dptr = m->va;
    return CUDA_SUCCESS;
}

bool ho_engine_free(CUdeviceptr dptr, CUstream stream, bool per_thread, bool async) {
    if (!eng.active) return false;
    /* Out of the registry first: no new use can find it. Then no use may still be issuing. */
    struct ho_buffer *b = ho_registry_remove_managed(dptr);
    if (b == NULL) return false;
    struct ho_managed *m = b->engine;
    ho_count(&ho_stats.counts_frees, 1);
    pthread_mutex_lock(&eng.lock);
    wait_pending(m);
    m->record = NULL;
    ho_want_drop(dev_of(m), m);
    ho_defer_drop(dev_of(m), m);
    if (eng.la != NULL) ho_la_free(eng.la, policy_id(m));
    if (ho_oracle_on()) ho_oracle_forget(m);
    ho_clock_forget(m);
    if (async) add_user(m, stream, per_thread, next_use());
    if (async && implicit_per_thread(stream, per_thread)) {
        /* The free is ordered after this thread's per-thread stream: wait for it here. */
        ho_real.cuStreamSynchronize_ptsz(NULL);
    }
    switch (atomic_load(&m->state)) {
    case HO_EVICTING:
        atomic_store(&m->state, HO_RESIDENT);
        break; /* cancel */
    case HO_RESTORING:
        atomic_store(&m->state, HO_HOST);
        break; /* cancel */
    default:
        break;
    }
    if (m->tr != NULL)
        m->free_requested = true;
    else
        start_free(m);
    pthread_mutex_unlock(&eng.lock);
    return true;
}

/* ---------------------------------------------------------------------------- restore */

/* Brings m back to the device and waits for it (a demand restore). False when there is no room:
 * m stays host-mapped and the use reads it remotely, correctly. eng.lock held. */
/* Starts bringing m back (eng.lock held): room under the budget, a device handle mapped at a
 * window, the copy queued after every queued use. False when there is no room or a step failed:
 * m stays host-mapped. `stall` accumulates what waiting for room cost. */
bool ho_start_restore(struct ho_managed *m, struct ho_managed *const *protect, int nprotect,
                      uint64_t *stall_out) {
    struct ho_dev *d = dev_of(m);
    uint64_t stall = 0;
    if (make_room(d, m->span, protect, nprotect, &stall) != ROOM_OK) {
        *stall_out += stall;
        return false;
    }
    struct ho_transition *tr = calloc(1, sizeof *tr);
    if (tr == NULL) return false;
    tr->kind = HO_TR_RESTORE;
    tr->m = m;
    ho_ctx_push(d);
    CUresult rc = CUDA_SUCCESS;
    if (eng.backend == HO_BACKEND_VMM) {
        rc = create_device_handle(d, m->span, &tr->dev, &stall);
        if (rc == CUDA_SUCCESS) {
            tr->window = ho_va_get(m->span);
            if (tr->window == 0 || !ho_map_rw(d, tr->window, m->span, tr->dev, m->device)) {
                if (tr->window != 0) ho_va_put(tr->window, m->span);
                ho_real.cuMemRelease(tr->dev);
                rc = CUDA_ERROR_OUT_OF_MEMORY;
            }
        }
    }
    if (rc != CUDA_SUCCESS) {
        ho_ctx_pop();
        free(tr);
        *stall_out += stall;
        return false;
    }
    atomic_store(&m->state, HO_RESTORING);
    wait_pending(m);
    barrier(m, HO_Q_RESTORE);
    bool time_it = eng.la != NULL &&
                   (eng.restores_timed < HO_LINK_FIRST || eng.restores_timed % HO_LINK_SAMPLE == 0);
    eng.restores_timed++;
    if (time_it) tr->timed[0] = ho_timing_event(d, d->stream[HO_Q_RESTORE], false);
    if (eng.backend == HO_BACKEND_VMM) {
        rc = ho_real.cuMemcpyDtoDAsync_v2(tr->window, m->va, m->span, d->stream[HO_Q_RESTORE]);
    } else {
        CUmemLocation here = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = m->device};
        rc = ho_real.cuMemPrefetchAsync_v2(m->va, m->span, here, 0, d->stream[HO_Q_RESTORE]);
    }
    if (rc != CUDA_SUCCESS) {
        ho_timing_drop(d, tr->timed[0]);
        atomic_store(&m->state, HO_HOST);
        if (eng.backend == HO_BACKEND_VMM) {
            ho_real.cuMemUnmap(tr->window, m->span);
            ho_va_put(tr->window, m->span);
            ho_real.cuMemRelease(tr->dev);
        }
        ho_ctx_pop();
        free(tr);
        *stall_out += stall;
        return false;
    }
    if (tr->timed[0] != NULL) tr->timed[1] = ho_timing_event(d, d->stream[HO_Q_RESTORE], false);
    d->resident += m->span;
    device_bytes((int64_t)m->span);
    finish_submit(d, HO_Q_RESTORE, tr);
    ho_ctx_pop();
    *stall_out += stall;
    return true;
}

/* Brings m back and waits for it: a demand restore, counted as a stall. */
static bool demand_restore(struct ho_managed *m, struct ho_managed *const *protect, int nprotect) {
    uint64_t stall = 0;
    bool started = ho_start_restore(m, protect, nprotect, &stall);
    if (started) {
        ho_trace_demand(m->id);
        stall += wait_move(m);
        ho_count(&ho_stats.counts_demand_restores, 1);
    }
    ho_count_stall(stall);
    return started && atomic_load(&m->state) == HO_RESIDENT;
}

/* ------------------------------------------------------------------------------ uses */

/* Makes m usable for a use about to be issued (eng.lock held): cancels a move out, waits for a
 * move in, or brings it back on demand. */
static void settle(struct ho_managed *m, bool restore, struct ho_managed *const *protect,
                   int nprotect) {
    bool capturing = atomic_load(&eng.capturing) > 0;
    /* A launch found it still on its way back, or queued for a prefetch that had no room yet:
     * the plan brought it too late. (One the plan never asked for is not late: it is unplanned.) */
    if (restore && eng.la != NULL &&
        (atomic_load(&m->state) == HO_RESTORING ||
         (m->wanted && atomic_load(&m->state) == HO_HOST)))
        ho_la_late(eng.la, policy_id(m));
    ho_want_drop(dev_of(m), m);
    switch (atomic_load(&m->state)) {
    case HO_EVICTING:
        atomic_store(&m->state, HO_RESIDENT); /* cancel: the device copy stays current */
        break;
    case HO_RESTORING:
        if (capturing)
            atomic_store(&m->state, HO_HOST); /* cancel: no waiting during capture */
        else
            ho_count_stall(wait_move(m));
        break;
    default:
        break;
    }
    if (atomic_load(&m->state) == HO_HOST && restore && !capturing && m->tr == NULL && !m->pinned)
        demand_restore(m, protect, nprotect);
}

/* The protocol (engine.h): enter the issuing section, then check the state of each buffer. If all
 * are resident the call is covered as it stands: a move starting now waits for this call to be
 * issued, then orders its copy after it. Otherwise leave the section before taking eng.lock (a
 * thread holding it may be waiting for this one), settle the buffers, and enter again under the
 * lock, where no move can start. */
void ho_engine_prepare(struct ho_buffer *const *bufs, int n, CUstream s, bool per_thread,
                       bool restore, struct ho_engine_touch *t) {
    t->n = 0;
    t->slot = NULL;
    t->locked = false;
    t->func = 0;
    t->timing_before = NULL;
    for (int i = 0; i < n && t->n < HO_TOUCH_MAX; i++)
        if (bufs[i]->engine != NULL) t->m[t->n++] = bufs[i]->engine;
    if (t->n == 0) return;
    struct issue_slot *sl = slot_get();
    uint64_t seq = next_use();
    t->seq = seq;
    bool resident = sl != NULL;
    if (sl != NULL) {
        issue_begin(sl);
        for (int i = 0; i < t->n && resident; i++)
            resident = atomic_load_explicit(&t->m[i]->state, memory_order_seq_cst) == HO_RESIDENT;
        if (resident) {
            for (int i = 0; i < t->n; i++)
                add_user(t->m[i], s, per_thread, seq);
            t->slot = sl;
            if (atomic_load_explicit(&eng.timing, memory_order_relaxed))
                t->timing_before = ho_timing_event(dev_of(t->m[0]), s, per_thread);
            return;
        }
        issue_end(sl);
    }
    pthread_mutex_lock(&eng.lock);
    for (int i = 0; i < t->n; i++)
        settle(t->m[i], restore, t->m, t->n);
    for (int i = 0; i < t->n; i++)
        add_user(t->m[i], s, per_thread, seq);
    if (atomic_load_explicit(&eng.timing, memory_order_relaxed))
        t->timing_before = ho_timing_event(dev_of(t->m[0]), s, per_thread);
    if (sl != NULL) {
        issue_begin(sl);
        t->slot = sl;
        pthread_mutex_unlock(&eng.lock);
    } else {
        t->locked = true; /* no slot: hold eng.lock until the call is issued */
    }
}

void ho_engine_finish(struct ho_engine_touch *t, CUstream s, bool per_thread, bool issued) {
    if (t->n == 0) return;
    if (issued && implicit_per_thread(s, per_thread)) {
        /* Name the use by an event on this thread's per-thread stream, recorded now, before the
         * call leaves the issuing section. Only the event pool's lock is taken: eng.lock may be
         * held by a thread waiting for this call. */
        for (int i = 0; i < t->n; i++) {
            struct ho_managed *m = t->m[i];
            CUevent e = ho_event_get(dev_of(m));
            bool kept = false;
            if (e != NULL && ho_real.cuEventRecord_ptsz(e, NULL) == CUDA_SUCCESS) {
                users_lock(m);
                if (m->nuse_events < HO_MAX_USERS) {
                    m->use_events[m->nuse_events++] = e;
                    kept = true;
                }
                users_unlock(m);
            }
            if (!kept) {
                users_lock(m);
                m->users_overflow = true;
                users_unlock(m);
                ho_event_put(dev_of(m), e);
            }
        }
    }
    if (t->slot != NULL) issue_end(t->slot);
    if (t->locked) pthread_mutex_unlock(&eng.lock);
    /* The policies plan for a budget: without one nothing moves ahead of need. */
    if ((eng.la != NULL || ho_oracle_on()) && issued && t->func != 0 &&
        dev_of(t->m[0])->budget != UINT64_MAX) {
        ho_plan_after_launch(t, s, per_thread);
    } else if (t->timing_before != NULL) {
        ho_timing_drop(dev_of(t->m[0]), t->timing_before); /* not a launch, or not issued */
    }
}

/* --------------------------------------------------------------------------- progress */

void ho_engine_progress(void) {
    if (atomic_load_explicit(&eng.inflight, memory_order_relaxed) == 0 ||
        atomic_load_explicit(&eng.capturing, memory_order_relaxed) > 0)
        return;
    if (pthread_mutex_trylock(&eng.lock) != 0) return; /* someone else is making progress */
    if (eng.ntimed > 0) ho_timing_poll();
    for (int dv = 0; dv < HO_MAX_DEVICES; dv++) {
        struct ho_dev *d = &eng.dev[dv];
        if (!d->ready) continue;
        for (int q = 0; q < HO_NQUEUES; q++) {
            while (d->head[q] != NULL) {
                CUevent e = d->head[q]->done;
                if (e != NULL) {
                    ho_ctx_push(d);
                    CUresult rc = ho_real.cuEventQuery(e);
                    ho_ctx_pop();
                    if (rc != CUDA_SUCCESS) break;
                }
                complete_head(d, q);
            }
        }
        if (d->ndefer > 0 && atomic_load(&eng.capturing) == 0) ho_defer_poll(d);
        if (d->nwant > 0 && atomic_load(&eng.capturing) == 0) ho_want_start(d);
    }
    pthread_mutex_unlock(&eng.lock);
}

void ho_engine_capture(int delta) {
    atomic_fetch_add(&eng.capturing, delta);
    if (atomic_load(&eng.capturing) < 0) atomic_store(&eng.capturing, 0);
}

/* ------------------------------------------------------------------------ other calls */

void ho_engine_meminfo(size_t *free_bytes, size_t *total) {
    CUdevice device;
    if (!eng.active || free_bytes == NULL || total == NULL ||
        ho_real.cuCtxGetDevice(&device) != CUDA_SUCCESS || device < 0 || device >= HO_MAX_DEVICES)
        return;
    pthread_mutex_lock(&eng.lock);
    struct ho_dev *d = &eng.dev[device];
    ho_dev_setup(device); /* the budget applies before the first managed allocation too */
    if (d->ready && d->budget != UINT64_MAX) {
        /* With a budget, the device looks as large as the budget and as free as the budget's
         * unused part, never freer than the device really is. */
        if (*total > d->budget) *total = d->budget;
        /* Cached device memory is free as far as the application can tell: it is given up first. */
        uint64_t held = d->resident - d->cached;
        uint64_t room = d->budget > held ? d->budget - held : 0;
        if (*free_bytes > room) *free_bytes = room;
    }
    pthread_mutex_unlock(&eng.lock);
}

bool ho_engine_reclaim(size_t bytes) {
    CUdevice device;
    if (!eng.active || atomic_load(&eng.capturing) > 0 ||
        ho_real.cuCtxGetDevice(&device) != CUDA_SUCCESS || device < 0 || device >= HO_MAX_DEVICES)
        return false;
    uint64_t stall = 0;
    pthread_mutex_lock(&eng.lock);
    bool freed = eng.dev[device].ready && reclaim_device(&eng.dev[device], bytes, &stall);
    pthread_mutex_unlock(&eng.lock);
    ho_count_stall(stall);
    return freed;
}

/* A step marker from the application (hostoff.h): the next launch starts a training step. */
__attribute__((visibility("default"))) void hostoff_mark_step(void) {
    ho_trace_step();
    if (eng.la == NULL) return;
    pthread_mutex_lock(&eng.lock);
    ho_la_step(eng.la);
    pthread_mutex_unlock(&eng.lock);
}

void ho_engine_stream_destroyed(CUstream s) {
    if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) return;
    pthread_mutex_lock(&eng.lock);
    if (eng.npend > 0 && eng.pend_stream == s) ho_clock_flush(); /* while s still exists */
    for (struct ho_managed *m = eng.all; m != NULL; m = m->next) {
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
        if (at < 0) continue;
        struct ho_dev *d = dev_of(m);
        CUevent e = ho_event_get(d);
        ho_ctx_push(d);
        bool kept = false;
        if (e != NULL && ho_real.cuEventRecord(e, s) == CUDA_SUCCESS) {
            users_lock(m);
            if (m->nuse_events < HO_MAX_USERS) {
                m->use_events[m->nuse_events++] = e;
                kept = true;
            }
            users_unlock(m);
        }
        if (!kept) {
            /* No room for the event: wait for the stream's work here instead. */
            ho_real.cuStreamSynchronize(s);
            ho_event_put(d, e);
        }
        ho_ctx_pop();
    }
    pthread_mutex_unlock(&eng.lock);
}

void ho_engine_pin(uint64_t addr) {
    ho_registry_read_begin();
    struct ho_buffer *b = ho_registry_lookup_locked(addr);
    struct ho_managed *m = b != NULL ? b->engine : NULL;
    ho_registry_read_end();
    if (m == NULL) return;
    pthread_mutex_lock(&eng.lock);
    m->pinned = true;
    pthread_mutex_unlock(&eng.lock);
}

void ho_engine_fork_child(void) {
    /* The parent's device state is unusable in the child: forget it, move nothing. */
    pthread_mutex_init(&eng.lock, NULL);
    memset(eng.dev, 0, sizeof eng.dev);
    eng.all = NULL;
    eng.host_pool = NULL;
    eng.va_pool = NULL;
    eng.host_used = eng.host_pooled = 0;
    atomic_store(&eng.inflight, 0);
    atomic_store(&eng.capturing, 0);
    eng.timed = NULL; /* the parent's events mean nothing here */
    eng.npend = 0;
    eng.ntimed = eng.captimed = 0;
    atomic_store(&eng.timing, false);
    eng.active = false;
}
