/* Streams and events: creation, ordering, queries and synchronisation by virtual time. */
#include "sim.h"

#include <stdlib.h>

/* Each thread's per-thread default streams, one per context it used. */
#define PTDS_SLOTS 16
static _Thread_local struct {
    struct sim_ctx *ctx;
    struct sim_stream *stream;
} ptds[PTDS_SLOTS];

struct sim_stream *sim_stream_new(struct sim_ctx *ctx, unsigned flags, int priority) {
    struct sim_stream *s = calloc(1, sizeof *s);
    if (s == NULL) return NULL;
    s->magic = SIM_MAGIC_STREAM;
    s->ctx = ctx;
    s->flags = flags;
    s->priority = priority;
    s->refs = 1;
    s->id = ++sim.next_id;
    return s;
}

/* A thread's per-thread default streams go with the thread, as the driver's do. Work they
 * queued still completes (queued operations hold references); the last one frees the stream. */
static pthread_key_t ptds_key;
static pthread_once_t ptds_key_once = PTHREAD_ONCE_INIT;

static void ptds_thread_exit(void *unused) {
    (void)unused;
    sim_lock();
    for (int i = 0; i < PTDS_SLOTS; i++) {
        struct sim_stream *s = ptds[i].stream;
        if (s == NULL) continue;
        ptds[i].ctx = NULL;
        ptds[i].stream = NULL;
        s->destroyed = true;
        sim_op_release(s->last_op);
        s->last_op = NULL;
        sim_stream_queue_drop(s);
        if (--s->refs == 0) {
            s->magic = SIM_MAGIC_DEAD;
            free(s);
        }
    }
    sim_unlock();
}

static void ptds_key_create(void) {
    pthread_key_create(&ptds_key, ptds_thread_exit);
}

static struct sim_stream *per_thread_stream(struct sim_ctx *ctx) {
    for (int i = 0; i < PTDS_SLOTS; i++) {
        if (ptds[i].ctx == ctx) return ptds[i].stream;
        if (ptds[i].ctx == NULL) {
            pthread_once(&ptds_key_once, ptds_key_create);
            pthread_setspecific(ptds_key, &ptds); /* non-NULL: the destructor runs at exit */
            sim_lock();
            struct sim_stream *s = sim_stream_new(ctx, 0, 0);
            sim_unlock();
            if (s == NULL) return NULL;
            s->per_thread = true;
            ptds[i].ctx = ctx;
            ptds[i].stream = s;
            return s;
        }
    }
    return NULL;
}

struct sim_stream *sim_stream_resolve(CUstream h, bool per_thread, CUresult *err) {
    *err = CUDA_SUCCESS;
    struct sim_ctx *ctx = sim_current_ctx();
    if (h == NULL) h = per_thread ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
    if (h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        if (ctx == NULL) {
            *err = CUDA_ERROR_INVALID_CONTEXT;
            return NULL;
        }
        struct sim_stream *s = h == CU_STREAM_LEGACY ? ctx->legacy : per_thread_stream(ctx);
        if (s == NULL) *err = CUDA_ERROR_OUT_OF_MEMORY;
        return s;
    }
    struct sim_stream *s = (struct sim_stream *)h;
    if (s->magic != SIM_MAGIC_STREAM || s->destroyed) {
        *err = CUDA_ERROR_INVALID_HANDLE;
        return NULL;
    }
    return s;
}

/* Every stream entry point: initialised, a context, and the stream handle resolved. */
static CUresult stream_enter(CUstream h, bool per_thread, struct sim_stream **out) {
    struct sim_ctx *c;
    CUresult rc = sim_require_ctx(&c);
    if (rc != CUDA_SUCCESS) return rc;
    *out = sim_stream_resolve(h, per_thread, &rc);
    return rc;
}

