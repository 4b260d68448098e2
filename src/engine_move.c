/* Moves: evictions, restores and stream-ordered frees, queued per device and direction on the
 * engine's copy streams, completed (remapped) once their copies are done, in order, at progress
 * points or when a caller has to wait for one. The state machine is described in engine.h. */
#include "engine_internal.h"

#include "log.h"
#include "move_cost.h"
#include "real.h"
#include "stats.h"
#include "trace.h"

#include <stdlib.h>

static void enqueue(struct ho_dev *d, int q, struct ho_transition *tr) {
    HO_ASSERT_HELD(&eng.lock);
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
    HO_ASSERT_HELD(&eng.lock);
    tr->done = ho_event_get(d);
    if (tr->done == NULL || ho_real.cuEventRecord(tr->done, d->stream[q]) != CUDA_SUCCESS) {
        /* No event: wait for the copy now, so completion can proceed at once. */
        ho_stream_drain(d->stream[q]);
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
    HO_ASSERT_HELD(&eng.lock);
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
        ho_note_host_peak();
    }
    atomic_fetch_add(&eng.moving, 1); /* before the wait: see engine_unseen.c */
    atomic_store(&m->state, HO_EVICTING);
    ho_issue_wait();
    if (eng.backend == HO_BACKEND_VMM) {
        /* Its barrier now, its copy as the link takes it, a chunk at a time (engine_send.c). */
        ho_send_begin(d, tr);
        m->tr = tr;
        tr->start_ns = ho_clock_ns();
        enqueue(d, HO_Q_EVICT, tr);
        d->evicting += m->span;
        ho_send_pump(d, NULL, true);
        ho_ctx_pop();
        return true;
    }
    /* Managed memory: one prefetch to the host, queued whole. */
    ho_barrier(m, HO_Q_EVICT);
    tr->sent = m->span;
    CUmemLocation host = {.type = CU_MEM_LOCATION_TYPE_HOST};
    CUresult rc = ho_real.cuMemPrefetchAsync_v2(m->va, m->span, host, 0, d->stream[HO_Q_EVICT]);
    if (rc != CUDA_SUCCESS) {
        ho_log(HO_LOG_WARN, "evicting a %llu-byte buffer failed (error %d): it stays on the device",
               (unsigned long long)m->size, (int)rc);
        atomic_store(&m->state, HO_RESIDENT);
        atomic_fetch_sub(&eng.moving, 1);
        ho_ctx_pop();
        free(tr);
        return false;
    }
    finish_submit(d, HO_Q_EVICT, tr);
    d->evicting += m->span;
    ho_ctx_pop();
    return true;
}

/* The device chunk m leaves behind after an eviction goes to the pool, mapped at the window it
 * came through (or, the first time, a new one: two calls once per chunk, none per move after);
 * released when it cannot be pooled. Still counted as resident, now as pooled. */
static void pool_evicted_chunk(struct ho_dev *d, struct ho_managed *m) {
    HO_ASSERT_HELD(&eng.lock);
    CUdeviceptr window = m->dev_window;
    if (window == 0) {
        window = ho_va_get(m->span);
        if (window != 0 && !ho_map_rw(d, window, m->span, m->dev, m->device)) {
            ho_va_put(window, m->span);
            window = 0;
        }
    }
    if (window == 0 || !ho_cache_put(d, window, m->dev, 0, m->span)) {
        ho_range_drop(window, m->span, m->dev, window != 0);
        d->resident -= m->span;
    }
    m->dev = 0;
    m->dev_window = 0;
}

/* A remap the driver refused every way: m's address maps nothing; it may never move again, and
 * both handles stay (their bytes are the buffer's). */
static void remap_lost(struct ho_managed *m) {
    m->pinned = true;
}

/* A move whose copy ran but which did not complete (a use or a free cancelled it, or the driver
 * refused its remap): the link carried its bytes all the same, and the report says so beside
 * the moves that completed (bytes.to_host counts only those). */
static void count_cancelled(bool evict, uint64_t span) {
    ho_count(evict ? &ho_stats.counts_cancelled_evictions : &ho_stats.counts_cancelled_restores, 1);
    ho_count(evict ? &ho_stats.bytes_cancelled_to_host : &ho_stats.bytes_cancelled_to_device, span);
}

