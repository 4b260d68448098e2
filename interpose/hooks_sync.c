/* Synchronisation, ordering, capture and context hooks: progress points for the engine. In
 * track mode they count and pass through. */
#include "hook.h"

#define HO_REALP(exp, ARGS) (ho_real.exp != NULL ? ho_real.exp ARGS : CUDA_ERROR_NOT_SUPPORTED)

static void maybe_count(_Atomic uint64_t *counter) {
    if (counter != NULL && ho_tracking()) ho_count(counter, 1);
}

/* A hook that passes through and bumps COUNTER (or nothing, for NONE). */
#define PASS_HOOK(exp, PARAMS, ARGS, COUNTER)                                                      \
    CUresult exp PARAMS {                                                                          \
        HO_ENTER(exp);                                                                             \
        CUresult rc = HO_REALP(exp, ARGS);                                                         \
        maybe_count(COUNTER);                                                                      \
        return rc;                                                                                 \
    }

/* A PASS_HOOK that also tells the trace (HOSTOFF_TRACE) about the call once it succeeded: TRACE
 * is the statement, with tt_ the call's entry time. */
#define TRACED_HOOK(exp, PARAMS, ARGS, COUNTER, TRACE)                                             \
    CUresult exp PARAMS {                                                                          \
        HO_ENTER(exp);                                                                             \
        uint64_t tt_ = ho_trace_begin();                                                           \
        CUresult rc = HO_REALP(exp, ARGS);                                                         \
        maybe_count(COUNTER);                                                                      \
        if (tt_ != 0 && rc == CUDA_SUCCESS) TRACE;                                                 \
        return rc;                                                                                 \
    }

/* A TRACED_HOOK that blocks the calling thread: the engine's held-back eviction chunks go to
 * the link first (no progress point comes while the thread waits). */
#define BLOCKING_HOOK(exp, PARAMS, ARGS, COUNTER, TRACE)                                           \
    CUresult exp PARAMS {                                                                          \
        HO_ENTER(exp);                                                                             \
        uint64_t tt_ = ho_trace_begin();                                                           \
        if (ho_offloading()) ho_engine_before_block();                                             \
        CUresult rc = HO_REALP(exp, ARGS);                                                         \
        maybe_count(COUNTER);                                                                      \
        if (tt_ != 0 && rc == CUDA_SUCCESS) TRACE;                                                 \
        return rc;                                                                                 \
    }

#define SYNCS    (&ho_stats.counts_syncs)
#define CAPTURES (&ho_stats.counts_captures)
#define NONE     ((_Atomic uint64_t *)NULL)

BLOCKING_HOOK(cuStreamSynchronize, (CUstream s), (s), SYNCS, ho_trace_sync(tt_, s, false, false))
BLOCKING_HOOK(cuStreamSynchronize_ptsz, (CUstream s), (s), SYNCS,
              ho_trace_sync(tt_, s, true, false))
/* The engine names streams that used a buffer: a stream about to go is replaced in those lists
 * by an event recorded on it now, which stays valid after the stream is gone. */
CUresult cuStreamDestroy_v2(CUstream s) {
    HO_ENTER(cuStreamDestroy_v2);
    if (ho_engine_active()) ho_engine_stream_destroyed(s);
    return HO_REALP(cuStreamDestroy_v2, (s));
}

PASS_HOOK(cuStreamQuery, (CUstream s), (s), NONE)
PASS_HOOK(cuStreamQuery_ptsz, (CUstream s), (s), NONE)
BLOCKING_HOOK(cuEventSynchronize, (CUevent e), (e), SYNCS, ho_trace_event_sync(tt_, e))
PASS_HOOK(cuEventQuery, (CUevent e), (e), NONE)
BLOCKING_HOOK(cuCtxSynchronize, (void), (), SYNCS, ho_trace_sync(tt_, NULL, false, true))
BLOCKING_HOOK(cuCtxSynchronize_v2, (CUcontext c), (c), SYNCS, ho_trace_sync(tt_, NULL, false, true))
TRACED_HOOK(cuStreamWaitEvent, (CUstream s, CUevent e, unsigned int f), (s, e, f), NONE,
            ho_trace_wait(tt_, s, false, e))
TRACED_HOOK(cuStreamWaitEvent_ptsz, (CUstream s, CUevent e, unsigned int f), (s, e, f), NONE,
            ho_trace_wait(tt_, s, true, e))
TRACED_HOOK(cuEventRecord, (CUevent e, CUstream s), (e, s), NONE, ho_trace_record(tt_, e, s, false))
TRACED_HOOK(cuEventRecord_ptsz, (CUevent e, CUstream s), (e, s), NONE,
            ho_trace_record(tt_, e, s, true))
