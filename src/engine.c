/* The engine's state and the calls the hooks make that are not uses, allocations or moves:
 * starting it, memory info under the budget, reclaiming for a plain allocation, step markers,
 * destroyed streams, pinning, and forgetting everything in a fork child. */
#include "engine_internal.h"

#include "log.h"
#include "lookahead.h"
#include "real.h"
#include "stats.h"
#include "trace.h"

#include <string.h>

struct ho_engine eng = {.lock = PTHREAD_MUTEX_INITIALIZER, .granule = 2u << 20};

const char *ho_engine_backend_name(void) {
    switch (eng.backend) {
    case HO_BACKEND_VMM:
        return "vmm";
    case HO_BACKEND_UVM:
        return "uvm";
    default:
        return "none";
    }
}

bool ho_engine_active(void) {
    return eng.active;
}

void ho_engine_init(const struct ho_options *o) {
    eng.backend = o->backend;
    eng.min_bytes = o->min_bytes;
    eng.host_limit = ho_amount_resolve(&o->host_limit, UINT64_MAX);
    bool oracle = o->policy == HO_CHOOSE_ORACLE && ho_oracle_load(o->oracle_plan);
    if (o->policy == HO_CHOOSE_LOOKAHEAD || (o->policy == HO_CHOOSE_ORACLE && !oracle)) {
        /* The first lead: 8 launches; late restores double it per buffer role. */
        eng.la = ho_la_create(8);
        if (eng.la == NULL)
            ho_log(HO_LOG_WARN, "out of memory for the lookahead policy: using lru");
    }
    eng.active = true;
}

bool ho_current_device(int *device) {
    CUdevice dev;
    if (ho_real.cuCtxGetDevice(&dev) != CUDA_SUCCESS || dev < 0 || dev >= HO_MAX_DEVICES)
        return false;
    *device = dev;
    return true;
}

void ho_engine_capture(int delta) {
    atomic_fetch_add(&eng.capturing, delta);
    if (atomic_load(&eng.capturing) < 0) atomic_store(&eng.capturing, 0);
}

void ho_engine_meminfo(size_t *free_bytes, size_t *total) {
    int device;
    if (!eng.active || free_bytes == NULL || total == NULL || !ho_current_device(&device)) return;
    pthread_mutex_lock(&eng.lock);
    struct ho_dev *d = &eng.dev[device];
    ho_dev_setup(device); /* the budget applies before the first managed allocation too */
    if (d->ready && d->budget != UINT64_MAX) {
        /* With a budget, the device looks as large as the budget and as free as the budget's
         * unused part, never freer than the device really is. */
        if (*total > d->budget) *total = d->budget;
        /* Cached device memory is free as far as the application can tell: it is given up first. */
        uint64_t held = d->resident - d->cached;
        uint64_t room = d->budget > held ? d->budget - held : 0;
        if (*free_bytes > room) *free_bytes = room;
    }
    pthread_mutex_unlock(&eng.lock);
}

bool ho_engine_reclaim(size_t bytes) {
    int device;
    if (!eng.active || atomic_load(&eng.capturing) > 0 || !ho_current_device(&device)) return false;
    uint64_t stall = 0;
    pthread_mutex_lock(&eng.lock);
    bool freed = eng.dev[device].ready && ho_reclaim_device(&eng.dev[device], bytes, &stall);
    pthread_mutex_unlock(&eng.lock);
    ho_count_stall(stall);
    return freed;
}

/* A step marker from the application (hostoff.h): the next launch starts a training step. */
__attribute__((visibility("default"))) void hostoff_mark_step(void) {
    ho_trace_step();
    if (eng.la == NULL) return;
    pthread_mutex_lock(&eng.lock);
    ho_la_step(eng.la);
    pthread_mutex_unlock(&eng.lock);
}

void ho_engine_stream_destroyed(CUstream s) {
    if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) return;
    pthread_mutex_lock(&eng.lock);
    if (eng.npend > 0 && eng.pend_stream == s) ho_clock_flush(); /* while s still exists */
    for (struct ho_managed *m = eng.all; m != NULL; m = m->next) {
        if (!ho_users_drop_stream(m, s)) continue;
        struct ho_dev *d = dev_of(m);
        CUevent e = ho_event_get(d);
        ho_ctx_push(d);
        /* No room for the event: wait for the stream's work here instead. */
        if (!ho_users_add_event(m, e, s, false)) ho_real.cuStreamSynchronize(s);
        ho_ctx_pop();
    }
    pthread_mutex_unlock(&eng.lock);
}

bool ho_engine_capturing(void) {
    return atomic_load_explicit(&eng.capturing, memory_order_relaxed) > 0;
}

void ho_engine_pin_escaped(uint64_t addr) {
    if (!eng.active) return;
    ho_registry_read_begin();
    struct ho_buffer *b = ho_registry_lookup_locked(addr);
    struct ho_managed *m = b != NULL ? b->engine : NULL;
    ho_registry_read_end();
    if (m == NULL) return;
    pthread_mutex_lock(&eng.lock);
    if (!m->pinned) {
        /* Its bytes must be where its handle is for good: a move on its way finishes or gives
         * way, and a buffer away is brought back when there is room (else it stays pinned on
         * the host handle, which the returned handle then names). */
        if (atomic_load(&m->state) == HO_EVICTING) atomic_store(&m->state, HO_RESIDENT);
        if (m->tr != NULL) ho_count_stall(ho_wait_move(m));
        if (atomic_load(&m->state) == HO_HOST && atomic_load(&eng.capturing) == 0)
            ho_demand_restore(m, NULL, 0);
        if (m->tr != NULL) ho_count_stall(ho_wait_move(m));
        m->pinned = true;
        ho_want_drop(dev_of(m), m);
        ho_defer_drop(dev_of(m), m);
        ho_count(&ho_stats.counts_escaped_handles, 1);
    }
    pthread_mutex_unlock(&eng.lock);
}

void ho_engine_pin(uint64_t addr) {
    ho_registry_read_begin();
    struct ho_buffer *b = ho_registry_lookup_locked(addr);
    struct ho_managed *m = b != NULL ? b->engine : NULL;
    ho_registry_read_end();
    if (m == NULL) return;
    pthread_mutex_lock(&eng.lock);
    m->pinned = true;
    pthread_mutex_unlock(&eng.lock);
}

void ho_engine_fork_child(void) {
    /* The parent's device state is unusable in the child: forget it, move nothing. */
    pthread_mutex_init(&eng.lock, NULL);
    memset(eng.dev, 0, sizeof eng.dev);
    eng.all = NULL;
    eng.host_pool = NULL;
    eng.va_pool = NULL;
    eng.host_used = eng.host_pooled = 0;
    atomic_store(&eng.inflight, 0);
    atomic_store(&eng.moving, 0);
    atomic_store(&eng.capturing, 0);
    ho_unseen_fork_child();
    eng.timed = NULL; /* the parent's events mean nothing here */
    eng.npend = 0;
    eng.ntimed = eng.captimed = 0;
    atomic_store(&eng.timing, false);
    eng.active = false;
}
