/* Stream-ordered allocation: cuMemAllocAsync, cuMemAllocFromPoolAsync, cuMemFreeAsync and
 * memory pools.
 *
 * The memory is mapped when the allocation call is made (the driver may hand out memory the pool
 * already holds just as early), and a free takes effect when its place in the stream is reached
 * on the device: the executor runs it, so another stream still using the buffer then is a
 * recorded hazard, and a later touch is an illegal access. What a free gives back is reused by
 * the pool's reuse policies (reuse.c), each switched by its attribute as on the driver, and the
 * pool keeps it, not the device, until the first synchronising call after the free completed,
 * where it gives back what it holds beyond its release threshold (0 by default). */
#include "sim.h"

#include <stdlib.h>

struct sim_pool {
    uint32_t magic;
    int device;
    bool is_default;
    uint64_t release_threshold;
    /* Reserved: in use and held of frees (reuse.c), counted when asked; its high-water mark is
     * taken at allocations, where it grows. */
    uint64_t reserved_high, used_current, used_high;
    bool destroyed; /* cuMemPoolDestroy came while allocations were outstanding */
    unsigned long long id;
    /* The reuse policies (CU_MEMPOOL_ATTR_REUSE_*), all enabled by default as on the driver. */
    int follow_events, opportunistic, internal_deps;
    struct sim_pool *next; /* live created pools (pool_list) */
};

static struct sim_pool default_pools[SIM_MAX_DEVICES];
static struct sim_pool *pool_list; /* created pools not yet freed (lock held) */

static void pool_init(struct sim_pool *p, int device) {
    p->magic = SIM_MAGIC_POOL;
    p->device = device;
    p->id = ++sim.next_id;
    p->follow_events = p->opportunistic = p->internal_deps = 1;
}

CUmemoryPool sim_pool_default(int device) {
    struct sim_pool *p = &default_pools[device];
    pool_init(p, device);
    p->is_default = true;
    return (CUmemoryPool)p;
}

unsigned long long sim_pool_id(CUmemoryPool pool) {
    return pool != NULL ? ((struct sim_pool *)pool)->id : 0;
}

static struct sim_pool *pool_by_id(unsigned long long id);

bool sim_pool_opportunistic(unsigned long long id) {
    if (id == 0) return true; /* not pool memory (cuMemFreeAsync of a cuMemAlloc allocation) */
    const struct sim_pool *p = pool_by_id(id);
    return p == NULL || p->opportunistic != 0; /* destroyed: nothing can allocate from it */
}

static struct sim_pool *pool_by_id(unsigned long long id) {
    for (int d = 0; d < SIM_MAX_DEVICES; d++)
        if (default_pools[d].id == id) return &default_pools[d];
    for (struct sim_pool *p = pool_list; p != NULL; p = p->next)
        if (p->id == id) return p;
    return NULL;
}

uint64_t sim_pool_keeps(unsigned long long id) {
    const struct sim_pool *p = id != 0 ? pool_by_id(id) : NULL;
    if (p == NULL || p->release_threshold == 0) return 0;
    /* Reserved bytes are the allocations in use and what the pool holds of frees. */
    return p->release_threshold > p->used_current ? p->release_threshold - p->used_current : 0;
}

