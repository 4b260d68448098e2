/* Managed (unified) memory: cuMemAllocManaged, cuMemPrefetchAsync and cuMemAdvise, both ABIs.
 *
 * The bytes always live in this process; what the simulator tracks is where the driver would
 * keep each 64 KiB page. A kernel whose pointer parameter points into a managed allocation
 * faults in every page of that allocation not resident on the device (counted in
 * managed_faults; the migration costs virtual time at the host-to-device rate), unless advice
 * says the device reads it remotely (preferred location CPU plus accessed-by the device), which
 * counts a remote access instead. Host access is not observed: pages stay where the device left
 * them until a prefetch to the CPU moves them back. Resident managed pages count toward the
 * device's footprint (peak_device_bytes) but never fail an allocation or a fault: the driver would
 * evict managed pages under pressure; the simulator does not model that eviction and instead
 * counts the footprint as the whole device while it is oversubscribed. */
#include "sim.h"

#include <stdlib.h>
#include <string.h>

static uint64_t pages_of(uint64_t bytes) {
    return (bytes + SIM_MANAGED_PAGE - 1) / SIM_MANAGED_PAGE;
}

/* Moves the device footprint by pages coming in and going out (lock held). */
static void managed_account(struct sim_device *dev, uint64_t pages_in, uint64_t pages_out) {
    uint64_t in = pages_in * SIM_MANAGED_PAGE, out = pages_out * SIM_MANAGED_PAGE;
    sim_capacity_give(dev, out);
    if (!sim_capacity_take(dev, in)) {
        /* Oversubscribed: see the file comment. */
        dev->used_bytes = sim.cfg.device_mem;
        if (dev->used_bytes > dev->peak_bytes) dev->peak_bytes = dev->used_bytes;
    }
}

