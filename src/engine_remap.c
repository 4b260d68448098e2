/* Remapping a buffer's address from one physical handle to another without ever leaving it
 * unmapped (issue 15): every step is retried, and a step that keeps failing is rolled back to a
 * state in which the address is mapped, with device access, to a handle holding a copy of the
 * buffer's bytes. Callers hold eng.lock and have the device's context current.
 *
 * Why retries: the driver's VMM calls fail transiently (out of memory while it allocates page
 * tables, a busy device); one failure in a row is common, two or three happen under pressure.
 * HO_REMAP_TRIES bounds each step: a driver that refuses a call that many times in a row is not
 * going to accept it, and the engine must not spin. */
#include "engine_internal.h"

#include "log.h"
#include "real.h"

#define HO_REMAP_TRIES 6

static bool unmap_retry(CUdeviceptr va, uint64_t span) {
    for (int i = 0; i < HO_REMAP_TRIES; i++)
        if (ho_real.cuMemUnmap(va, span) == CUDA_SUCCESS) return true;
    return false;
}

/* Maps [va, va + span) to h with device access, each call retried. On failure the range is left
 * unmapped (false) unless even the unmap of a half-made mapping failed: then *stuck is set and
 * the range is mapped to h without device access. */
static bool map_rw_retry(CUdeviceptr va, uint64_t span, CUmemGenericAllocationHandle h, int device,
                         bool *stuck) {
    bool mapped = false;
    for (int i = 0; i < HO_REMAP_TRIES && !mapped; i++)
        mapped = ho_real.cuMemMap(va, span, 0, h, 0) == CUDA_SUCCESS;
    if (!mapped) return false;
    CUmemAccessDesc rw = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = device},
                          .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    for (int i = 0; i < HO_REMAP_TRIES; i++)
        if (ho_real.cuMemSetAccess(va, span, &rw, 1) == CUDA_SUCCESS) return true;
    if (!unmap_retry(va, span)) *stuck = true;
    return false;
}

bool ho_map_rw(struct ho_dev *d, CUdeviceptr va, uint64_t span, CUmemGenericAllocationHandle h,
               int device) {
    (void)d;
    bool stuck = false;
    if (map_rw_retry(va, span, h, device, &stuck)) return true;
    if (stuck)
        ho_log(HO_LOG_WARN, "a mapping of the engine's own at %#llx could not be undone",
               (unsigned long long)va);
    return false;
}

enum ho_remap ho_remap(struct ho_managed *m, CUmemGenericAllocationHandle to,
                       CUmemGenericAllocationHandle from) {
    HO_ASSERT_HELD(&eng.lock);
    /* Unmap: a failed unmap changed nothing, the address still maps `from`. */
    if (!unmap_retry(m->va, m->span)) return HO_REMAP_KEPT;
    /* Both handles hold the bytes (the copy has completed): map whichever the driver accepts,
     * the new one first, then the old one, and again, a bounded number of rounds. */
    for (int round = 0; round < HO_REMAP_TRIES; round++) {
        bool stuck = false;
        if (map_rw_retry(m->va, m->span, to, m->device, &stuck)) return HO_REMAP_DONE;
        if (stuck) break;
        if (map_rw_retry(m->va, m->span, from, m->device, &stuck)) return HO_REMAP_KEPT;
        if (stuck) break;
    }
    ho_log(HO_LOG_ERROR,
           "cannot map a buffer at %#llx again: the driver refused every mapping (its bytes are "
           "safe in handles %#llx and %#llx)",
           (unsigned long long)m->va, (unsigned long long)to, (unsigned long long)from);
    return HO_REMAP_LOST;
}
