/* Linear device memory, pinned host memory, registered host memory and pointer queries. */
#include "sim.h"

#include <string.h>
#include <sys/mman.h>

/* Allocations of 2 MiB and more are aligned like the driver's large pages; smaller ones to a
 * page. The extent the simulator tracks is the size asked for. */
uint64_t sim_alloc_align(uint64_t size) {
    return size >= SIM_GRANULE ? SIM_GRANULE : 4096;
}

uint64_t sim_alloc_va_size(uint64_t size) {
    uint64_t page = 4096;
    return (size + page - 1) & ~(page - 1);
}

void sim_lookup(uint64_t addr, struct sim_lookup *out) {
    memset(out, 0, sizeof *out);
    out->fd = -1;
    struct sim_range *r = sim_range_find(addr);
    if (r == NULL) return;
    out->range = r;
    out->mapping_base = r->base;
    out->mapping_size = r->size;
    switch (r->kind) {
    case SIM_R_DEVICE:
        out->loc = SIM_LOC_DEVICE;
        out->mapped = true;
        break;
    case SIM_R_HOST:
    case SIM_R_REGISTERED:
        out->loc = SIM_LOC_HOST;
        out->mapped = true;
        break;
    case SIM_R_MANAGED:
        out->loc = SIM_LOC_MANAGED;
        out->mapped = true;
        break;
    case SIM_R_RESERVED:
        sim_vmm_lookup(r, addr, out);
        break;
    }
}

uint64_t sim_range_bytes(uint64_t addr) {
    sim_lock();
    struct sim_range *r = sim_range_find(addr);
    uint64_t size = r != NULL ? r->size : 0;
    sim_unlock();
    return size;
}

