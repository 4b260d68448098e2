/* Copy and memset hooks: each marks the tracked buffers it touches. The parameter lists are
 * written out; the declarations from hooks.def make the compiler check them. */
#include "hook.h"
#include "trace_args.h"
#include "track_learn.h"

#define HO_REALP(exp, ARGS) (ho_real.exp != NULL ? ho_real.exp ARGS : CUDA_ERROR_NOT_SUPPORTED)

static void copied(uint64_t dst, uint64_t src) {
    ho_track_touch(dst);
    ho_track_touch(src);
    ho_count(&ho_stats.counts_copies, 1);
}

static void memset_done(uint64_t dst) {
    ho_track_touch(dst);
    ho_count(&ho_stats.counts_memsets, 1);
}

/* Offload mode: a copy or memset reads and writes buffers wherever they are (a host-mapped
 * buffer is as good a copy endpoint as a resident one), so it never restores; it only makes a
 * move in flight give way and announces the use. */
static void access_begin(uint64_t a, uint64_t b, CUstream s, bool pt, struct ho_engine_touch *t) {
    const uint64_t addrs[2] = {a, b};
    ho_track_access_begin(addrs, b != 0 ? 2 : 1, s, pt, false, t);
}

#define P(x) ((uint64_t)(uintptr_t)(x))

/* A hook that calls the driver, then reports what it touched (and to the trace, its size). PRE
 * runs first (host-to-device copies learn pointer arrays: track_learn.h). */
#define COPY_HOOK(exp, PARAMS, ARGS, DST, SRC, STREAM, PT)                                         \
    COPY_HOOK_PRE(exp, PARAMS, ARGS, DST, SRC, STREAM, PT, (void)0)
#define HTOD_HOOK(exp, PARAMS, ARGS, DST, SRC, STREAM, PT)                                         \
    COPY_HOOK_PRE(exp, PARAMS, ARGS, DST, SRC, STREAM, PT,                                         \
                  if (ho_offloading()) ho_learn_copy_in(P(DST), SRC, n))
#define COPY_HOOK_PRE(exp, PARAMS, ARGS, DST, SRC, STREAM, PT, PRE)                                \
    CUresult exp PARAMS {                                                                          \
        HO_ENTER(exp);                                                                             \
        PRE;                                                                                       \
        uint64_t tt_ = ho_trace_begin();                                                           \
        if (ho_offloading()) {                                                                     \
            struct ho_engine_touch t_;                                                             \
            access_begin(P(DST), P(SRC), STREAM, PT, &t_);                                         \
            CUresult rc = HO_REALP(exp, ARGS);                                                     \
            ho_engine_finish(&t_, STREAM, PT, rc == CUDA_SUCCESS);                                 \
            if (rc == CUDA_SUCCESS) ho_count(&ho_stats.counts_copies, 1);                          \
            ho_trace_copy(tt_, P(DST), P(SRC), HO_COPY_BYTES ARGS, STREAM, PT, #exp, rc);          \
            return rc;                                                                             \
        }                                                                                          \
        CUresult rc = HO_REALP(exp, ARGS);                                                         \
        if (rc == CUDA_SUCCESS && ho_tracking()) copied(P(DST), P(SRC));                           \
        ho_trace_copy(tt_, P(DST), P(SRC), HO_COPY_BYTES ARGS, STREAM, PT, #exp, rc);              \
        return rc;                                                                                 \
    }

#define MEMSET_HOOK(exp, PARAMS, ARGS, STREAM, PT)                                                 \
    CUresult exp PARAMS {                                                                          \
        HO_ENTER(exp);                                                                             \
        uint64_t tt_ = ho_trace_begin();                                                           \
        if (ho_offloading()) {                                                                     \
            struct ho_engine_touch t_;                                                             \
            access_begin(d, 0, STREAM, PT, &t_);                                                   \
            CUresult rc = HO_REALP(exp, ARGS);                                                     \
            ho_engine_finish(&t_, STREAM, PT, rc == CUDA_SUCCESS);                                 \
            if (rc == CUDA_SUCCESS) ho_count(&ho_stats.counts_memsets, 1);                         \
            ho_trace_memset(tt_, d, HO_MEMSET_BYTES ARGS, STREAM, PT, #exp, rc);                   \
            return rc;                                                                             \
        }                                                                                          \
        CUresult rc = HO_REALP(exp, ARGS);                                                         \
        if (rc == CUDA_SUCCESS && ho_tracking()) memset_done(d);                                   \
        ho_trace_memset(tt_, d, HO_MEMSET_BYTES ARGS, STREAM, PT, #exp, rc);                       \
        return rc;                                                                                 \
    }

COPY_HOOK(cuMemcpy, (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n), d, s, NULL, false)
COPY_HOOK(cuMemcpy_ptds, (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n), d, s, NULL, true)
COPY_HOOK(cuMemcpyAsync, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st), (d, s, n, st), d, s,
          st, false)
COPY_HOOK(cuMemcpyAsync_ptsz, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st), (d, s, n, st),
          d, s, st, true)
HTOD_HOOK(cuMemcpyHtoD_v2, (CUdeviceptr d, const void *s, size_t n), (d, s, n), d, s, NULL, false)
HTOD_HOOK(cuMemcpyHtoD_v2_ptds, (CUdeviceptr d, const void *s, size_t n), (d, s, n), d, s, NULL,
          true)
COPY_HOOK(cuMemcpyDtoH_v2, (void *d, CUdeviceptr s, size_t n), (d, s, n), d, s, NULL, false)
COPY_HOOK(cuMemcpyDtoH_v2_ptds, (void *d, CUdeviceptr s, size_t n), (d, s, n), d, s, NULL, true)
COPY_HOOK(cuMemcpyDtoD_v2, (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n), d, s, NULL, false)
COPY_HOOK(cuMemcpyDtoD_v2_ptds, (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n), d, s, NULL,
          true)
HTOD_HOOK(cuMemcpyHtoDAsync_v2, (CUdeviceptr d, const void *s, size_t n, CUstream st),
          (d, s, n, st), d, s, st, false)
HTOD_HOOK(cuMemcpyHtoDAsync_v2_ptsz, (CUdeviceptr d, const void *s, size_t n, CUstream st),
          (d, s, n, st), d, s, st, true)
COPY_HOOK(cuMemcpyDtoHAsync_v2, (void *d, CUdeviceptr s, size_t n, CUstream st), (d, s, n, st), d,
          s, st, false)
COPY_HOOK(cuMemcpyDtoHAsync_v2_ptsz, (void *d, CUdeviceptr s, size_t n, CUstream st), (d, s, n, st),
          d, s, st, true)
COPY_HOOK(cuMemcpyDtoDAsync_v2, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st),
          (d, s, n, st), d, s, st, false)
COPY_HOOK(cuMemcpyDtoDAsync_v2_ptsz, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st),
          (d, s, n, st), d, s, st, true)
