/* memcpy and memset families, synchronous and asynchronous, and the copy-engine timing model. */
#include "sim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool device_side(uint64_t addr) {
    struct sim_lookup lk;
    sim_lookup(addr, &lk);
    return lk.loc == SIM_LOC_DEVICE || lk.loc == SIM_LOC_MANAGED;
}

enum sim_copy_dir sim_classify_copy(uint64_t dst, uint64_t src) {
    bool d = device_side(dst), s = device_side(src);
    if (d && s) return SIM_D2D;
    if (d) return SIM_H2D;
    if (s) return SIM_D2H;
    return SIM_H2H;
}

/* The host link: one engine per direction, each a FIFO of transfers (copies, and the zero-copy
 * traffic of kernels touching host-located memory). Alone a direction moves at its own rate;
 * while both run, each moves at its own measured duplex rate (PCIe Gen5: host-to-device about 35,
 * device-to-host about 53 GB/s), whichever started first.
 *
 * Operations are timed in enqueue order, so when a transfer starts while the other direction is
 * busy, the other direction's work was timed as if alone and its end may already be known to
 * the program. This transfer is timed at its duplex rate for the overlap, and the other
 * direction's slowdown for the same overlap is charged to that direction: its engine stays busy
 * until the bytes it lost have moved, so its next transfer starts later. Each direction's
 * throughput is then the measured one; only the other direction's transfer in flight reports
 * its end early, by at most that slowdown (docs/simcuda.md). */
uint64_t sim_link_transfer(struct sim_device *dev, bool to_device, uint64_t bytes, double solo,
                           double dup, uint64_t *start_ns) {
    struct sim_engine *own = to_device ? &dev->h2d : &dev->d2h;
    struct sim_engine *other = to_device ? &dev->d2h : &dev->h2d;
    if (dup > solo) dup = solo;
    if (own->free_ns > *start_ns) *start_ns = own->free_ns;
    const bool new_run = *start_ns > own->free_ns || own->free_ns == 0;
    double t = (double)*start_ns, left = (double)bytes;
    const double o_free = (double)other->free_ns;
    double o_new_free = o_free;
    if (o_free > t) {
        /* Alone until the other direction's current run begins. */
        double o_from = (double)other->run_ns;
        if (o_from > t) {
            double alone = (o_from - t) * solo;
            if (alone >= left) {
                t += left / solo;
                left = 0;
            } else {
                left -= alone;
                t = o_from;
            }
        }
        if (left > 0 && o_free > t) {
            /* Both run: the other's remaining bytes were timed at its rate alone. */
            double o_solo = other->solo, o_dup = other->dup < o_solo ? other->dup : o_solo;
            double o_left = (o_free - t) * o_solo;
            double mine = left / dup, theirs = o_left / o_dup;
            if (mine <= theirs) {
                o_new_free = t + mine + (o_left - mine * o_dup) / o_solo;
                t += mine;
                left = 0;
            } else {
                left -= theirs * dup;
                t += theirs;
                o_new_free = t;
            }
        }
    }
    if (left > 0) t += left / solo;
    uint64_t end = (uint64_t)ceil(t);
    if (bytes > 0 && end == *start_ns) end++; /* a non-empty transfer always takes time */
    if (new_run) own->run_ns = *start_ns;
    own->free_ns = end;
    own->solo = solo;
    own->dup = dup;
    uint64_t o_end = (uint64_t)ceil(o_new_free);
    if (o_end > other->free_ns) other->free_ns = o_end;
    return end - *start_ns;
}

uint64_t sim_copy_duration(struct sim_device *dev, enum sim_copy_dir dir, uint64_t bytes,
                           uint64_t *start_ns) {
    const struct sim_link *l = sim_link();
    if (dir == SIM_D2D) return sim_bytes_ns(bytes, l->hbm);
    /* Host-to-host copies use the host-to-device engine. */
    if (dir == SIM_D2H)
        return sim_link_transfer(dev, false, bytes, l->d2h, l->d2h_duplex, start_ns);
    return sim_link_transfer(dev, true, bytes, l->h2d, l->h2d_duplex, start_ns);
}

