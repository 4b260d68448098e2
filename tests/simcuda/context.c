/* Contexts: primary contexts, created contexts and each thread's context stack. */
#include "sim.h"

#include <stdlib.h>
#include <string.h>

#define CTX_STACK_MAX 64

/* The calling thread's context stack; the top is the current context. */
static _Thread_local struct sim_ctx *ctx_stack[CTX_STACK_MAX];
static _Thread_local int ctx_depth;

struct sim_ctx *sim_current_ctx(void) {
    return ctx_depth > 0 ? ctx_stack[ctx_depth - 1] : NULL;
}

struct sim_ctx *sim_ctx_from_handle(CUcontext h) {
    struct sim_ctx *c = (struct sim_ctx *)h;
    if (c == NULL || c->magic != SIM_MAGIC_CTX) return NULL;
    return c;
}

CUresult sim_require_ctx(struct sim_ctx **out) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    struct sim_ctx *c = sim_current_ctx();
    if (c == NULL) return CUDA_ERROR_INVALID_CONTEXT;
    if (c->primary && !c->dev->primary_active) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    *out = c;
    return CUDA_SUCCESS;
}

/* Creates a context's legacy stream the first time the context is used (lock held). */
static void ctx_activate(struct sim_ctx *c) {
    if (c->legacy == NULL) {
        c->legacy = sim_stream_new(c, 0, 0);
        c->legacy->legacy = true;
    }
}

/* Flags cuCtxCreate, cuCtxSetFlags and cuDevicePrimaryCtxSetFlags accept: bits the driver
 * defines and at most one scheduling policy; the driver rejects anything else with
 * CUDA_ERROR_INVALID_VALUE, so a program relying on a bad flag learns it here too. */
static bool ctx_flags_valid(unsigned flags) {
    unsigned sched = flags & CU_CTX_SCHED_MASK;
    if ((flags & ~(unsigned)CU_CTX_FLAGS_MASK) != 0) return false;
    return sched == CU_CTX_SCHED_AUTO || sched == CU_CTX_SCHED_SPIN ||
           sched == CU_CTX_SCHED_YIELD || sched == CU_CTX_SCHED_BLOCKING_SYNC;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (pctx == NULL) return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= sim.ndevices) return CUDA_ERROR_INVALID_DEVICE;
    struct sim_device *d = &sim.devices[dev];
    sim_lock();
    d->primary_refs++;
    d->primary_active = true;
    d->primary.flags = d->primary_flags;
    ctx_activate(&d->primary);
    sim_unlock();
    *pctx = (CUcontext)&d->primary;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (dev < 0 || dev >= sim.ndevices) return CUDA_ERROR_INVALID_DEVICE;
    struct sim_device *d = &sim.devices[dev];
    sim_lock();
    if (d->primary_refs == 0) {
        sim_unlock();
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    /* The simulator keeps the context's memory when the last reference goes: a GPU process that
     * drops it loses its allocations, but no program here relies on that, and keeping them avoids
     * tearing down executors under a running program. */
    d->primary_refs--;
    sim_unlock();
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (dev < 0 || dev >= sim.ndevices) return CUDA_ERROR_INVALID_DEVICE;
    if (!ctx_flags_valid(flags)) return CUDA_ERROR_INVALID_VALUE;
    sim.devices[dev].primary_flags = flags;
    sim.devices[dev].primary.flags = flags;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (dev < 0 || dev >= sim.ndevices) return CUDA_ERROR_INVALID_DEVICE;
    if (flags == NULL || active == NULL) return CUDA_ERROR_INVALID_VALUE;
    *flags = sim.devices[dev].primary_flags;
    *active = sim.devices[dev].primary_refs > 0;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (dev < 0 || dev >= sim.ndevices) return CUDA_ERROR_INVALID_DEVICE;
    sim_lock();
    sim_device_drain(&sim.devices[dev]);
    sim_unlock();
    return CUDA_SUCCESS;
}

