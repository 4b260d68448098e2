/* Copies and memory operations besides the plain memcpy/memset families: batch copies, 3D peer
 * copies, array copies and stream memory operations (write or wait on a word). Each names the
 * device memory it touches: the engine makes a move in flight give way and announces the use
 * on the stream, as for any copy (it never restores for one: host-mapped memory is as good a
 * copy endpoint). */
#include "hook.h"

#include <stdlib.h>

#define P(x) ((uint64_t)(uintptr_t)(x))

/* Runs CALL between the engine's prepare and finish for the addresses in addrs[0..n). */
#define ACCESS(exp, addrs, n, s, pt, CALL)                                                         \
    do {                                                                                           \
        HO_ENTER(exp);                                                                             \
        if (ho_offloading()) {                                                                     \
            struct ho_engine_touch t_;                                                             \
            ho_track_access_begin((addrs), (n), (s), (pt), false, &t_);                            \
            CUresult rc_ = ho_real.exp != NULL ? (CALL) : CUDA_ERROR_NOT_SUPPORTED;                \
            ho_engine_finish(&t_, (s), (pt), rc_ == CUDA_SUCCESS);                                 \
            if (rc_ == CUDA_SUCCESS) ho_count(&ho_stats.counts_copies, 1);                         \
            return rc_;                                                                            \
        }                                                                                          \
        CUresult rc_ = ho_real.exp != NULL ? (CALL) : CUDA_ERROR_NOT_SUPPORTED;                    \
        if (rc_ == CUDA_SUCCESS && ho_tracking()) {                                                \
            for (int i_ = 0; i_ < (n); i_++)                                                       \
                ho_track_touch((addrs)[i_]);                                                       \
            ho_count(&ho_stats.counts_copies, 1);                                                  \
        }                                                                                          \
        return rc_;                                                                                \
    } while (0)

/* ------------------------------------------------------------------------------ batch copies */

/* Both ends of every copy of a batch (on the heap: a batch may hold thousands). */
static uint64_t *batch_addrs(const CUdeviceptr *dsts, const CUdeviceptr *srcs, size_t count,
                             int *n) {
    *n = 0;
    if (dsts == NULL || srcs == NULL || count == 0 || count > (1u << 24)) return NULL;
    uint64_t *a = malloc(2 * count * sizeof *a);
    if (a == NULL) return NULL;
    for (size_t i = 0; i < count; i++) {
        a[(*n)++] = dsts[i];
        a[(*n)++] = srcs[i];
    }
    return a;
}

/* A batch copy: ADDRS (an expression setting n_) lists the pointer operands. Out of memory for
 * the list: the copies are unattributed, a barrier (engine_unseen.c). The pass-through path
 * (mode off) builds no list: no allocation there. */
#define BATCH_COPY(exp, ADDRS, count, s, pt, CALL)                                                 \
    do {                                                                                           \
        HO_ENTER(exp);                                                                             \
        if (ho_real.exp == NULL) return CUDA_ERROR_NOT_SUPPORTED;                                  \
        if (!ho_tracking()) return (CALL);                                                         \
        int n_;                                                                                    \
        uint64_t *a_ = (ADDRS);                                                                    \
        CUresult rc_;                                                                              \
        if (ho_offloading()) {                                                                     \
            struct ho_engine_touch t_;                                                             \
            ho_track_access_begin_ex(a_, n_, s, pt, false, a_ == NULL && (count) > 0, &t_);        \
            rc_ = (CALL);                                                                          \
            ho_engine_finish(&t_, s, pt, rc_ == CUDA_SUCCESS);                                     \
        } else {                                                                                   \
            rc_ = (CALL);                                                                          \
            for (int i_ = 0; rc_ == CUDA_SUCCESS && i_ < n_; i_++)                                 \
                ho_track_touch(a_[i_]);                                                            \
        }                                                                                          \
        if (rc_ == CUDA_SUCCESS) ho_count(&ho_stats.counts_copies, (count));                       \
        free(a_);                                                                                  \
        return rc_;                                                                                \
    } while (0)

#define BATCH(exp, dsts, srcs, count, s, pt, CALL)                                                 \
    BATCH_COPY(exp, batch_addrs(dsts, srcs, count, &n_), count, s, pt, CALL)

