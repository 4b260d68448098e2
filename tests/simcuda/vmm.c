/* Virtual memory management: reservations, physical handles (device, host, host NUMA) backed by
 * memfd so that several mappings of one handle share bytes, maps, access and unmaps.
 *
 * A mapping starts PROT_NONE: on a GPU a mapped range is not accessible until cuMemSetAccess, and
 * the simulator enforces the same with page protection. */
#include "sim.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct sim_phys {
    uint32_t magic;
    struct sim_physmem mem; /* the memfd, and its home mapping (physfd.c) */
    uint64_t size;
    CUmemAllocationProp prop;
    bool device_located;
    int device;      /* owning device for capacity (device-located handles) */
    int refs;        /* each outstanding handle reference + each mapping */
    int handle_refs; /* cuMemCreate/cuMemRetainAllocationHandle not yet released */
};

#define SIM_MAGIC_PHYS 0x5c7c0010u

struct sim_mapping {
    uint64_t base, size, offset;
    struct sim_phys *phys;
    CUmemAccess_flags access; /* what cuMemSetAccess granted the device */
    bool holds_home;          /* holds the handle's home mapping (physfd.c) */
    struct sim_mapping *next;
};

static struct sim_phys *phys_from_handle(CUmemGenericAllocationHandle h) {
    struct sim_phys *p = (struct sim_phys *)(uintptr_t)h;
    if (p == NULL || p->magic != SIM_MAGIC_PHYS) return NULL;
    return p;
}

static void phys_put(struct sim_phys *p) {
    if (--p->refs > 0) return;
    if (p->device_located) sim_capacity_give(&sim.devices[p->device], p->size);
    sim_physmem_close(&p->mem);
    p->magic = 0;
    free(p);
}

static bool is_host_location(CUmemLocationType t) {
    return t == CU_MEM_LOCATION_TYPE_HOST || t == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
           t == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
}

/* Where a handle's memory lives, for its costs (lock taken; a bad handle counts as device). */
static enum sim_where handle_where(CUmemGenericAllocationHandle h, uint64_t *bytes) {
    sim_lock();
    struct sim_phys *p = phys_from_handle(h);
    enum sim_where w = p != NULL && !p->device_located ? SIM_AT_HOST : SIM_AT_DEVICE;
    *bytes = p != NULL ? p->size : 0;
    sim_unlock();
    return w;
}

static struct sim_mapping *mapping_at(struct sim_range *r, uint64_t addr);

/* Where a mapped range lives, for its costs: host-located when any mapping in it is (lock taken).
 */
static enum sim_where range_where(uint64_t ptr, uint64_t size) {
    enum sim_where w = SIM_AT_DEVICE;
    sim_lock();
    struct sim_range *r = sim_range_find(ptr);
    if (r != NULL && r->kind == SIM_R_RESERVED) {
        for (struct sim_mapping *m = r->maps; m != NULL; m = m->next)
            if (m->base < ptr + size && ptr < m->base + m->size && !m->phys->device_located)
                w = SIM_AT_HOST;
    }
    sim_unlock();
    return w;
}

