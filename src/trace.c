/* The trace's entry points: deciding whether to trace, turning each observed call into a buffered
 * line, and the end of the trace at exit or fork. See trace.h for the cost model and the locking,
 * docs/trace-format.md for what is written. */
#include "trace_internal.h"

#include "ending.h"
#include "engine.h"
#include "mode.h"
#include "log.h"
#include "options.h"
#include "outfile.h"
#include "report.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Atomic int ho_trace_state = HO_TRACE_UNDECIDED;
struct trace_state tr = {.lock = HO_MUTEX_INITIALIZER, .fd = -1};

static pthread_once_t decide_once = PTHREAD_ONCE_INIT;
static bool forked_child;

/* The ids a launch touched, between its parameter scan and its end (per thread). */
static _Thread_local struct {
    uint64_t id[HO_TOUCH_INLINE];
    uint32_t n;
} launch_uses;

uint64_t ho_trace_self_begin(void) {
    return ho_clock_ns();
}

void ho_trace_self_end(uint64_t started) {
    uint64_t now = ho_clock_ns();
    if (now > started) atomic_fetch_add_explicit(&tr.self_ns, now - started, memory_order_relaxed);
}

uint64_t ho_trace_clock(void) {
    uint64_t c = ho_clock_ns() - atomic_load_explicit(&tr.self_ns, memory_order_relaxed);
    return c != 0 ? c : 1; /* 0 means "not tracing" to the hooks */
}

#define SELF_RING (sizeof tr.self_ring / sizeof tr.self_ring[0])

/* Notes the self time when it has grown since the last sample (tr.lock held, asserted). */
static void self_sample(void) {
    HO_ASSERT_HELD(&tr.lock);
    uint64_t self = atomic_load_explicit(&tr.self_ns, memory_order_relaxed);
    unsigned last = (tr.self_at + SELF_RING - 1) % SELF_RING;
    if (tr.self_n > 0 && tr.self_ring[last].self == self) return;
    tr.self_ring[tr.self_at].clock = ho_clock_ns();
    tr.self_ring[tr.self_at].self = self;
    tr.self_at = (tr.self_at + 1) % SELF_RING;
    if (tr.self_n < SELF_RING) tr.self_n++;
}

uint64_t ho_trace_clock_at(uint64_t engine_ns) {
    /* The self time then: that of the newest sample taken at or before it. Older than every
     * sample: 0 if none was ever dropped, else the oldest kept (an upper bound). */
    uint64_t self = 0;
    unsigned i = 0;
    for (; i < tr.self_n; i++) {
        unsigned k = (tr.self_at + SELF_RING - 1 - i) % SELF_RING;
        self = tr.self_ring[k].self;
        if (tr.self_ring[k].clock <= engine_ns) break;
    }
    if (i == tr.self_n && tr.self_n < SELF_RING) self = 0;
    uint64_t c = engine_ns > self ? engine_ns - self : 1;
    return c != 0 ? c : 1;
}

void ho_trace_fail(const char *why) {
    HO_ASSERT_HELD(&tr.lock);
    if (atomic_load(&ho_trace_state) == HO_TRACE_OFF) return;
    atomic_store(&ho_trace_state, HO_TRACE_OFF);
    ho_log(HO_LOG_ERROR, "HOSTOFF_TRACE: %s; the trace stops here", why);
    ho_trace_flush(true);
    if (tr.fd >= 0) close(tr.fd);
    tr.fd = -1;
}

static void trace_at_exit(void) {
    if (forked_child) return;
    ho_engine_count_unfinished(); /* its moves still in flight, traced as cancelled first */
    ho_mutex_lock(&tr.lock);
    if (atomic_load(&ho_trace_state) == HO_TRACE_ON) {
        atomic_store(&ho_trace_state, HO_TRACE_OFF);
        ho_trace_timing_resolve(0, true, UINT64_MAX, true);
        ho_trace_flush(true);
        if (tr.fd >= 0 && close(tr.fd) != 0)
            ho_log(HO_LOG_ERROR, "HOSTOFF_TRACE: the trace could not be completed");
        tr.fd = -1;
    }
    ho_mutex_unlock(&tr.lock);
}

/* A fork child records nothing: on a GPU the parent's CUDA state is unusable there, and the
 * parent's buffered lines are the parent's to write. The lock may have been held by another
 * thread of the parent: the child makes a fresh one. */