struct copy_req {
    uint64_t dst, src;
    size_t width, height, dpitch, spitch;
    bool sync;
    bool per_thread;
    CUstream stream;
    int explicit_dir; /* -1: unified (classify), else the enum sim_copy_dir the API names */
};

/* Returns true when addr has a device address the simulator knows (for explicit-direction
 * checks). With unified addressing, pinned and registered host memory is mapped for the device at
 * the same address, so the driver accepts it as the device side of cuMemcpyDtoD and friends;
 * only memory it does not know (pageable) is refused. */
static bool known_device(uint64_t addr) {
    struct sim_lookup lk;
    sim_lookup(addr, &lk);
    return lk.range != NULL;
}

static bool pageable(uint64_t addr) {
    return sim_range_find(addr) == NULL;
}

static CUresult copy_submit(const struct copy_req *q) {
    struct sim_ctx *c;
    sim_bill(q->sync ? SIM_COST_MEMCPY : SIM_COST_MEMCPY_ASYNC, SIM_AT_DEVICE,
             (uint64_t)q->width * q->height);
    CUresult rc = sim_require_ctx(&c);
    if (rc != CUDA_SUCCESS) return rc;
    if (q->width == 0 || q->height == 0) return CUDA_SUCCESS;
    if (q->dst == 0 || q->src == 0) return CUDA_ERROR_INVALID_VALUE;
    struct sim_stream *s = sim_stream_resolve(q->stream, q->per_thread, &rc);
    if (s == NULL) return rc;
    if (q->sync && (rc = sim_capture_check_unsafe()) != CUDA_SUCCESS) return rc;
    if ((rc = sim_fail_check(q->sync ? "cuMemcpy" : "cuMemcpyAsync")) != CUDA_SUCCESS) return rc;
    sim_lock();
    if (sim.sticky != CUDA_SUCCESS) {
        rc = sim.sticky;
        goto out;
    }
    enum sim_copy_dir dir = sim_classify_copy(q->dst, q->src);
    if (q->explicit_dir >= 0) {
        /* The API's direction names which side must be device memory; the time a copy takes
         * depends on where the bytes really are (a "device" pointer may be host-mapped VMM). */
        enum sim_copy_dir named = (enum sim_copy_dir)q->explicit_dir;
        bool dst_dev = named == SIM_H2D || named == SIM_D2D;
        bool src_dev = named == SIM_D2H || named == SIM_D2D;
        if ((dst_dev && !known_device(q->dst)) || (src_dev && !known_device(q->src))) {
            rc = CUDA_ERROR_INVALID_VALUE;
            goto out;
        }
    }
    struct sim_op *op = sim_op_new(SIM_OP_COPY, s);
    if (op == NULL) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    struct sim_copy_op *cp = &op->u.copy;
    cp->dst = (void *)(uintptr_t)q->dst;
    cp->src = (const void *)(uintptr_t)q->src;
    cp->bytes = q->width;
    cp->height = q->height;
    cp->dst_pitch = q->dpitch;
    cp->src_pitch = q->spitch;
    cp->dir = dir;
    uint64_t dspan = (q->height - 1) * q->dpitch + q->width;
    uint64_t sspan = (q->height - 1) * q->spitch + q->width;
    sim_op_add_ref(op, q->dst, dspan);
    sim_op_add_ref(op, q->src, sspan);
    bool must_wait = q->sync;
    /* Pageable host memory: the driver stages a pageable source before returning, and copies to
     * a pageable destination synchronously. */
    if (!q->sync && sim.cfg.data == SIM_DATA_FULL && pageable(q->src) && dir != SIM_D2D) {
        cp->staging = malloc(sspan);
        if (cp->staging == NULL) {
            sim_op_release(op);
            rc = CUDA_ERROR_OUT_OF_MEMORY;
            goto out;
        }
        memcpy(cp->staging, cp->src, sspan);
        cp->src_pitch = q->spitch;
    }
    if (pageable(q->dst) && dir != SIM_D2D) must_wait = true;
    if (sim_capture_intercept(s, op, &rc)) {
        sim_op_release(op);
        goto out;
    }
    sim_op_enqueue(op);
    if (must_wait) rc = sim_stream_sync_locked(s);
    sim_op_release(op);
out:
    sim_unlock();
    return rc;
}

