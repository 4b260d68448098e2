/* Allocation hooks: every allocation and free is tracked after the driver accepts it. */
#include "hook.h"

#define DEVICE_KINDS ((1u << HO_BUF_DEVICE) | (1u << HO_BUF_ASYNC) | (1u << HO_BUF_MANAGED))

/* Offload mode: the engine takes allocations it can manage; CUDA_ERROR_NOT_SUPPORTED from it
 * means "not for me" and the driver allocates. The trace (tt, from ho_trace_begin) records
 * every successful device allocation, engine's or driver's, on stream s when has_s. */
#define ENGINE_ALLOC(dptr, bytes, kind, tt, s, has_s, pt)                                          \
    do {                                                                                           \
        if (ho_offloading()) {                                                                     \
            struct ho_alloc_order ord_ = {(s), (pt)};                                              \
            CUresult erc_ = ho_engine_alloc(dptr, bytes, kind, (has_s) ? &ord_ : NULL);            \
            if (erc_ == CUDA_SUCCESS) ho_trace_alloc(tt, *(dptr), s, has_s, pt);                   \
            if (erc_ != CUDA_ERROR_NOT_SUPPORTED) return erc_;                                     \
        }                                                                                          \
    } while (0)

/* A stream-ordered allocation made while its stream captures is graph memory: the graph owns it
 * (allocated at each launch, freed by the graph's own free node), so it goes to the driver,
 * never to the engine's arena, whose address a capture-time free would hand to the next
 * allocation while replays still write there. */
static bool capturing(CUstream s, bool pt) {
    if (!ho_engine_capturing()) return false; /* no capture anywhere: the common case */
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult rc =
        pt ? HO_REAL(cuStreamIsCapturing_ptsz, s, &st) : HO_REAL(cuStreamIsCapturing, s, &st);
    return rc != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_NONE;
}