static void pool_free(struct sim_pool *p) {
    for (struct sim_pool **pp = &pool_list; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
    free(p);
}

static struct sim_pool *pool_from_handle(CUmemoryPool h) {
    struct sim_pool *p = (struct sim_pool *)h;
    if (p == NULL || p->magic != SIM_MAGIC_POOL) return NULL;
    return p;
}

void sim_pool_forget(struct sim_range *r) {
    struct sim_pool *pl = (struct sim_pool *)r->pool;
    if (pl == NULL) return;
    pl->used_current -= r->size <= pl->used_current ? r->size : pl->used_current;
    if (pl->destroyed && pl->used_current == 0) pool_free(pl); /* its last allocation is gone */
    r->pool = NULL;
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t bytes, struct sim_pool *pool, CUstream hs,
                            bool pt) {
    struct sim_ctx *c;
    sim_bill(SIM_COST_MEM_ALLOC_ASYNC, SIM_AT_DEVICE, bytes);
    CUresult rc = sim_require_ctx(&c);
    if (rc != CUDA_SUCCESS) return rc;
    if (dptr == NULL || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    struct sim_stream *s = sim_stream_resolve(hs, pt, &rc);
    if (s == NULL) return rc;
    if ((rc = sim_fail_check("cuMemAllocAsync")) != CUDA_SUCCESS) return rc;
    uint64_t p = 0;
    sim_lock();
    struct sim_device *dev = pool != NULL ? &sim.devices[pool->device] : s->ctx->dev;
    struct sim_pool *pl = pool != NULL ? pool : &default_pools[dev->ordinal];
    rc = sim_reuse_alloc(dev, s, pl->id, pl->follow_events != 0, bytes, &p);
    if (rc == CUDA_SUCCESS) {
        /* Remember the pool: its counters drop at the free, and MEMPOOL_HANDLE names it. */
        sim_range_find(p)->pool = (CUmemoryPool)pl;
        /* Graph memory: its address belongs to the graph for the graph's life (the driver maps
         * it at the allocation node of every launch); a free node does not give it up. */
        sim_range_find(p)->graph_owned = s->capture != NULL;
        pl->used_current += bytes;
        if (pl->used_current > pl->used_high) pl->used_high = pl->used_current;
        uint64_t reserved = pl->used_current + sim_pool_held(dev, pl->id);
        if (reserved > pl->reserved_high) pl->reserved_high = reserved;
    }
    sim_unlock();
    if (rc == CUDA_SUCCESS) *dptr = (CUdeviceptr)p;
    return rc;
}

static CUresult free_async(CUdeviceptr dptr, CUstream hs, bool pt) {
    struct sim_ctx *c;
    sim_bill(SIM_COST_MEM_FREE_ASYNC, SIM_AT_DEVICE, sim_range_bytes(dptr));
    CUresult rc = sim_require_ctx(&c);
    if (rc != CUDA_SUCCESS) return rc;
    struct sim_stream *s = sim_stream_resolve(hs, pt, &rc);
    if (s == NULL) return rc;
    sim_lock();
    struct sim_range *r = sim_range_find(dptr);
    if (r == NULL || r->kind != SIM_R_DEVICE || r->base != dptr) {
        sim_unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    unsigned long long pool = sim_pool_id(r->pool);
    sim_pool_forget(r);
    struct sim_op *op = sim_op_new(SIM_OP_FREE, s);
    if (op == NULL) {
        sim_unlock();
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    op->u.free.addr = dptr;
    op->u.free.pool = pool;
    if (!sim_capture_intercept(s, op, &rc)) sim_op_enqueue(op);
    sim_op_release(op);
    sim_unlock();
    return rc;
}

SIM_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes, CUstream s) {
    return alloc_async(dptr, bytes, NULL, s, false);
}
SIM_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream s) {
    return alloc_async(dptr, bytes, NULL, s, true);
}
SIM_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
                                            CUstream s) {
    struct sim_pool *p = pool_from_handle(pool);
    return p == NULL ? CUDA_ERROR_INVALID_VALUE : alloc_async(dptr, bytes, p, s, false);
}
SIM_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
                                                 CUstream s) {
    struct sim_pool *p = pool_from_handle(pool);
    return p == NULL ? CUDA_ERROR_INVALID_VALUE : alloc_async(dptr, bytes, p, s, true);
}
SIM_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s) {
    return free_async(dptr, s, false);
}
SIM_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s) {
    return free_async(dptr, s, true);
}

SIM_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (pool == NULL || props == NULL || props->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    if (props->location.id < 0 || props->location.id >= sim.ndevices)
        return CUDA_ERROR_INVALID_DEVICE;
    struct sim_pool *p = calloc(1, sizeof *p);
    if (p == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    sim_lock();
    pool_init(p, props->location.id);
    p->next = pool_list;
    pool_list = p;
    sim_unlock();
    *pool = (CUmemoryPool)p;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    sim_lock();
    struct sim_pool *p = pool_from_handle(pool);
    if (p == NULL || p->is_default) {
        sim_unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* As on the driver, outstanding allocations keep the pool's bookkeeping alive until they
     * are freed; the handle itself is dead now. */
    p->magic = SIM_MAGIC_DEAD;
    if (p->used_current == 0) {
        pool_free(p);
    } else {
        p->destroyed = true;
    }
    sim_unlock();
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    sim_lock();
    struct sim_pool *p = pool_from_handle(pool);
    if (p != NULL) {
        /* What the pool holds of completed frees goes back until its reserved bytes (those in
         * use and those held) are down to `keep`; frees not yet complete stay. */
        struct sim_device *dev = &sim.devices[p->device];
        sim_capacity_settle(dev);
        sim_pool_trim(dev, p->id, keep > p->used_current ? keep - p->used_current : 0);
    }
    sim_unlock();
    return p == NULL ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
                                          void *value) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    struct sim_pool *p = pool_from_handle(pool);
    if (p == NULL || value == NULL) return CUDA_ERROR_INVALID_VALUE;
    switch (attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        p->release_threshold = *(cuuint64_t *)value;
        break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
        p->reserved_high = 0;
        break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        p->used_high = 0;
        break;
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        p->follow_events = *(int *)value != 0;
        break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        p->opportunistic = *(int *)value != 0;
        break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        p->internal_deps = *(int *)value != 0; /* stored and reported: not modelled */
        break;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
                                          void *value) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    struct sim_pool *p = pool_from_handle(pool);
    if (p == NULL || value == NULL) return CUDA_ERROR_INVALID_VALUE;
    switch (attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        *(cuuint64_t *)value = p->release_threshold;
        break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
        sim_lock();
        sim_capacity_settle(&sim.devices[p->device]);
        *(cuuint64_t *)value = p->used_current + sim_pool_held(&sim.devices[p->device], p->id);
        sim_unlock();
        break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
        *(cuuint64_t *)value = p->reserved_high;
        break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
        *(cuuint64_t *)value = p->used_current;
        break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        *(cuuint64_t *)value = p->used_high;
        break;
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        *(int *)value = p->follow_events;
        break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        *(int *)value = p->opportunistic;
        break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        *(int *)value = p->internal_deps;
        break;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (dev < 0 || dev >= sim.ndevices) return CUDA_ERROR_INVALID_DEVICE;
    return pool_from_handle(pool) == NULL ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