CUresult cuMemcpyBatchAsync(CUdeviceptr *d, CUdeviceptr *s, size_t *sz, size_t count,
                            CUmemcpyAttributes *a, size_t *ai, size_t na, size_t *fail,
                            CUstream st) {
    BATCH(cuMemcpyBatchAsync, d, s, count, st, false,
          ho_real.cuMemcpyBatchAsync(d, s, sz, count, a, ai, na, fail, st));
}
CUresult cuMemcpyBatchAsync_ptsz(CUdeviceptr *d, CUdeviceptr *s, size_t *sz, size_t count,
                                 CUmemcpyAttributes *a, size_t *ai, size_t na, size_t *fail,
                                 CUstream st) {
    BATCH(cuMemcpyBatchAsync_ptsz, d, s, count, st, true,
          ho_real.cuMemcpyBatchAsync_ptsz(d, s, sz, count, a, ai, na, fail, st));
}
CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *d, CUdeviceptr *s, size_t *sz, size_t count,
                               CUmemcpyAttributes *a, size_t *ai, size_t na, CUstream st) {
    BATCH(cuMemcpyBatchAsync_v2, d, s, count, st, false,
          ho_real.cuMemcpyBatchAsync_v2(d, s, sz, count, a, ai, na, st));
}
CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *d, CUdeviceptr *s, size_t *sz, size_t count,
                                    CUmemcpyAttributes *a, size_t *ai, size_t na, CUstream st) {
    BATCH(cuMemcpyBatchAsync_v2_ptsz, d, s, count, st, true,
          ho_real.cuMemcpyBatchAsync_v2_ptsz(d, s, sz, count, a, ai, na, st));
}

/* A 3D batch: the pointer operands (an array operand has no device pointer of a tracked
 * buffer; its other side does). */
static uint64_t *batch3d_addrs(const CUDA_MEMCPY3D_BATCH_OP *ops, size_t count, int *n) {
    *n = 0;
    if (ops == NULL || count == 0 || count > (1u << 24)) return NULL;
    uint64_t *a = malloc(2 * count * sizeof *a);
    if (a == NULL) return NULL;
    for (size_t i = 0; i < count; i++) {
        if (ops[i].dst.type == CU_MEMCPY_OPERAND_TYPE_POINTER) a[(*n)++] = ops[i].dst.op.ptr.ptr;
        if (ops[i].src.type == CU_MEMCPY_OPERAND_TYPE_POINTER) a[(*n)++] = ops[i].src.op.ptr.ptr;
    }
    return a;
}

#define BATCH3D(exp, ops, count, s, pt, CALL)                                                      \
    BATCH_COPY(exp, batch3d_addrs(ops, count, &n_), count, s, pt, CALL)

CUresult cuMemcpy3DBatchAsync(size_t n, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *fail,
                              unsigned long long flags, CUstream st) {
    BATCH3D(cuMemcpy3DBatchAsync, ops, n, st, false,
            ho_real.cuMemcpy3DBatchAsync(n, ops, fail, flags, st));
}
CUresult cuMemcpy3DBatchAsync_ptsz(size_t n, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *fail,
                                   unsigned long long flags, CUstream st) {
    BATCH3D(cuMemcpy3DBatchAsync_ptsz, ops, n, st, true,
            ho_real.cuMemcpy3DBatchAsync_ptsz(n, ops, fail, flags, st));
}
CUresult cuMemcpy3DBatchAsync_v2(size_t n, CUDA_MEMCPY3D_BATCH_OP *ops, unsigned long long flags,
                                 CUstream st) {
    BATCH3D(cuMemcpy3DBatchAsync_v2, ops, n, st, false,
            ho_real.cuMemcpy3DBatchAsync_v2(n, ops, flags, st));
}
CUresult cuMemcpy3DBatchAsync_v2_ptsz(size_t n, CUDA_MEMCPY3D_BATCH_OP *ops,
                                      unsigned long long flags, CUstream st) {
    BATCH3D(cuMemcpy3DBatchAsync_v2_ptsz, ops, n, st, true,
            ho_real.cuMemcpy3DBatchAsync_v2_ptsz(n, ops, flags, st));
}

/* ----------------------------------------------------------------- 3D peer and array copies */

static uint64_t side(CUmemorytype t, const void *host, CUdeviceptr dev) {
    if (t == CU_MEMORYTYPE_DEVICE || t == CU_MEMORYTYPE_UNIFIED) return dev;
    if (t == CU_MEMORYTYPE_HOST) return P(host);
    return 0;
}

#define PEER_ADDRS(p)                                                                              \
    {                                                                                              \
        (p) != NULL ? side((p)->dstMemoryType, (p)->dstHost, (p)->dstDevice) : 0,                  \
            (p) != NULL ? side((p)->srcMemoryType, (p)->srcHost, (p)->srcDevice) : 0               \
    }

CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *p) {
    const uint64_t a[2] = PEER_ADDRS(p);
    ACCESS(cuMemcpy3DPeer, a, 2, NULL, false, ho_real.cuMemcpy3DPeer(p));
}
CUresult cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER *p) {
    const uint64_t a[2] = PEER_ADDRS(p);
    ACCESS(cuMemcpy3DPeer_ptds, a, 2, NULL, true, ho_real.cuMemcpy3DPeer_ptds(p));
}
CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *p, CUstream st) {
    const uint64_t a[2] = PEER_ADDRS(p);
    ACCESS(cuMemcpy3DPeerAsync, a, 2, st, false, ho_real.cuMemcpy3DPeerAsync(p, st));
}
CUresult cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER *p, CUstream st) {
    const uint64_t a[2] = PEER_ADDRS(p);
    ACCESS(cuMemcpy3DPeerAsync_ptsz, a, 2, st, true, ho_real.cuMemcpy3DPeerAsync_ptsz(p, st));
}

