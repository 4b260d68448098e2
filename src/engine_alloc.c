/* Allocation and free of managed buffers: device memory under the budget (or a freed buffer's
 * cached memory of the same size), the registry record, the policy told; a free is ordered after
 * every queued use of the buffer and cancels a move in flight. */
#include "engine_internal.h"

#include "log.h"
#include "real.h"
#include "site.h"
#include "stats.h"

#include <stdlib.h>

static CUresult alloc_locked(struct ho_dev *d, struct ho_managed *m, const struct ho_alloc_order *o,
                             uint64_t *stall) {
    CUresult rc;
    if (o != NULL && ho_sfree_take(d, m, o->stream, o->per_thread)) {
        /* Freed on this stream: its memory serves at once, in stream order (engine_sfree.c). */
        ho_device_bytes((int64_t)m->span);
        goto ready;
    }
    /* Held for another stream, or for none: the ordinary free makes it reusable once done. */
    if (d->sfree != NULL) ho_sfree_flush(d, m->span);
    if (eng.backend == HO_BACKEND_VMM &&
        ho_cache_take(d, m->span, &m->va, &m->dev, &m->dev_window)) {
        /* Same size as a freed buffer: its memory, still mapped and already counted as
         * resident, serves at once. */
        ho_device_bytes((int64_t)m->span);
        goto ready;
    }
    enum ho_room room = ho_make_room(d, m->span, NULL, 0, stall);
    if (room == HO_ROOM_NONE) {
        /* The application sees CUDA_ERROR_OUT_OF_MEMORY: say why, on one line (the first few
         * times: a framework may retry). */
        static unsigned said;
        if (said++ < 3)
            ho_log(HO_LOG_ERROR,
                   m->span > d->budget
                       ? "an allocation of %llu bytes (%.1f MiB) is larger than HOSTOFF_BUDGET "
                         "(%llu bytes, %.1f MiB): CUDA_ERROR_OUT_OF_MEMORY; raise the budget above "
                         "the largest allocation"
                       : "no room for an allocation of %llu bytes (%.1f MiB) under HOSTOFF_BUDGET "
                         "(%llu bytes, %.1f MiB): every resident buffer is in use or pinned; "
                         "CUDA_ERROR_OUT_OF_MEMORY",
                   (unsigned long long)m->span, (double)m->span / 1048576.0,
                   (unsigned long long)d->budget, (double)d->budget / 1048576.0);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (eng.backend == HO_BACKEND_VMM &&
        ho_cache_take(d, m->span, &m->va, &m->dev, &m->dev_window)) {
        ho_device_bytes((int64_t)m->span); /* an eviction made room by pooling this chunk */
        goto ready;
    }
    ho_ctx_push(d);
    if (eng.backend == HO_BACKEND_VMM) {
        rc = ho_create_device_handle(d, m->span, &m->dev, NULL, 0, stall);
        if (rc == CUDA_SUCCESS) {
            m->va = ho_va_get(m->span);
            if (m->va == 0 || !ho_map_rw(d, m->va, m->span, m->dev, m->device)) {
                ho_range_drop(m->va, m->span, m->dev, false);
                /* The driver refused a step of the engine's own: let it allocate plainly, so the
                 * application sees only what it would have seen without the library. */
                rc = CUDA_ERROR_NOT_SUPPORTED;
            }
        } else {
            /* No device memory for a handle even after reclaiming: a plain allocation gets the
             * driver's own answer (out of memory too when the device is really full). */
            rc = CUDA_ERROR_NOT_SUPPORTED;
        }
    } else {
        rc = ho_real.cuMemAllocManaged(&m->va, m->span, CU_MEM_ATTACH_GLOBAL);
        while (rc == CUDA_ERROR_OUT_OF_MEMORY && ho_reclaim_device(d, m->span, NULL, 0, stall))
            rc = ho_real.cuMemAllocManaged(&m->va, m->span, CU_MEM_ATTACH_GLOBAL);
        if (rc == CUDA_SUCCESS) {
            CUmemLocation here = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = m->device};
            ho_real.cuMemPrefetchAsync_v2(m->va, m->span, here, 0, d->stream[HO_Q_RESTORE]);
        } else {
            /* The engine's own call failed: a plain allocation gets the driver's own answer,
             * as on the vmm backend. */
            rc = CUDA_ERROR_NOT_SUPPORTED;
        }
    }
    ho_ctx_pop();
    if (rc != CUDA_SUCCESS) return rc;
    d->resident += m->span;
    ho_device_bytes((int64_t)m->span);
ready:
    atomic_store(&m->state, HO_RESIDENT);
    m->next = eng.all;
    eng.all = m;
    return CUDA_SUCCESS;
}

