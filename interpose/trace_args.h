/* The bytes a copy or memset hook moves, from its argument list as hooks_copy.c writes it
 * (ARGS, in parentheses), so the trace can record it without a byte count written out at every
 * hook. By the number of arguments:
 *   copies:  (d, s, n) and (d, s, n, stream)              -> n
 *            (d, dctx, s, sctx, n) and (..., n, stream)   -> n               (peer copies)
 *            (p) and (p, stream)                          -> the 2D or 3D extent of *p
 *   memsets: (d, v, n) and (d, v, n, stream)              -> n * sizeof v    (v's type: D8/16/32)
 *            (d, pitch, v, w, h) and (..., h, stream)     -> w * h * sizeof v */
#ifndef HOSTOFF_TRACE_ARGS_H
#define HOSTOFF_TRACE_ARGS_H

#include "cuda_api.h"

#include <stdint.h>

static inline uint64_t ho_copy2d_bytes(const CUDA_MEMCPY2D *p) {
    return p != NULL ? (uint64_t)p->WidthInBytes * p->Height : 0;
}

static inline uint64_t ho_copy3d_bytes(const CUDA_MEMCPY3D *p) {
    return p != NULL ? (uint64_t)p->WidthInBytes * p->Height * p->Depth : 0;
}

#define HO_EXTENT_BYTES(p)                                                                         \
    _Generic((p), const CUDA_MEMCPY2D *: ho_copy2d_bytes, const CUDA_MEMCPY3D *: ho_copy3d_bytes)(p)

#define HO_PICK6(_1, _2, _3, _4, _5, _6, NAME, ...) NAME

#define HO_CB1(p)                   HO_EXTENT_BYTES(p)
#define HO_CB2(p, st)               HO_EXTENT_BYTES(p)
#define HO_CB3(d, s, n)             ((uint64_t)(n))
#define HO_CB4(d, s, n, st)         ((uint64_t)(n))
#define HO_CB5(d, dc, s, sc, n)     ((uint64_t)(n))
#define HO_CB6(d, dc, s, sc, n, st) ((uint64_t)(n))
#define HO_COPY_BYTES(...)                                                                         \
    HO_PICK6(__VA_ARGS__, HO_CB6, HO_CB5, HO_CB4, HO_CB3, HO_CB2, HO_CB1, _)(__VA_ARGS__)

#define HO_MB3(d, v, n)               ((uint64_t)(n) * sizeof(v))
#define HO_MB4(d, v, n, st)           ((uint64_t)(n) * sizeof(v))
#define HO_MB5(d, pitch, v, w, h)     ((uint64_t)(w) * (h) * sizeof(v))
#define HO_MB6(d, pitch, v, w, h, st) ((uint64_t)(w) * (h) * sizeof(v))
#define HO_MEMSET_BYTES(...)                                                                       \
    HO_PICK6(__VA_ARGS__, HO_MB6, HO_MB5, HO_MB4, HO_MB3, _, _, _)(__VA_ARGS__)

#endif