SIM_EXPORT CUresult cuStreamCreateWithPriority(CUstream *ph, unsigned int flags, int priority) {
    struct sim_ctx *c;
    CUresult rc = sim_require_ctx(&c);
    if (rc != CUDA_SUCCESS) return rc;
    if (ph == NULL || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = sim_fail_check("cuStreamCreate")) != CUDA_SUCCESS) return rc;
    /* Priorities outside [greatest, least] are clamped, as the driver does. */
    if (priority < -5) priority = -5;
    if (priority > 0) priority = 0;
    sim_lock();
    struct sim_stream *s = sim_stream_new(c, flags, priority);
    sim_unlock();
    if (s == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    *ph = (CUstream)s;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuStreamCreate(CUstream *ph, unsigned int flags) {
    return cuStreamCreateWithPriority(ph, flags, 0);
}

SIM_EXPORT CUresult cuStreamDestroy_v2(CUstream h) {
    struct sim_ctx *c;
    CUresult rc = sim_require_ctx(&c);
    if (rc != CUDA_SUCCESS) return rc;
    if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD)
        return CUDA_ERROR_INVALID_HANDLE;
    struct sim_stream *s = (struct sim_stream *)h;
    sim_lock();
    if (s->magic != SIM_MAGIC_STREAM || s->destroyed) {
        sim_unlock();
        return CUDA_ERROR_INVALID_HANDLE;
    }
    /* Work already queued still completes, as on the device; the struct goes with its last op. */
    s->destroyed = true;
    struct sim_op *last = s->last_op;
    s->last_op = NULL;
    sim_op_release(last);
    sim_stream_queue_drop(s);
    if (--s->refs == 0) {
        s->magic = SIM_MAGIC_DEAD;
        free(s);
    }
    sim_unlock();
    return CUDA_SUCCESS;
}

static CUresult stream_get_flags(CUstream h, bool pt, unsigned int *flags) {
    struct sim_stream *s;
    CUresult rc = stream_enter(h, pt, &s);
    if (rc != CUDA_SUCCESS) return rc;
    if (flags == NULL) return CUDA_ERROR_INVALID_VALUE;
    *flags = s->flags;
    return CUDA_SUCCESS;
}

static CUresult stream_get_priority(CUstream h, bool pt, int *priority) {
    struct sim_stream *s;
    CUresult rc = stream_enter(h, pt, &s);
    if (rc != CUDA_SUCCESS) return rc;
    if (priority == NULL) return CUDA_ERROR_INVALID_VALUE;
    *priority = s->priority;
    return CUDA_SUCCESS;
}

static CUresult stream_get_ctx(CUstream h, bool pt, CUcontext *pctx) {
    struct sim_stream *s;
    CUresult rc = stream_enter(h, pt, &s);
    if (rc != CUDA_SUCCESS) return rc;
    if (pctx == NULL) return CUDA_ERROR_INVALID_VALUE;
    *pctx = (CUcontext)s->ctx;
    return CUDA_SUCCESS;
}

static CUresult stream_get_id(CUstream h, bool pt, unsigned long long *id) {
    struct sim_stream *s;
    CUresult rc = stream_enter(h, pt, &s);
    if (rc != CUDA_SUCCESS) return rc;
    if (id == NULL) return CUDA_ERROR_INVALID_VALUE;
    *id = s->id;
    return CUDA_SUCCESS;
}

static CUresult stream_get_device(CUstream h, bool pt, CUdevice *dev) {
    struct sim_stream *s;
    CUresult rc = stream_enter(h, pt, &s);
    if (rc != CUDA_SUCCESS) return rc;
    if (dev == NULL) return CUDA_ERROR_INVALID_VALUE;
    *dev = s->ctx->dev->ordinal;
    return CUDA_SUCCESS;
}

static CUresult stream_synchronize(CUstream h, bool pt) {
    struct sim_stream *s;
    sim_bill(SIM_COST_STREAM_SYNCHRONIZE, SIM_AT_DEVICE, 0);
    CUresult rc = stream_enter(h, pt, &s);
    if (rc != CUDA_SUCCESS) return rc;
    if ((rc = sim_capture_check_sync(s)) != CUDA_SUCCESS) return rc;
    if ((rc = sim_fail_check("cuStreamSynchronize")) != CUDA_SUCCESS) return rc;
    sim_lock();
    rc = sim_stream_sync_locked(s);
    sim_unlock();
    return rc;
}