static void trace_fork_child(void) {
    forked_child = true;
    atomic_store(&ho_trace_state, HO_TRACE_OFF);
    ho_mutex_reinit(&tr.lock);
    tr.fd = -1;
}

static void decide(void) {
    const struct ho_options *o = ho_options();
    if (o->trace == NULL) {
        atomic_store(&ho_trace_state, HO_TRACE_OFF);
        return;
    }
    if (ho_mode() == HO_MODE_OFF) {
        /* Buffer ids come from the registry, which only runs when the library tracks. */
        ho_log(HO_LOG_WARN, "HOSTOFF_TRACE is ignored with HOSTOFF_MODE=off");
        atomic_store(&ho_trace_state, HO_TRACE_OFF);
        return;
    }
    char path[4096];
    if (ho_expand_path(o->trace, path, sizeof path) != 0) {
        ho_log(HO_LOG_ERROR, "HOSTOFF_TRACE=%s: path too long; no trace written", o->trace);
        atomic_store(&ho_trace_state, HO_TRACE_OFF);
        return;
    }
    /* A process exec'd by a traced one inherits HOSTOFF_TRACE: with no %p in the path it would
     * replace the trace its parent is still writing. The writer holds a lock on its file; a
     * process that finds the path locked writes PATH.PID instead (docs/trace-format.md). */
    if (ho_outfile_in_use(path)) {
        size_t n = strlen(path);
        int w = snprintf(path + n, sizeof path - n, ".%ld", (long)getpid());
        if (w < 0 || (size_t)w >= sizeof path - n) {
            ho_log(HO_LOG_ERROR, "HOSTOFF_TRACE=%s: path too long; no trace written", o->trace);
            atomic_store(&ho_trace_state, HO_TRACE_OFF);
            return;
        }
        ho_log(HO_LOG_WARN,
               "HOSTOFF_TRACE=%s: another process is writing %.*s (the path has no %%p); process "
               "%ld writes %s",
               o->trace, (int)n, path, (long)getpid(), path);
    }
    /* Streamed to its final name: published (renamed over the path) at once, then appended to. */
    static struct ho_outfile out;
    const char *why = NULL;
    if (ho_outfile_open(&out, path, &why) == 0) {
        ho_outfile_lock(&out);
        if (ho_outfile_publish(&out, &why) != 0) ho_outfile_abort(&out);
    }
    if (out.fd < 0) {
        ho_log(HO_LOG_ERROR, "HOSTOFF_TRACE=%s: %s %s%s%s; no trace written", o->trace, path, why,
               out.err ? ": " : "", out.err ? strerror(out.err) : "");
        atomic_store(&ho_trace_state, HO_TRACE_OFF);
        return;
    }
    tr.fd = out.fd;
    ho_ending_add(trace_at_exit); /* exit, SIGTERM, SIGINT */
    pthread_atfork(NULL, NULL, trace_fork_child);
    atomic_store(&ho_trace_state, HO_TRACE_ON);
}

/* The trace clock now, 0 when not tracing (deciding first). */
static uint64_t trace_now(void) {
    if (atomic_load_explicit(&ho_trace_state, memory_order_acquire) == HO_TRACE_UNDECIDED)
        pthread_once(&decide_once, decide);
    if (atomic_load_explicit(&ho_trace_state, memory_order_acquire) != HO_TRACE_ON) return 0;
    return ho_trace_clock();
}

/* The entry time of the hook this thread is in (ho_trace_enter), 0 once taken. A hook that
 * traces nothing leaves it for the next hook's entry to overwrite; only hooks take it. */
static _Thread_local uint64_t entry_ns;

void ho_trace_enter_slow(void) {
    entry_ns = ho_trace_clock();
}

uint64_t ho_trace_begin_slow(void) {
    uint64_t t = entry_ns;
    entry_ns = 0;
    uint64_t now = trace_now();
    return t != 0 && now != 0 && t <= now ? t : now;
}

/* ---------------------------------------------------------------------------- the buffer */

/* Lines buffered before a write is attempted: large enough that writes are rare, small enough
 * (about 100 bytes a line) to stay out of the application's way. */
#define FLUSH_LINES 4096u

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t cap2 = *cap ? *cap * 2 : 1024;
    while (cap2 < need)
        cap2 *= 2;
    void *q = realloc(*p, cap2 * elem);
    if (q == NULL) return false;
    *p = q;
    *cap = cap2;
    return true;
}

