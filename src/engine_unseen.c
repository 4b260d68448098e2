/* Uses the engine cannot tie to buffers (docs/ARCHITECTURE.md, "How a use reaches the device"):
 * a launch whose parameter layout is unknown, a graph with a node it cannot read, a call that
 * reaches memory through a handle or descriptor it does not know. The rule: what the engine
 * cannot attribute, it waits for. Such a use becomes a barrier on its stream:
 *
 *  - before it is issued, every move between its copy and its remap gives way (an eviction is
 *    cancelled: the device copy stays current; a restore is cancelled: the host copy stays
 *    current), so the use never runs under a remap and never writes bytes a copy already took;
 *  - after it is issued, an event is recorded on its stream, in the stream's own context, and
 *    every move started later makes its copy wait for that event (ho_barrier calls
 *    ho_unseen_wait first), on every device.
 *
 * Both halves follow the issuing protocol of engine.h: the use enters the issuing section before
 * it looks at eng.moving (moves in flight); a move raises eng.moving before it waits for the
 * issuing sections. So either the use sees the move and cancels it under eng.lock, or the move
 * waits until the use has been issued and its event recorded, and its barrier includes it.
 *
 * One event per stream: a later record on the same stream covers every earlier one (stream
 * order), so the table holds each stream's latest. Entries whose event completed are dropped when
 * the table fills. The table has its own lock, taken after eng.lock when both are held (a
 * use records without eng.lock: a thread holding it may be waiting for that use's section). */
#include "engine_internal.h"

#include "log.h"
#include "real.h"
#include "stats.h"

#include <pthread.h>
#include <string.h>

#define UNSEEN_MAX 64

struct unseen_entry {
    CUstream stream;  /* the stream, or NULL for a per-thread default stream */
    pthread_t thread; /* that per-thread stream's thread */
    CUcontext ctx;    /* the stream's context: the event belongs to it */
    CUevent e;        /* recorded after the stream's latest unattributed use */
    bool per_thread;
};

static pthread_mutex_t unseen_lock = PTHREAD_MUTEX_INITIALIZER;
static struct unseen_entry unseen[UNSEEN_MAX];
static int nunseen;
static _Atomic int unseen_live; /* nunseen, for a lock-free "any?" */

bool ho_unseen_pending(void) {
    return atomic_load_explicit(&unseen_live, memory_order_acquire) > 0;
}

/* Cancels every move between copy and remap, on every device (eng.lock held). */
void ho_unseen_cancel_moves(void) {
    HO_ASSERT_HELD(&eng.lock);
    for (int dv = 0; dv < HO_MAX_DEVICES; dv++) {
        struct ho_dev *d = &eng.dev[dv];
        if (!d->ready) continue;
        for (struct ho_transition *tr = d->head[HO_Q_EVICT]; tr != NULL; tr = tr->next)
            if (atomic_load(&tr->m->state) == HO_EVICTING) atomic_store(&tr->m->state, HO_RESIDENT);
        for (struct ho_transition *tr = d->head[HO_Q_RESTORE]; tr != NULL; tr = tr->next)
            if (atomic_load(&tr->m->state) == HO_RESTORING) atomic_store(&tr->m->state, HO_HOST);
    }
}

/* The context stream s belongs to (the current one for the default streams), or NULL. */
static CUcontext stream_ctx(CUstream s, bool per_thread) {
    CUcontext c = NULL;
    bool implicit = s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
    if (!implicit && ho_real.cuStreamGetCtx != NULL) {
        CUresult rc = per_thread && ho_real.cuStreamGetCtx_ptsz != NULL
                          ? ho_real.cuStreamGetCtx_ptsz(s, &c)
                          : ho_real.cuStreamGetCtx(s, &c);
        if (rc == CUDA_SUCCESS) return c;
    }
    if (ho_real.cuCtxGetCurrent == NULL || ho_real.cuCtxGetCurrent(&c) != CUDA_SUCCESS) return NULL;
    return c;
}

static CUresult record(CUevent e, CUstream s, bool per_thread) {
    if (implicit_per_thread(s, per_thread)) return ho_real.cuEventRecord_ptsz(e, NULL);
    return ho_real.cuEventRecord(e, s);
}

/* Drops the entries whose event has completed (unseen_lock held). */
static void prune(void) {
    for (int i = 0; i < nunseen;) {
        if (ho_real.cuEventQuery(unseen[i].e) == CUDA_SUCCESS) {
            ho_real.cuEventDestroy_v2(unseen[i].e);
            unseen[i] = unseen[--nunseen];
        } else {
            i++;
        }
    }
    atomic_store_explicit(&unseen_live, nunseen, memory_order_release);
}

/* Records the stream's latest unattributed use. On any failure the use is waited for on the
 * host: the rule holds at the price of a stall. */