static CUresult stream_query(CUstream h, bool pt) {
    struct sim_stream *s;
    sim_bill(SIM_COST_STREAM_QUERY, SIM_AT_DEVICE, 0);
    CUresult rc = stream_enter(h, pt, &s);
    if (rc != CUDA_SUCCESS) return rc;
    if ((rc = sim_capture_check_sync(s)) != CUDA_SUCCESS) return rc;
    sim_lock();
    rc = sim.sticky;
    struct sim_op *op = s->last_op;
    if (rc == CUDA_SUCCESS && op != NULL) {
        /* Wall clock only: the answer is by virtual time. */
        if (sim_op_wait_end(op) > sim_now()) rc = CUDA_ERROR_NOT_READY;
        rc = sim.sticky != CUDA_SUCCESS ? sim.sticky : rc;
    }
    sim_unlock();
    return rc;
}

static CUresult stream_wait_event(CUstream h, bool pt, CUevent ev, unsigned int flags) {
    struct sim_stream *s;
    sim_bill(SIM_COST_STREAM_WAIT_EVENT, SIM_AT_DEVICE, 0);
    CUresult rc = stream_enter(h, pt, &s);
    if (rc != CUDA_SUCCESS) return rc;
    struct sim_event *e = sim_event_from_handle(ev);
    if (e == NULL) return CUDA_ERROR_INVALID_HANDLE;
    if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
    if ((rc = sim_fail_check("cuStreamWaitEvent")) != CUDA_SUCCESS) return rc;
    sim_lock();
    if (sim_capture_stream_wait(s, e, &rc)) {
        sim_unlock();
        return rc;
    }
    if (e->record != NULL) {
        struct sim_op *op = sim_op_new(SIM_OP_WAIT, s);
        if (op == NULL) {
            sim_unlock();
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        sim_op_add_dep(op, e->record);
        sim_op_enqueue(op);
        sim_op_release(op);
        sim_order_note_wait(s, e);
    }
    sim_unlock();
    return CUDA_SUCCESS;
}

static CUresult enqueue_host_func(struct sim_stream *s, struct sim_op *op) {
    CUresult rc = CUDA_SUCCESS;
    sim_lock();
    if (!sim_capture_intercept(s, op, &rc)) sim_op_enqueue(op);
    sim_op_release(op);
    sim_unlock();
    return rc;
}

static CUresult launch_host_func(CUstream h, bool pt, CUhostFn fn, void *user) {
    struct sim_stream *s;
    CUresult rc = stream_enter(h, pt, &s);
    if (rc != CUDA_SUCCESS) return rc;
    if (fn == NULL) return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    struct sim_op *op = sim_op_new(SIM_OP_HOST_FUNC, s);
    sim_unlock();
    if (op == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.host.fn = fn;
    op->u.host.user = user;
    return enqueue_host_func(s, op);
}

static CUresult stream_add_callback(CUstream h, bool pt, CUstreamCallback cb, void *user,
                                    unsigned int flags) {
    struct sim_stream *s;
    CUresult rc = stream_enter(h, pt, &s);
    if (rc != CUDA_SUCCESS) return rc;
    if (cb == NULL || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    struct sim_op *op = sim_op_new(SIM_OP_HOST_FUNC, s);
    sim_unlock();
    if (op == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.host.cb = cb;
    op->u.host.cb_stream = h;
    op->u.host.user = user;
    return enqueue_host_func(s, op);
}

/* Legacy and per-thread entry points share the implementations above; the _ptsz/_ptds names
 * are defined in ptds.c. */
#define STREAM_ENTRY_POINTS(SUFFIX, PT)                                                            \
    SIM_EXPORT CUresult cuStreamGetFlags##SUFFIX(CUstream h, unsigned int *f) {                    \
        return stream_get_flags(h, PT, f);                                                         \
    }                                                                                              \
    SIM_EXPORT CUresult cuStreamGetPriority##SUFFIX(CUstream h, int *p) {                          \
        return stream_get_priority(h, PT, p);                                                      \
    }                                                                                              \
    SIM_EXPORT CUresult cuStreamGetCtx##SUFFIX(CUstream h, CUcontext *c) {                         \
        return stream_get_ctx(h, PT, c);                                                           \
    }                                                                                              \
    SIM_EXPORT CUresult cuStreamGetId##SUFFIX(CUstream h, unsigned long long *id) {                \
        return stream_get_id(h, PT, id);                                                           \
    }                                                                                              \
    SIM_EXPORT CUresult cuStreamGetDevice##SUFFIX(CUstream h, CUdevice *d) {                       \
        return stream_get_device(h, PT, d);                                                        \
    }                                                                                              \
    SIM_EXPORT CUresult cuStreamSynchronize##SUFFIX(CUstream h) {                                  \
        return stream_synchronize(h, PT);                                                          \
    }                                                                                              \
    SIM_EXPORT CUresult cuStreamQuery##SUFFIX(CUstream h) {                                        \
        return stream_query(h, PT);                                                                \
    }                                                                                              \
    SIM_EXPORT CUresult cuStreamWaitEvent##SUFFIX(CUstream h, CUevent e, unsigned int f) {         \
        return stream_wait_event(h, PT, e, f);                                                     \
    }                                                                                              \
    SIM_EXPORT CUresult cuLaunchHostFunc##SUFFIX(CUstream h, CUhostFn fn, void *u) {               \
        return launch_host_func(h, PT, fn, u);                                                     \
    }                                                                                              \
    SIM_EXPORT CUresult cuStreamAddCallback##SUFFIX(CUstream h, CUstreamCallback cb, void *u,      \
                                                    unsigned int f) {                              \
        return stream_add_callback(h, PT, cb, u, f);                                               \
    }