struct trec *ho_trace_append(enum trec_kind kind, uint64_t t0, const uint64_t *ids, uint32_t n) {
    HO_ASSERT_HELD(&tr.lock);
    if (atomic_load(&ho_trace_state) != HO_TRACE_ON) return NULL;
    if (!grow((void **)&tr.rec, &tr.caprec, tr.nrec + 1, sizeof *tr.rec) ||
        !grow((void **)&tr.uses, &tr.capuses, tr.nuses + n, sizeof *tr.uses)) {
        ho_trace_fail("out of memory");
        return NULL;
    }
    if (!tr.have_base) {
        tr.base = t0;
        tr.have_base = true;
    }
    self_sample();
    struct trec *r = &tr.rec[tr.nrec++];
    memset(r, 0, sizeof *r);
    r->kind = (uint8_t)kind;
    r->t = t0;
    uint64_t now = ho_trace_clock();
    r->d = now > t0 ? now - t0 : 0;
    r->use_at = tr.nuses;
    r->nuse = n;
    if (n > 0) memcpy(tr.uses + tr.nuses, ids, n * sizeof *ids);
    tr.nuses += n;
    return r;
}

/* How often the trace reaches the file while calls keep coming (the engine clock: virtual time
 * under the simulator, so a replay's trace is the same whatever the machine's speed). A job
 * killed by SIGKILL or the OOM killer loses at most this much of its last calls, and the
 * launches the device had not finished; the file always ends with a whole line. */
#define FLUSH_EVERY_NS 100000000ull /* 100 ms */

static uint64_t last_flush_ns;

/* After appending: writes out what can be written once enough lines wait, or time has passed
 * (the first call's lines at once, so a trace file is never left empty). */
static void maybe_flush(void) {
    uint64_t now = ho_clock_ns();
    bool due = last_flush_ns == 0 || now - last_flush_ns >= FLUSH_EVERY_NS;
    if (tr.nrec < FLUSH_LINES && !due) return;
    if (due) ho_trace_timing_poll();
    ho_trace_flush(false);
    last_flush_ns = now != 0 ? now : 1;
}

/* Buffers the trace names: device memory in all its forms the replay can allocate again.
 * Host allocations and ranges the application maps itself are not traced (nor are their ids in
 * use lists). */
static bool traced_kind(enum ho_buffer_kind k) {
    return k == HO_BUF_DEVICE || k == HO_BUF_ASYNC || k == HO_BUF_MANAGED;
}

/* The traced buffer starting at ptr (registry read side taken here). */
static const struct ho_buffer *buffer_at(uint64_t ptr, uint64_t *id, uint64_t *size,
                                         enum ho_buffer_kind *kind, uint64_t *site) {
    if (!ho_registry_maybe(ptr)) return NULL;
    ho_registry_read_begin();
    const struct ho_buffer *b = ho_registry_lookup_locked(ptr);
    if (b != NULL && traced_kind(b->kind)) {
        *id = b->id;
        *size = b->size;
        *kind = b->kind;
        if (site != NULL) *site = b->site;
    } else {
        b = NULL;
    }
    ho_registry_read_end();
    return b;
}

/* ------------------------------------------------------------------------ entry points */

void ho_trace_alloc_slow(uint64_t t0, uint64_t ptr, CUstream s, bool has_stream, bool per_thread) {
    uint64_t id = 0, size = 0;
    enum ho_buffer_kind kind = HO_BUF_DEVICE;
    uint64_t site = 0;
    if (buffer_at(ptr, &id, &size, &kind, &site) == NULL) return;
    ho_mutex_lock(&tr.lock);
    struct trec *r = ho_trace_append(TR_ALLOC, t0, NULL, 0);
    if (r != NULL) {
        r->id = id;
        r->bytes = size;
        r->site = site;
        if (kind == HO_BUF_MANAGED) r->flags |= TRF_MANAGED;
        if (has_stream) {
            r->flags |= TRF_STREAM;
            r->s = ho_trace_stream_num(s, per_thread);
        }
        maybe_flush();
    }
    ho_mutex_unlock(&tr.lock);
}