#define COPY1D(dst, src, n, sync, pt, stream, dir)                                                 \
    copy_submit(&(struct copy_req){(uint64_t)(uintptr_t)(dst), (uint64_t)(uintptr_t)(src), (n), 1, \
                                   (n), (n), (sync), (pt), (stream), (dir)})

/* Unified, explicit-direction, sync and async entry points, legacy and per-thread. */
#define COPY_ENTRY_POINTS(S_SYNC, S_ASYNC, PT)                                                     \
    SIM_EXPORT CUresult cuMemcpy##S_SYNC(CUdeviceptr d, CUdeviceptr s, size_t n) {                 \
        return COPY1D(d, s, n, true, PT, NULL, -1);                                                \
    }                                                                                              \
    SIM_EXPORT CUresult cuMemcpyAsync##S_ASYNC(CUdeviceptr d, CUdeviceptr s, size_t n,             \
                                               CUstream st) {                                      \
        return COPY1D(d, s, n, false, PT, st, -1);                                                 \
    }                                                                                              \
    SIM_EXPORT CUresult cuMemcpyHtoD_v2##S_SYNC(CUdeviceptr d, const void *s, size_t n) {          \
        return COPY1D(d, s, n, true, PT, NULL, SIM_H2D);                                           \
    }                                                                                              \
    SIM_EXPORT CUresult cuMemcpyDtoH_v2##S_SYNC(void *d, CUdeviceptr s, size_t n) {                \
        return COPY1D(d, s, n, true, PT, NULL, SIM_D2H);                                           \
    }                                                                                              \
    SIM_EXPORT CUresult cuMemcpyDtoD_v2##S_SYNC(CUdeviceptr d, CUdeviceptr s, size_t n) {          \
        return COPY1D(d, s, n, true, PT, NULL, SIM_D2D);                                           \
    }                                                                                              \
    SIM_EXPORT CUresult cuMemcpyHtoDAsync_v2##S_ASYNC(CUdeviceptr d, const void *s, size_t n,      \
                                                      CUstream st) {                               \
        return COPY1D(d, s, n, false, PT, st, SIM_H2D);                                            \
    }                                                                                              \
    SIM_EXPORT CUresult cuMemcpyDtoHAsync_v2##S_ASYNC(void *d, CUdeviceptr s, size_t n,            \
                                                      CUstream st) {                               \
        return COPY1D(d, s, n, false, PT, st, SIM_D2H);                                            \
    }                                                                                              \
    SIM_EXPORT CUresult cuMemcpyDtoDAsync_v2##S_ASYNC(CUdeviceptr d, CUdeviceptr s, size_t n,      \
                                                      CUstream st) {                               \
        return COPY1D(d, s, n, false, PT, st, SIM_D2D);                                            \
    }                                                                                              \
    SIM_EXPORT CUresult cuMemcpyPeer##S_SYNC(CUdeviceptr d, CUcontext dc, CUdeviceptr s,           \
                                             CUcontext sc, size_t n) {                             \
        (void)dc;                                                                                  \
        (void)sc;                                                                                  \
        return COPY1D(d, s, n, true, PT, NULL, SIM_D2D);                                           \
    }                                                                                              \
    SIM_EXPORT CUresult cuMemcpyPeerAsync##S_ASYNC(CUdeviceptr d, CUcontext dc, CUdeviceptr s,     \
                                                   CUcontext sc, size_t n, CUstream st) {          \
        (void)dc;                                                                                  \
        (void)sc;                                                                                  \
        return COPY1D(d, s, n, false, PT, st, SIM_D2D);                                            \
    }

COPY_ENTRY_POINTS(, , false)
COPY_ENTRY_POINTS(_ptds, _ptsz, true)