static CUresult ctx_create(CUcontext *pctx, unsigned flags, CUdevice dev) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (pctx == NULL) return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= sim.ndevices) return CUDA_ERROR_INVALID_DEVICE;
    if (!ctx_flags_valid(flags)) return CUDA_ERROR_INVALID_VALUE;
    if (ctx_depth >= CTX_STACK_MAX) return CUDA_ERROR_OUT_OF_MEMORY;
    struct sim_ctx *c = calloc(1, sizeof *c);
    if (c == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    c->magic = SIM_MAGIC_CTX;
    c->dev = &sim.devices[dev];
    c->flags = flags;
    sim_lock();
    c->id = ++sim.next_id;
    sim.devices[dev].primary_active = true; /* the device is in use */
    ctx_activate(c);
    sim_unlock();
    ctx_stack[ctx_depth++] = c;
    *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
    return ctx_create(pctx, flags, dev);
}

SIM_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params, int n,
                                   unsigned int flags, CUdevice dev) {
    (void)params;
    (void)n;
    return ctx_create(pctx, flags, dev);
}

SIM_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags,
                                   CUdevice dev) {
    (void)params;
    return ctx_create(pctx, flags, dev);
}

SIM_EXPORT CUresult cuCtxDestroy_v2(CUcontext h) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    struct sim_ctx *c = sim_ctx_from_handle(h);
    if (c == NULL || c->primary) return CUDA_ERROR_INVALID_CONTEXT;
    /* Queued work completes first. Its result is deliberately not returned: destroying the
     * context is how a program recovers from a sticky error, and the driver's cuCtxDestroy
     * succeeds even after an illegal address. */
    sim_lock();
    (void)sim_ctx_sync_locked(c);
    sim_unlock();
    /* Remove it from this thread's stack; other threads' stacks must not hold it (as on a GPU). */
    for (int i = 0; i < ctx_depth; i++) {
        if (ctx_stack[i] == c) {
            memmove(&ctx_stack[i], &ctx_stack[i + 1], (size_t)(ctx_depth - i - 1) * sizeof c);
            ctx_depth--;
            i--;
        }
    }
    /* The context's streams may still be referenced by finished operations; the struct stays
     * allocated but dead so a stale handle is recognised rather than reused. */
    c->magic = SIM_MAGIC_DEAD;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext h) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    struct sim_ctx *c = sim_ctx_from_handle(h);
    if (c == NULL) return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx_depth >= CTX_STACK_MAX) return CUDA_ERROR_INVALID_VALUE;
    ctx_stack[ctx_depth++] = c;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (ctx_depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
    struct sim_ctx *c = ctx_stack[--ctx_depth];
    if (pctx != NULL) *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxSetCurrent(CUcontext h) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (h == NULL) {
        if (ctx_depth > 0) ctx_depth--;
        return CUDA_SUCCESS;
    }
    struct sim_ctx *c = sim_ctx_from_handle(h);
    if (c == NULL) return CUDA_ERROR_INVALID_CONTEXT;
    sim_lock();
    ctx_activate(c);
    sim_unlock();
    if (ctx_depth == 0) ctx_depth = 1;
    ctx_stack[ctx_depth - 1] = c;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (pctx == NULL) return CUDA_ERROR_INVALID_VALUE;
    *pctx = (CUcontext)sim_current_ctx();
    return CUDA_SUCCESS;
}