SIM_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytes, unsigned int flags) {
    struct sim_ctx *c;
    CUresult rc = sim_require_ctx(&c);
    if (rc != CUDA_SUCCESS) return rc;
    if (dptr == NULL || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = sim_capture_check_unsafe()) != CUDA_SUCCESS) return rc;
    if ((rc = sim_fail_check("cuMemAllocManaged")) != CUDA_SUCCESS) return rc;
    uint64_t vsz = (bytes + 4095) & ~(uint64_t)4095;
    struct sim_managed *m = calloc(1, sizeof *m);
    if (m == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    m->pages = pages_of(bytes);
    m->resident = calloc(m->pages, 1);
    m->preferred = CU_DEVICE_INVALID; /* no preference (CU_DEVICE_CPU is -1, a real one) */
    if (m->resident == NULL) {
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    sim_lock();
    void *p = sim_va_reserve(vsz, SIM_GRANULE);
    struct sim_range *r = NULL;
    if (p != NULL && sim_va_commit(p, vsz))
        r = sim_range_add((uint64_t)(uintptr_t)p, bytes, SIM_R_MANAGED, c->dev->ordinal);
    if (r != NULL) {
        r->managed = m;
        r->flags = flags;
    }
    sim_unlock();
    if (r == NULL) {
        free(m->resident);
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

/* Frees managed memory through cuMemFree (called from memory.c's free path, lock held). */
void sim_managed_free(struct sim_range *r) {
    struct sim_managed *m = r->managed;
    uint64_t resident = 0;
    for (uint64_t i = 0; i < m->pages; i++)
        resident += m->resident[i];
    sim_capacity_give(&sim.devices[r->device], resident * SIM_MANAGED_PAGE);
    free(m->resident);
    free(m);
    r->managed = NULL;
}

uint64_t sim_managed_touch(struct sim_device *dev, uint64_t addr, bool *remote) {
    struct sim_range *r = sim_range_find(addr);
    if (r == NULL || r->managed == NULL) return 0;
    struct sim_managed *m = r->managed;
    /* Accessed-by maps the pages into the device's page tables wherever they are, so unless
     * the device is also their preferred home they are read over the link instead of faulting
     * in; pages already on the device (a prefetch migrates whatever the advice) are local. */
    bool map_remote = m->accessed_by_device && m->preferred != dev->ordinal;
    uint64_t faults = 0;
    for (uint64_t i = 0; i < m->pages; i++) {
        if (m->resident[i]) continue;
        if (map_remote) {
            *remote = true;
            continue;
        }
        m->resident[i] = 1;
        faults++;
    }
    if (faults == 0) return 0;
    sim.stats.managed_faults += faults;
    managed_account(dev, faults, 0);
    /* Fault-driven migration is slower than a bulk prefetch: each fault group pays a service
     * latency (about 20 us per 64 KiB page batch on recent GPUs) on top of the transfer. */
    return sim_bytes_ns(faults * SIM_MANAGED_PAGE, sim.cfg.h2d_gbps) + faults * 2000;
}

uint64_t sim_managed_prefetch(struct sim_device *dev, uint64_t addr, uint64_t bytes,
                              bool to_device) {
    struct sim_range *r = sim_range_find(addr);
    if (r == NULL || r->managed == NULL) return 0;
    struct sim_managed *m = r->managed;
    uint64_t first = (addr - r->base) / SIM_MANAGED_PAGE;
    uint64_t last = (addr - r->base + bytes - 1) / SIM_MANAGED_PAGE;
    uint64_t in = 0, out = 0;
    for (uint64_t i = first; i <= last && i < m->pages; i++) {
        if (to_device && !m->resident[i]) in++;
        if (!to_device && m->resident[i]) out++;
        m->resident[i] = to_device;
    }
    managed_account(dev, in, out);
    /* Only pages that change sides cross the link: a prefetch of resident pages is cheap. */
    return (to_device ? in : out) * SIM_MANAGED_PAGE;
}

static CUresult prefetch(CUdeviceptr ptr, size_t bytes, bool to_device, int device, CUstream hs,
                         bool pt) {
    struct sim_ctx *c;
    CUresult rc = sim_require_ctx(&c);
    if (rc != CUDA_SUCCESS) return rc;
    if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    if (to_device && (device < 0 || device >= sim.ndevices)) return CUDA_ERROR_INVALID_DEVICE;
    struct sim_stream *s = sim_stream_resolve(hs, pt, &rc);
    if (s == NULL) return rc;
    if ((rc = sim_fail_check("cuMemPrefetchAsync")) != CUDA_SUCCESS) return rc;
    sim_lock();
    struct sim_range *r = sim_range_find(ptr);
    if (r == NULL || r->managed == NULL || ptr + bytes > r->base + r->size) {
        sim_unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct sim_op *op = sim_op_new(SIM_OP_PREFETCH, s);
    if (op == NULL) {
        sim_unlock();
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    op->u.prefetch.addr = ptr;
    op->u.prefetch.bytes = bytes;
    op->u.prefetch.to_device = to_device;
    if (!sim_capture_intercept(s, op, &rc)) sim_op_enqueue(op);
    sim_op_release(op);
    sim_unlock();
    return rc;
}

/* The pre-versioned ABI: cuda.h maps the plain name to the newest variant. */
#undef cuMemPrefetchAsync
/* The pre-13.0 ABI takes a device ordinal (CU_DEVICE_CPU for the host). */
SIM_EXPORT CUresult cuMemPrefetchAsync(CUdeviceptr ptr, size_t bytes, CUdevice dst, CUstream s) {
    return prefetch(ptr, bytes, dst != CU_DEVICE_CPU, dst, s, false);
}
SIM_EXPORT CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr ptr, size_t bytes, CUdevice dst,
                                            CUstream s) {
    return prefetch(ptr, bytes, dst != CU_DEVICE_CPU, dst, s, true);
}

static bool location_is_device(CUmemLocation loc, int *device) {
    *device = loc.id;
    return loc.type == CU_MEM_LOCATION_TYPE_DEVICE;
}

SIM_EXPORT CUresult cuMemPrefetchAsync_v2(CUdeviceptr ptr, size_t bytes, CUmemLocation loc,
                                          unsigned int flags, CUstream s) {
    int dev;
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    bool to_device = location_is_device(loc, &dev);
    return prefetch(ptr, bytes, to_device, dev, s, false);
}
SIM_EXPORT CUresult cuMemPrefetchAsync_v2_ptsz(CUdeviceptr ptr, size_t bytes, CUmemLocation loc,
                                               unsigned int flags, CUstream s) {
    int dev;
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    bool to_device = location_is_device(loc, &dev);
    return prefetch(ptr, bytes, to_device, dev, s, true);
}

static CUresult advise(CUdeviceptr ptr, size_t bytes, CUmem_advise advice, bool device_target) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    sim_lock();
    struct sim_range *r = sim_range_find(ptr);
    if (r == NULL || r->managed == NULL || bytes == 0 || ptr + bytes > r->base + r->size) {
        sim_unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct sim_managed *m = r->managed;
    switch (advice) {
    case CU_MEM_ADVISE_SET_READ_MOSTLY:
        m->read_mostly = true;
        break;
    case CU_MEM_ADVISE_UNSET_READ_MOSTLY:
        m->read_mostly = false;
        break;
    case CU_MEM_ADVISE_SET_PREFERRED_LOCATION:
        m->preferred = device_target ? r->device : CU_DEVICE_CPU;
        break;
    case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
        m->preferred = CU_DEVICE_INVALID;
        break;
    case CU_MEM_ADVISE_SET_ACCESSED_BY:
        m->accessed_by_device = device_target;
        break;
    case CU_MEM_ADVISE_UNSET_ACCESSED_BY:
        m->accessed_by_device = false;
        break;
    default:
        rc = CUDA_ERROR_INVALID_VALUE;
        break;
    }
    sim_unlock();
    return rc;
}

/* The pre-versioned ABI: cuda.h maps the plain name to the newest variant. */
#undef cuMemAdvise
SIM_EXPORT CUresult cuMemAdvise(CUdeviceptr ptr, size_t bytes, CUmem_advise advice, CUdevice dev) {
    return advise(ptr, bytes, advice, dev != CU_DEVICE_CPU);
}

SIM_EXPORT CUresult cuMemAdvise_v2(CUdeviceptr ptr, size_t bytes, CUmem_advise advice,
                                   CUmemLocation loc) {
    return advise(ptr, bytes, advice, loc.type == CU_MEM_LOCATION_TYPE_DEVICE);
}

SIM_EXPORT CUresult cuStreamAttachMemAsync(CUstream s, CUdeviceptr ptr, size_t len,
                                           unsigned int flags) {
    CUresult rc = sim_enter();
    (void)s;
    (void)ptr;
    (void)len;
    (void)flags; /* every device here has concurrent managed access: attachment changes nothing */
    return rc;
}