/* A driver allocation that ran out of memory is retried after the engine made room. */
#define RETRY_ON_OOM(rc, bytes, CALL)                                                              \
    while ((rc) == CUDA_ERROR_OUT_OF_MEMORY && ho_offloading() && ho_engine_reclaim(bytes))        \
    (rc) = (CALL)

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
    HO_ENTER(cuMemAlloc_v2);
    uint64_t tt = ho_trace_begin();
    ENGINE_ALLOC(dptr, bytesize, HO_BUF_DEVICE, tt, NULL, false, false);
    CUresult rc = HO_REAL(cuMemAlloc_v2, dptr, bytesize);
    RETRY_ON_OOM(rc, bytesize, HO_REAL(cuMemAlloc_v2, dptr, bytesize));
    if (rc == CUDA_SUCCESS && ho_tracking()) ho_track_alloc(*dptr, bytesize, HO_BUF_DEVICE);
    if (rc == CUDA_SUCCESS) ho_trace_alloc(tt, *dptr, NULL, false, false);
    return rc;
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                            unsigned int elem) {
    HO_ENTER(cuMemAllocPitch_v2);
    uint64_t tt = ho_trace_begin();
    /* Pitched allocations stay with the driver (it chooses the pitch): tracked, never moved. */
    CUresult rc = HO_REAL(cuMemAllocPitch_v2, dptr, pitch, width, height, elem);
    RETRY_ON_OOM(rc, width * height, HO_REAL(cuMemAllocPitch_v2, dptr, pitch, width, height, elem));
    if (rc == CUDA_SUCCESS && ho_tracking())
        ho_track_alloc(*dptr, (uint64_t)*pitch * height, HO_BUF_DEVICE);
    if (rc == CUDA_SUCCESS) ho_trace_alloc(tt, *dptr, NULL, false, false);
    return rc;
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream s) {
    HO_ENTER(cuMemAllocAsync);
    uint64_t tt = ho_trace_begin();
    /* A managed buffer is usable at once: stream order only matters for its free. */
    if (!capturing(s, false)) ENGINE_ALLOC(dptr, bytesize, HO_BUF_ASYNC, tt, s, true, false);
    CUresult rc = HO_REAL(cuMemAllocAsync, dptr, bytesize, s);
    RETRY_ON_OOM(rc, bytesize, HO_REAL(cuMemAllocAsync, dptr, bytesize, s));
    if (rc == CUDA_SUCCESS && ho_tracking()) ho_track_alloc(*dptr, bytesize, HO_BUF_ASYNC);
    if (rc == CUDA_SUCCESS) ho_trace_alloc(tt, *dptr, s, true, false);
    return rc;
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream s) {
    HO_ENTER(cuMemAllocAsync_ptsz);
    uint64_t tt = ho_trace_begin();
    /* A managed buffer is usable at once: stream order only matters for its free. */
    if (!capturing(s, true)) ENGINE_ALLOC(dptr, bytesize, HO_BUF_ASYNC, tt, s, true, true);
    CUresult rc = HO_REAL(cuMemAllocAsync_ptsz, dptr, bytesize, s);
    RETRY_ON_OOM(rc, bytesize, HO_REAL(cuMemAllocAsync_ptsz, dptr, bytesize, s));
    if (rc == CUDA_SUCCESS && ho_tracking()) ho_track_alloc(*dptr, bytesize, HO_BUF_ASYNC);
    if (rc == CUDA_SUCCESS) ho_trace_alloc(tt, *dptr, s, true, true);
    return rc;
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                 CUstream s) {
    HO_ENTER(cuMemAllocFromPoolAsync);
    uint64_t tt = ho_trace_begin();
    /* An explicit pool carries the application's own settings (access, export): the driver's. */
    CUresult rc = HO_REAL(cuMemAllocFromPoolAsync, dptr, bytesize, pool, s);
    RETRY_ON_OOM(rc, bytesize, HO_REAL(cuMemAllocFromPoolAsync, dptr, bytesize, pool, s));
    if (rc == CUDA_SUCCESS && ho_tracking()) ho_track_alloc(*dptr, bytesize, HO_BUF_ASYNC);
    if (rc == CUDA_SUCCESS) ho_trace_alloc(tt, *dptr, s, true, false);
    return rc;
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream s) {
    HO_ENTER(cuMemAllocFromPoolAsync_ptsz);
    uint64_t tt = ho_trace_begin();
    /* An explicit pool carries the application's own settings (access, export): the driver's. */
    CUresult rc = HO_REAL(cuMemAllocFromPoolAsync_ptsz, dptr, bytesize, pool, s);
    RETRY_ON_OOM(rc, bytesize, HO_REAL(cuMemAllocFromPoolAsync_ptsz, dptr, bytesize, pool, s));
    if (rc == CUDA_SUCCESS && ho_tracking()) ho_track_alloc(*dptr, bytesize, HO_BUF_ASYNC);
    if (rc == CUDA_SUCCESS) ho_trace_alloc(tt, *dptr, s, true, true);
    return rc;
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
    HO_ENTER(cuMemAllocManaged);
    uint64_t tt = ho_trace_begin();
    CUresult rc = HO_REAL(cuMemAllocManaged, dptr, bytesize, flags);
    if (rc == CUDA_SUCCESS && ho_tracking()) ho_track_alloc(*dptr, bytesize, HO_BUF_MANAGED);
    if (rc == CUDA_SUCCESS) ho_trace_alloc(tt, *dptr, NULL, false, false);
    return rc;
}

/* The record goes before the driver frees: once freed, the driver may hand the same address to
 * another thread's allocation, which must not find a stale record in the way. */