static CUresult ctx_or_current(CUcontext h, struct sim_ctx **out) {
    if (h == NULL) return sim_require_ctx(out);
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    *out = sim_ctx_from_handle(h);
    return *out != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

SIM_EXPORT CUresult cuCtxGetDevice(CUdevice *device) {
    struct sim_ctx *c;
    CUresult rc = sim_require_ctx(&c);
    if (rc != CUDA_SUCCESS) return rc;
    if (device == NULL) return CUDA_ERROR_INVALID_VALUE;
    *device = c->dev->ordinal;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext h) {
    struct sim_ctx *c;
    CUresult rc = ctx_or_current(h, &c);
    if (rc != CUDA_SUCCESS) return rc;
    if (device == NULL) return CUDA_ERROR_INVALID_VALUE;
    *device = c->dev->ordinal;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxSynchronize(void) {
    struct sim_ctx *c;
    sim_bill(SIM_COST_CTX_SYNCHRONIZE, SIM_AT_DEVICE, 0);
    CUresult rc = sim_require_ctx(&c);
    if (rc != CUDA_SUCCESS) return rc;
    if ((rc = sim_capture_check_ctx(c)) != CUDA_SUCCESS) return rc;
    if ((rc = sim_fail_check("cuCtxSynchronize")) != CUDA_SUCCESS) return rc;
    sim_lock();
    rc = sim_ctx_sync_locked(c);
    sim_unlock();
    return rc;
}

SIM_EXPORT CUresult cuCtxSynchronize_v2(CUcontext h) {
    struct sim_ctx *c;
    sim_bill(SIM_COST_CTX_SYNCHRONIZE, SIM_AT_DEVICE, 0);
    CUresult rc = ctx_or_current(h, &c);
    if (rc != CUDA_SUCCESS) return rc;
    if ((rc = sim_capture_check_ctx(c)) != CUDA_SUCCESS) return rc;
    if ((rc = sim_fail_check("cuCtxSynchronize")) != CUDA_SUCCESS) return rc;
    sim_lock();
    rc = sim_ctx_sync_locked(c);
    sim_unlock();
    return rc;
}

SIM_EXPORT CUresult cuCtxGetFlags(unsigned int *flags) {
    struct sim_ctx *c;
    CUresult rc = sim_require_ctx(&c);
    if (rc != CUDA_SUCCESS) return rc;
    if (flags == NULL) return CUDA_ERROR_INVALID_VALUE;
    *flags = c->flags;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxSetFlags(unsigned int flags) {
    struct sim_ctx *c;
    CUresult rc = sim_require_ctx(&c);
    if (rc != CUDA_SUCCESS) return rc;
    if (!ctx_flags_valid(flags)) return CUDA_ERROR_INVALID_VALUE;
    c->flags = flags;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetId(CUcontext h, unsigned long long *id) {
    struct sim_ctx *c;
    CUresult rc = ctx_or_current(h, &c);
    if (rc != CUDA_SUCCESS) return rc;
    if (id == NULL) return CUDA_ERROR_INVALID_VALUE;
    *id = c->id;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetApiVersion(CUcontext h, unsigned int *version) {
    struct sim_ctx *c;
    CUresult rc = ctx_or_current(h, &c);
    if (rc != CUDA_SUCCESS) return rc;
    if (version == NULL) return CUDA_ERROR_INVALID_VALUE;
    *version = 3020;
    return CUDA_SUCCESS;
}

/* Limits are stored and read back; the simulator enforces none of them. */
static size_t limits[CU_LIMIT_MAX] = {
    [CU_LIMIT_STACK_SIZE] = 1024,
    [CU_LIMIT_PRINTF_FIFO_SIZE] = 1 << 20,
    [CU_LIMIT_MALLOC_HEAP_SIZE] = 8 << 20,
    [CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH] = 2,
    [CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048,
    [CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 64,
};

SIM_EXPORT CUresult cuCtxGetLimit(size_t *value, CUlimit limit) {
    struct sim_ctx *c;
    CUresult rc = sim_require_ctx(&c);
    if (rc != CUDA_SUCCESS) return rc;
    if (value == NULL || (int)limit < 0 || limit >= CU_LIMIT_MAX) return CUDA_ERROR_INVALID_VALUE;
    *value = limits[limit];
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxSetLimit(CUlimit limit, size_t value) {
    struct sim_ctx *c;
    CUresult rc = sim_require_ctx(&c);
    if (rc != CUDA_SUCCESS) return rc;
    if ((int)limit < 0 || limit >= CU_LIMIT_MAX) return CUDA_ERROR_INVALID_VALUE;
    limits[limit] = value;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetCacheConfig(CUfunc_cache *config) {
    struct sim_ctx *c;
    CUresult rc = sim_require_ctx(&c);
    if (rc != CUDA_SUCCESS) return rc;
    if (config == NULL) return CUDA_ERROR_INVALID_VALUE;
    *config = CU_FUNC_CACHE_PREFER_NONE;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxSetCacheConfig(CUfunc_cache config) {
    struct sim_ctx *c;
    (void)config;
    return sim_require_ctx(&c);
}

SIM_EXPORT CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest) {
    struct sim_ctx *c;
    CUresult rc = sim_require_ctx(&c);
    if (rc != CUDA_SUCCESS) return rc;
    if (least != NULL) *least = 0;
    if (greatest != NULL) *greatest = -5;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxResetPersistingL2Cache(void) {
    struct sim_ctx *c;
    return sim_require_ctx(&c);
}
