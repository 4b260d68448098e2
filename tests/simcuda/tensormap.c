/* Tensor-memory-access descriptors: cuTensorMapEncodeTiled, cuTensorMapEncodeIm2col,
 * cuTensorMapEncodeIm2colWide and cuTensorMapReplaceAddress fill a 128-byte CUtensorMap.
 *
 * The descriptor's format is the simulator's own, as NVIDIA's is undocumented: word 0 a magic
 * number, word 1 the global address shifted right by 4 (the driver requires 16-byte alignment)
 * with the rank in its top bits, word 2 the extent in bytes the map can reach, the rest zero. The
 * address never appears as a plain word, so a program (or a library) that scans kernel
 * parameters for pointers does not find it: it must learn descriptors from the calls that make
 * them. A kernel body reads the address back with simcuda_tensor_map_address(); the launch
 * recognises its own descriptors inside by-value parameters, so hazard detection and illegal
 * accesses cover what a kernel reaches through them. */
#include "sim.h"

#include <simcuda.h>
#include <string.h>

#define TMAP_MAGIC 0x53494d544d415031ull /* "SIMTMAP1" */

static unsigned elem_bytes(CUtensorMapDataType t) {
    switch (t) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8:
        return 1;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16:
        return 2;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32:
    case CU_TENSOR_MAP_DATA_TYPE_INT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ:
        return 4;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64:
    case CU_TENSOR_MAP_DATA_TYPE_INT64:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64:
        return 8;
    default:
        return 1; /* packed sub-byte types: an upper bound per element */
    }
}

/* Checks what the driver checks of the shared arguments and returns the extent in bytes, or 0. */
static uint64_t tmap_extent(CUtensorMapDataType type, cuuint32_t rank, uint64_t addr,
                            const cuuint64_t *dim, const cuuint64_t *stride, cuuint32_t lo_rank) {
    if (rank < lo_rank || rank > 5 || addr == 0 || addr % 16 != 0 || dim == NULL) return 0;
    if (rank > 1 && stride == NULL) return 0;
    uint64_t extent = dim[0] * elem_bytes(type);
    for (cuuint32_t i = 0; i < rank; i++)
        if (dim[i] == 0 || dim[i] > (1ull << 32)) return 0;
    for (cuuint32_t i = 0; i + 1 < rank; i++) {
        if (stride[i] % 16 != 0 || stride[i] >= (1ull << 40)) return 0;
        uint64_t reach = stride[i] * dim[i + 1];
        if (reach > extent) extent = reach;
    }
    return extent;
}

static CUresult tmap_fill(CUtensorMap *map, cuuint32_t rank, uint64_t addr, uint64_t extent) {
    memset(map, 0, sizeof *map);
    map->opaque[0] = TMAP_MAGIC;
    map->opaque[1] = (addr >> 4) | ((uint64_t)rank << 60);
    map->opaque[2] = extent;
    return CUDA_SUCCESS;
}

bool sim_tensor_map_decode(const void *p, uint64_t *addr, uint64_t *extent) {
    uint64_t w[3];
    memcpy(w, p, sizeof w);
    if (w[0] != TMAP_MAGIC) return false;
    *addr = (w[1] & ((1ull << 60) - 1)) << 4;
    *extent = w[2];
    return true;
}

SIM_EXPORT uint64_t simcuda_tensor_map_address(const void *map) {
    uint64_t addr, extent;
    return map != NULL && sim_tensor_map_decode(map, &addr, &extent) ? addr : 0;
}

static CUresult tmap_enter(CUtensorMap *map) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    return map != NULL && ((uintptr_t)map % 64) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult cuTensorMapEncodeTiled(CUtensorMap *map, CUtensorMapDataType type,
                                           cuuint32_t rank, void *addr, const cuuint64_t *dim,
                                           const cuuint64_t *stride, const cuuint32_t *box,
                                           const cuuint32_t *elem_stride, CUtensorMapInterleave il,
                                           CUtensorMapSwizzle sw, CUtensorMapL2promotion l2,
                                           CUtensorMapFloatOOBfill oob) {
    (void)il, (void)sw, (void)l2, (void)oob;
    CUresult rc = tmap_enter(map);
    if (rc != CUDA_SUCCESS) return rc;
    if (box == NULL || elem_stride == NULL) return CUDA_ERROR_INVALID_VALUE;
    for (cuuint32_t i = 0; i < rank && i < 5; i++)
        if (box[i] == 0 || box[i] > 256 || elem_stride[i] == 0 || elem_stride[i] > 8)
            return CUDA_ERROR_INVALID_VALUE;
    uint64_t extent = tmap_extent(type, rank, (uint64_t)(uintptr_t)addr, dim, stride, 1);
    if (extent == 0) return CUDA_ERROR_INVALID_VALUE;
    return tmap_fill(map, rank, (uint64_t)(uintptr_t)addr, extent);
}

SIM_EXPORT CUresult cuTensorMapEncodeIm2col(
    CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank, void *addr, const cuuint64_t *dim,
    const cuuint64_t *stride, const int *lower, const int *upper, cuuint32_t channels,
    cuuint32_t pixels, const cuuint32_t *elem_stride, CUtensorMapInterleave il,
    CUtensorMapSwizzle sw, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
    (void)il, (void)sw, (void)l2, (void)oob;
    CUresult rc = tmap_enter(map);
    if (rc != CUDA_SUCCESS) return rc;
    if (lower == NULL || upper == NULL || elem_stride == NULL || channels == 0 || channels > 256 ||
        pixels == 0 || pixels > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t extent = tmap_extent(type, rank, (uint64_t)(uintptr_t)addr, dim, stride, 3);
    if (extent == 0) return CUDA_ERROR_INVALID_VALUE;
    return tmap_fill(map, rank, (uint64_t)(uintptr_t)addr, extent);
}

SIM_EXPORT CUresult cuTensorMapEncodeIm2colWide(
    CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank, void *addr, const cuuint64_t *dim,
    const cuuint64_t *stride, int lower, int upper, cuuint32_t channels, cuuint32_t pixels,
    const cuuint32_t *elem_stride, CUtensorMapInterleave il, CUtensorMapIm2ColWideMode mode,
    CUtensorMapSwizzle sw, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
    (void)lower, (void)upper, (void)il, (void)mode, (void)sw, (void)l2, (void)oob;
    CUresult rc = tmap_enter(map);
    if (rc != CUDA_SUCCESS) return rc;
    if (elem_stride == NULL || channels == 0 || channels > 256 || pixels == 0 || pixels > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t extent = tmap_extent(type, rank, (uint64_t)(uintptr_t)addr, dim, stride, 3);
    if (extent == 0) return CUDA_ERROR_INVALID_VALUE;
    return tmap_fill(map, rank, (uint64_t)(uintptr_t)addr, extent);
}

/* Keeps everything but the address, as the driver documents (the extent stays the one the map
 * was encoded with). */
SIM_EXPORT CUresult cuTensorMapReplaceAddress(CUtensorMap *map, void *addr) {
    CUresult rc = tmap_enter(map);
    if (rc != CUDA_SUCCESS) return rc;
    uint64_t old, extent, a = (uint64_t)(uintptr_t)addr;
    if (!sim_tensor_map_decode(map, &old, &extent) || a == 0 || a % 16 != 0)
        return CUDA_ERROR_INVALID_VALUE;
    map->opaque[1] = (a >> 4) | (map->opaque[1] & (15ull << 60));
    return CUDA_SUCCESS;
}