/* Synchronous, on the legacy (or per-thread) default stream. */
CUresult cuMemcpyAtoD_v2(CUdeviceptr d, CUarray a, size_t off, size_t n) {
    const uint64_t ad[1] = {d};
    ACCESS(cuMemcpyAtoD_v2, ad, 1, NULL, false, ho_real.cuMemcpyAtoD_v2(d, a, off, n));
}
CUresult cuMemcpyAtoD_v2_ptds(CUdeviceptr d, CUarray a, size_t off, size_t n) {
    const uint64_t ad[1] = {d};
    ACCESS(cuMemcpyAtoD_v2_ptds, ad, 1, NULL, true, ho_real.cuMemcpyAtoD_v2_ptds(d, a, off, n));
}
CUresult cuMemcpyDtoA_v2(CUarray a, size_t off, CUdeviceptr s, size_t n) {
    const uint64_t ad[1] = {s};
    ACCESS(cuMemcpyDtoA_v2, ad, 1, NULL, false, ho_real.cuMemcpyDtoA_v2(a, off, s, n));
}
CUresult cuMemcpyDtoA_v2_ptds(CUarray a, size_t off, CUdeviceptr s, size_t n) {
    const uint64_t ad[1] = {s};
    ACCESS(cuMemcpyDtoA_v2_ptds, ad, 1, NULL, true, ho_real.cuMemcpyDtoA_v2_ptds(a, off, s, n));
}

/* --------------------------------------------------------------- stream memory operations */

#define VALUE_HOOK(exp, T, PT)                                                                     \
    CUresult exp(CUstream s, CUdeviceptr addr, T v, unsigned int flags) {                          \
        const uint64_t a[1] = {addr};                                                              \
        ACCESS(exp, a, 1, s, PT, ho_real.exp(s, addr, v, flags));                                  \
    }

VALUE_HOOK(cuStreamWriteValue32, cuuint32_t, false)
VALUE_HOOK(cuStreamWriteValue32_ptsz, cuuint32_t, true)
VALUE_HOOK(cuStreamWriteValue32_v2, cuuint32_t, false)
VALUE_HOOK(cuStreamWriteValue32_v2_ptsz, cuuint32_t, true)
VALUE_HOOK(cuStreamWriteValue64, cuuint64_t, false)
VALUE_HOOK(cuStreamWriteValue64_ptsz, cuuint64_t, true)
VALUE_HOOK(cuStreamWriteValue64_v2, cuuint64_t, false)
VALUE_HOOK(cuStreamWriteValue64_v2_ptsz, cuuint64_t, true)
VALUE_HOOK(cuStreamWaitValue32, cuuint32_t, false)
VALUE_HOOK(cuStreamWaitValue32_ptsz, cuuint32_t, true)
VALUE_HOOK(cuStreamWaitValue32_v2, cuuint32_t, false)
VALUE_HOOK(cuStreamWaitValue32_v2_ptsz, cuuint32_t, true)
VALUE_HOOK(cuStreamWaitValue64, cuuint64_t, false)
VALUE_HOOK(cuStreamWaitValue64_ptsz, cuuint64_t, true)
VALUE_HOOK(cuStreamWaitValue64_v2, cuuint64_t, false)
VALUE_HOOK(cuStreamWaitValue64_v2_ptsz, cuuint64_t, true)

/* The words a batch writes or waits on (at most 256 operations, as the driver allows). */
static int memop_addrs(const CUstreamBatchMemOpParams *p, unsigned count, uint64_t *a) {
    int n = 0;
    for (unsigned i = 0; p != NULL && i < count && i < 256; i++) {
        if (p[i].operation == CU_STREAM_MEM_OP_WAIT_VALUE_32 ||
            p[i].operation == CU_STREAM_MEM_OP_WAIT_VALUE_64)
            a[n++] = p[i].waitValue.address;
        else if (p[i].operation == CU_STREAM_MEM_OP_WRITE_VALUE_32 ||
                 p[i].operation == CU_STREAM_MEM_OP_WRITE_VALUE_64)
            a[n++] = p[i].writeValue.address;
    }
    return n;
}

#define BATCH_MEMOP_HOOK(exp, PT)                                                                  \
    CUresult exp(CUstream s, unsigned int count, CUstreamBatchMemOpParams *p, unsigned int f) {    \
        uint64_t a[256];                                                                           \
        int n = memop_addrs(p, count, a);                                                          \
        ACCESS(exp, a, n, s, PT, ho_real.exp(s, count, p, f));                                     \
    }

BATCH_MEMOP_HOOK(cuStreamBatchMemOp, false)
BATCH_MEMOP_HOOK(cuStreamBatchMemOp_ptsz, true)
BATCH_MEMOP_HOOK(cuStreamBatchMemOp_v2, false)
BATCH_MEMOP_HOOK(cuStreamBatchMemOp_v2_ptsz, true)
