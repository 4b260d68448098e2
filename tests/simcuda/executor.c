/* The device executor: runs each device's operations in enqueue order on the simulator's own
 * thread, computes their virtual start and end, and records faults, hazards and remote accesses.
 *
 * Why one FIFO per device: enqueue order already respects stream order and event waits (a wait
 * names a record that was enqueued before it), so running in that order needs no scheduler and
 * the virtual timeline it computes depends only on the order of calls, never on wall-clock
 * timing. Overlap between streams lives in virtual time, not in threads. */
#include "sim.h"

#include <stdlib.h>
#include <string.h>

static _Thread_local uint64_t body_duration_ns;
static _Thread_local bool body_duration_set;
/* The kernel whose body runs on this executor thread (its ranges grow by simcuda_kernel_access). */
static _Thread_local struct sim_op *body_op;

SIM_EXPORT void simcuda_set_duration_ns(uint64_t ns) {
    body_duration_ns = ns;
    body_duration_set = true;
}

SIM_EXPORT uint64_t simcuda_now_ns(void) {
    return sim_now();
}

/* Called from a kernel body with the lock released; only this executor thread touches body_op's
 * range list while its body runs (hazard scans read operations that have completed). */
SIM_EXPORT void simcuda_kernel_access(const void *ptr, uint64_t bytes) {
    if (body_op != NULL && ptr != NULL) sim_op_add_ref(body_op, (uint64_t)(uintptr_t)ptr, bytes);
}

struct sim_op *sim_op_new(enum sim_op_kind kind, struct sim_stream *s) {
    struct sim_op *op = calloc(1, sizeof *op);
    if (op == NULL) return NULL;
    op->kind = kind;
    op->refs = 1;
    op->stream = s;
    op->stream_ordered = s != NULL;
    op->dev = s != NULL ? s->ctx->dev : NULL;
    if (s != NULL) s->refs++;
    return op;
}

void sim_op_add_dep(struct sim_op *op, struct sim_op *dep) {
    struct sim_op **d = realloc(op->deps, (size_t)(op->ndeps + 1) * sizeof *d);
    if (d == NULL) return; /* an unmet dependency only loses ordering, never memory safety */
    op->deps = d;
    dep->refs++;
    op->deps[op->ndeps++] = dep;
}

void sim_op_add_ref(struct sim_op *op, uint64_t addr, uint64_t bytes) {
    struct sim_range_ref *r = realloc(op->refs_list, (size_t)(op->nrefs + 1) * sizeof *r);
    if (r == NULL) return;
    op->refs_list = r;
    op->refs_list[op->nrefs].addr = addr;
    op->refs_list[op->nrefs].bytes = bytes;
    op->nrefs++;
}

static void stream_release(struct sim_stream *s) {
    if (--s->refs == 0 && s->destroyed) {
        s->magic = SIM_MAGIC_DEAD;
        free(s);
    }
}

void sim_op_release(struct sim_op *op) {
    if (op == NULL || --op->refs > 0) return;
    for (int i = 0; i < op->ndeps; i++)
        sim_op_release(op->deps[i]);
    free(op->deps);
    free(op->refs_list);
    if (op->kind == SIM_OP_KERNEL) {
        free(op->u.kernel.params);
        free(op->u.kernel.argbuf);
    } else if (op->kind == SIM_OP_COPY) {
        free(op->u.copy.staging);
    } else if (op->kind == SIM_OP_CALL && op->u.call.drop != NULL) {
        op->u.call.drop(op->u.call.data);
    }
    if (op->stream != NULL) stream_release(op->stream);
    free(op);
}

static void *executor_main(void *arg);

static void executor_start(struct sim_device *dev) {
    if (dev->thread_started) return;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    /* Kernel bodies run on this thread: give them a generous stack. */
    pthread_attr_setstacksize(&attr, 8u << 20);
    if (pthread_create(&dev->thread, &attr, executor_main, dev) == 0) dev->thread_started = true;
    pthread_attr_destroy(&attr);
}

