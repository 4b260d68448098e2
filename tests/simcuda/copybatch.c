/* Batch and 3D peer copies: cuMemcpyBatchAsync (both ABIs), cuMemcpy3DBatchAsync (both ABIs) and
 * cuMemcpy3DPeer(Async), legacy and per-thread. Each copy of a batch is one copy on the stream, in
 * list order, exactly as if made with cuMemcpyAsync / cuMemcpy2DAsync one after another: the
 * same direction rules, copy engines, hazards and faults. The attributes (source access order,
 * location hints) only allow the driver to reorder or overlap what it may; running in order
 * honours all of them. Array operands are CUDA_ERROR_NOT_SUPPORTED: the simulator has no arrays
 * (so neither has it cuMemcpyAtoD/DtoA, which stay "not supported" stubs). */
#define __CUDA_API_VERSION_INTERNAL 1
#include "sim.h"

#include <string.h>

CUresult cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st);
CUresult cuMemcpyAsync_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st);
CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *p, CUstream st);
CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *p, CUstream st);
CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *p);
CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *p);

static CUresult batch_1d(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                         CUmemcpyAttributes *attrs, size_t *idxs, size_t nattrs, size_t *fail,
                         CUstream s, bool pt) {
    if (fail != NULL) *fail = SIZE_MAX;
    if (count == 0 || dsts == NULL || srcs == NULL || sizes == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (nattrs == 0 || attrs == NULL || idxs == NULL || idxs[0] != 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 1; i < nattrs; i++)
        if (idxs[i] <= idxs[i - 1] || idxs[i] >= count) return CUDA_ERROR_INVALID_VALUE;
    if (s == NULL || s == CU_STREAM_LEGACY) return CUDA_ERROR_INVALID_VALUE; /* as documented */
    for (size_t i = 0; i < count; i++) {
        CUresult rc = pt ? cuMemcpyAsync_ptsz(dsts[i], srcs[i], sizes[i], s)
                         : cuMemcpyAsync(dsts[i], srcs[i], sizes[i], s);
        if (rc != CUDA_SUCCESS) {
            if (fail != NULL) *fail = i;
            return rc;
        }
    }
    return CUDA_SUCCESS;
}

/* One pointer operand's side of a 2D slice. */
static void operand_side(const CUmemcpy3DOperand *o, const CUextent3D *e, size_t z, bool dst,
                         CUDA_MEMCPY2D *p) {
    size_t pitch = o->op.ptr.rowLength != 0 ? o->op.ptr.rowLength : e->width;
    size_t layer = o->op.ptr.layerHeight != 0 ? o->op.ptr.layerHeight : e->height;
    CUdeviceptr at = o->op.ptr.ptr + z * pitch * layer;
    if (dst) {
        p->dstMemoryType = CU_MEMORYTYPE_UNIFIED;
        p->dstDevice = at;
        p->dstPitch = pitch;
    } else {
        p->srcMemoryType = CU_MEMORYTYPE_UNIFIED;
        p->srcDevice = at;
        p->srcPitch = pitch;
    }
}

static CUresult batch_3d(size_t n, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *fail,
                         unsigned long long flags, CUstream s, bool pt) {
    if (fail != NULL) *fail = SIZE_MAX;
    if (n == 0 || ops == NULL || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (s == NULL || s == CU_STREAM_LEGACY) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < n; i++) {
        const CUDA_MEMCPY3D_BATCH_OP *o = &ops[i];
        if (o->src.type != CU_MEMCPY_OPERAND_TYPE_POINTER ||
            o->dst.type != CU_MEMCPY_OPERAND_TYPE_POINTER) {
            if (fail != NULL) *fail = i;
            return CUDA_ERROR_NOT_SUPPORTED;
        }
        if (o->extent.width == 0 || o->extent.height == 0 || o->extent.depth == 0) {
            if (fail != NULL) *fail = i;
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    for (size_t i = 0; i < n; i++) {
        const CUDA_MEMCPY3D_BATCH_OP *o = &ops[i];
        for (size_t z = 0; z < o->extent.depth; z++) {
            CUDA_MEMCPY2D p;
            memset(&p, 0, sizeof p);
            operand_side(&o->src, &o->extent, z, false, &p);
            operand_side(&o->dst, &o->extent, z, true, &p);
            p.WidthInBytes = o->extent.width;
            p.Height = o->extent.height;
            CUresult rc = pt ? cuMemcpy2DAsync_v2_ptsz(&p, s) : cuMemcpy2DAsync_v2(&p, s);
            if (rc != CUDA_SUCCESS) {
                if (fail != NULL) *fail = i;
                return rc;
            }
        }
    }
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemcpyBatchAsync(CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t count,
                                       CUmemcpyAttributes *a, size_t *ai, size_t na, size_t *fail,
                                       CUstream st) {
    return batch_1d(d, s, n, count, a, ai, na, fail, st, false);
}
SIM_EXPORT CUresult cuMemcpyBatchAsync_ptsz(CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t count,
                                            CUmemcpyAttributes *a, size_t *ai, size_t na,
                                            size_t *fail, CUstream st) {
    return batch_1d(d, s, n, count, a, ai, na, fail, st, true);
}
SIM_EXPORT CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t count,
                                          CUmemcpyAttributes *a, size_t *ai, size_t na,
                                          CUstream st) {
    return batch_1d(d, s, n, count, a, ai, na, NULL, st, false);
}
SIM_EXPORT CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *d, CUdeviceptr *s, size_t *n,
                                               size_t count, CUmemcpyAttributes *a, size_t *ai,
                                               size_t na, CUstream st) {
    return batch_1d(d, s, n, count, a, ai, na, NULL, st, true);
}
SIM_EXPORT CUresult cuMemcpy3DBatchAsync(size_t n, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *fail,
                                         unsigned long long flags, CUstream st) {
    return batch_3d(n, ops, fail, flags, st, false);
}
SIM_EXPORT CUresult cuMemcpy3DBatchAsync_ptsz(size_t n, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *fail,
                                              unsigned long long flags, CUstream st) {
    return batch_3d(n, ops, fail, flags, st, true);
}
SIM_EXPORT CUresult cuMemcpy3DBatchAsync_v2(size_t n, CUDA_MEMCPY3D_BATCH_OP *ops,
                                            unsigned long long flags, CUstream st) {
    return batch_3d(n, ops, NULL, flags, st, false);
}
SIM_EXPORT CUresult cuMemcpy3DBatchAsync_v2_ptsz(size_t n, CUDA_MEMCPY3D_BATCH_OP *ops,
                                                 unsigned long long flags, CUstream st) {
    return batch_3d(n, ops, NULL, flags, st, true);
}

/* A 3D copy between contexts: one 2D copy per slice (the contexts only say where each side
 * lives, which unified addressing already tells). */
static CUresult copy3d_peer(const CUDA_MEMCPY3D_PEER *p, bool sync, bool pt, CUstream st) {
    if (p == NULL) return CUDA_ERROR_INVALID_VALUE;
    if (p->srcMemoryType == CU_MEMORYTYPE_ARRAY || p->dstMemoryType == CU_MEMORYTYPE_ARRAY)
        return CUDA_ERROR_NOT_SUPPORTED;
    size_t depth = p->Depth < 1 ? 1 : p->Depth;
    size_t sh = p->srcHeight != 0 ? p->srcHeight : p->Height;
    size_t dh = p->dstHeight != 0 ? p->dstHeight : p->Height;
    for (size_t z = 0; z < depth; z++) {
        CUDA_MEMCPY2D q;
        memset(&q, 0, sizeof q);
        q.srcXInBytes = p->srcXInBytes;
        q.srcY = p->srcY + (p->srcZ + z) * sh;
        q.srcMemoryType = p->srcMemoryType;
        q.srcHost = p->srcHost;
        q.srcDevice = p->srcDevice;
        q.srcPitch = p->srcPitch != 0 ? p->srcPitch : p->WidthInBytes;
        q.dstXInBytes = p->dstXInBytes;
        q.dstY = p->dstY + (p->dstZ + z) * dh;
        q.dstMemoryType = p->dstMemoryType;
        q.dstHost = p->dstHost;
        q.dstDevice = p->dstDevice;
        q.dstPitch = p->dstPitch != 0 ? p->dstPitch : p->WidthInBytes;
        q.WidthInBytes = p->WidthInBytes;
        q.Height = p->Height < 1 ? 1 : p->Height;
        CUresult rc;
        if (sync)
            rc = pt ? cuMemcpy2D_v2_ptds(&q) : cuMemcpy2D_v2(&q);
        else
            rc = pt ? cuMemcpy2DAsync_v2_ptsz(&q, st) : cuMemcpy2DAsync_v2(&q, st);
        if (rc != CUDA_SUCCESS) return rc;
    }
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *p) {
    return copy3d_peer(p, true, false, NULL);
}
SIM_EXPORT CUresult cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER *p) {
    return copy3d_peer(p, true, true, NULL);
}
SIM_EXPORT CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *p, CUstream st) {
    return copy3d_peer(p, false, false, st);
}
SIM_EXPORT CUresult cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER *p, CUstream st) {
    return copy3d_peer(p, false, true, st);
}