CUresult ho_engine_alloc(CUdeviceptr *dptr, size_t bytes, enum ho_buffer_kind kind,
                         const struct ho_alloc_order *order) {
    if (!eng.active || bytes < eng.min_bytes || dptr == NULL) return CUDA_ERROR_NOT_SUPPORTED;
    int device;
    if (!ho_current_device(&device))
        return CUDA_ERROR_NOT_SUPPORTED; /* no context: the driver gives its own answer */
    struct ho_managed *m = calloc(1, sizeof *m);
    if (m == NULL) return CUDA_ERROR_NOT_SUPPORTED;
    m->pol.id = policy_id(m);
    m->device = device;
    m->size = bytes;
    atomic_flag_clear(&m->users_lock);
    uint64_t stall = 0;
    ho_mutex_lock(&eng.lock);
    CUresult rc = CUDA_ERROR_NOT_SUPPORTED;
    if (ho_dev_setup(device)) {
        m->span = (bytes + eng.granule - 1) / eng.granule * eng.granule;
        rc = alloc_locked(&eng.dev[device], m, order, &stall);
    }
    ho_mutex_unlock(&eng.lock);
    ho_count_stall(stall);
    if (rc != CUDA_SUCCESS) {
        free(m);
        return rc;
    }
    /* The registry is written outside eng.lock: launches hold its read side while they take the
     * engine lock, so the opposite order would deadlock. */
    m->site = ho_site_capture();
    struct ho_buffer *b = ho_registry_add(m->va, bytes, device, kind);
    if (b == NULL) {
        ho_mutex_lock(&eng.lock);
        ho_start_free(m);
        ho_mutex_unlock(&eng.lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    m->id = b->id;
    b->site = m->site;
    m->record = b;
    b->engine = m;
    if (eng.policy.ops->plans) { /* the others hear of no allocation: no lock taken for them */
        ho_mutex_lock(&eng.lock);
        eng.policy.ops->alloc(eng.policy.self, &m->pol, m->span, m->site);
        ho_mutex_unlock(&eng.lock);
    }
    ho_count(&ho_stats.counts_allocs, 1);
    ho_count(&ho_stats.bytes_allocated, bytes);
    *dptr = m->va;
    return CUDA_SUCCESS;
}

bool ho_engine_free(CUdeviceptr dptr, CUstream stream, bool per_thread, bool async) {
    if (!eng.active) return false;
    /* Out of the registry first: no new use can find it. Then no use may still be issuing. */
    struct ho_buffer *b = ho_registry_remove_managed(dptr);
    if (b == NULL) return false;
    struct ho_managed *m = b->engine;
    ho_count(&ho_stats.counts_frees, 1);
    ho_mutex_lock(&eng.lock);
    ho_issue_wait();
    m->record = NULL;
    ho_want_drop(dev_of(m), m);
    ho_defer_drop(dev_of(m), m);
    eng.policy.ops->free(eng.policy.self, &m->pol);
    ho_clock_forget(m);
    if (async) ho_users_add(m, stream, per_thread, ho_use_seq_next());
    if (async && implicit_per_thread(stream, per_thread)) {
        /* The free is ordered after this thread's per-thread stream: wait for it here. */
        ho_real.cuStreamSynchronize_ptsz(NULL);
    }
    switch (atomic_load(&m->state)) {
    case HO_EVICTING:
        atomic_store(&m->state, HO_RESIDENT);
        break; /* cancel */
    case HO_RESTORING:
        atomic_store(&m->state, HO_HOST);
        break; /* cancel */
    default:
        break;
    }
    if (m->tr != NULL)
        m->free_requested = true;
    else if (!async || !ho_sfree_put(m, stream, per_thread))
        ho_start_free(m);
    ho_mutex_unlock(&eng.lock);
    return true;
}