void sim_op_enqueue(struct sim_op *op) {
    struct sim_device *dev = op->dev;
    op->enq_ns = sim_now();
    op->seq = ++dev->enqueued_seq;
    op->refs++; /* the queue's reference, dropped by the executor */
    if (op->kind == SIM_OP_FREE) dev->frees_queued++; /* graph launches' free nodes too */
    if (op->stream != NULL && op->stream_ordered) {
        op->refs++;
        sim_op_release(op->stream->last_op);
        op->stream->last_op = op;
    }
    op->next = NULL;
    if (dev->tail != NULL)
        dev->tail->next = op;
    else
        dev->head = op;
    dev->tail = op;
    executor_start(dev);
    pthread_cond_broadcast(&sim.progress);
}

static _Thread_local bool on_executor;

/* A call that has waited for the operation numbered `seq` on dev has seen everything the device
 * did up to it: a fault there becomes the program's sticky error. Publishing here, rather than
 * when the executor faults, makes which calls report the error depend only on the order of
 * calls: a launch made before any call waited for the fault succeeds however far the executor
 * has got in wall-clock time, as an error reported asynchronously at a later call would. */
static void publish_fault(struct sim_device *dev, uint64_t seq) {
    if (!on_executor && dev != NULL && dev->fault_seq != 0 && seq >= dev->fault_seq)
        sim.sticky = sim.device_error;
}

void sim_op_wait_done(struct sim_op *op) {
    while (!op->done)
        pthread_cond_wait(&sim.progress, &sim.lock);
    publish_fault(op->dev, op->seq);
}

/* Waits for op and returns its virtual end. The wait releases the lock, and meanwhile another
 * thread may enqueue on the same stream or re-record the same event, dropping the reference the
 * caller found op through: hold one of our own across the wait. */
uint64_t sim_op_wait_end(struct sim_op *op) {
    op->refs++;
    sim_op_wait_done(op);
    uint64_t end = op->end_ns;
    sim_op_release(op);
    return end;
}

void sim_device_drain(struct sim_device *dev) {
    uint64_t target = dev->enqueued_seq;
    while (dev->done_seq < target)
        pthread_cond_wait(&sim.progress, &sim.lock);
    publish_fault(dev, target);
}

static void advance_host_to(uint64_t t) {
    uint64_t cur = sim_now();
    while (cur < t && !atomic_compare_exchange_weak(&sim.host_ns, &cur, t)) {
    }
}

/* The launch queue. A stream holds at most SIMCUDA_LAUNCH_QUEUE kernels that have not ended;
 * one more launch blocks the host until the oldest one ends, and then returns. Measured on
 * NVIDIA's driver (docs/simcuda.md, "Asynchrony and virtual time"): about 1000 launches queue on
 * one stream at a few microseconds each, after which each launch takes as long as a kernel runs,
 * and each stream has a queue of its own. Without it the host ran any number of launches ahead
 * of the device, which no real host can. */
void sim_stream_admit(struct sim_stream *s, struct sim_op *op) {
    uint64_t depth = sim.cfg.launch_queue;
    if (depth == 0) return; /* unbounded, as before the queue was modelled */
    if (s->queue == NULL && (s->queue = calloc(depth, sizeof *s->queue)) == NULL)
        return; /* no memory for the ring: this stream's launches never wait */
    /* The wait releases the lock: another thread launching onto s may free the place first, or
     * destroy s (its ring goes). Holding a reference of our own, the oldest can be compared
     * after the wait; the place is taken only while the queue is still full of the same ones. */
    while (s->queue != NULL && s->queue_len == depth) {
        struct sim_op *oldest = s->queue[s->queue_head];
        oldest->refs++;
        advance_host_to(sim_op_wait_end(oldest));
        if (s->queue != NULL && s->queue_len == depth && s->queue[s->queue_head] == oldest) {
            sim_op_release(oldest); /* the ring's reference */
            s->queue_head = (unsigned)((s->queue_head + 1) % depth);
            s->queue_len--;
        }
        sim_op_release(oldest);
    }
    if (s->queue == NULL) return; /* destroyed meanwhile: the launch goes untracked */
    op->refs++;
    s->queue[(s->queue_head + s->queue_len) % depth] = op;
    s->queue_len++;
}