uint64_t ho_trace_free_id_slow(uint64_t ptr) {
    uint64_t id = 0, size = 0;
    enum ho_buffer_kind kind;
    const struct ho_buffer *b = buffer_at(ptr, &id, &size, &kind, NULL);
    (void)size;
    return b != NULL ? id : 0;
}

void ho_trace_free_slow(uint64_t t0, uint64_t id, CUstream s, bool has_stream, bool per_thread) {
    ho_mutex_lock(&tr.lock);
    struct trec *r = ho_trace_append(TR_FREE, t0, NULL, 0);
    if (r != NULL) {
        r->id = id;
        if (has_stream) {
            r->flags |= TRF_STREAM;
            r->s = ho_trace_stream_num(s, per_thread);
        }
        maybe_flush();
    }
    ho_mutex_unlock(&tr.lock);
}

void ho_trace_launch_begin_slow(struct ho_trace_launch *l, uint64_t t0) {
    (void)t0;
    l->ev[0] = l->ev[1] = NULL;
    launch_uses.n = 0;
}

void ho_trace_uses_slow(struct ho_buffer *const *bufs, int n) {
    launch_uses.n = 0;
    for (int i = 0; i < n && launch_uses.n < HO_TOUCH_INLINE; i++)
        if (traced_kind(bufs[i]->kind)) launch_uses.id[launch_uses.n++] = bufs[i]->id;
}

void ho_trace_launch_issue_slow(struct ho_trace_launch *l, CUstream s, bool per_thread) {
    /* Captured work does not run: nothing to time, and events must not enter the graph. */
    if (atomic_load_explicit(&tr.capturing, memory_order_relaxed) > 0) {
        l->t0 = 0;
        return;
    }
    ho_trace_timing_start(l, s, per_thread);
}

void ho_trace_launch_issued_slow(struct ho_trace_launch *l, CUstream s, bool per_thread,
                                 CUresult rc) {
    ho_trace_timing_end(l, s, per_thread, rc == CUDA_SUCCESS);
}

void ho_trace_launch_end_slow(struct ho_trace_launch *l, const void *func, CUstream s,
                              bool per_thread, CUresult rc) {
    if (rc != CUDA_SUCCESS) return;
    ho_mutex_lock(&tr.lock);
    struct trec *r = ho_trace_append(TR_LAUNCH, l->t0, launch_uses.id, launch_uses.n);
    if (r != NULL) {
        r->s = ho_trace_stream_num(s, per_thread);
        r->kname = ho_trace_kernel_name(func);
        if (l->ev[0] != NULL) {
            r->flags |= TRF_PENDING;
            r->ev[0] = l->ev[0];
            r->ev[1] = l->ev[1];
            tr.pending++;
        }
        maybe_flush();
    }
    ho_mutex_unlock(&tr.lock);
    launch_uses.n = 0;
}

void ho_trace_copy_slow(uint64_t t0, uint64_t dst, uint64_t src, uint64_t bytes, CUstream s,
                        bool per_thread, const char *entry, bool memset) {
    if (atomic_load_explicit(&tr.capturing, memory_order_relaxed) > 0) return;
    uint64_t ids[2], n = 0, id, size;
    enum ho_buffer_kind kind;
    bool dst_dev = buffer_at(dst, &id, &size, &kind, NULL) != NULL;
    if (dst_dev) ids[n++] = id;
    bool src_dev = !memset && src != 0 && buffer_at(src, &id, &size, &kind, NULL) != NULL;
    if (src_dev) ids[n++] = id;
    if (n == 0) return; /* host to host, or memory the trace does not name */
    ho_mutex_lock(&tr.lock);
    struct trec *r = ho_trace_append(TR_COPY, t0, ids, (uint32_t)n);
    if (r != NULL) {
        r->s = ho_trace_stream_num(s, per_thread);
        r->bytes = bytes;
        r->dir = memset || (dst_dev && src_dev) ? TR_D2D : dst_dev ? TR_H2D : TR_D2H;
        if (memset) r->flags |= TRF_MEMSET;
        if (strstr(entry, "Async") == NULL) r->flags |= TRF_SYNC;
        maybe_flush();
    }
    ho_mutex_unlock(&tr.lock);
}

static void sync_record(uint64_t t0, int stream, bool device) {
    struct trec *r = ho_trace_append(TR_SYNC, t0, NULL, 0);
    if (r == NULL) return;
    if (!device) {
        r->flags |= TRF_STREAM;
        r->s = stream;
    }
    /* Whatever was queued on that stream before the call has completed: durations are known. */
    ho_trace_timing_resolve(stream, device, t0, false);
    ho_trace_flush(false);
}

