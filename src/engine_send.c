/* Chunked evictions: an eviction's copy goes to the eviction stream a chunk at a time
 * (HOSTOFF_EVICT_CHUNK), never more than HO_SEND_AHEAD chunks ahead of the link, the rest held
 * here until the link has room for it.
 *
 * Why: a copy queued on a stream cannot be called off. An eviction queued whole holds the link
 * and its buffer's device memory until its last byte has crossed, even when the application
 * frees the buffer (or uses it) a moment after it started: on a Llama-class step at 32k tokens
 * the engine evicted a 16.8 GB logits buffer to keep its headroom a few microseconds before the
 * application freed it, and the next allocation waited 317 ms on pcie5 for the room the copy
 * still held (docs/policy-benchmark.md, seventh round). Held here, the rest of a cancelled move
 * is never queued: the free's room comes once the chunks already queued have crossed.
 *
 * Every eviction of the vmm backend goes this way, one of a chunk or less as one chunk (and with
 * HOSTOFF_EVICT_CHUNK=0 each whole): one queued whole beside this queue, its barrier and copy on
 * the eviction stream at once, would go ahead of the chunks still held of those before it, and
 * the moves would complete out of the stream's order (the first waiting for the last, every
 * remap after every copy).
 *
 * Order and safety. A move's barrier (every queued use of its buffer, every unattributed launch)
 * goes on the eviction stream when nothing is held; while chunks of earlier moves are, it is
 * issued on the device's gate stream, which holds nothing but such waits, and an event recorded
 * after it there is what the move's first chunk waits for on the eviction stream: the chunks of
 * an earlier move queued later never wait behind a later move's barrier. The move's
 * `done` event is recorded on the eviction stream after its last chunk (or, when it was called
 * off, after the chunks already queued, or after a wait for its gate when none was), so
 * everything that waits for a move to complete - its remap, a free behind it - still waits for
 * its barrier and its copy. Before the application's thread waits (for a move: room, a demand,
 * a pin; or in a synchronising call), and before a capture begins, everything held is queued
 * (ho_send_pump with `upto`): no progress point comes meanwhile to feed the link.
 *
 * Cost: one copy call and one event record per chunk, and an event query at a progress point
 * while the window is full. */
#include "engine_internal.h"

#include "log.h"
#include "real.h"

void ho_send_begin(struct ho_dev *d, struct ho_transition *tr) {
    HO_ASSERT_HELD(&eng.lock);
    tr->sent = 0;
    tr->sending = true;
    bool behind = false; /* chunks of an earlier eviction are still held */
    for (const struct ho_transition *t = d->head[HO_Q_EVICT]; t != NULL && !behind; t = t->next)
        behind = t->sending;
    if (!behind || d->gate == NULL) {
        /* Everything before it is queued: its barrier goes on the eviction stream, where its
         * chunks follow at once (no gate event: the calls of a move queued whole). Without a
         * gate stream, the chunks still held of earlier moves then wait for it too: slower. */
        ho_barrier(tr->m, HO_Q_EVICT);
        tr->gate = NULL;
        return;
    }
    ho_barrier_on(tr->m, d->gate);
    tr->gate = ho_event_get(d);
    if (tr->gate == NULL || ho_real.cuEventRecord(tr->gate, d->gate) != CUDA_SUCCESS) {
        /* No event to carry the barrier over: the eviction stream waits for the gate itself
         * (chunks of earlier moves queued later then wait for this barrier too: slower, rare). */
        ho_event_put(d, tr->gate);
        tr->gate = NULL;
        ho_order_after_stream(d, d->stream[HO_Q_EVICT], d->gate);
    }
}

/* Queues bytes [from, to) of tr's buffer into its host slots: each piece holds its own bytes of
 * the buffer, in order (pool_host.c). */
static CUresult copy_range(struct ho_dev *d, const struct ho_transition *tr, uint64_t from,
                           uint64_t to) {
    uint64_t off = 0;
    CUresult rc = CUDA_SUCCESS;
    for (const struct ho_host_slot *p = tr->host; p != NULL && rc == CUDA_SUCCESS && off < to;
         p = p->next) {
        uint64_t lo = from > off ? from : off, hi = to < off + p->held ? to : off + p->held;
        if (lo < hi)
            rc = ho_real.cuMemcpyDtoDAsync_v2(p->window + (lo - off), tr->m->va + lo, hi - lo,
                                              d->stream[HO_Q_EVICT]);
        off += p->held;
    }
    return rc;
}

/* Forgets the chunks the link has carried, oldest first. The driver is asked (an event query,
 * one call) only when the window is full, and each progress point asks at most until the first
 * chunk not yet done. An estimate of when a chunk should be done from the link's measured rate
 * was tried in place of the query: the rate measured is the restores' (sharing the link with
 * evictions, below the evictions' own), so the window refilled late and the link idled. */