void sim_stream_queue_drop(struct sim_stream *s) {
    uint64_t depth = sim.cfg.launch_queue;
    for (unsigned i = 0; s->queue != NULL && i < s->queue_len; i++)
        sim_op_release(s->queue[(s->queue_head + i) % depth]);
    free(s->queue);
    s->queue = NULL;
    s->queue_len = s->queue_head = 0;
}

CUresult sim_stream_sync_locked(struct sim_stream *s) {
    struct sim_op *op = s->last_op;
    if (op != NULL) advance_host_to(sim_op_wait_end(op));
    s->ctx->dev->synced_ns = sim_now();
    return sim.sticky;
}

CUresult sim_ctx_sync_locked(struct sim_ctx *ctx) {
    struct sim_device *dev = ctx->dev;
    sim_device_drain(dev);
    uint64_t end = 0;
    if (dev->h2d.free_ns > end) end = dev->h2d.free_ns;
    if (dev->d2h.free_ns > end) end = dev->d2h.free_ns;
    if (ctx->blocking_end_ns > end) end = ctx->blocking_end_ns;
    if (ctx->legacy != NULL && ctx->legacy->last_end_ns > end) end = ctx->legacy->last_end_ns;
    if (dev->max_end_ns > end) end = dev->max_end_ns;
    advance_host_to(end);
    dev->synced_ns = sim_now();
    return sim.sticky;
}

static bool ranges_overlap(uint64_t a, uint64_t an, uint64_t b, uint64_t bn) {
    return a < b + bn && b < a + an;
}

static void heap_swap(struct sim_op **h, size_t a, size_t b) {
    struct sim_op *t = h[a];
    h[a] = h[b];
    h[b] = t;
}