STREAM_ENTRY_POINTS(, false)
STREAM_ENTRY_POINTS(_ptsz, true)

/* ------------------------------------------------------------------------------------ events */

struct sim_event *sim_event_from_handle(CUevent h) {
    struct sim_event *e = (struct sim_event *)h;
    if (e == NULL || e->magic != SIM_MAGIC_EVENT) return NULL;
    return e;
}

SIM_EXPORT CUresult cuEventCreate(CUevent *ph, unsigned int flags) {
    struct sim_ctx *c;
    CUresult rc = sim_require_ctx(&c);
    if (rc != CUDA_SUCCESS) return rc;
    unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
    if (ph == NULL || (flags & ~known) != 0) return CUDA_ERROR_INVALID_VALUE;
    if ((flags & CU_EVENT_INTERPROCESS) && !(flags & CU_EVENT_DISABLE_TIMING))
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = sim_fail_check("cuEventCreate")) != CUDA_SUCCESS) return rc;
    struct sim_event *e = calloc(1, sizeof *e);
    if (e == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    e->magic = SIM_MAGIC_EVENT;
    e->flags = flags;
    e->dev = c->dev;
    e->timing_disabled = (flags & CU_EVENT_DISABLE_TIMING) != 0;
    *ph = (CUevent)e;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuEventDestroy_v2(CUevent h) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    struct sim_event *e = sim_event_from_handle(h);
    if (e == NULL) return CUDA_ERROR_INVALID_HANDLE;
    if ((rc = sim_fail_check("cuEventDestroy")) != CUDA_SUCCESS) return rc;
    sim_lock();
    e->magic = SIM_MAGIC_DEAD;
    sim_op_release(e->record);
    sim_capture_event_clear(e);
    sim_unlock();
    free(e);
    return CUDA_SUCCESS;
}

