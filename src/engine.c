/* The engine's state and the calls the hooks make that are not uses, allocations or moves:
 * starting it, memory info under the budget, reclaiming for a plain allocation, step markers,
 * destroyed streams, pinning, and forgetting everything in a fork child. */
#include "engine_internal.h"

#include "log.h"
#include "move_cost.h"
#include "lookahead.h"
#include "oracle.h"
#include "real.h"
#include "stats.h"
#include "trace.h"

#include <string.h>

struct ho_engine eng = {
    .lock = HO_MUTEX_INITIALIZER, .granule = 2u << 20, .policy = {&ho_policy_lru_ops, NULL}};

const char *ho_engine_backend_name(void) {
    return eng.backend == HO_BACKEND_AUTO ? "none" : ho_backend_name(eng.backend);
}

bool ho_engine_active(void) {
    return eng.active;
}

/* The oracle policy, following the plan at `path` (written by `hostoff replay --policy oracle`);
 * false, with one line saying why, when the plan cannot be had. */
static bool oracle_policy(const char *path, struct ho_policy *p) {
    char err[512];
    struct ho_oracle_plan plan = {0};
    if (path == NULL) {
        ho_log(HO_LOG_ERROR, "HOSTOFF_POLICY=oracle needs HOSTOFF_ORACLE_PLAN (hostoff replay "
                             "--policy oracle writes it): using lookahead");
        return false;
    }
    if (ho_oracle_read(path, &plan, err, sizeof err) != 0) {
        ho_log(HO_LOG_ERROR, "HOSTOFF_ORACLE_PLAN=%s", err);
        return false;
    }
    if (!ho_policy_oracle(p, &plan)) {
        ho_log(HO_LOG_ERROR, "HOSTOFF_ORACLE_PLAN=%s: out of memory: using lookahead", path);
        return false;
    }
    return true;
}

/* The policy the options ask for: the oracle falls back to lookahead when its plan cannot be
 * had, lookahead to lru when out of memory. */
static struct ho_policy choose_policy(const struct ho_options *o) {
    struct ho_policy p = {&ho_policy_lru_ops, NULL};
    if (o->policy == HO_CHOOSE_ORACLE && oracle_policy(o->oracle_plan, &p)) return p;
    if (o->policy == HO_CHOOSE_LOOKAHEAD || o->policy == HO_CHOOSE_ORACLE) {
        /* The first lead: 8 launches; late restores double it per buffer role. */
        if (!ho_policy_lookahead(&p, 8))
            ho_log(HO_LOG_WARN, "out of memory for the lookahead policy: using lru");
    }
    return p;
}

void ho_engine_init(const struct ho_options *o) {
    eng.backend = o->backend;
    eng.min_bytes = o->min_bytes;
    /* Which HOSTOFF_MIN_BYTES is in force and why (the report says it too). */
    if (o->min_bytes_auto)
        ho_log(HO_LOG_INFO,
               "HOSTOFF_MIN_BYTES=auto: %llu bytes, the smallest buffer whose bytes take the link "
               "(%.0f GB/s, published) as long as its round trip's fixed remap time (%u us, "
               "published driver costs)",
               (unsigned long long)o->min_bytes, HO_PUBLISHED_LINK_BYTES_PER_NS,
               (HO_PUBLISHED_EVICT_REMAP_NS + HO_PUBLISHED_RESTORE_REMAP_NS) / 1000u);
    else
        ho_log(HO_LOG_INFO, "HOSTOFF_MIN_BYTES: %llu bytes, as set",
               (unsigned long long)o->min_bytes);
    eng.host_limit = ho_amount_resolve(&o->host_limit, UINT64_MAX);
    eng.send_chunk = o->evict_chunk;
    eng.policy = choose_policy(o);
    eng.active = true;
}

bool ho_current_device(int *device) {
    CUdevice dev;
    if (ho_real.cuCtxGetDevice(&dev) != CUDA_SUCCESS || dev < 0 || dev >= HO_MAX_DEVICES)
        return false;
    *device = dev;
    return true;
}

void ho_engine_before_block(void) {
    /* The application's thread is about to wait, and makes no progress meanwhile: the chunks
     * of evictions still held go to the link now, so that it does not idle (engine_send.c). */
    if (eng.active && atomic_load(&eng.capturing) == 0) ho_send_flush_all();
}

void ho_engine_capture(int delta) {
    /* No progress is made while a capture is under way: the evictions' chunks still held go to
     * the link now rather than wait for its end. */
    if (delta > 0 && eng.active) ho_send_flush_all();
    atomic_fetch_add(&eng.capturing, delta);
    if (atomic_load(&eng.capturing) < 0) atomic_store(&eng.capturing, 0);
}

void ho_engine_meminfo(size_t *free_bytes, size_t *total) {
    int device;
    if (!eng.active || free_bytes == NULL || total == NULL || !ho_current_device(&device)) return;
    ho_mutex_lock(&eng.lock);
    struct ho_dev *d = &eng.dev[device];
    ho_dev_setup(device); /* the budget applies before the first managed allocation too */
    if (d->ready && d->budget != UINT64_MAX) {
        /* With a budget, the device looks as large as the budget and as free as the budget's
         * unused part, never freer than the device really is. */
        if (*total > d->budget) *total = d->budget;
        /* Cached device memory is free as far as the application can tell: it is given up first. */
        uint64_t held = d->resident - d->cached - d->sfree_bytes;
        uint64_t room = d->budget > held ? d->budget - held : 0;
        if (*free_bytes > room) *free_bytes = room;
    }
    ho_mutex_unlock(&eng.lock);
}

bool ho_engine_reclaim(size_t bytes) {
    int device;
    if (!eng.active || atomic_load(&eng.capturing) > 0 || !ho_current_device(&device)) return false;
    uint64_t stall = 0;
    ho_mutex_lock(&eng.lock);
    bool freed =
        eng.dev[device].ready && ho_reclaim_device(&eng.dev[device], bytes, NULL, 0, &stall);
    ho_mutex_unlock(&eng.lock);
    ho_count_stall(stall);
    return freed;
}

/* A step marker from the application (hostoff.h): the next launch starts a training step. */
__attribute__((visibility("default"))) void hostoff_mark_step(void) {
    ho_trace_step();
    if (!eng.policy.ops->plans) return;
    ho_mutex_lock(&eng.lock);
    eng.policy.ops->step(eng.policy.self);
    ho_mutex_unlock(&eng.lock);
}

void ho_engine_stream_destroyed(CUstream s) {
    if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) return;
    ho_mutex_lock(&eng.lock);
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
    ho_mutex_unlock(&eng.lock);
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
    ho_mutex_lock(&eng.lock);
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
    ho_mutex_unlock(&eng.lock);
}

void ho_engine_pin(uint64_t addr) {
    ho_registry_read_begin();
    struct ho_buffer *b = ho_registry_lookup_locked(addr);
    struct ho_managed *m = b != NULL ? b->engine : NULL;
    ho_registry_read_end();
    if (m == NULL) return;
    ho_mutex_lock(&eng.lock);
    m->pinned = true;
    ho_mutex_unlock(&eng.lock);
}

void ho_engine_fork_child(void) {
    /* The parent's device state is unusable in the child: forget it, move nothing. */
    ho_mutex_reinit(&eng.lock);
    memset(eng.dev, 0, sizeof eng.dev);
    eng.all = NULL;
    eng.host_pool = NULL;
    eng.va_pool = NULL;
    eng.host_used = eng.host_waste = eng.host_pooled = eng.host_peak_used = 0;
    eng.host_exact = false;
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