/* Keeps a record of op (referenced) until it has surely ended. */
static void inflight_push(struct sim_device *dev, struct sim_op *op) {
    if (dev->ninflight == dev->cap_inflight) {
        size_t cap = dev->cap_inflight ? dev->cap_inflight * 2 : 256;
        struct sim_op **n = realloc(dev->inflight, cap * sizeof *n);
        if (n == NULL) return; /* an unrecorded operation only weakens hazard detection */
        dev->inflight = n;
        dev->cap_inflight = cap;
    }
    op->refs++;
    size_t i = dev->ninflight++;
    dev->inflight[i] = op;
    while (i > 0 && dev->inflight[(i - 1) / 2]->end_ns > dev->inflight[i]->end_ns) {
        heap_swap(dev->inflight, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

/* Drops in-flight records that can no longer matter: they ended before `floor`, and no later
 * check can ask about an earlier time. */
static void inflight_prune(struct sim_device *dev, uint64_t floor) {
    struct sim_op **h = dev->inflight;
    while (dev->ninflight > 0 && h[0]->end_ns <= floor) {
        sim_op_release(h[0]);
        h[0] = h[--dev->ninflight];
        size_t i = 0;
        for (;;) {
            size_t l = 2 * i + 1, r = l + 1, m = i;
            if (l < dev->ninflight && h[l]->end_ns < h[m]->end_ns) m = l;
            if (r < dev->ninflight && h[r]->end_ns < h[m]->end_ns) m = r;
            if (m == i) break;
            heap_swap(h, i, m);
            i = m;
        }
    }
}

static void hazard_scan(struct sim_device *dev, uint64_t addr, uint64_t bytes, uint64_t at_ns,
                        const struct sim_op *self) {
    for (size_t k = 0; k < dev->ninflight; k++) {
        const struct sim_op *op = dev->inflight[k];
        if (op == self || op->end_ns <= at_ns || op->failed) continue;
        for (int i = 0; i < op->nrefs; i++) {
            if (ranges_overlap(op->refs_list[i].addr, op->refs_list[i].bytes, addr, bytes)) {
                sim.stats.hazards++;
                return; /* one hazard per unmap, however many operations it hits */
            }
        }
    }
}

void sim_hazard_check(struct sim_device *dev, uint64_t addr, uint64_t bytes, uint64_t at_ns) {
    /* Let the executors catch up (wall clock only): then every operation enqueued so far has a
     * known virtual end, and the answer is exact. Every device: with peer access a kernel on
     * another device may be using this memory too. */
    (void)dev;
    uint64_t before = sim.stats.hazards;
    for (int d = 0; d < sim.ndevices && sim.stats.hazards == before; d++) {
        sim_device_drain(&sim.devices[d]);
        hazard_scan(&sim.devices[d], addr, bytes, at_ns, NULL);
    }
}

/* ------------------------------------------------------------------ running one operation */

struct kernel_call {
    sim_kernel_body body;
    void **params;
};

static void call_kernel(void *arg) {
    struct kernel_call *k = arg;
    k->body(k->params);
}

#define COPY_SEGMENTS 64

struct copy_call {
    struct sim_copy_op *c;
    int nseg; /* -1: the whole copy; else only these stretches (holecopy.c punched the rest) */
    struct sim_copy_segment seg[COPY_SEGMENTS];
};

static void call_copy(void *arg) {
    struct copy_call *call = arg;
    struct sim_copy_op *c = call->c;
    if (call->nseg >= 0) {
        for (int i = 0; i < call->nseg; i++)
            memmove((unsigned char *)c->dst + call->seg[i].at,
                    (const unsigned char *)c->src + call->seg[i].at, call->seg[i].bytes);
        return;
    }
    const unsigned char *src = c->staging != NULL ? c->staging : c->src;
    if (c->height <= 1) {
        memmove(c->dst, src, c->bytes);
        return;
    }
    for (size_t row = 0; row < c->height; row++)
        memmove((unsigned char *)c->dst + row * c->dst_pitch, src + row * c->src_pitch, c->bytes);
}

static void call_memset(void *arg) {
    struct sim_memset_op *m = arg;
    size_t rows = m->height < 1 ? 1 : m->height;
    for (size_t row = 0; row < rows; row++) {
        unsigned char *p = (unsigned char *)m->dst + row * m->pitch;
        if (m->elem == 1) {
            memset(p, (int)(m->value & 0xff), m->count);
        } else if (m->elem == 2) {
            uint16_t v = (uint16_t)m->value;
            for (size_t i = 0; i < m->count; i++)
                memcpy(p + 2 * i, &v, 2);
        } else {
            uint32_t v = m->value;
            for (size_t i = 0; i < m->count; i++)
                memcpy(p + 4 * i, &v, 4);
        }
    }
}

void sim_record_fault(uint64_t addr) {
    if (sim.stats.illegal_accesses == 0) sim.stats.first_illegal_addr = addr;
    sim.stats.illegal_accesses++;
    sim.device_error = CUDA_ERROR_ILLEGAL_ADDRESS; /* published by a waiting call */
}

/* Runs fn guarded with the lock released. Returns false (and records the fault) on a fault. */
bool sim_run_unlocked(void (*fn)(void *), void *arg) {
    uint64_t fault = 0;
    sim_unlock();
    bool ok = sim_guarded_run(fn, arg, &fault);
    sim_lock();
    if (!ok) sim_record_fault(fault);
    return ok;
}

/* Checks every byte range a copy or memset touches is mapped for the device (sparse mode, where
 * no bytes move, and the device side of explicit copies in full mode). */
static bool probe_mapped(uint64_t addr, uint64_t bytes) {
    struct sim_lookup lk;
    sim_lookup(addr, &lk);
    if (lk.range == NULL) return true; /* host memory the simulator does not manage */
    if (!lk.mapped) {
        sim_record_fault(addr);
        return false;
    }
    if (bytes > 0 && addr + bytes > lk.mapping_base + lk.mapping_size) {
        /* Spans into the next mapping: probe that one too. */
        uint64_t next = lk.mapping_base + lk.mapping_size;
        return probe_mapped(next, addr + bytes - next);
    }
    return true;
}

/* The bytes a kernel is charged for over the link: each distinct host-located extent (the
 * mapping, or pinned/registered allocation) a pointer parameter falls in, once per launch. The
 * simulator cannot know how many bytes a kernel really reads or writes; the whole extent once is
 * what a kernel that uses its operand does (docs/simcuda.md). */
static bool extent_seen(const struct sim_range_ref *refs, int upto, uint64_t base) {
    for (int j = 0; j < upto; j++)
        if (refs[j].addr == base) return true;
    return false;
}

static uint64_t run_kernel(struct sim_op *op, uint64_t start) {
    struct sim_kernel_op *k = &op->u.kernel;
    struct sim_func *f = k->func;
    uint64_t extra_ns = 0, zerocopy = 0;
    bool remote = false;
    /* Resolve what each pointer parameter points into: managed pages fault in, host-backed
     * mappings are remote, and in sparse mode an unmapped pointer is the illegal access. */
    for (int i = 0; i < op->nrefs; i++) {
        struct sim_range_ref *r = &op->refs_list[i];
        struct sim_lookup lk;
        const uint64_t ptr = r->addr;
        sim_lookup(ptr, &lk);
        if (lk.range == NULL) continue;
        const bool seen = extent_seen(op->refs_list, i, lk.mapping_base);
        r->addr = lk.mapping_base;
        r->bytes = lk.mapping_size;
        if (lk.mapped && lk.range->kind == SIM_R_DEVICE &&
            !sim_peer_allowed(op->dev->ordinal, lk.range->device)) {
            /* Another device's memory without peer access: the device faults on it. */
            sim_record_fault(ptr);
            op->failed = true;
            return 0;
        }
        if (!lk.mapped) {
            if (sim.cfg.data == SIM_DATA_SPARSE) {
                /* The pointer itself is the faulting address (the device reports the address,
                 * not the reservation's base), and the kernel did not run. */
                sim_record_fault(ptr);
                op->failed = true;
                return 0;
            }
            continue; /* full mode: the body faults if it really touches it */
        }
        if (lk.loc == SIM_LOC_HOST) {
            remote = true;
            if (!seen) zerocopy += lk.mapping_size;
        }
        if (lk.loc == SIM_LOC_MANAGED) extra_ns += sim_managed_touch(op->dev, r->addr, &remote);
    }
    if (remote) sim.stats.remote_accesses++;
    sim.stats.launches++;
    uint64_t dur = f->default_ns;
    if (f->ns_param >= 0) {
        uint64_t v = 0;
        memcpy(&v, k->params[f->ns_param], sizeof v);
        dur = v;
    }
    if (f->body != NULL && sim.cfg.data == SIM_DATA_FULL) {
        body_duration_set = false;
        body_op = op;
        struct kernel_call call = {f->body, k->params};
        bool ok = sim_run_unlocked(call_kernel, &call);
        body_op = NULL;
        if (!ok) {
            op->failed = true;
            return 0;
        }
        if (body_duration_set) dur = body_duration_ns;
    }
    dur += extra_ns;
    if (zerocopy > 0) {
        /* Host-located operands cross the link at the zero-copy rate, in the host-to-device
         * direction's FIFO with the copies; the kernel ends when its traffic has too. */
        const struct sim_link *l = sim_link();
        uint64_t at = start;
        uint64_t xfer =
            sim_link_transfer(op->dev, true, zerocopy, l->zerocopy,
                              l->zerocopy < l->h2d_duplex ? l->zerocopy : l->h2d_duplex, &at);
        if (at + xfer > start + dur) dur = at + xfer - start;
        sim.stats.bytes_zerocopy += zerocopy;
    }
    return dur;
}

void sim_op_run(struct sim_op *op, uint64_t *start) {
    uint64_t dur = 0;
    switch (op->kind) {
    case SIM_OP_KERNEL:
        dur = run_kernel(op, *start);
        break;
    case SIM_OP_COPY: {
        struct sim_copy_op *c = &op->u.copy;
        size_t rows = c->height < 1 ? 1 : c->height;
        uint64_t total = (uint64_t)c->bytes * rows;
        if (!probe_mapped((uint64_t)(uintptr_t)c->dst, total) ||
            !probe_mapped((uint64_t)(uintptr_t)c->src, total)) {
            op->failed = true;
            break;
        }
        dur = sim_copy_duration(op->dev, c->dir, total, start);
        sim.stats.copies++;
        /* Host-to-host copies run on the H2D engine and are counted with it. */
        if (c->dir == SIM_H2D || c->dir == SIM_H2H)
            sim.stats.bytes_h2d += total;
        else if (c->dir == SIM_D2H)
            sim.stats.bytes_d2h += total;
        else
            sim.stats.bytes_d2d += total;
        if (sim.cfg.data == SIM_DATA_FULL) {
            struct copy_call call = {.c = c};
            call.nseg = sim_holecopy_plan(c, call.seg, COPY_SEGMENTS);
            if (!sim_run_unlocked(call_copy, &call)) op->failed = true;
        }
        break;
    }
    case SIM_OP_MEMSET: {
        struct sim_memset_op *m = &op->u.memset;
        size_t rows = m->height < 1 ? 1 : m->height;
        uint64_t total = (uint64_t)m->count * m->elem * rows;
        if (!probe_mapped((uint64_t)(uintptr_t)m->dst, total)) {
            op->failed = true;
            break;
        }
        dur = sim_bytes_ns(total, sim_link()->hbm);
        sim.stats.memsets++;
        if (sim.cfg.data == SIM_DATA_FULL && !sim_run_unlocked(call_memset, m)) op->failed = true;
        break;
    }
    case SIM_OP_HOST_FUNC: {
        struct sim_host_func_op *h = &op->u.host;
        CUresult status = sim.device_error; /* read under the lock */
        sim_unlock();
        if (h->cb != NULL)
            h->cb(h->cb_stream, status, h->user);
        else
            h->fn(h->user);
        sim_lock();
        break;
    }
    case SIM_OP_FREE: {
        struct sim_range *r = sim_range_find(op->u.free.addr);
        /* A graph's free node keeps graph memory's address for the next launch (stream NULL:
         * a node of a graph launch). */
        bool graph_node = r != NULL && r->graph_owned && op->stream == NULL;
        if (r != NULL && r->base == op->u.free.addr && !graph_node) {
            hazard_scan(op->dev, r->base, r->size, *start, op);
            sim_free_range_at(r, op, *start);
        }
        op->dev->frees_queued--;
        break;
    }
    case SIM_OP_PREFETCH: {
        uint64_t moved = sim_managed_prefetch(op->dev, op->u.prefetch.addr, op->u.prefetch.bytes,
                                              op->u.prefetch.to_device);
        if (moved > 0)
            dur = sim_copy_duration(op->dev, op->u.prefetch.to_device ? SIM_H2D : SIM_D2H, moved,
                                    start);
        break;
    }
    case SIM_OP_CALL:
        dur = op->u.call.run(op, start);
        break;
    case SIM_OP_RECORD:
    case SIM_OP_WAIT:
        break;
    }
    op->start_ns = *start;
    op->end_ns = *start + dur;
}

/* Memory handed over from a stream-ordered free to an allocation ordered after it (reuse.c) is
 * the previous allocation's until the free's virtual time: an operation that touches it and
 * starts earlier (work on another stream not ordered after the free) races that allocation's
 * users, as on a GPU. One hazard per operation. */
static void reuse_race_check(const struct sim_op *op) {
    if (sim.stats.reuse_handovers == 0 || op->failed) return;
    for (int i = 0; i < op->nrefs; i++) {
        const struct sim_range *r = sim_range_find(op->refs_list[i].addr);
        if (r != NULL && r->reused_until_ns > op->start_ns) {
            sim.stats.hazards++;
            return;
        }
    }
}

static uint64_t op_earliest_start(struct sim_op *op) {
    uint64_t start = op->enq_ns;
    struct sim_stream *s = op->stream;
    if (s != NULL && op->stream_ordered) {
        if (s->last_end_ns > start) start = s->last_end_ns;
        struct sim_ctx *ctx = s->ctx;
        /* The legacy default stream waits for all earlier work on blocking streams, and blocking
         * streams wait for earlier work on the legacy stream. */
        if (s->legacy) {
            if (ctx->blocking_end_ns > start) start = ctx->blocking_end_ns;
        } else if (!(s->flags & CU_STREAM_NON_BLOCKING) && ctx->legacy != NULL) {
            if (ctx->legacy->last_end_ns > start) start = ctx->legacy->last_end_ns;
        }
    }
    for (int i = 0; i < op->ndeps; i++) {
        sim_op_wait_done(op->deps[i]); /* only waits for another device's executor */
        if (op->deps[i]->end_ns > start) start = op->deps[i]->end_ns;
    }
    return start;
}

static void op_complete(struct sim_device *dev, struct sim_op *op) {
    struct sim_stream *s = op->stream;
    if (s != NULL && op->stream_ordered) {
        if (op->end_ns > s->last_end_ns) s->last_end_ns = op->end_ns;
        if (!(s->flags & CU_STREAM_NON_BLOCKING) && op->end_ns > s->ctx->blocking_end_ns)
            s->ctx->blocking_end_ns = op->end_ns;
    }
    if (op->end_ns > dev->max_end_ns) dev->max_end_ns = op->end_ns;
    if (sim.cfg.timeline != NULL) sim_timeline_op(op);
    op->done = true;
    dev->done_seq = op->seq;
    /* The first operation to complete after the fault is the one that faulted (or, for a fault
     * on another device, the first this device skipped): waiting for it reveals the error. */
    if (sim.device_error != CUDA_SUCCESS && dev->fault_seq == 0) dev->fault_seq = op->seq;
    if (op->nrefs > 0 && !op->failed) inflight_push(dev, op);
    uint64_t floor = sim_now();
    if (op->enq_ns < floor) floor = op->enq_ns;
    inflight_prune(dev, floor);
    pthread_cond_broadcast(&sim.progress);
}

static void *executor_main(void *arg) {
    struct sim_device *dev = arg;
    on_executor = true; /* its waits for other devices' operations publish nothing */
    sim_lock();
    for (;;) {
        while (dev->head == NULL)
            pthread_cond_wait(&sim.progress, &sim.lock);
        struct sim_op *op = dev->head;
        dev->head = op->next;
        if (dev->head == NULL) dev->tail = NULL;
        uint64_t start = op_earliest_start(op);
        if (sim.device_error != CUDA_SUCCESS) {
            /* After an illegal access the context is unusable: nothing else runs, except
             * cuStreamAddCallback's callbacks, which the driver still calls, with the error
             * (cuLaunchHostFunc's functions are not called after an error). */
            op->failed = true;
            op->start_ns = op->end_ns = start;
            if (op->kind == SIM_OP_HOST_FUNC && op->u.host.cb != NULL) sim_op_run(op, &start);
        } else {
            sim_op_run(op, &start);
            reuse_race_check(op);
        }
        op_complete(dev, op);
        sim_op_release(op);
    }
    return NULL;
}
