/* Tensor-memory-access descriptors (CUtensorMap): the library learns each descriptor's bytes and
 * the global address it was encoded for, so a launch that passes it by value is attributed to
 * that buffer (track_learn.h). Learning happens in every tracking mode, after the driver made
 * the descriptor. */
#include "hook.h"

#include "track_learn.h"

static CUresult learnt(CUresult rc, const CUtensorMap *map, void *addr) {
    if (rc == CUDA_SUCCESS && map != NULL && ho_tracking())
        ho_learn_tmap(map, (uint64_t)(uintptr_t)addr);
    return rc;
}

CUresult cuTensorMapEncodeTiled(CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank,
                                void *addr, const cuuint64_t *dim, const cuuint64_t *stride,
                                const cuuint32_t *box, const cuuint32_t *es,
                                CUtensorMapInterleave il, CUtensorMapSwizzle sw,
                                CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
    HO_ENTER(cuTensorMapEncodeTiled);
    return learnt(HO_REAL(cuTensorMapEncodeTiled, map, type, rank, addr, dim, stride, box, es, il,
                          sw, l2, oob),
                  map, addr);
}

CUresult cuTensorMapEncodeIm2col(CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank,
                                 void *addr, const cuuint64_t *dim, const cuuint64_t *stride,
                                 const int *lower, const int *upper, cuuint32_t channels,
                                 cuuint32_t pixels, const cuuint32_t *es, CUtensorMapInterleave il,
                                 CUtensorMapSwizzle sw, CUtensorMapL2promotion l2,
                                 CUtensorMapFloatOOBfill oob) {
    HO_ENTER(cuTensorMapEncodeIm2col);
    return learnt(HO_REAL(cuTensorMapEncodeIm2col, map, type, rank, addr, dim, stride, lower, upper,
                          channels, pixels, es, il, sw, l2, oob),
                  map, addr);
}

CUresult cuTensorMapEncodeIm2colWide(CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank,
                                     void *addr, const cuuint64_t *dim, const cuuint64_t *stride,
                                     int lower, int upper, cuuint32_t channels, cuuint32_t pixels,
                                     const cuuint32_t *es, CUtensorMapInterleave il,
                                     CUtensorMapIm2ColWideMode mode, CUtensorMapSwizzle sw,
                                     CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
    HO_ENTER(cuTensorMapEncodeIm2colWide);
    return learnt(HO_REAL(cuTensorMapEncodeIm2colWide, map, type, rank, addr, dim, stride, lower,
                          upper, channels, pixels, es, il, mode, sw, l2, oob),
                  map, addr);
}

CUresult cuTensorMapReplaceAddress(CUtensorMap *map, void *addr) {
    HO_ENTER(cuTensorMapReplaceAddress);
    return learnt(HO_REAL(cuTensorMapReplaceAddress, map, addr), map, addr);
}