void ho_unseen_record(CUstream s, bool per_thread) {
    bool pt = implicit_per_thread(s, per_thread);
    if (s == NULL && !per_thread) s = CU_STREAM_LEGACY;
    pthread_t me = pthread_self();
    /* The context tells the default streams of different contexts apart (one handle names the
     * legacy stream of whichever context is current). */
    CUcontext c = stream_ctx(s, per_thread);
    pthread_mutex_lock(&unseen_lock);
    struct unseen_entry *en = NULL;
    for (int i = 0; i < nunseen && en == NULL; i++)
        if (unseen[i].per_thread == pt && unseen[i].ctx == c &&
            (pt ? pthread_equal(unseen[i].thread, me) : unseen[i].stream == s))
            en = &unseen[i];
    if (en == NULL && nunseen == UNSEEN_MAX) prune();
    if (en == NULL && nunseen < UNSEEN_MAX) {
        CUevent e = NULL;
        bool pushed = c != NULL && ho_real.cuCtxPushCurrent_v2(c) == CUDA_SUCCESS;
        if (ho_real.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) e = NULL;
        if (pushed) {
            CUcontext ignored;
            ho_real.cuCtxPopCurrent_v2(&ignored);
        }
        if (e != NULL) {
            en = &unseen[nunseen++];
            *en = (struct unseen_entry){pt ? NULL : s, me, c, e, pt};
            atomic_store_explicit(&unseen_live, nunseen, memory_order_release);
        }
    }
    bool ok = en != NULL && record(en->e, s, per_thread) == CUDA_SUCCESS;
    pthread_mutex_unlock(&unseen_lock);
    if (!ok) {
        ho_log(HO_LOG_DEBUG, "an unattributed use could not be named by an event: waiting for it");
        if (pt)
            ho_real.cuStreamSynchronize_ptsz(NULL);
        else
            ho_real.cuStreamSynchronize(s);
    }
    ho_count(&ho_stats.counts_unattributed_uses, 1);
}

/* Waits, on the host, for every device the engine set up (eng.lock held): the fallback when a
 * use cannot be ordered any other way (its stream unnamed, on whichever device). */
void ho_sync_all_devices(void) {
    HO_ASSERT_HELD(&eng.lock);
    for (int dv = 0; dv < HO_MAX_DEVICES; dv++) {
        struct ho_dev *d = &eng.dev[dv];
        if (!d->ready) continue;
        ho_ctx_push(d);
        ho_real.cuCtxSynchronize();
        ho_ctx_pop();
    }
}

/* Makes stream q wait for every unattributed use recorded so far (eng.lock held). */
void ho_unseen_wait(CUstream q) {
    HO_ASSERT_HELD(&eng.lock);
    if (!ho_unseen_pending()) return;
    pthread_mutex_lock(&unseen_lock);
    for (int i = 0; i < nunseen; i++)
        if (ho_real.cuStreamWaitEvent(q, unseen[i].e, 0) != CUDA_SUCCESS)
            ho_real.cuEventSynchronize(unseen[i].e);
    pthread_mutex_unlock(&unseen_lock);
}

/* Makes stream q (of device d) wait for the work queued on stream s so far, whatever context s
 * belongs to: an event of d's pool first; for a stream of another device, an event made in that
 * stream's context; failing both, the host waits for s. (eng.lock held, d's context current.) */
void ho_order_after_stream(struct ho_dev *d, CUstream q, CUstream s) {
    HO_ASSERT_HELD(&eng.lock);
    CUevent e = ho_event_get(d);
    if (e != NULL && ho_real.cuEventRecord(e, s) == CUDA_SUCCESS &&
        ho_real.cuStreamWaitEvent(q, e, 0) == CUDA_SUCCESS) {
        ho_event_put(d, e);
        return;
    }
    ho_event_put(d, e);
    CUcontext c = stream_ctx(s, false);
    CUevent own = NULL;
    bool ordered = false;
    if (c != NULL && ho_real.cuCtxPushCurrent_v2(c) == CUDA_SUCCESS) {
        if (ho_real.cuEventCreate(&own, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS) {
            ordered = ho_real.cuEventRecord(own, s) == CUDA_SUCCESS;
        }
        CUcontext ignored;
        ho_real.cuCtxPopCurrent_v2(&ignored);
    }
    if (ordered) ordered = ho_real.cuStreamWaitEvent(q, own, 0) == CUDA_SUCCESS;
    if (!ordered) ho_real.cuStreamSynchronize(s);
    if (own != NULL) ho_real.cuEventDestroy_v2(own); /* the wait keeps the state it saw */
}

void ho_unseen_fork_child(void) {
    pthread_mutex_init(&unseen_lock, NULL);
    nunseen = 0;
    atomic_store(&unseen_live, 0);
}