CUresult cuMemFree_v2(CUdeviceptr dptr) {
    HO_ENTER(cuMemFree_v2);
    uint64_t tt = ho_trace_begin(), tid = ho_trace_free_id(tt, dptr);
    if (dptr != 0 && ho_engine_active() && ho_engine_free(dptr, NULL, false, false))
        return ho_trace_freed(tt, tid, NULL, false, false, CUDA_SUCCESS);
    if (dptr != 0 && ho_tracking()) ho_track_free(dptr, DEVICE_KINDS);
    return ho_trace_freed(tt, tid, NULL, false, false, HO_REAL(cuMemFree_v2, dptr));
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s) {
    HO_ENTER(cuMemFreeAsync);
    uint64_t tt = ho_trace_begin(), tid = ho_trace_free_id(tt, dptr);
    if (dptr != 0 && ho_engine_active() && ho_engine_free(dptr, s, false, true))
        return ho_trace_freed(tt, tid, s, true, false, CUDA_SUCCESS);
    if (dptr != 0 && ho_tracking()) ho_track_free(dptr, DEVICE_KINDS);
    return ho_trace_freed(tt, tid, s, true, false, HO_REAL(cuMemFreeAsync, dptr, s));
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s) {
    HO_ENTER(cuMemFreeAsync_ptsz);
    uint64_t tt = ho_trace_begin(), tid = ho_trace_free_id(tt, dptr);
    if (dptr != 0 && ho_engine_active() && ho_engine_free(dptr, s, true, true))
        return ho_trace_freed(tt, tid, s, true, true, CUDA_SUCCESS);
    if (dptr != 0 && ho_tracking()) ho_track_free(dptr, DEVICE_KINDS);
    return ho_trace_freed(tt, tid, s, true, true, HO_REAL(cuMemFreeAsync_ptsz, dptr, s));
}

/* Host allocations are tracked only: pointers into them are recognised, nothing moves. */
CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags) {
    HO_ENTER(cuMemHostAlloc);
    CUresult rc = HO_REAL(cuMemHostAlloc, pp, bytesize, flags);
    if (rc == CUDA_SUCCESS && ho_tracking())
        ho_track_alloc((uint64_t)(uintptr_t)*pp, bytesize, HO_BUF_HOST);
    return rc;
}

CUresult cuMemAllocHost_v2(void **pp, size_t bytesize) {
    HO_ENTER(cuMemAllocHost_v2);
    CUresult rc = HO_REAL(cuMemAllocHost_v2, pp, bytesize);
    if (rc == CUDA_SUCCESS && ho_tracking())
        ho_track_alloc((uint64_t)(uintptr_t)*pp, bytesize, HO_BUF_HOST);
    return rc;
}

CUresult cuMemFreeHost(void *p) {
    HO_ENTER(cuMemFreeHost);
    if (p != NULL && ho_tracking()) ho_track_free((uint64_t)(uintptr_t)p, 1u << HO_BUF_HOST);
    return HO_REAL(cuMemFreeHost, p);
}

CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int flags) {
    HO_ENTER(cuMemHostRegister_v2);
    CUresult rc = HO_REAL(cuMemHostRegister_v2, p, bytesize, flags);
    if (rc == CUDA_SUCCESS && ho_tracking())
        ho_track_alloc((uint64_t)(uintptr_t)p, bytesize, HO_BUF_REGISTERED);
    return rc;
}

CUresult cuMemHostUnregister(void *p) {
    HO_ENTER(cuMemHostUnregister);
    if (p != NULL && ho_tracking()) ho_track_free((uint64_t)(uintptr_t)p, 1u << HO_BUF_REGISTERED);
    return HO_REAL(cuMemHostUnregister, p);
}

/* In track mode the driver's answer is the truth. In offload mode, with a budget, the device
 * looks as large as the budget (docs/ARCHITECTURE.md). */
CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
    HO_ENTER(cuMemGetInfo_v2);
    CUresult rc = HO_REAL(cuMemGetInfo_v2, free_bytes, total);
    if (rc == CUDA_SUCCESS && ho_offloading()) ho_engine_meminfo(free_bytes, total);
    return rc;
}