static void complete_evict(struct ho_transition *tr) {
    HO_ASSERT_HELD(&eng.lock);
    struct ho_managed *m = tr->m;
    struct ho_dev *d = dev_of(m);
    d->evicting -= m->span;
    if (atomic_load(&m->state) != HO_EVICTING) { /* cancelled: the device copy is current */
        if (tr->host != NULL) ho_host_slot_put(tr->host);
        /* The bytes its copy carried: all of them, or the chunks queued before it was called off
         * (engine_send.c). */
        count_cancelled(true, tr->sent);
        ho_trace_move(HO_MOVE_EVICT, m->id, tr->sent, tr->start_ns, true);
        return;
    }
    if (eng.backend == HO_BACKEND_VMM) {
        uint64_t t0 = ho_clock_ns();
        struct ho_layout to = ho_host_layout(tr->host), from = ho_layout_one(m->dev, m->span);
        enum ho_remap r = ho_remap(m, &to, &from);
        if (r == HO_REMAP_DONE)
            ho_move_cost_note(true, m->span, ho_clock_ns() - t0, eng.link_bytes_per_ns);
        if (r == HO_REMAP_KEPT && !ho_host_one_whole(tr->host)) {
            /* Rolled back, and the buffer was to map a slot's prefix or several slots: the
             * driver refuses those (cuda.h documents both; a driver may differ). The address
             * still maps the device copy; each buffer takes one slot of its exact span from now
             * on, and this one may move again. */
            atomic_store(&m->state, HO_RESIDENT);
            ho_host_slot_put(tr->host);
            ho_host_layout_refused();
            count_cancelled(true, m->span);
            ho_trace_move(HO_MOVE_EVICT, m->id, m->span, tr->start_ns, true);
            return;
        }
        if (r != HO_REMAP_DONE) {
            /* Rolled back: the address still maps the device copy. The buffer stays put from now
             * on (pass-through for it): the driver refuses its moves. */
            atomic_store(&m->state, HO_RESIDENT);
            if (r == HO_REMAP_LOST)
                remap_lost(m);
            else
                m->pinned = true;
            ho_host_slot_put(tr->host);
            ho_log(HO_LOG_WARN,
                   "a %llu-byte buffer could not be remapped to host memory: it "
                   "stays on the device",
                   (unsigned long long)m->size);
            count_cancelled(true, m->span);
            ho_trace_move(HO_MOVE_EVICT, m->id, m->span, tr->start_ns, true);
            return;
        }
        pool_evicted_chunk(d, m);
        m->host = tr->host;
    } else {
        d->resident -= m->span;
    }
    ho_device_bytes(-(int64_t)m->span);
    atomic_store(&m->state, HO_HOST);
    ho_count(&ho_stats.counts_evictions, 1);
    ho_count(&ho_stats.bytes_to_host, m->span);
    ho_trace_move(HO_MOVE_EVICT, m->id, m->span, tr->start_ns, false);
}

static void complete_restore(struct ho_transition *tr) {
    HO_ASSERT_HELD(&eng.lock);
    struct ho_managed *m = tr->m;
    struct ho_dev *d = dev_of(m);
    if (tr->timed[0] != NULL && tr->timed[1] != NULL) {
        /* The fastest restore is the link's own rate: slower ones shared it with evictions. */
        uint64_t ns = ho_timing_read(d, tr->timed[0], tr->timed[1]);
        double rate = ns > 0 ? (double)m->span / (double)ns : 0;
        if (rate > eng.link_bytes_per_ns) {
            eng.link_bytes_per_ns = rate;
            eng.policy.ops->set_link(eng.policy.self, rate * 1e9);
        }
    }
    ho_timing_drop(d, tr->timed[0]);
    ho_timing_drop(d, tr->timed[1]);
    bool ok = atomic_load(&m->state) == HO_RESTORING;
    if (ok && eng.backend == HO_BACKEND_VMM) {
        uint64_t t0 = ho_clock_ns();
        struct ho_layout to = ho_layout_one(tr->dev, m->span), from = ho_host_layout(m->host);
        enum ho_remap r = ho_remap(m, &to, &from);
        if (r == HO_REMAP_DONE)
            ho_move_cost_note(false, m->span, ho_clock_ns() - t0, eng.link_bytes_per_ns);
        if (r != HO_REMAP_DONE) {
            /* Rolled back: the address still maps the host copy; it stays there. */
            m->pinned = true;
            if (r == HO_REMAP_LOST) remap_lost(m);
            ho_log(HO_LOG_WARN,
                   "a %llu-byte buffer could not be remapped to device memory: it "
                   "stays in host memory",
                   (unsigned long long)m->size);
            ok = false;
        }
    }
    if (!ok) { /* cancelled, or the remap failed: the host copy is current */
        if (eng.backend != HO_BACKEND_VMM || !ho_cache_put(d, tr->window, tr->dev, 0, m->span)) {
            if (eng.backend == HO_BACKEND_VMM) ho_range_drop(tr->window, m->span, tr->dev, true);
            d->resident -= m->span;
        }
        ho_device_bytes(-(int64_t)m->span);
        atomic_store(&m->state, HO_HOST);
        count_cancelled(false, m->span);
        ho_trace_move(HO_MOVE_RESTORE, m->id, m->span, tr->start_ns, true);
        return;
    }
    if (eng.backend == HO_BACKEND_VMM) {
        ho_host_slot_put(m->host);
        m->host = NULL;
        m->dev = tr->dev;
        m->dev_window = tr->window; /* kept: the chunk's copy window when it goes back */
    }
    atomic_store(&m->state, HO_RESIDENT);
    ho_count(&ho_stats.counts_restores, 1);
    ho_count(&ho_stats.bytes_to_device, m->span);
    ho_trace_move(HO_MOVE_RESTORE, m->id, m->span, tr->start_ns, false);
}

