/* The engine's arena: per-device setup (context, copy streams, handle properties, granularity),
 * address ranges for buffers and copy windows and events, each reused rather than recreated
 * (pinned host slots: pool_host.c; pooled device memory: pool_device.c).
 * Callers hold eng.lock. */
#include "engine_internal.h"

#include "real.h"
#include "log.h"

#include <stdlib.h>

struct va_range {
    CUdeviceptr va;
    uint64_t span;
    struct va_range *next;
};

/* The engine's own context pushes on this thread, innermost last. A push of the context the
 * engine already made current on this thread (nested inside its own push: a progress point that
 * completes a move, which queries events and remaps) makes no driver call, nor does its pop:
 * between the engine's push and its pop only the engine runs on the thread, and it never changes
 * the current context otherwise, so the context is still the one pushed. Each pair of driver calls
 * is a host cost on a hot path (the simulator charges each call its `default` row); the policy
 * benchmark's per-tensor replays made about 12,000 such pairs a step before, most of them nested.
 * A push the driver refused is remembered too, so that its pop does not pop the application's
 * context instead. Beyond HO_CTX_DEPTH nested pushes every push and pop is the driver's. */
#define HO_CTX_DEPTH 16
enum ctx_push { CTX_PUSHED, CTX_ELIDED, CTX_REFUSED };
static _Thread_local struct {
    int n, overflow;
    CUcontext ctx[HO_CTX_DEPTH]; /* current after each push (the elided ones: the same) */
    unsigned char how[HO_CTX_DEPTH];
} ctx_stack;

void ho_ctx_push(struct ho_dev *d) {
    int n = ctx_stack.n;
    if (n == HO_CTX_DEPTH) {
        ctx_stack.overflow++;
        ho_real.cuCtxPushCurrent_v2(d->ctx);
        return;
    }
    enum ctx_push how = CTX_ELIDED;
    if (n == 0 || ctx_stack.ctx[n - 1] != d->ctx || ctx_stack.how[n - 1] == CTX_REFUSED)
        how = ho_real.cuCtxPushCurrent_v2(d->ctx) == CUDA_SUCCESS ? CTX_PUSHED : CTX_REFUSED;
    ctx_stack.ctx[n] = d->ctx;
    ctx_stack.how[n] = (unsigned char)how;
    ctx_stack.n = n + 1;
}

void ho_ctx_pop(void) {
    CUcontext ignored;
    if (ctx_stack.overflow > 0) {
        ctx_stack.overflow--;
        ho_real.cuCtxPopCurrent_v2(&ignored);
        return;
    }
    if (ctx_stack.n == 0) { /* unpaired: the driver's stack as it was before this change */
        ho_real.cuCtxPopCurrent_v2(&ignored);
        return;
    }
    if (ctx_stack.how[--ctx_stack.n] == CTX_PUSHED) ho_real.cuCtxPopCurrent_v2(&ignored);
}

CUresult ho_event_query(struct ho_dev *d, CUevent e) {
    CUresult rc = ho_real.cuEventQuery(e);
    if (rc == CUDA_SUCCESS || rc == CUDA_ERROR_NOT_READY) return rc;
    ho_ctx_push(d);
    rc = ho_real.cuEventQuery(e);
    ho_ctx_pop();
    return rc;
}

static bool attribute(CUdevice dev, CUdevice_attribute a) {
    int v = 0;
    return ho_real.cuDeviceGetAttribute(&v, a, dev) == CUDA_SUCCESS && v != 0;
}

/* The host location this driver supports for VMM handles, or false: then only uvm can work. */
static bool choose_host_location(CUdevice dev, CUmemLocation *loc) {
    if (attribute(dev, CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)) {
        loc->type = CU_MEM_LOCATION_TYPE_HOST;
        loc->id = 0;
        return true;
    }
    if (attribute(dev, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)) {
        int numa = 0;
        ho_real.cuDeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev);
        loc->type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
        loc->id = numa < 0 ? 0 : numa;
        return true;
    }
    return false;
}