void ho_trace_sync(uint64_t t0, CUstream s, bool per_thread, bool device) {
    ho_mutex_lock(&tr.lock);
    if (tr.capturing == 0) sync_record(t0, device ? 0 : ho_trace_stream_num(s, per_thread), device);
    ho_mutex_unlock(&tr.lock);
}

void ho_trace_event_sync(uint64_t t0, CUevent e) {
    ho_mutex_lock(&tr.lock);
    int stream = ho_trace_event_stream(e);
    if (stream >= 0 && tr.capturing == 0) sync_record(t0, stream, false);
    ho_mutex_unlock(&tr.lock);
}

void ho_trace_record(uint64_t t0, CUevent e, CUstream s, bool per_thread) {
    (void)t0;
    ho_mutex_lock(&tr.lock);
    ho_trace_event_set(e, tr.capturing == 0 ? ho_trace_stream_num(s, per_thread) : -1);
    ho_mutex_unlock(&tr.lock);
}

void ho_trace_wait(uint64_t t0, CUstream s, bool per_thread, CUevent e) {
    ho_mutex_lock(&tr.lock);
    int on = ho_trace_event_stream(e);
    int stream = ho_trace_stream_num(s, per_thread);
    if (on >= 0 && on != stream && tr.capturing == 0) {
        struct trec *r = ho_trace_append(TR_WAIT, t0, NULL, 0);
        if (r != NULL) {
            r->s = stream;
            r->on = on;
            maybe_flush();
        }
    }
    ho_mutex_unlock(&tr.lock);
}

void ho_trace_capture(int delta) {
    if (atomic_load_explicit(&ho_trace_state, memory_order_relaxed) == HO_TRACE_OFF) return;
    /* An end without a begin the trace saw (tracing decided in between) must not go below 0. */
    int cur = atomic_load(&tr.capturing);
    while (!atomic_compare_exchange_weak(&tr.capturing, &cur, cur + delta < 0 ? 0 : cur + delta)) {
    }
}

void ho_trace_step(void) {
    uint64_t t0 = trace_now(); /* not a hook: it has no entry time of its own */
    if (t0 == 0) return;
    ho_mutex_lock(&tr.lock);
    if (ho_trace_append(TR_STEP, t0, NULL, 0) != NULL) maybe_flush();
    ho_mutex_unlock(&tr.lock);
}

/* ------------------------------------------------------------------ the engine's timeline */

/* The buffer this thread is restoring on demand (ho_trace_demand), 0: none. */
static _Thread_local uint64_t demand_id;

void ho_trace_demand_slow(uint64_t id) {
    demand_id = id;
}

void ho_trace_move_slow(enum ho_trace_move_kind kind, uint64_t id, uint64_t bytes,
                        uint64_t start_ns, bool cancelled) {
    if (kind == HO_MOVE_RESTORE && (id == 0 || id != demand_id)) kind = HO_MOVE_PREFETCH;
    if (kind == HO_MOVE_RESTORE) demand_id = 0;
    ho_mutex_lock(&tr.lock);
    uint64_t end = ho_trace_clock();
    uint64_t start = ho_trace_clock_at(start_ns);
    if (start > end) start = end;
    struct trec *r = ho_trace_append(TR_MOVE, start, NULL, 0);
    if (r != NULL) {
        r->dir = (uint8_t)kind;
        r->id = id;
        r->bytes = bytes;
        r->ns = end - start;
        if (cancelled) r->flags |= TRF_CANCELLED;
    }
    ho_mutex_unlock(&tr.lock);
}

void ho_trace_stall_slow(uint64_t id, uint64_t ns, enum ho_trace_move_kind waited_for) {
    if (waited_for == HO_MOVE_RESTORE && (id == 0 || id != demand_id))
        waited_for = HO_MOVE_PREFETCH;
    ho_mutex_lock(&tr.lock);
    uint64_t end = ho_trace_clock();
    struct trec *r = ho_trace_append(TR_STALL, end > ns ? end - ns : 1, NULL, 0);
    if (r != NULL) {
        r->dir = (uint8_t)waited_for;
        r->id = id;
        r->ns = ns;
    }
    ho_mutex_unlock(&tr.lock);
}