TRACED_HOOK(cuEventRecordWithFlags, (CUevent e, CUstream s, unsigned int f), (e, s, f), NONE,
            ho_trace_record(tt_, e, s, false))
TRACED_HOOK(cuEventRecordWithFlags_ptsz, (CUevent e, CUstream s, unsigned int f), (e, s, f), NONE,
            ho_trace_record(tt_, e, s, true))

/* Captures in progress stop the engine: nothing moves or synchronises while one is open. */
#define BEGIN_CAPTURE_HOOK(exp, PARAMS, ARGS)                                                      \
    CUresult exp PARAMS {                                                                          \
        HO_ENTER(exp);                                                                             \
        if (ho_offloading()) ho_engine_capture(+1);                                                \
        ho_trace_capture(+1);                                                                      \
        CUresult rc = HO_REALP(exp, ARGS);                                                         \
        if (ho_offloading() && rc != CUDA_SUCCESS) ho_engine_capture(-1);                          \
        if (rc != CUDA_SUCCESS) ho_trace_capture(-1);                                              \
        maybe_count(rc == CUDA_SUCCESS ? CAPTURES : NONE);                                         \
        return rc;                                                                                 \
    }

/* A capture ends with its graph, or invalidated or unjoined: either way it is over. */
#define END_CAPTURE_HOOK(exp)                                                                      \
    CUresult exp(CUstream s, CUgraph *g) {                                                         \
        HO_ENTER(exp);                                                                             \
        CUresult rc = HO_REALP(exp, (s, g));                                                       \
        if (ho_offloading() &&                                                                     \
            (rc == CUDA_SUCCESS || rc == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED ||                  \
             rc == CUDA_ERROR_STREAM_CAPTURE_UNJOINED))                                            \
            ho_engine_capture(-1);                                                                 \
        if (rc == CUDA_SUCCESS || rc == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED ||                   \
            rc == CUDA_ERROR_STREAM_CAPTURE_UNJOINED)                                              \
            ho_trace_capture(-1);                                                                  \
        return rc;                                                                                 \
    }

BEGIN_CAPTURE_HOOK(cuStreamBeginCapture_v2, (CUstream s, CUstreamCaptureMode m), (s, m))
BEGIN_CAPTURE_HOOK(cuStreamBeginCapture_v2_ptsz, (CUstream s, CUstreamCaptureMode m), (s, m))
BEGIN_CAPTURE_HOOK(cuStreamBeginCaptureToGraph,
                   (CUstream s, CUgraph g, const CUgraphNode *deps, const CUgraphEdgeData *data,
                    size_t n, CUstreamCaptureMode m),
                   (s, g, deps, data, n, m))
BEGIN_CAPTURE_HOOK(cuStreamBeginCaptureToGraph_ptsz,
                   (CUstream s, CUgraph g, const CUgraphNode *deps, const CUgraphEdgeData *data,
                    size_t n, CUstreamCaptureMode m),
                   (s, g, deps, data, n, m))
END_CAPTURE_HOOK(cuStreamEndCapture)
END_CAPTURE_HOOK(cuStreamEndCapture_ptsz)
PASS_HOOK(cuStreamIsCapturing, (CUstream s, CUstreamCaptureStatus *st), (s, st), NONE)
PASS_HOOK(cuStreamIsCapturing_ptsz, (CUstream s, CUstreamCaptureStatus *st), (s, st), NONE)
PASS_HOOK(cuStreamGetCaptureInfo_v3,
          (CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g,
           const CUgraphNode **deps, const CUgraphEdgeData **data, size_t *n),
          (s, st, id, g, deps, data, n), NONE)
PASS_HOOK(cuStreamGetCaptureInfo_v3_ptsz,
          (CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g,
           const CUgraphNode **deps, const CUgraphEdgeData **data, size_t *n),
          (s, st, id, g, deps, data, n), NONE)
PASS_HOOK(cuThreadExchangeStreamCaptureMode, (CUstreamCaptureMode * m), (m), NONE)

PASS_HOOK(cuInit, (unsigned int flags), (flags), NONE)
PASS_HOOK(cuCtxCreate_v4, (CUcontext * c, CUctxCreateParams *p, unsigned int f, CUdevice d),
          (c, p, f, d), NONE)
PASS_HOOK(cuCtxDestroy_v2, (CUcontext c), (c), NONE)
PASS_HOOK(cuDevicePrimaryCtxReset_v2, (CUdevice d), (d), NONE)
