/* Kernel durations for the trace: a pair of events recorded around each traced launch on its own
 * stream, read back with cuEventElapsedTime once the application itself has synchronised that
 * stream (or the device), and at exit. The trace never waits for the device on its own during
 * the run: a wait inside a hook could deadlock a program whose device work waits on the host
 * (a host function), and would change the timing being recorded.
 *
 * At most MAX_TIMED launches wait for their durations at once; later launches are written with
 * "ns": 0 (unknown) until the application synchronises. Events are pooled: a launch costs two
 * cuEventRecord calls and no creation once the pool is warm. */
#include "trace_internal.h"

#include "real.h"

#include <stdlib.h>

#define MAX_TIMED 32768u

static CUevent *pool; /* free events, guarded by the trace lock */
static size_t npool, cappool;

static void release(CUevent e) {
    HO_ASSERT_HELD(&tr.lock);
    if (e == NULL) return;
    if (npool == cappool) {
        size_t cap = cappool ? cappool * 2 : 256;
        CUevent *p = realloc(pool, cap * sizeof *p);
        if (p == NULL) {
            ho_real.cuEventDestroy_v2(e);
            return;
        }
        pool = p;
        cappool = cap;
    }
    pool[npool++] = e;
}

static CUresult record(CUevent e, CUstream s, bool per_thread) {
    if (per_thread) return ho_real.cuEventRecord_ptsz(e, s);
    return ho_real.cuEventRecord(e, s);
}

void ho_trace_timing_start(struct ho_trace_launch *l, CUstream s, bool per_thread) {
    l->ev[0] = l->ev[1] = NULL;
    if (ho_real.cuEventCreate == NULL || ho_real.cuEventElapsedTime_v2 == NULL) return;
    ho_mutex_lock(&tr.lock);
    bool room = tr.pending < MAX_TIMED;
    for (int i = 0; i < 2 && room && npool > 0; i++)
        l->ev[i] = pool[--npool];
    ho_mutex_unlock(&tr.lock);
    if (!room) return;
    uint64_t t = ho_trace_self_begin();
    bool ok = true;
    for (int i = 0; i < 2 && ok; i++)
        if (l->ev[i] == NULL)
            ok = ho_real.cuEventCreate(&l->ev[i], CU_EVENT_DEFAULT) == CUDA_SUCCESS;
    if (ok) ok = record(l->ev[0], s, per_thread) == CUDA_SUCCESS;
    ho_trace_self_end(t);
    if (!ok) {
        /* Another context's stream, say: this launch goes untimed. */
        ho_mutex_lock(&tr.lock);
        release(l->ev[0]);
        release(l->ev[1]);
        ho_mutex_unlock(&tr.lock);
        l->ev[0] = l->ev[1] = NULL;
    }
}

void ho_trace_timing_end(struct ho_trace_launch *l, CUstream s, bool per_thread, bool ok) {
    if (l->ev[0] == NULL) return;
    if (ok) {
        uint64_t t = ho_trace_self_begin();
        ok = record(l->ev[1], s, per_thread) == CUDA_SUCCESS;
        ho_trace_self_end(t);
    }
    if (ok) return;
    ho_mutex_lock(&tr.lock);
    release(l->ev[0]);
    release(l->ev[1]);
    ho_mutex_unlock(&tr.lock);
    l->ev[0] = l->ev[1] = NULL;
}

/* The launch's duration, or false while its events have not completed. */
static bool read_duration(struct trec *r, bool wait) {
    uint64_t t = ho_trace_self_begin();
    if (wait) ho_real.cuEventSynchronize(r->ev[1]);
    float ms = 0;
    CUresult rc = ho_real.cuEventElapsedTime_v2(&ms, r->ev[0], r->ev[1]);
    ho_trace_self_end(t);
    if (rc == CUDA_ERROR_NOT_READY && !wait) return false;
    /* Any other failure (a sticky device error, say) leaves the duration unknown: 0. */
    r->ns = rc == CUDA_SUCCESS && ms > 0 ? (uint64_t)((double)ms * 1e6 + 0.5) : 0;
    return true;
}

void ho_trace_timing_resolve(int s, bool every_stream, uint64_t before, bool wait) {
    HO_ASSERT_HELD(&tr.lock);
    if (tr.pending == 0) return;
    for (size_t i = 0; i < tr.nrec && tr.pending > 0; i++) {
        struct trec *r = &tr.rec[i];
        if (!(r->flags & TRF_PENDING) || r->t > before) continue;
        if (!every_stream && r->s != s) continue;
        if (!read_duration(r, wait)) continue;
        r->flags &= (uint8_t)~TRF_PENDING;
        release(r->ev[0]);
        release(r->ev[1]);
        r->ev[0] = r->ev[1] = NULL;
        tr.pending--;
    }
}

void ho_trace_timing_poll(void) {
    HO_ASSERT_HELD(&tr.lock);
    /* From the front: the flush writes nothing past the first launch still pending anyway. */
    for (size_t i = 0; i < tr.nrec && tr.pending > 0; i++) {
        struct trec *r = &tr.rec[i];
        if (!(r->flags & TRF_PENDING)) continue;
        if (!read_duration(r, false)) return;
        r->flags &= (uint8_t)~TRF_PENDING;
        release(r->ev[0]);
        release(r->ev[1]);
        r->ev[0] = r->ev[1] = NULL;
        tr.pending--;
    }
}