SIM_EXPORT CUresult cuMemGetAllocationGranularity(size_t *gran, const CUmemAllocationProp *prop,
                                                  CUmemAllocationGranularity_flags option) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (gran == NULL || prop == NULL) return CUDA_ERROR_INVALID_VALUE;
    if ((rc = sim_fail_check("cuMemGetAllocationGranularity")) != CUDA_SUCCESS) return rc;
    if (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
        option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
        return CUDA_ERROR_INVALID_VALUE;
    bool on_device = prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE;
    if (!on_device && !is_host_location(prop->location.type)) return CUDA_ERROR_INVALID_VALUE;
    /* Each location answers for itself (docs/simcuda.md, "VMM granularity"). */
    *gran = on_device ? SIM_GRANULE : SIM_HOST_GRANULE;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                const CUmemAllocationProp *prop, unsigned long long flags) {
    bool host_at = prop != NULL && is_host_location(prop->location.type);
    sim_bill(SIM_COST_MEM_CREATE, host_at ? SIM_AT_HOST : SIM_AT_DEVICE, size);
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (handle == NULL || prop == NULL || flags != 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
    if (size % (host_at ? SIM_HOST_GRANULE : SIM_GRANULE) != 0) return CUDA_ERROR_INVALID_VALUE;
    if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
    bool on_device = prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE;
    if (!on_device && !is_host_location(prop->location.type)) return CUDA_ERROR_INVALID_VALUE;
    int device = on_device ? prop->location.id : 0;
    if (on_device && (device < 0 || device >= sim.ndevices)) return CUDA_ERROR_INVALID_DEVICE;
    if (!on_device && sim_current_ctx() == NULL) {
        /* A host-located handle still needs an initialised device context in the driver. */
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if ((rc = sim_fail_check("cuMemCreate")) != CUDA_SUCCESS) return rc;
    struct sim_phys *p = calloc(1, sizeof *p);
    if (p == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    if (!sim_physmem_open(&p->mem, size)) {
        free(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    p->magic = SIM_MAGIC_PHYS;
    p->size = size;
    p->prop = *prop;
    p->device_located = on_device;
    p->device = device;
    p->refs = 1;
    p->handle_refs = 1;
    if (on_device) {
        sim_lock();
        sim_capacity_settle(&sim.devices[device]);
        bool ok = sim_capacity_take(&sim.devices[device], size);
        sim_unlock();
        if (!ok) {
            sim_physmem_close(&p->mem);
            free(p);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)p;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    uint64_t bytes = 0;
    enum sim_where where = handle_where(handle, &bytes);
    sim_bill(SIM_COST_MEM_RELEASE, where, bytes);
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if ((rc = sim_fail_check("cuMemRelease")) != CUDA_SUCCESS) return rc;
    sim_lock();
    struct sim_phys *p = phys_from_handle(handle);
    if (p == NULL || p->handle_refs == 0) {
        sim_unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* The bytes live on while mapped; they go with the last unmap. */
    p->handle_refs--;
    phys_put(p);
    sim_unlock();
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                           CUmemGenericAllocationHandle handle) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (prop == NULL) return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    struct sim_phys *p = phys_from_handle(handle);
    if (p != NULL) *prop = p->prop;
    sim_unlock();
    return p != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                        CUdeviceptr addr, unsigned long long flags) {
    sim_bill(SIM_COST_MEM_ADDRESS_RESERVE, SIM_AT_DEVICE, size);
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    (void)addr; /* a hint, as on the device: the simulator picks its own */
    if (ptr == NULL || size == 0 || size % SIM_GRANULE != 0 || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (alignment != 0 && (alignment & (alignment - 1)) != 0) return CUDA_ERROR_INVALID_VALUE;
    uint64_t align = alignment > SIM_GRANULE ? alignment : SIM_GRANULE;
    if ((rc = sim_fail_check("cuMemAddressReserve")) != CUDA_SUCCESS) return rc;
    sim_lock();
    void *p = sim_va_reserve(size, align);
    struct sim_range *r =
        p != NULL ? sim_range_add((uint64_t)(uintptr_t)p, size, SIM_R_RESERVED, 0) : NULL;
    sim_unlock();
    if (r == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    *ptr = (CUdeviceptr)r->base;
    return CUDA_SUCCESS;
}

static void mapping_drop(struct sim_range *r, struct sim_mapping *m) {
    for (struct sim_mapping **pp = &r->maps; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == m) {
            *pp = m->next;
            break;
        }
    }
    sim_physmem_unmap(&m->phys->mem, (void *)(uintptr_t)m->base, m->size, m->holds_home);
    phys_put(m->phys);
    free(m);
}

SIM_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    sim_bill(SIM_COST_MEM_ADDRESS_FREE, SIM_AT_DEVICE, size);
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if ((rc = sim_fail_check("cuMemAddressFree")) != CUDA_SUCCESS) return rc;
    sim_lock();
    struct sim_range *r = sim_range_find(ptr);
    if (r == NULL || r->kind != SIM_R_RESERVED || r->base != ptr || r->size != size) {
        sim_unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (r->maps != NULL) sim_hazard_check(&sim.devices[0], r->base, r->size, sim_now());
    while (r->maps != NULL)
        mapping_drop(r, r->maps);
    sim_va_retire((void *)(uintptr_t)r->base, r->size);
    sim_range_remove(r);
    sim_unlock();
    return CUDA_SUCCESS;
}

static struct sim_mapping *mapping_at(struct sim_range *r, uint64_t addr) {
    for (struct sim_mapping *m = r->maps; m != NULL; m = m->next)
        if (addr >= m->base && addr < m->base + m->size) return m;
    return NULL;
}

SIM_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                             CUmemGenericAllocationHandle handle, unsigned long long flags) {
    uint64_t handle_bytes = 0;
    sim_bill(SIM_COST_MEM_MAP, handle_where(handle, &handle_bytes), size);
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    /* The address must be granule-aligned too (mmap alone would take any page). The offset
     * "currently must be zero" (cuda.h 13, cuMemMap's offset parameter): the driver maps a handle
     * from its first byte only, so the simulator refuses any other offset as the documented
     * driver does. A prefix (size below the handle's: "offset + size must be less than the size
     * of the memory allocation") is legal. */
    if (flags != 0 || size == 0 || size % SIM_GRANULE != 0 || offset != 0 || ptr % SIM_GRANULE != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = sim_fail_check("cuMemMap")) != CUDA_SUCCESS) return rc;
    /* The fault point of prefix mappings alone: a test plays a driver that refuses them. */
    if (size < handle_bytes && (rc = sim_fail_check("cuMemMapPrefix")) != CUDA_SUCCESS) return rc;
    sim_lock();
    struct sim_phys *p = phys_from_handle(handle);
    struct sim_range *r = sim_range_find(ptr);
    rc = CUDA_ERROR_INVALID_VALUE;
    if (p == NULL || p->handle_refs == 0 || r == NULL || r->kind != SIM_R_RESERVED) goto out;
    if (ptr + size > r->base + r->size || size > p->size) goto out; /* past the handle */
    for (struct sim_mapping *m = r->maps; m != NULL; m = m->next)
        if (ptr < m->base + m->size && m->base < ptr + size) goto out; /* already mapped */
    struct sim_mapping *m = calloc(1, sizeof *m);
    if (m == NULL) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    if (!sim_physmem_map(&p->mem, (void *)(uintptr_t)ptr, size, offset, &m->holds_home)) {
        free(m);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    m->base = ptr;
    m->size = size;
    m->offset = offset;
    m->phys = p;
    m->access = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    m->next = r->maps;
    r->maps = m;
    p->refs++;
    rc = CUDA_SUCCESS;
out:
    sim_unlock();
    return rc;
}

SIM_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    sim_bill(SIM_COST_MEM_UNMAP, range_where(ptr, size), size);
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if ((rc = sim_fail_check("cuMemUnmap")) != CUDA_SUCCESS) return rc;
    sim_lock();
    struct sim_range *r = sim_range_find(ptr);
    if (r == NULL || r->kind != SIM_R_RESERVED) {
        sim_unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* The range must be covered by whole mappings. */
    for (uint64_t a = ptr; a < ptr + size;) {
        struct sim_mapping *m = mapping_at(r, a);
        if (m == NULL || m->base != a || m->base + m->size > ptr + size) {
            sim_unlock();
            return CUDA_ERROR_INVALID_VALUE;
        }
        a += m->size;
    }
    /* The driver does not wait for queued work here: record a hazard if some is in flight. */
    for (int d = 0; d < sim.ndevices; d++)
        sim_hazard_check(&sim.devices[d], ptr, size, sim_now());
    for (uint64_t a = ptr; a < ptr + size;) {
        struct sim_mapping *m = mapping_at(r, a);
        a += m->size;
        mapping_drop(r, m);
    }
    sim_unlock();
    return CUDA_SUCCESS;
}

static int prot_for(CUmemAccess_flags f) {
    switch (f) {
    case CU_MEM_ACCESS_FLAGS_PROT_READWRITE:
        return PROT_READ | PROT_WRITE;
    case CU_MEM_ACCESS_FLAGS_PROT_READ:
        return PROT_READ;
    default:
        return PROT_NONE;
    }
}

SIM_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                                   size_t count) {
    sim_bill(SIM_COST_MEM_SET_ACCESS, range_where(ptr, size), size);
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (desc == NULL || count == 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
    if ((rc = sim_fail_check("cuMemSetAccess")) != CUDA_SUCCESS) return rc;
    /* The process has one page protection for all devices: the most permissive device wins. */
    CUmemAccess_flags access = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    for (size_t i = 0; i < count; i++) {
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || desc[i].location.id < 0 ||
            desc[i].location.id >= sim.ndevices)
            return CUDA_ERROR_INVALID_DEVICE;
        if (desc[i].flags > access) access = desc[i].flags;
    }
    sim_lock();
    struct sim_range *r = sim_range_find(ptr);
    rc = CUDA_ERROR_INVALID_VALUE;
    if (r == NULL || r->kind != SIM_R_RESERVED) goto out;
    for (uint64_t a = ptr; a < ptr + size;) {
        struct sim_mapping *m = mapping_at(r, a);
        if (m == NULL) goto out;
        a = m->base + m->size;
    }
    for (uint64_t a = ptr; a < ptr + size;) {
        struct sim_mapping *m = mapping_at(r, a);
        bool newly = m->access == CU_MEM_ACCESS_FLAGS_PROT_NONE;
        m->access = access;
        mprotect((void *)(uintptr_t)m->base, m->size, prot_for(access));
        if (newly && access != CU_MEM_ACCESS_FLAGS_PROT_NONE)
            sim_physmem_populate(&m->phys->mem, (void *)(uintptr_t)m->base, m->size,
                                 access == CU_MEM_ACCESS_FLAGS_PROT_READWRITE, m->holds_home);
        a = m->base + m->size;
    }
    rc = CUDA_SUCCESS;
out:
    sim_unlock();
    return rc;
}

SIM_EXPORT CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location,
                                   CUdeviceptr ptr) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (flags == NULL || location == NULL) return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    struct sim_range *r = sim_range_find(ptr);
    struct sim_mapping *m = r != NULL && r->kind == SIM_R_RESERVED ? mapping_at(r, ptr) : NULL;
    if (m != NULL) *flags = m->access;
    sim_unlock();
    return m != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (handle == NULL) return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    struct sim_range *r = sim_range_find((uint64_t)(uintptr_t)addr);
    struct sim_mapping *m =
        r != NULL && r->kind == SIM_R_RESERVED ? mapping_at(r, (uint64_t)(uintptr_t)addr) : NULL;
    if (m != NULL) {
        /* A retained handle must be released again, like the one cuMemCreate returned. */
        m->phys->refs++;
        m->phys->handle_refs++;
        *handle = (CUmemGenericAllocationHandle)(uintptr_t)m->phys;
    }
    sim_unlock();
    return m != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

void sim_vmm_lookup(struct sim_range *r, uint64_t addr, struct sim_lookup *out) {
    struct sim_mapping *m = mapping_at(r, addr);
    if (m == NULL) {
        out->loc = SIM_LOC_NONE;
        out->mapped = false;
        return;
    }
    out->mapping_base = m->base;
    out->mapping_size = m->size;
    out->loc = m->phys->device_located ? SIM_LOC_DEVICE : SIM_LOC_HOST;
    out->mapped = m->access != CU_MEM_ACCESS_FLAGS_PROT_NONE;
    out->fd = m->phys->mem.fd;
    out->fd_offset = m->offset + (addr - m->base);
}