static void complete_free(struct ho_transition *tr) {
    HO_ASSERT_HELD(&eng.lock);
    struct ho_managed *m = tr->m;
    struct ho_dev *d = dev_of(m);
    ho_clock_put(d, m->clock);
    m->clock = NULL;
    bool on_device = atomic_load(&m->state) == HO_RESIDENT;
    struct ho_cached *c =
        on_device && eng.backend == HO_BACKEND_VMM && m->dev != 0 ? malloc(sizeof *c) : NULL;
    if (c != NULL) {
        /* Keep the mapped device memory for the next allocation of this size. */
        *c = (struct ho_cached){m->va, m->dev, m->dev_window, m->span, d->cache};
        d->cache = c;
        d->cached += m->span;
        ho_device_bytes(-(int64_t)m->span);
    } else if (eng.backend == HO_BACKEND_VMM) {
        bool mapped = true;
        if (m->host != NULL) { /* its address maps host slots: unmapped a piece at a time */
            struct ho_layout l = ho_host_layout(m->host);
            ho_unmap_layout(m->va, &l);
            ho_host_slot_put(m->host);
            mapped = false;
        }
        if (m->dev_window != 0) ho_range_drop(m->dev_window, m->span, 0, true);
        ho_range_drop(m->va, m->span, m->dev, mapped);
    } else {
        ho_real.cuMemFree_v2(m->va);
    }
    if (on_device && c == NULL) {
        d->resident -= m->span;
        ho_device_bytes(-(int64_t)m->span);
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
    HO_ASSERT_HELD(&eng.lock);
    struct ho_transition *tr = d->head[q];
    d->head[q] = tr->next;
    if (d->head[q] == NULL) d->tail[q] = NULL;
    atomic_fetch_sub(&eng.inflight, 1);
    if (tr->kind != HO_TR_FREE) atomic_fetch_sub(&eng.moving, 1);
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
    ho_event_put(d, tr->gate); /* NULL by now: passed before its first chunk or its `done` */
    ho_ctx_pop();
    bool freed = tr->kind == HO_TR_FREE;
    free(tr);
    if (freed) {
        free(m);
        return;
    }
    m->tr = NULL;
    if (m->free_requested) ho_start_free(m);
}

/* Waits for the move in flight on m (if any) and completes it and everything queued before it on
 * the same queue. Returns the stall in ns. When the driver refuses every wait, nothing completes
 * and m->tr stays set: callers check. eng.lock held. */
uint64_t ho_wait_move(struct ho_managed *m) {
    HO_ASSERT_HELD(&eng.lock);
    struct ho_transition *tr = m->tr;
    if (tr == NULL) return 0;
    struct ho_dev *d = dev_of(m);
    int q = tr->kind == HO_TR_RESTORE ? HO_Q_RESTORE
                                      : (tr->kind == HO_TR_FREE ? HO_Q_FREE : HO_Q_EVICT);
    uint64_t t0 = ho_clock_ns();
    /* The rest of it, and every eviction held back: the host is about to wait, and then to
     * complete what landed (remaps take the host milliseconds), with no progress point to feed
     * the link meanwhile (engine_send.c). */
    ho_send_pump(d, d->tail[HO_Q_EVICT], false);
    if (tr->done != NULL) {
        ho_ctx_push(d);
        bool done = ho_event_wait(tr->done, d->stream[q]);
        ho_ctx_pop();
        if (!done) return ho_clock_ns() - t0; /* not known to be done: left in flight */
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

void ho_start_free(struct ho_managed *m) {
    HO_ASSERT_HELD(&eng.lock);
    struct ho_dev *d = dev_of(m);
    m->free_requested = false;
    if (!ho_users_queued(m) && !ho_unseen_pending()) {
        /* Every use was covered by an earlier move that has completed, and no unattributed use
         * may still be queued: nothing can still use it, so it can go now, without an event
         * round trip. */
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
    ho_barrier(m, HO_Q_FREE);
    finish_submit(d, HO_Q_FREE, tr);
    ho_ctx_pop();
}

/* ---------------------------------------------------------------------------- restore */

/* Starts bringing m back (eng.lock held): room under the budget, a device handle mapped at a
 * window, the copy queued after every queued use. False when there is no room or a step failed:
 * m stays host-mapped. `stall` accumulates what waiting for room cost. */
bool ho_start_restore(struct ho_managed *m, struct ho_managed *const *protect, int nprotect,
                      uint64_t *stall_out) {
    HO_ASSERT_HELD(&eng.lock);
    struct ho_dev *d = dev_of(m);
    uint64_t stall = 0;
    if (ho_make_room(d, m->span, protect, nprotect, &stall) != HO_ROOM_OK) {
        *stall_out += stall;
        return false;
    }
    struct ho_transition *tr = calloc(1, sizeof *tr);
    if (tr == NULL) return false;
    tr->kind = HO_TR_RESTORE;
    tr->m = m;
    ho_ctx_push(d);
    CUresult rc = CUDA_SUCCESS;
    if (eng.backend == HO_BACKEND_VMM && ho_cache_take_window(d, m->span, &tr->dev, &tr->window)) {
        /* A pooled chunk, already mapped at a window and counted as resident: no driver call. */
        d->resident -= m->span; /* counted again below, as the buffer's */
    } else if (eng.backend == HO_BACKEND_VMM) {
        rc = ho_create_device_handle(d, m->span, &tr->dev, protect, nprotect, &stall);
        if (rc == CUDA_SUCCESS) {
            tr->window = ho_va_get(m->span);
            if (tr->window == 0 || !ho_map_rw(d, tr->window, m->span, tr->dev, m->device)) {
                ho_range_drop(tr->window, m->span, tr->dev, false);
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
    atomic_fetch_add(&eng.moving, 1);
    atomic_store(&m->state, HO_RESTORING);
    ho_issue_wait();
    ho_barrier(m, HO_Q_RESTORE);
    bool time_it = eng.policy.ops->timed &&
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
        atomic_fetch_sub(&eng.moving, 1);
        if (eng.backend == HO_BACKEND_VMM && ho_cache_put(d, tr->window, tr->dev, 0, m->span))
            d->resident += m->span; /* pooled, counted as resident again */
        else if (eng.backend == HO_BACKEND_VMM)
            ho_range_drop(tr->window, m->span, tr->dev, true);
        ho_ctx_pop();
        free(tr);
        *stall_out += stall;
        return false;
    }
    if (tr->timed[0] != NULL) tr->timed[1] = ho_timing_event(d, d->stream[HO_Q_RESTORE], false);
    d->resident += m->span;
    ho_device_bytes((int64_t)m->span);
    finish_submit(d, HO_Q_RESTORE, tr);
    ho_ctx_pop();
    *stall_out += stall;
    return true;
}

/* Brings m back and waits for it: a demand restore, counted as a stall. False when there is no
 * room: m stays host-mapped and the use reads it remotely, correctly. */
bool ho_demand_restore(struct ho_managed *m, struct ho_managed *const *protect, int nprotect) {
    HO_ASSERT_HELD(&eng.lock);
    uint64_t stall = 0;
    bool started = ho_start_restore(m, protect, nprotect, &stall);
    if (started) {
        ho_trace_demand(m->id);
        stall += ho_wait_move(m);
        ho_count(&ho_stats.counts_demand_restores, 1);
        if (m->tr != NULL) /* the wait failed: cancel, the host copy stays the buffer's */
            atomic_store(&m->state, HO_HOST);
    }
    ho_count_stall(stall);
    return started && atomic_load(&m->state) == HO_RESIDENT;
}

static bool wants_restore(const struct ho_managed *m, const struct ho_dev *d) {
    return dev_of(m) == d && atomic_load(&m->state) == HO_HOST && m->tr == NULL && !m->pinned;
}

void ho_demand_restores(struct ho_managed *const *ms, int n) {
    HO_ASSERT_HELD(&eng.lock);
    struct ho_dev *d = NULL;
    uint64_t need = 0;
    int count = 0;
    for (int i = 0; i < n; i++) {
        if (d == NULL && atomic_load(&ms[i]->state) == HO_HOST) d = dev_of(ms[i]);
        if (d != NULL && wants_restore(ms[i], d)) {
            need += ms[i]->span;
            count++;
        }
    }
    if (count < 2) return; /* one buffer: the plain demand restore does the same */
    bool host_full = false;
    ho_evict_for(d, need, ms, n, 0, &host_full);
    for (int i = 0; i < n; i++) {
        struct ho_managed *m = ms[i];
        if (!wants_restore(m, d)) continue;
        uint64_t stall = 0;
        if (ho_start_restore(m, ms, n, &stall)) {
            m->tr->demand = true;
            ho_count(&ho_stats.counts_demand_restores, 1);
        }
        ho_count_stall(stall);
    }
}

/* --------------------------------------------------------------------------- progress */

void ho_engine_count_unfinished(void) {
    static atomic_bool counted;
    if (atomic_exchange(&counted, true)) return;
    if (!ho_mutex_trylock(&eng.lock)) return;
    for (int dv = 0; dv < HO_MAX_DEVICES; dv++) {
        struct ho_dev *d = &eng.dev[dv];
        if (!d->ready) continue;
        for (int q = 0; q < HO_NQUEUES; q++)
            for (const struct ho_transition *tr = d->head[q]; tr != NULL; tr = tr->next) {
                if (tr->kind == HO_TR_EVICT && tr->sent > 0) {
                    count_cancelled(true, tr->sent); /* the chunks queued, or all of it */
                    ho_trace_move(HO_MOVE_EVICT, tr->m->id, tr->sent, tr->start_ns, true);
                } else if (tr->kind == HO_TR_RESTORE) {
                    count_cancelled(false, tr->m->span); /* queued whole when it started */
                    ho_trace_move(HO_MOVE_RESTORE, tr->m->id, tr->m->span, tr->start_ns, true);
                }
            }
    }
    ho_mutex_unlock(&eng.lock);
}

void ho_engine_progress(void) {
    if (atomic_load_explicit(&eng.inflight, memory_order_relaxed) == 0 ||
        atomic_load_explicit(&eng.capturing, memory_order_relaxed) > 0)
        return;
    if (!ho_mutex_trylock(&eng.lock)) return; /* someone else is making progress */
    if (eng.ntimed > 0) ho_timing_poll();
    for (int dv = 0; dv < HO_MAX_DEVICES; dv++) {
        struct ho_dev *d = &eng.dev[dv];
        if (!d->ready) continue;
        /* More chunks of the evictions, as the link takes them (engine_send.c). */
        if (d->head[HO_Q_EVICT] != NULL) ho_send_pump(d, NULL, false);
        for (int q = 0; q < HO_NQUEUES; q++) {
            while (d->head[q] != NULL) {
                if (d->head[q]->sending) break; /* chunks of it still to queue */
                CUevent e = d->head[q]->done;
                if (e != NULL && ho_event_query(d, e) != CUDA_SUCCESS) break;
                complete_head(d, q);
                /* A completion can take the host a while (a remap): feed the link first. */
                if (d->head[HO_Q_EVICT] != NULL) ho_send_pump(d, NULL, false);
            }
        }
        if (d->ndefer > 0 && atomic_load(&eng.capturing) == 0) ho_defer_poll(d);
        if (d->nwant > 0 && atomic_load(&eng.capturing) == 0) ho_want_start(d);
    }
    ho_mutex_unlock(&eng.lock);
}