/* 2D copies between host and device memory (arrays are not simulated). */
static CUresult copy2d(const CUDA_MEMCPY2D *p, bool sync, bool pt, CUstream st) {
    if (p == NULL) return CUDA_ERROR_INVALID_VALUE;
    uint64_t dst = 0, src = 0;
    switch (p->srcMemoryType) {
    case CU_MEMORYTYPE_HOST:
        src = (uint64_t)(uintptr_t)p->srcHost;
        break;
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_UNIFIED:
        src = p->srcDevice;
        break;
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    switch (p->dstMemoryType) {
    case CU_MEMORYTYPE_HOST:
        dst = (uint64_t)(uintptr_t)p->dstHost;
        break;
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_UNIFIED:
        dst = p->dstDevice;
        break;
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    if ((p->Height > 1 && (p->srcPitch < p->WidthInBytes || p->dstPitch < p->WidthInBytes)))
        return CUDA_ERROR_INVALID_VALUE;
    src += p->srcY * p->srcPitch + p->srcXInBytes;
    dst += p->dstY * p->dstPitch + p->dstXInBytes;
    struct copy_req q = {dst, src, p->WidthInBytes, p->Height, p->dstPitch, p->srcPitch, sync, pt,
                         st,  -1};
    return copy_submit(&q);
}

SIM_EXPORT CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *p) {
    return copy2d(p, true, false, NULL);
}
SIM_EXPORT CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *p) {
    return copy2d(p, true, false, NULL);
}
SIM_EXPORT CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *p, CUstream st) {
    return copy2d(p, false, false, st);
}
SIM_EXPORT CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *p) {
    return copy2d(p, true, true, NULL);
}
SIM_EXPORT CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *p) {
    return copy2d(p, true, true, NULL);
}
SIM_EXPORT CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *p, CUstream st) {
    return copy2d(p, false, true, st);
}

/* ------------------------------------------------------------------------------- memsets */

struct memset_req {
    uint64_t dst;
    unsigned value, elem;
    size_t count, height, pitch;
    bool sync, per_thread;
    CUstream stream;
};