static CUresult event_record(CUevent ev, CUstream h, bool pt, unsigned int flags) {
    struct sim_stream *s;
    sim_bill(SIM_COST_EVENT_RECORD, SIM_AT_DEVICE, 0);
    CUresult rc = stream_enter(h, pt, &s);
    if (rc != CUDA_SUCCESS) return rc;
    struct sim_event *e = sim_event_from_handle(ev);
    if (e == NULL) return CUDA_ERROR_INVALID_HANDLE;
    if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
    if ((rc = sim_fail_check("cuEventRecord")) != CUDA_SUCCESS) return rc;
    /* cuda.h: the event and the stream must be from the same context, else
     * CUDA_ERROR_INVALID_CONTEXT (modelled per device: contexts of a device share its queue). */
    if (e->dev != NULL && e->dev != s->ctx->dev) return CUDA_ERROR_INVALID_CONTEXT;
    sim_lock();
    if (s->capture != NULL) {
        sim_capture_event_record(s, e);
        sim_unlock();
        return CUDA_SUCCESS;
    }
    struct sim_op *op = sim_op_new(SIM_OP_RECORD, s);
    if (op == NULL) {
        sim_unlock();
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    sim_op_release(e->record);
    sim_capture_event_clear(e); /* recorded outside any capture from now on */
    op->refs++;
    e->record = op;
    sim_op_enqueue(op);
    sim_order_note_record(e, s, op->seq);
    sim_op_release(op);
    sim_unlock();
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuEventRecord(CUevent e, CUstream s) {
    return event_record(e, s, false, 0);
}
SIM_EXPORT CUresult cuEventRecord_ptsz(CUevent e, CUstream s) {
    return event_record(e, s, true, 0);
}
SIM_EXPORT CUresult cuEventRecordWithFlags(CUevent e, CUstream s, unsigned int f) {
    return event_record(e, s, false, f);
}
SIM_EXPORT CUresult cuEventRecordWithFlags_ptsz(CUevent e, CUstream s, unsigned int f) {
    return event_record(e, s, true, f);
}

SIM_EXPORT CUresult cuEventQuery(CUevent h) {
    sim_bill(SIM_COST_EVENT_QUERY, SIM_AT_DEVICE, 0);
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    struct sim_event *e = sim_event_from_handle(h);
    if (e == NULL) return CUDA_ERROR_INVALID_HANDLE;
    if ((rc = sim_capture_check_event(e)) != CUDA_SUCCESS) return rc;
    if ((rc = sim_fail_check("cuEventQuery")) != CUDA_SUCCESS) return rc;
    sim_lock();
    rc = CUDA_SUCCESS;
    if (e->record != NULL && sim_op_wait_end(e->record) > sim_now()) rc = CUDA_ERROR_NOT_READY;
    if (sim.sticky != CUDA_SUCCESS) rc = sim.sticky;
    sim_unlock();
    return rc;
}

SIM_EXPORT CUresult cuEventSynchronize(CUevent h) {
    sim_bill(SIM_COST_EVENT_SYNCHRONIZE, SIM_AT_DEVICE, 0);
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    struct sim_event *e = sim_event_from_handle(h);
    if (e == NULL) return CUDA_ERROR_INVALID_HANDLE;
    if ((rc = sim_capture_check_event(e)) != CUDA_SUCCESS) return rc;
    if ((rc = sim_fail_check("cuEventSynchronize")) != CUDA_SUCCESS) return rc;
    sim_lock();
    if (e->record != NULL) {
        uint64_t t = sim_op_wait_end(e->record), cur = sim_now();
        while (cur < t && !atomic_compare_exchange_weak(&sim.host_ns, &cur, t)) {
        }
        e->record->dev->synced_ns = sim_now();
    }
    rc = sim.sticky;
    sim_unlock();
    return rc;
}

static CUresult event_elapsed(float *ms, CUevent a, CUevent b) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (ms == NULL) return CUDA_ERROR_INVALID_VALUE;
    struct sim_event *ea = sim_event_from_handle(a), *eb = sim_event_from_handle(b);
    if (ea == NULL || eb == NULL) return CUDA_ERROR_INVALID_HANDLE;
    if (ea->timing_disabled || eb->timing_disabled) return CUDA_ERROR_INVALID_HANDLE;
    sim_lock();
    if (ea->record == NULL || eb->record == NULL) {
        sim_unlock();
        return CUDA_ERROR_INVALID_HANDLE;
    }
    struct sim_op *ra = ea->record, *rb = eb->record;
    ra->refs++; /* the waits release the lock: a re-record must not free what is compared */
    rb->refs++;
    uint64_t end_a = sim_op_wait_end(ra), end_b = sim_op_wait_end(rb);
    sim_op_release(ra);
    sim_op_release(rb);
    uint64_t now = sim_now();
    if (end_a > now || end_b > now) {
        sim_unlock();
        return CUDA_ERROR_NOT_READY;
    }
    double diff = (double)end_b - (double)end_a;
    *ms = (float)(diff / 1e6);
    rc = sim.sticky;
    sim_unlock();
    return rc;
}

/* The pre-versioned ABI: cuda.h maps the plain name to the newest variant. */
#undef cuEventElapsedTime
SIM_EXPORT CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b) {
    return event_elapsed(ms, a, b);
}
SIM_EXPORT CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b) {
    return event_elapsed(ms, a, b);
}