static uint64_t lcm(uint64_t a, uint64_t b) {
    uint64_t x = a, y = b;
    while (y != 0) {
        uint64_t t = x % y;
        x = y;
        y = t;
    }
    return a / x * b;
}

bool ho_dev_setup(int device) {
    HO_ASSERT_HELD(&eng.lock);
    struct ho_dev *d = &eng.dev[device];
    if (d->ready) return true;
    if (d->failed) return false;
    d->failed = true; /* until everything below succeeded */
    CUdevice dev;
    if (ho_real.cuDeviceGet(&dev, device) != CUDA_SUCCESS ||
        ho_real.cuDevicePrimaryCtxRetain(&d->ctx, dev) != CUDA_SUCCESS)
        return false;
    size_t total = 0;
    ho_real.cuDeviceTotalMem_v2(&total, dev);
    d->total_mem = total;
    d->budget = ho_amount_resolve(&ho_options()->budget, total);
    d->budgeted = d->budget != UINT64_MAX;
    d->dev_prop =
        (CUmemAllocationProp){.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                              .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = device}};
    d->host_prop = (CUmemAllocationProp){.type = CU_MEM_ALLOCATION_TYPE_PINNED};
    bool host_vmm = choose_host_location(dev, &d->host_prop.location);
    if (eng.backend == HO_BACKEND_AUTO) {
        bool vmm = attribute(dev, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED);
        eng.backend = vmm && host_vmm ? HO_BACKEND_VMM : HO_BACKEND_UVM;
        ho_log(HO_LOG_INFO, "backend %s (host-located VMM handles %s)",
               ho_backend_name(eng.backend), host_vmm ? "supported" : "not supported");
    } else if (eng.backend == HO_BACKEND_VMM && !host_vmm) {
        ho_log(HO_LOG_WARN, "HOSTOFF_BACKEND=vmm, but the driver has no host-located VMM "
                            "handles: using uvm");
        eng.backend = HO_BACKEND_UVM;
    }
    size_t gran = 0;
    if (ho_real.cuMemGetAllocationGranularity(&gran, &d->dev_prop,
                                              CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS ||
        gran == 0)
        return false;
    if (gran > eng.granule) eng.granule = gran;
    if (host_vmm) {
        /* Host-located handles have their own granularity (the host's page size the driver pins
         * in): a buffer's span must suit both locations, since it maps either. Asked, never
         * assumed. */
        size_t host_gran = 0;
        if (ho_real.cuMemGetAllocationGranularity(
                &host_gran, &d->host_prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS ||
            host_gran == 0) {
            if (eng.backend == HO_BACKEND_VMM) return false;
        } else {
            eng.granule = lcm(eng.granule, host_gran);
        }
    }
    ho_ctx_push(d);
    bool ok = true;
    for (int q = 0; q < HO_NQUEUES && ok; q++)
        ok = ho_real.cuStreamCreate(&d->stream[q], CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS;
    /* The barriers of chunked evictions (engine_send.c); without it, evictions go whole. */
    if (ok && eng.backend == HO_BACKEND_VMM && eng.send_chunk > 0 &&
        ho_real.cuStreamCreate(&d->gate, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
        d->gate = NULL;
    ho_ctx_pop();
    if (!ok) return false;
    d->failed = false;
    d->ready = true;
    return true;
}

/* The event pool has its own lock: ho_engine_finish takes events without eng.lock. */
static pthread_mutex_t events_lock = PTHREAD_MUTEX_INITIALIZER;

CUevent ho_event_get(struct ho_dev *d) {
    pthread_mutex_lock(&events_lock);
    CUevent e = d->nfree_events > 0 ? d->free_events[--d->nfree_events] : NULL;
    pthread_mutex_unlock(&events_lock);
    if (e != NULL) return e;
    ho_ctx_push(d);
    if (ho_real.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) e = NULL;
    ho_ctx_pop();
    return e;
}

/* An event goes back once nothing will wait on its current record: a cuStreamWaitEvent already
 * enqueued keeps the state it saw, so re-recording it later changes nothing there. */
void ho_event_put(struct ho_dev *d, CUevent e) {
    if (e == NULL) return;
    pthread_mutex_lock(&events_lock);
    if (d->nfree_events == d->cap_events) {
        size_t cap = d->cap_events ? d->cap_events * 2 : 64;
        CUevent *n = realloc(d->free_events, cap * sizeof *n);
        if (n == NULL) {
            pthread_mutex_unlock(&events_lock);
            ho_real.cuEventDestroy_v2(e);
            return;
        }
        d->free_events = n;
        d->cap_events = cap;
    }
    d->free_events[d->nfree_events++] = e;
    pthread_mutex_unlock(&events_lock);
}

CUresult ho_event_record(CUevent e, CUstream s, bool per_thread) {
    return implicit_per_thread(s, per_thread) ? ho_real.cuEventRecord_ptsz(e, NULL)
                                              : ho_real.cuEventRecord(e, s);
}

CUdeviceptr ho_va_get(uint64_t span) {
    HO_ASSERT_HELD(&eng.lock);
    for (struct va_range **pp = &eng.va_pool; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->span == span) {
            struct va_range *r = *pp;
            *pp = r->next;
            CUdeviceptr va = r->va;
            free(r);
            return va;
        }
    }
    CUdeviceptr va = 0;
    if (ho_real.cuMemAddressReserve(&va, span, 0, 0, 0) != CUDA_SUCCESS) return 0;
    return va;
}

void ho_va_put(CUdeviceptr va, uint64_t span) {
    HO_ASSERT_HELD(&eng.lock);
    struct va_range *r = malloc(sizeof *r);
    if (r == NULL) {
        ho_real.cuMemAddressFree(va, span);
        return;
    }
    r->va = va;
    r->span = span;
    r->next = eng.va_pool;
    eng.va_pool = r;
}

/* The devices that may reach device `device`'s memory directly (peer access): a buffer the
 * application allocated with cuMemAlloc is reachable from them once it enables peer access, so
 * the engine's mapping of it grants them access too. Asked once per device. */
int ho_peers_of(int device, CUmemAccessDesc *desc) {
    static int npeers[HO_MAX_DEVICES] = {0};
    static int peer[HO_MAX_DEVICES][HO_MAX_DEVICES];
    static bool asked[HO_MAX_DEVICES];
    static pthread_mutex_t peers_lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&peers_lock);
    if (!asked[device]) {
        int count = 0;
        if (ho_real.cuDeviceGetCount == NULL || ho_real.cuDeviceGetCount(&count) != CUDA_SUCCESS)
            count = 0;
        for (int o = 0; o < count && o < HO_MAX_DEVICES; o++) {
            int can = 0;
            if (o != device && ho_real.cuDeviceCanAccessPeer != NULL &&
                ho_real.cuDeviceCanAccessPeer(&can, o, device) == CUDA_SUCCESS && can)
                peer[device][npeers[device]++] = o;
        }
        asked[device] = true;
    }
    pthread_mutex_unlock(&peers_lock);
    int n = 0;
    desc[n++] = (CUmemAccessDesc){.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = device},
                                  .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    for (int i = 0; i < npeers[device]; i++)
        desc[n++] = (CUmemAccessDesc){
            .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = peer[device][i]},
            .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    return n;
}

void ho_range_drop(CUdeviceptr va, uint64_t span, CUmemGenericAllocationHandle h, bool mapped) {
    HO_ASSERT_HELD(&eng.lock);
    if (mapped) ho_real.cuMemUnmap(va, span);
    if (va != 0) ho_va_put(va, span);
    if (h != 0) ho_real.cuMemRelease(h);
}