COPY_HOOK(cuMemcpyPeer, (CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n),
          (d, dc, s, sc, n), d, s, NULL, false)
COPY_HOOK(cuMemcpyPeer_ptds, (CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n),
          (d, dc, s, sc, n), d, s, NULL, true)
COPY_HOOK(cuMemcpyPeerAsync,
          (CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream st),
          (d, dc, s, sc, n, st), d, s, st, false)
COPY_HOOK(cuMemcpyPeerAsync_ptsz,
          (CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream st),
          (d, dc, s, sc, n, st), d, s, st, true)

/* Where a 2D or 3D copy's source and destination are, by their memory types. */
static uint64_t side(CUmemorytype t, const void *host, CUdeviceptr dev) {
    if (t == CU_MEMORYTYPE_HOST) return P(host);
    if (t == CU_MEMORYTYPE_DEVICE || t == CU_MEMORYTYPE_UNIFIED) return dev;
    return 0; /* arrays are not tracked buffers */
}

#define DST2(p) ((p) != NULL ? side((p)->dstMemoryType, (p)->dstHost, (p)->dstDevice) : 0)
#define SRC2(p) ((p) != NULL ? side((p)->srcMemoryType, (p)->srcHost, (p)->srcDevice) : 0)

COPY_HOOK(cuMemcpy2D_v2, (const CUDA_MEMCPY2D *p), (p), DST2(p), SRC2(p), NULL, false)
COPY_HOOK(cuMemcpy2D_v2_ptds, (const CUDA_MEMCPY2D *p), (p), DST2(p), SRC2(p), NULL, true)
COPY_HOOK(cuMemcpy2DUnaligned_v2, (const CUDA_MEMCPY2D *p), (p), DST2(p), SRC2(p), NULL, false)
COPY_HOOK(cuMemcpy2DUnaligned_v2_ptds, (const CUDA_MEMCPY2D *p), (p), DST2(p), SRC2(p), NULL, true)
COPY_HOOK(cuMemcpy2DAsync_v2, (const CUDA_MEMCPY2D *p, CUstream st), (p, st), DST2(p), SRC2(p), st,
          false)
