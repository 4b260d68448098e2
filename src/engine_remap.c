/* Remapping a buffer's address from one physical layout to another (a device handle, or the
 * pieces of its host slots: pool_host.c) without ever leaving it unmapped (issue 15): every step is
 * retried, and a step that keeps failing is rolled back to a state in which the address is mapped,
 * with device access, to a handle holding a copy of the buffer's bytes. Callers hold eng.lock and
 * have the device's context current.
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

/* Unmaps the pieces of l at va, in order, each retried (a piece at a time: cuMemUnmap takes "the
 * entire contiguous address range that was mapped", cuda.h 13). Returns how many it unmapped. */
static int unmap_pieces(CUdeviceptr va, const struct ho_layout *l) {
    uint64_t off = 0;
    for (int i = 0; i < l->n; off += l->len[i], i++)
        if (!unmap_retry(va + off, l->len[i])) return i;
    return l->n;
}

void ho_unmap_layout(CUdeviceptr va, const struct ho_layout *l) {
    unmap_pieces(va, l);
}

/* Maps the pieces of l from va on, with device access, each call retried. On failure the range is
 * left unmapped (false) unless even the unmap of a half-made mapping failed: then *stuck is set
 * and some of it stays mapped without device access. */
static bool map_rw_retry(CUdeviceptr va, const struct ho_layout *l, int device, bool *stuck) {
    uint64_t off = 0;
    int mapped = 0;
    for (; mapped < l->n; off += l->len[mapped], mapped++) {
        bool ok = false;
        for (int i = 0; i < HO_REMAP_TRIES && !ok; i++)
            ok = ho_real.cuMemMap(va + off, l->len[mapped], 0, l->h[mapped], 0) == CUDA_SUCCESS;
        if (!ok) break;
    }
    if (mapped == l->n) {
        /* The device and its peers (arena.c: ho_peers_of); the device alone if the driver
         * refuses the peers. One call for the whole range, pieces and all. */
        CUmemAccessDesc rw[HO_MAX_DEVICES];
        int n = ho_peers_of(device, rw);
        for (int i = 0; i < HO_REMAP_TRIES; i++)
            if (ho_real.cuMemSetAccess(va, off, rw, (size_t)n) == CUDA_SUCCESS ||
                (n > 1 && ho_real.cuMemSetAccess(va, off, rw, 1) == CUDA_SUCCESS))
                return true;
    }
    struct ho_layout done = *l;
    done.n = mapped;
    if (unmap_pieces(va, &done) != mapped) *stuck = true;
    return false;
}

struct ho_layout ho_layout_one(CUmemGenericAllocationHandle h, uint64_t span) {
    return (struct ho_layout){.n = 1, .h = {h}, .len = {span}};
}

bool ho_map_rw(struct ho_dev *d, CUdeviceptr va, uint64_t span, CUmemGenericAllocationHandle h,
               int device) {
    (void)d;
    bool stuck = false;
    struct ho_layout l = ho_layout_one(h, span);
    if (map_rw_retry(va, &l, device, &stuck)) return true;
    if (stuck)
        ho_log(HO_LOG_WARN, "a mapping of the engine's own at %#llx could not be undone",
               (unsigned long long)va);
    return false;
}

enum ho_remap ho_remap(struct ho_managed *m, const struct ho_layout *to,
                       const struct ho_layout *from) {
    HO_ASSERT_HELD(&eng.lock);
    /* Unmap: a failed unmap of the first piece changed nothing, the address still maps `from`;
     * one of a later piece left the pieces before it unmapped: they are mapped again. */
    int unmapped = unmap_pieces(m->va, from);
    if (unmapped == 0) return HO_REMAP_KEPT;
    if (unmapped < from->n) {
        struct ho_layout part = *from;
        part.n = unmapped;
        bool stuck = false;
        for (int round = 0; round < HO_REMAP_TRIES && !stuck; round++)
            if (map_rw_retry(m->va, &part, m->device, &stuck)) return HO_REMAP_KEPT;
    } else {
        /* Both hold the bytes (the copy has completed): map whichever the driver accepts, the
         * new one first, then the old one, and again, a bounded number of rounds. */
        for (int round = 0; round < HO_REMAP_TRIES; round++) {
            bool stuck = false;
            if (map_rw_retry(m->va, to, m->device, &stuck)) return HO_REMAP_DONE;
            if (stuck) break;
            if (map_rw_retry(m->va, from, m->device, &stuck)) return HO_REMAP_KEPT;
            if (stuck) break;
        }
    }
    ho_log(HO_LOG_ERROR,
           "cannot map a buffer at %#llx again: the driver refused every mapping (its bytes are "
           "safe in handles %#llx and %#llx)",
           (unsigned long long)m->va, (unsigned long long)to->h[0], (unsigned long long)from->h[0]);
    return HO_REMAP_LOST;
}

/* ------------------------------------------------------------------------- waits, retried */

/* A failed wait must never let a remap or a copy go ahead of the work it waits for (a hazard):
 * each wait is retried, then replaced by a wider one (the stream, then the device). False: the
 * driver would not wait at all; the caller must not proceed as if the work were done. */

bool ho_device_drain(void) {
    for (int i = 0; i < HO_REMAP_TRIES; i++)
        if (ho_real.cuCtxSynchronize() == CUDA_SUCCESS) return true;
    ho_log(HO_LOG_ERROR, "the driver refused every device synchronisation");
    return false;
}

bool ho_stream_drain(CUstream s) {
    for (int i = 0; i < HO_REMAP_TRIES; i++)
        if (ho_real.cuStreamSynchronize(s) == CUDA_SUCCESS) return true;
    return ho_device_drain();
}

bool ho_event_wait(CUevent e, CUstream s) {
    for (int i = 0; i < HO_REMAP_TRIES; i++)
        if (ho_real.cuEventSynchronize(e) == CUDA_SUCCESS) return true;
    return ho_stream_drain(s);
}