static CUresult memset_submit(const struct memset_req *q) {
    struct sim_ctx *c;
    CUresult rc = sim_require_ctx(&c);
    if (rc != CUDA_SUCCESS) return rc;
    if (q->count == 0 || q->height == 0) return CUDA_SUCCESS;
    if ((q->dst % q->elem) != 0) return CUDA_ERROR_INVALID_VALUE;
    struct sim_stream *s = sim_stream_resolve(q->stream, q->per_thread, &rc);
    if (s == NULL) return rc;
    sim_lock();
    if (!known_device(q->dst) && sim_range_find(q->dst) == NULL) {
        sim_unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    rc = sim.sticky;
    struct sim_op *op = rc == CUDA_SUCCESS ? sim_op_new(SIM_OP_MEMSET, s) : NULL;
    if (op == NULL) {
        sim_unlock();
        return rc != CUDA_SUCCESS ? rc : CUDA_ERROR_OUT_OF_MEMORY;
    }
    op->u.memset.dst = (void *)(uintptr_t)q->dst;
    op->u.memset.value = q->value;
    op->u.memset.elem = q->elem;
    op->u.memset.count = q->count;
    op->u.memset.height = q->height;
    op->u.memset.pitch = q->pitch;
    sim_op_add_ref(op, q->dst, (q->height - 1) * q->pitch + q->count * q->elem);
    if (!sim_capture_intercept(s, op, &rc)) {
        sim_op_enqueue(op);
        /* Synchronous memsets of device memory are asynchronous to the host; of host memory
         * they complete before returning. */
        if (q->sync && !device_side(q->dst)) rc = sim_stream_sync_locked(s);
    }
    sim_op_release(op);
    sim_unlock();
    return rc;
}

#define MEMSET1(d, v, e, n, sync, pt, st)                                                          \
    memset_submit(&(struct memset_req){(d), (v), (e), (n), 1, (n) * (e), (sync), (pt), (st)})
#define MEMSET2(d, p, v, e, w, h, sync, pt, st)                                                    \
    memset_submit(&(struct memset_req){(d), (v), (e), (w), (h), (p), (sync), (pt), (st)})

#define MEMSET_ENTRY_POINTS(S_SYNC, S_ASYNC, PT)                                                   \
    SIM_EXPORT CUresult cuMemsetD8_v2##S_SYNC(CUdeviceptr d, unsigned char v, size_t n) {          \
        return MEMSET1(d, v, 1, n, true, PT, NULL);                                                \
    }                                                                                              \
    SIM_EXPORT CUresult cuMemsetD16_v2##S_SYNC(CUdeviceptr d, unsigned short v, size_t n) {        \
        return MEMSET1(d, v, 2, n, true, PT, NULL);                                                \
    }                                                                                              \
    SIM_EXPORT CUresult cuMemsetD32_v2##S_SYNC(CUdeviceptr d, unsigned int v, size_t n) {          \
        return MEMSET1(d, v, 4, n, true, PT, NULL);                                                \
    }                                                                                              \
    SIM_EXPORT CUresult cuMemsetD2D8_v2##S_SYNC(CUdeviceptr d, size_t p, unsigned char v,          \
                                                size_t w, size_t h) {                              \
        return MEMSET2(d, p, v, 1, w, h, true, PT, NULL);                                          \
    }                                                                                              \
    SIM_EXPORT CUresult cuMemsetD2D16_v2##S_SYNC(CUdeviceptr d, size_t p, unsigned short v,        \
                                                 size_t w, size_t h) {                             \
        return MEMSET2(d, p, v, 2, w, h, true, PT, NULL);                                          \
    }                                                                                              \
    SIM_EXPORT CUresult cuMemsetD2D32_v2##S_SYNC(CUdeviceptr d, size_t p, unsigned int v,          \
                                                 size_t w, size_t h) {                             \
        return MEMSET2(d, p, v, 4, w, h, true, PT, NULL);                                          \
    }                                                                                              \
    SIM_EXPORT CUresult cuMemsetD8Async##S_ASYNC(CUdeviceptr d, unsigned char v, size_t n,         \
                                                 CUstream st) {                                    \
        return MEMSET1(d, v, 1, n, false, PT, st);                                                 \
    }                                                                                              \
    SIM_EXPORT CUresult cuMemsetD16Async##S_ASYNC(CUdeviceptr d, unsigned short v, size_t n,       \
                                                  CUstream st) {                                   \
        return MEMSET1(d, v, 2, n, false, PT, st);                                                 \
    }                                                                                              \
    SIM_EXPORT CUresult cuMemsetD32Async##S_ASYNC(CUdeviceptr d, unsigned int v, size_t n,         \
                                                  CUstream st) {                                   \
        return MEMSET1(d, v, 4, n, false, PT, st);                                                 \
    }                                                                                              \
    SIM_EXPORT CUresult cuMemsetD2D8Async##S_ASYNC(CUdeviceptr d, size_t p, unsigned char v,       \
                                                   size_t w, size_t h, CUstream st) {              \
        return MEMSET2(d, p, v, 1, w, h, false, PT, st);                                           \
    }                                                                                              \
    SIM_EXPORT CUresult cuMemsetD2D16Async##S_ASYNC(CUdeviceptr d, size_t p, unsigned short v,     \
                                                    size_t w, size_t h, CUstream st) {             \
        return MEMSET2(d, p, v, 2, w, h, false, PT, st);                                           \
    }                                                                                              \
    SIM_EXPORT CUresult cuMemsetD2D32Async##S_ASYNC(CUdeviceptr d, size_t p, unsigned int v,       \
                                                    size_t w, size_t h, CUstream st) {             \
        return MEMSET2(d, p, v, 4, w, h, false, PT, st);                                           \
    }

MEMSET_ENTRY_POINTS(, , false)
MEMSET_ENTRY_POINTS(_ptds, _ptsz, true)