COPY_HOOK(cuMemcpy2DAsync_v2_ptsz, (const CUDA_MEMCPY2D *p, CUstream st), (p, st), DST2(p), SRC2(p),
          st, true)
COPY_HOOK(cuMemcpy3D_v2, (const CUDA_MEMCPY3D *p), (p), DST2(p), SRC2(p), NULL, false)
COPY_HOOK(cuMemcpy3D_v2_ptds, (const CUDA_MEMCPY3D *p), (p), DST2(p), SRC2(p), NULL, true)
COPY_HOOK(cuMemcpy3DAsync_v2, (const CUDA_MEMCPY3D *p, CUstream st), (p, st), DST2(p), SRC2(p), st,
          false)
COPY_HOOK(cuMemcpy3DAsync_v2_ptsz, (const CUDA_MEMCPY3D *p, CUstream st), (p, st), DST2(p), SRC2(p),
          st, true)

MEMSET_HOOK(cuMemsetD8_v2, (CUdeviceptr d, unsigned char v, size_t n), (d, v, n), NULL, false)
MEMSET_HOOK(cuMemsetD8_v2_ptds, (CUdeviceptr d, unsigned char v, size_t n), (d, v, n), NULL, true)
MEMSET_HOOK(cuMemsetD16_v2, (CUdeviceptr d, unsigned short v, size_t n), (d, v, n), NULL, false)
MEMSET_HOOK(cuMemsetD16_v2_ptds, (CUdeviceptr d, unsigned short v, size_t n), (d, v, n), NULL, true)
MEMSET_HOOK(cuMemsetD32_v2, (CUdeviceptr d, unsigned int v, size_t n), (d, v, n), NULL, false)
MEMSET_HOOK(cuMemsetD32_v2_ptds, (CUdeviceptr d, unsigned int v, size_t n), (d, v, n), NULL, true)
MEMSET_HOOK(cuMemsetD2D8_v2, (CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h),
            (d, pitch, v, w, h), NULL, false)
MEMSET_HOOK(cuMemsetD2D8_v2_ptds,
            (CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h), (d, pitch, v, w, h),
            NULL, true)
MEMSET_HOOK(cuMemsetD2D16_v2, (CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h),
            (d, pitch, v, w, h), NULL, false)
MEMSET_HOOK(cuMemsetD2D16_v2_ptds,
            (CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h),
            (d, pitch, v, w, h), NULL, true)
MEMSET_HOOK(cuMemsetD2D32_v2, (CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h),
            (d, pitch, v, w, h), NULL, false)
MEMSET_HOOK(cuMemsetD2D32_v2_ptds,
            (CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h), (d, pitch, v, w, h),
            NULL, true)
MEMSET_HOOK(cuMemsetD8Async, (CUdeviceptr d, unsigned char v, size_t n, CUstream st), (d, v, n, st),
            st, false)
MEMSET_HOOK(cuMemsetD8Async_ptsz, (CUdeviceptr d, unsigned char v, size_t n, CUstream st),
            (d, v, n, st), st, true)
MEMSET_HOOK(cuMemsetD16Async, (CUdeviceptr d, unsigned short v, size_t n, CUstream st),
            (d, v, n, st), st, false)
MEMSET_HOOK(cuMemsetD16Async_ptsz, (CUdeviceptr d, unsigned short v, size_t n, CUstream st),
            (d, v, n, st), st, true)
MEMSET_HOOK(cuMemsetD32Async, (CUdeviceptr d, unsigned int v, size_t n, CUstream st), (d, v, n, st),
            st, false)
MEMSET_HOOK(cuMemsetD32Async_ptsz, (CUdeviceptr d, unsigned int v, size_t n, CUstream st),
            (d, v, n, st), st, true)
MEMSET_HOOK(cuMemsetD2D8Async,
            (CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h, CUstream st),
            (d, pitch, v, w, h, st), st, false)
MEMSET_HOOK(cuMemsetD2D8Async_ptsz,
            (CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h, CUstream st),
            (d, pitch, v, w, h, st), st, true)
MEMSET_HOOK(cuMemsetD2D16Async,
            (CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h, CUstream st),
            (d, pitch, v, w, h, st), st, false)
MEMSET_HOOK(cuMemsetD2D16Async_ptsz,
            (CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h, CUstream st),
            (d, pitch, v, w, h, st), st, true)
MEMSET_HOOK(cuMemsetD2D32Async,
            (CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h, CUstream st),
            (d, pitch, v, w, h, st), st, false)
MEMSET_HOOK(cuMemsetD2D32Async_ptsz,
            (CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h, CUstream st),
            (d, pitch, v, w, h, st), st, true)