/* Allocates device memory (lock held). */
CUresult sim_device_alloc(struct sim_device *dev, uint64_t bytes, bool from_pool, uint64_t *out) {
    if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    sim_capacity_settle(dev);
    if (!sim_capacity_take(dev, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
    uint64_t vsz = sim_alloc_va_size(bytes);
    void *p = sim_va_reserve(vsz, sim_alloc_align(bytes));
    if (p == NULL || !sim_va_commit(p, vsz)) {
        sim_capacity_give(dev, bytes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    struct sim_range *r = sim_range_add((uint64_t)(uintptr_t)p, bytes, SIM_R_DEVICE, dev->ordinal);
    if (r == NULL) {
        sim_va_retire(p, vsz);
        sim_capacity_give(dev, bytes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    r->from_pool = from_pool;
    *out = r->base;
    return CUDA_SUCCESS;
}

static void free_range(struct sim_range *r, const struct sim_op *free_op, uint64_t at_ns) {
    sim_pool_forget(r); /* cuMemFree of a stream-ordered allocation is allowed (it syncs) */
    if (r->kind == SIM_R_MANAGED) sim_managed_free(r);
    void *va = (void *)(uintptr_t)r->base;
    uint64_t vsz = sim_alloc_va_size(r->size);
    if (r->kind == SIM_R_DEVICE && free_op != NULL) {
        /* Freed at virtual time at_ns: unreachable at once (later work faults on it); its bytes
         * and addresses go to what is ordered after the free, or wait for that time (reuse.c). */
        sim_va_close(va, vsz);
        sim_release_add(&sim.devices[r->device], free_op, r->size, va, vsz, at_ns);
    } else {
        if (r->kind == SIM_R_DEVICE) sim_capacity_give(&sim.devices[r->device], r->size);
        sim_va_retire(va, vsz);
    }
    sim_range_remove(r);
}

void sim_free_range_locked(struct sim_range *r) {
    free_range(r, NULL, 0);
}

void sim_free_range_at(struct sim_range *r, const struct sim_op *free_op, uint64_t at_ns) {
    free_range(r, free_op, at_ns);
}

SIM_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
    struct sim_ctx *c;
    sim_bill(SIM_COST_MEM_ALLOC, SIM_AT_DEVICE, bytesize);
    CUresult rc = sim_require_ctx(&c);
    if (rc != CUDA_SUCCESS) return rc;
    if (dptr == NULL) return CUDA_ERROR_INVALID_VALUE;
    if ((rc = sim_fail_check("cuMemAlloc_v2")) != CUDA_SUCCESS) return rc;
    if ((rc = sim_capture_check_unsafe()) != CUDA_SUCCESS) return rc;
    uint64_t p = 0;
    sim_lock();
    rc = sim_device_alloc(c->dev, bytesize, false, &p);
    sim_unlock();
    if (rc == CUDA_SUCCESS) *dptr = (CUdeviceptr)p;
    return rc;
}

SIM_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width,
                                       size_t height, unsigned int elem) {
    if (pitch == NULL || (elem != 4 && elem != 8 && elem != 16) || width == 0 || height == 0)
        return CUDA_ERROR_INVALID_VALUE;
    size_t p = (width + 511) & ~(size_t)511; /* the H200's texture pitch alignment */
    CUresult rc = cuMemAlloc_v2(dptr, p * height);
    if (rc == CUDA_SUCCESS) *pitch = p;
    return rc;
}

SIM_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
    struct sim_ctx *c;
    sim_bill(SIM_COST_MEM_FREE, SIM_AT_DEVICE, sim_range_bytes(dptr));
    CUresult rc = sim_require_ctx(&c);
    if (rc != CUDA_SUCCESS) return rc;
    if (dptr == 0) return CUDA_SUCCESS;
    if ((rc = sim_capture_check_unsafe()) != CUDA_SUCCESS) return rc;
    if ((rc = sim_fail_check("cuMemFree")) != CUDA_SUCCESS) return rc;
    sim_lock();
    struct sim_range *r = sim_range_find(dptr);
    if (r == NULL || (r->kind != SIM_R_DEVICE && r->kind != SIM_R_MANAGED) || r->base != dptr) {
        sim_unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* cuMemFree waits for the device to finish what it queued, as the driver does; so a free can
     * never pull memory from under queued work. */
    sim_ctx_sync_locked(&sim.devices[r->device].primary);
    r = sim_range_find(dptr); /* the drain released the lock */
    if (r != NULL && r->base == dptr) sim_free_range_locked(r);
    rc = sim.sticky;
    sim_unlock();
    return rc;
}

SIM_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
    struct sim_ctx *c;
    CUresult rc = sim_require_ctx(&c);
    if (rc != CUDA_SUCCESS) return rc;
    if (free_bytes == NULL || total == NULL) return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    sim_capacity_settle(c->dev);
    *total = sim.cfg.device_mem;
    *free_bytes = sim.cfg.device_mem - c->dev->used_bytes;
    sim_unlock();
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr dptr) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    sim_lock();
    struct sim_lookup lk;
    sim_lookup(dptr, &lk);
    sim_unlock();
    if (lk.range == NULL || lk.loc == SIM_LOC_NONE) return CUDA_ERROR_NOT_FOUND;
    if (base != NULL) *base = lk.mapping_base;
    if (size != NULL) *size = lk.mapping_size;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ pinned host memory */

static CUresult host_alloc(void **pp, size_t bytes, unsigned flags) {
    struct sim_ctx *c;
    sim_bill(SIM_COST_MEM_HOST_ALLOC, SIM_AT_HOST, bytes);
    CUresult rc = sim_require_ctx(&c);
    if (rc != CUDA_SUCCESS) return rc;
    if (pp == NULL || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    if ((rc = sim_fail_check("cuMemHostAlloc")) != CUDA_SUCCESS) return rc;
    uint64_t vsz = sim_alloc_va_size(bytes);
    sim_lock();
    void *p = sim_va_reserve(vsz, sim_alloc_align(bytes));
    if (p == NULL || !sim_va_commit(p, vsz)) {
        sim_unlock();
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    struct sim_range *r = sim_range_add((uint64_t)(uintptr_t)p, bytes, SIM_R_HOST, c->dev->ordinal);
    if (r != NULL) r->flags = flags;
    sim_unlock();
    if (r == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    *pp = p;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytes, unsigned int flags) {
    unsigned known =
        CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;
    if (flags & ~known) return CUDA_ERROR_INVALID_VALUE;
    return host_alloc(pp, bytes, flags);
}

SIM_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytes) {
    return host_alloc(pp, bytes, CU_MEMHOSTALLOC_PORTABLE);
}

SIM_EXPORT CUresult cuMemFreeHost(void *p) {
    struct sim_ctx *c;
    sim_bill(SIM_COST_MEM_FREE_HOST, SIM_AT_HOST, sim_range_bytes((uint64_t)(uintptr_t)p));
    CUresult rc = sim_require_ctx(&c);
    if (rc != CUDA_SUCCESS) return rc;
    sim_lock();
    struct sim_range *r = sim_range_find((uint64_t)(uintptr_t)p);
    if (r == NULL || r->kind != SIM_R_HOST || r->base != (uint64_t)(uintptr_t)p) {
        sim_unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* Like cuMemFree, freeing pinned memory waits for the device. */
    sim_ctx_sync_locked(c);
    r = sim_range_find((uint64_t)(uintptr_t)p);
    if (r != NULL) sim_free_range_locked(r);
    sim_unlock();
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pd, void *p, unsigned int flags) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (pd == NULL || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    struct sim_range *r = sim_range_find((uint64_t)(uintptr_t)p);
    bool ok = r != NULL && (r->kind == SIM_R_HOST || r->kind == SIM_R_REGISTERED);
    sim_unlock();
    if (!ok) return CUDA_ERROR_INVALID_VALUE;
    *pd = (CUdeviceptr)(uintptr_t)p; /* unified addressing: the same address */
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemHostGetFlags(unsigned int *flags, void *p) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (flags == NULL) return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    struct sim_range *r = sim_range_find((uint64_t)(uintptr_t)p);
    bool ok = r != NULL && r->kind == SIM_R_HOST;
    if (ok) *flags = r->flags;
    sim_unlock();
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytes, unsigned int flags) {
    struct sim_ctx *c;
    sim_bill(SIM_COST_MEM_HOST_REGISTER, SIM_AT_HOST, bytes);
    CUresult rc = sim_require_ctx(&c);
    if (rc != CUDA_SUCCESS) return rc;
    if (p == NULL || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    uint64_t a = (uint64_t)(uintptr_t)p;
    sim_lock();
    for (uint64_t probe = a; probe < a + bytes; probe += 4096) {
        if (sim_range_find(probe) != NULL) {
            sim_unlock();
            return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
        }
    }
    struct sim_range *r = sim_range_add(a, bytes, SIM_R_REGISTERED, c->dev->ordinal);
    if (r != NULL) r->flags = flags;
    sim_unlock();
    return r != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* The pre-versioned ABI: cuda.h maps the plain name to the newest variant. */
#undef cuMemHostRegister
SIM_EXPORT CUresult cuMemHostRegister(void *p, size_t bytes, unsigned int flags) {
    return cuMemHostRegister_v2(p, bytes, flags);
}

SIM_EXPORT CUresult cuMemHostUnregister(void *p) {
    sim_bill(SIM_COST_MEM_HOST_UNREGISTER, SIM_AT_HOST, sim_range_bytes((uint64_t)(uintptr_t)p));
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    sim_lock();
    struct sim_range *r = sim_range_find((uint64_t)(uintptr_t)p);
    if (r == NULL || r->kind != SIM_R_REGISTERED || r->base != (uint64_t)(uintptr_t)p) {
        sim_unlock();
        return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    }
    sim_range_remove(r); /* the memory is the application's: only the registration goes */
    sim_unlock();
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ pointer attributes */

/* Fills one attribute; returns false when ptr is not memory the device knows. */
static CUresult pointer_attribute(void *data, CUpointer_attribute attr, uint64_t ptr) {
    struct sim_lookup lk;
    sim_lookup(ptr, &lk);
    struct sim_range *r = lk.range;
    if (r == NULL || lk.loc == SIM_LOC_NONE) return CUDA_ERROR_INVALID_VALUE;
    struct sim_device *dev = &sim.devices[r->device];
    bool host = r->kind == SIM_R_HOST || r->kind == SIM_R_REGISTERED;
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = (CUcontext)&dev->primary;
        break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        /* The physical type: managed memory reads as device memory, as on the driver
         * (CU_MEMORYTYPE_UNIFIED only names copy operands; IS_MANAGED tells managed apart). */
        *(unsigned *)data = host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = (CUdeviceptr)ptr;
        break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (!host && r->kind != SIM_R_MANAGED) return CUDA_ERROR_INVALID_VALUE;
        *(void **)data = (void *)(uintptr_t)ptr;
        break;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
        *(int *)data = 1;
        break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        *(unsigned long long *)data = r->buffer_id;
        break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(int *)data = r->kind == SIM_R_MANAGED;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = r->device;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = lk.mapping_base;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = lk.mapping_size;
        break;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(int *)data = lk.mapped;
        break;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        *(int *)data = r->kind == SIM_R_DEVICE && !r->from_pool;
        break;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
        *(unsigned long long *)data =
            r->kind == SIM_R_RESERVED ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : 0;
        break;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
        *(unsigned *)data = lk.mapped ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE
                                      : CU_POINTER_ATTRIBUTE_ACCESS_FLAG_NONE;
        break;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        if (!r->from_pool) return CUDA_ERROR_INVALID_VALUE;
        *(CUmemoryPool *)data = r->pool != NULL ? r->pool : dev->default_pool;
        break;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
        *(int *)data = 0;
        break;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attr, CUdeviceptr ptr) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (data == NULL) return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    rc = pointer_attribute(data, attr, ptr);
    sim_unlock();
    return rc;
}

/* Unlike the single query, unknown pointers are not an error: attributes read as zero/NULL
 * (MEMORY_TYPE 0), as the driver documents. */
SIM_EXPORT CUresult cuPointerGetAttributes(unsigned int n, CUpointer_attribute *attrs, void **data,
                                           CUdeviceptr ptr) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (attrs == NULL || data == NULL) return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    for (unsigned i = 0; i < n; i++) {
        if (data[i] == NULL) continue;
        if (pointer_attribute(data[i], attrs[i], ptr) != CUDA_SUCCESS) {
            size_t sz = sizeof(int);
            switch (attrs[i]) {
            case CU_POINTER_ATTRIBUTE_CONTEXT:
            case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
            case CU_POINTER_ATTRIBUTE_HOST_POINTER:
            case CU_POINTER_ATTRIBUTE_BUFFER_ID:
            case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
            case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
            case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
            case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
                sz = 8;
                break;
            case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
                *(int *)data[i] = -2; /* the driver's "no device" ordinal */
                continue;
            default:
                break;
            }
            memset(data[i], 0, sz);
        }
    }
    sim_unlock();
    return CUDA_SUCCESS;
}