static void retire(struct ho_dev *d) {
    int done = 0;
    while (done < d->nahead && ho_real.cuEventQuery(d->ahead[done]) != CUDA_ERROR_NOT_READY)
        done++; /* an error reads as done: it only frees a place in the window */
    for (int i = 0; i < done; i++)
        ho_event_put(d, d->ahead[i]);
    for (int i = done; i < d->nahead; i++)
        d->ahead[i - done] = d->ahead[i];
    d->nahead -= done;
}

/* Orders the eviction stream after tr's barrier (once, before its first chunk, or before its
 * `done` when it is called off with none queued). */
static void pass_gate(struct ho_dev *d, struct ho_transition *tr) {
    if (tr->gate == NULL) return;
    if (ho_real.cuStreamWaitEvent(d->stream[HO_Q_EVICT], tr->gate, 0) != CUDA_SUCCESS)
        ho_event_wait(tr->gate, d->gate); /* retried, then widened to the gate, the device */
    ho_event_put(d, tr->gate);
    tr->gate = NULL;
}

/* Queues tr's next chunk (after its barrier, for the first); false when the driver refused the
 * copy: the move is called off and the buffer stays on the device, whose copy is current. */
static bool send_chunk(struct ho_dev *d, struct ho_transition *tr) {
    struct ho_managed *m = tr->m;
    pass_gate(d, tr);
    uint64_t chunk = eng.send_chunk > 0 ? eng.send_chunk : m->span; /* 0: the copy whole */
    uint64_t len = m->span - tr->sent < chunk ? m->span - tr->sent : chunk;
    CUresult rc = copy_range(d, tr, tr->sent, tr->sent + len);
    if (rc != CUDA_SUCCESS) {
        ho_log(HO_LOG_WARN,
               "evicting a %llu-byte buffer failed after %llu bytes (error %d): it stays on the "
               "device",
               (unsigned long long)m->size, (unsigned long long)tr->sent, (int)rc);
        atomic_store(&m->state, HO_RESIDENT);
        return false;
    }
    tr->sent += len;
    /* The window counts the chunks that have another after them; a move's last chunk is
     * followed by its `done` event, which completion asks about anyway. */
    if (tr->sent < m->span && d->nahead < HO_SEND_AHEAD) {
        CUevent e = ho_event_get(d);
        if (e != NULL && ho_real.cuEventRecord(e, d->stream[HO_Q_EVICT]) == CUDA_SUCCESS) {
            d->ahead[d->nahead++] = e;
        } else {
            ho_event_put(d, e); /* not counted ahead: the window is a bound on queries only */
        }
    }
    return true;
}

/* Nothing more of tr will be queued: its `done`, on the eviction stream, covers its barrier
 * (passed here when no chunk was queued) and what was queued. */
static void end_sending(struct ho_dev *d, struct ho_transition *tr) {
    tr->sending = false;
    pass_gate(d, tr);
    tr->done = ho_event_get(d);
    if (tr->done == NULL ||
        ho_real.cuEventRecord(tr->done, d->stream[HO_Q_EVICT]) != CUDA_SUCCESS) {
        /* No event: wait for the stream now, so completion can proceed at once. */
        ho_stream_drain(d->stream[HO_Q_EVICT]);
        ho_event_put(d, tr->done);
        tr->done = NULL;
    }
}

void ho_send_pump(struct ho_dev *d, const struct ho_transition *upto, bool ctx_current) {
    HO_ASSERT_HELD(&eng.lock);
    struct ho_transition *tr = d->head[HO_Q_EVICT];
    while (tr != NULL && !tr->sending && tr != upto)
        tr = tr->next;
    if (tr == NULL || !tr->sending) return; /* every move before `upto` is queued whole */
    if (!ctx_current) ho_ctx_push(d);       /* two driver calls: not made when nothing is held */
    bool all = upto != NULL;
    for (; tr != NULL; tr = tr->next) {
        struct ho_managed *m = tr->m;
        while (tr->sending && atomic_load(&m->state) == HO_EVICTING && tr->sent < m->span) {
            if (!all && d->nahead == HO_SEND_AHEAD) retire(d);
            if (!all && d->nahead == HO_SEND_AHEAD) break; /* the window is full */
            if (!send_chunk(d, tr)) break;
        }
        if (tr->sending && (atomic_load(&m->state) != HO_EVICTING || tr->sent == m->span))
            end_sending(d, tr);               /* called off by a use or a free, or all queued */
        if (tr == upto || tr->sending) break; /* later moves wait their turn */
    }
    if (!ctx_current) ho_ctx_pop();
}

void ho_send_flush_all(void) {
    if (atomic_load_explicit(&eng.inflight, memory_order_relaxed) == 0) return;
    ho_mutex_lock(&eng.lock);
    for (int dv = 0; dv < HO_MAX_DEVICES; dv++)
        if (eng.dev[dv].ready) ho_send_pump(&eng.dev[dv], eng.dev[dv].tail[HO_Q_EVICT], false);
    ho_mutex_unlock(&eng.lock);
}
