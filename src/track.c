#include "track.h"
#include "site.h"
#include "options.h"

#include "real.h"
#include "mode.h"
#include "log.h"
#include "paramcache.h"
#include "stats.h"
#include "engine.h"
#include "thread_slots.h"
#include "trace.h"
#include "track_learn.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define KIND_BIT(k) (1u << (k))

/* The device an allocation lives on: the driver's answer for the pointer (a stream-ordered or
 * pool allocation belongs to the stream's or pool's device, not the current context's), else the
 * current context's device (host allocations), else 0. */
static int alloc_device(uint64_t base) {
    int ordinal = -1;
    if (ho_real.cuPointerGetAttribute != NULL &&
        ho_real.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                      (CUdeviceptr)base) == CUDA_SUCCESS &&
        ordinal >= 0)
        return ordinal;
    CUdevice dev = 0;
    if (ho_real.cuCtxGetDevice == NULL || ho_real.cuCtxGetDevice(&dev) != CUDA_SUCCESS) dev = 0;
    return (int)dev;
}

void ho_track_alloc(uint64_t base, uint64_t size, enum ho_buffer_kind kind) {
    int dev = alloc_device(base);
    /* Where it came from, for the buffers worth naming (an unwind costs microseconds). */
    uint64_t site = size >= ho_options()->min_bytes ? ho_site_capture() : 0;
    struct ho_buffer *b = ho_registry_add(base, size, dev, kind);
    if (b == NULL) {
        ho_degrade("out of memory tracking an allocation");
        return;
    }
    b->site = site;
    ho_count(&ho_stats.counts_allocs, 1);
    if (kind == HO_BUF_DEVICE || kind == HO_BUF_ASYNC || kind == HO_BUF_VMM_APP) {
        ho_count(&ho_stats.bytes_allocated, size);
        uint64_t now = atomic_fetch_add(&ho_stats.bytes_device_now, size) + size;
        ho_peak(&ho_stats.bytes_peak_device, now);
    }
}

void ho_track_free(uint64_t base, unsigned kinds) {
    struct ho_buffer *b = ho_registry_remove(base, kinds);
    if (b == NULL) return; /* not ours (allocated before tracking, or a bad pointer) */
    ho_count(&ho_stats.counts_frees, 1);
    if (b->kind == HO_BUF_DEVICE || b->kind == HO_BUF_ASYNC || b->kind == HO_BUF_VMM_APP)
        atomic_fetch_sub(&ho_stats.bytes_device_now, b->size);
}

void ho_track_pin(uint64_t addr) {
    ho_registry_read_begin();
    struct ho_buffer *b = ho_registry_lookup_locked(addr);
    if (b != NULL) b->pinned = true;
    ho_registry_read_end();
}

/* ------------------------------------------------------------------- launches and use counts
 *
 * The launch path costs what its memory accesses cost, so it touches as few cache lines as it
 * can and takes no locked instruction per buffer (eight locked adds alone were half the 60 ns a
 * launch may add). Each launching thread owns a struct thread_uses:
 *  - a lookup cache, direct-mapped by 2 MiB chunk: the buffer a recent pointer fell into and the
 *    uses this thread has counted for it since the entry was filled. A hit costs one compare and
 *    one increment in the same cache line. Entries hold while the registry's generation (bumped
 *    by every add and remove) has not moved; the read lock keeps it still during a launch.
 *  - a table of counts by buffer id, where an entry's count goes when the entry is refilled or
 *    the generation moves.
 * Only the owner writes its structure (relaxed atomic loads and stores where the report may read
 * at the same time). The report adds, for each buffer, its own atomic count (copies, memsets, ids
 * past a table's reach), every thread's table and every thread's cache entry for that id.
 * Structures are never freed: a thread that exits hands its own, counts included, to the next
 * thread that needs one, so the sums stay exact. Cache entries and ids only ever name buffers by
 * id, never dereference an old record, so a record the registry has since dropped is harmless. */
#define USE_PAGE_IDS 512u  /* counters per page (4 KiB) */
#define USE_PAGES    2048u /* ids below 1 Mi are counted per thread (16 KiB of page pointers) */
#define USE_CACHE    64u   /* lookup cache entries, by chunk */

struct use_entry {
    uint64_t base, size;    /* the buffer [base, base + size), or size 0: empty */
    struct ho_buffer *b;    /* valid while the generation holds */
    _Atomic uint64_t count; /* uses counted here since the entry was filled */
};

struct thread_uses {
    struct ho_thread_slot slot; /* first: its place in the list (thread_slots.h) */
    uint64_t generation;        /* the registry generation the cache was filled at */
    struct use_entry cache[USE_CACHE];
    _Atomic uint64_t cache_id[USE_CACHE]; /* each entry's buffer id (0: none) */
    _Atomic(_Atomic uint64_t *) page[USE_PAGES];
};

static struct ho_thread_slots all_uses = HO_THREAD_SLOTS(struct thread_uses);
static _Thread_local struct ho_thread_slot *my_uses;

/* This thread's structure: one an exited thread left, else a new one; NULL when out of memory. */
static struct thread_uses *thread_uses_get(void) {
    struct ho_thread_slot *s = my_uses != NULL ? my_uses : ho_thread_slot_take(&all_uses, &my_uses);
    return (struct thread_uses *)s;
}

static inline void bump(_Atomic uint64_t *c, uint64_t n) {
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

/* The ids a table counts; a buffer past them counts on its own record, atomically. */
#define USE_IDS ((uint64_t)USE_PAGES * USE_PAGE_IDS)

/* Adds n uses of buffer `id` (below USE_IDS) to u's table; false when out of memory. */
static bool table_add(struct thread_uses *u, uint64_t id, uint64_t n) {
    _Atomic(_Atomic uint64_t *) *slot = &u->page[id / USE_PAGE_IDS];
    _Atomic uint64_t *page = atomic_load_explicit(slot, memory_order_relaxed);
    if (page == NULL) {
        page = calloc(USE_PAGE_IDS, sizeof *page);
        if (page == NULL) return false;
        atomic_store_explicit(slot, page, memory_order_release);
    }
    bump(&page[id % USE_PAGE_IDS], n);
    return true;
}

/* Moves entry i's count to the table and empties the entry. */
static void entry_flush(struct thread_uses *u, unsigned i) {
    struct use_entry *e = &u->cache[i];
    e->base = e->size = 0;
    e->b = NULL;
    uint64_t n = atomic_load_explicit(&e->count, memory_order_relaxed);
    uint64_t id = atomic_load_explicit(&u->cache_id[i], memory_order_relaxed);
    if (n > 0 && !table_add(u, id, n)) return; /* out of memory: the entry keeps its count */
    /* The report may read between the two stores: it then counts these uses twice or not at
     * all, for that instant only (it runs at exit, after the launching threads are done). */
    atomic_store_explicit(&e->count, 0, memory_order_relaxed);
    atomic_store_explicit(&u->cache_id[i], 0, memory_order_relaxed);
}

uint64_t ho_track_uses(const struct ho_buffer *b) {
    uint64_t n = atomic_load_explicit(&((struct ho_buffer *)b)->uses, memory_order_relaxed);
    for (struct ho_thread_slot *s = ho_thread_slots_first(&all_uses); s != NULL; s = s->next) {
        const struct thread_uses *u = (const struct thread_uses *)s;
        for (unsigned i = 0; i < USE_CACHE; i++)
            if (atomic_load_explicit(&u->cache_id[i], memory_order_relaxed) == b->id)
                n += atomic_load_explicit(&u->cache[i].count, memory_order_relaxed);
        if (b->id >= USE_IDS) continue;
        _Atomic uint64_t *page =
            atomic_load_explicit(&u->page[b->id / USE_PAGE_IDS], memory_order_acquire);
        if (page != NULL)
            n += atomic_load_explicit(&page[b->id % USE_PAGE_IDS], memory_order_relaxed);
    }
    return n;
}

/* The distinct buffers one launch touches: no cap (a fused optimizer passes hundreds); past the
 * inline array they live on the heap, and if the heap refuses, the launch is unattributed. */
#define TOUCH_INLINE 64
struct touch_set {
    struct ho_buffer *inl[TOUCH_INLINE];
    struct ho_buffer **b; /* inl, or a heap array of cap */
    int n, cap;
    bool unseen;           /* part of what it touches cannot be attributed */
    struct thread_uses *u; /* NULL: out of memory, count on the buffers themselves */
    uint64_t lo, hi;       /* the registry's bounds */
};

static void touch_init(struct touch_set *t) {
    t->b = t->inl;
    t->n = 0;
    t->cap = TOUCH_INLINE;
    t->unseen = false;
}

static void touch_done(struct touch_set *t) {
    if (t->b != t->inl) free(t->b);
    t->b = t->inl;
}

static bool touch_grow(struct touch_set *t) __attribute__((noinline, cold));

static inline bool touch_room(struct touch_set *t) {
    return t->n < t->cap || touch_grow(t);
}

/* Doubles the list (the first growth moves it off the inline array). */
static bool touch_grow(struct touch_set *t) {
    int cap = t->cap * 2;
    struct ho_buffer **nb = malloc((size_t)cap * sizeof *nb);
    if (nb == NULL) return false;
    memcpy(nb, t->b, (size_t)t->n * sizeof *nb);
    if (t->b != t->inl) free(t->b);
    t->b = nb;
    t->cap = cap;
    return true;
}

static void touch_ptrs(uint64_t v, void *arg);
static void touch_array(struct ho_buffer *b, struct touch_set *t) __attribute__((noinline, cold));

/* One parameter word: if it points into a tracked buffer, one use of it for this launch. */
static inline void touch_word(uint64_t v, struct touch_set *t) {
    if (v < t->lo || v >= t->hi) return;
    struct thread_uses *u = t->u;
    struct use_entry *e = NULL;
    struct ho_buffer *b;
    if (u != NULL) {
        unsigned i = (unsigned)(v >> 21) % USE_CACHE;
        e = &u->cache[i];
        if (v - e->base < e->size) {
            b = e->b;
        } else {
            b = ho_registry_lookup_locked(v);
            if (b == NULL) return;
            if (atomic_load_explicit(&u->cache_id[i], memory_order_relaxed) != 0) entry_flush(u, i);
            if (atomic_load_explicit(&u->cache_id[i], memory_order_relaxed) == 0 &&
                b->id < USE_IDS) {
                e->base = b->base;
                e->size = b->size;
                e->b = b;
                atomic_store_explicit(&u->cache_id[i], b->id, memory_order_relaxed);
            } else {
                e = NULL; /* not cached: count on the record */
            }
        }
    } else {
        b = ho_registry_lookup_locked(v);
        if (b == NULL) return;
    }
    for (int k = 0; k < t->n; k++)
        if (t->b[k] == b) return;
    if (!touch_room(t)) {
        t->unseen = true;
        return;
    }
    t->b[t->n++] = b;
    if (e != NULL)
        bump(&e->count, 1);
    else
        atomic_fetch_add_explicit(&b->uses, 1, memory_order_relaxed);
    /* A pointer array the program copied in: the buffers it names are used too. (The record
     * is read only once some array was learnt: the cache hit above never touches it.) */
    if (ho_learn_ptrs_known()) touch_array(b, t);
}

static void touch_array(struct ho_buffer *b, struct touch_set *t) {
    if (atomic_load_explicit(&b->holds_ptrs, memory_order_relaxed))
        ho_learn_ptrs_of(b, touch_ptrs, t);
}

static void touch_ptrs(uint64_t v, void *arg) {
    struct touch_set *t = arg;
    if (v < t->lo || v >= t->hi) return;
    struct ho_buffer *b = ho_registry_lookup_locked(v);
    if (b == NULL) return;
    for (int k = 0; k < t->n; k++)
        if (t->b[k] == b) return;
    if (!touch_room(t)) {
        t->unseen = true;
        return;
    }
    t->b[t->n++] = b;
    atomic_fetch_add_explicit(&b->uses, 1, memory_order_relaxed);
}

/* Every aligned 8-byte word of [p, p + size): pointers, inside by-value structs too. */
static inline void scan_bytes(const unsigned char *p, size_t size, struct touch_set *t) {
    for (size_t off = 0; off + 8 <= size; off += 8) {
        uint64_t v;
        memcpy(&v, p + off, sizeof v);
        touch_word(v, t);
    }
}

/* One parameter of `size` bytes, of which `have` are given (an extra buffer may be shorter than
 * the layout: the driver accepts it and NCCL depends on it). Tensor maps the program encoded are
 * recognised by their bytes (they are 64-byte aligned wherever they sit); a 128-byte parameter
 * that is no known descriptor may be one built elsewhere: unattributed. */
static void scan_param(const unsigned char *p, size_t size, size_t have, struct touch_set *t) {
    if (have > size) have = size;
    scan_bytes(p, have, t);
    if (size < 128 || have < 128) return;
    bool any = false;
    if (ho_learn_tmaps_known()) {
        for (size_t off = 0; off + 128 <= have; off += 64) {
            uint64_t addr;
            if (ho_learn_tmap_lookup(p + off, &addr)) {
                touch_word(addr, t);
                any = true;
            }
        }
    }
    if (size == 128 && !any) t->unseen = true;
}

static bool extra_buffer(void **extra, const unsigned char **buf, size_t *size) {
    *buf = NULL;
    *size = 0;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END && i < 64; i += 2) {
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
            *buf = extra[i + 1];
        else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
            *size = *(size_t *)extra[i + 1];
    }
    return *buf != NULL && *size > 0;
}

/* A layout query stops at HO_MAX_PARAMS: a function with that many may have more, unseen. */
static bool layout_complete(const struct ho_param_layout *l) {
    return l->nparams >= 0 && l->nparams < HO_MAX_PARAMS;
}

static void scan_launch(const void *func, void **params, void **extra, struct touch_set *t) {
    const struct ho_param_layout *l = ho_param_layout(func);
    if (params != NULL && l->nparams >= 0) {
        for (int i = 0; i < l->nparams; i++) {
            if (l->p[i].size < 8 || params[i] == NULL) continue;
            if (l->p[i].size < 128)
                scan_bytes(params[i], l->p[i].size, t); /* the common case: no descriptor fits */
            else
                scan_param(params[i], l->p[i].size, l->p[i].size, t);
        }
        if (!layout_complete(l)) t->unseen = true;
        return;
    }
    const unsigned char *buf;
    size_t size;
    if (extra != NULL && extra_buffer(extra, &buf, &size)) {
        if (l->nparams >= 0) {
            for (int i = 0; i < l->nparams; i++) {
                size_t off = l->p[i].offset;
                if (l->p[i].size >= 8 && off < size)
                    scan_param(buf + off, l->p[i].size, size - off, t);
            }
            if (!layout_complete(l)) scan_bytes(buf, size, t);
        } else {
            scan_bytes(buf, size, t); /* no layout: every aligned word of the packed buffer */
        }
        return;
    }
    if (params != NULL || extra != NULL) {
        ho_count(&ho_stats.counts_unknown_layout_launches, 1);
        t->unseen = true; /* what it reaches is unknown: a barrier (engine_unseen.c) */
    }
}

/* Scans a launch's parameters with the registry's read side held (the caller releases it). */
static void launch_scan(const void *func, void **params, void **extra, struct touch_set *t) {
    touch_init(t);
    t->u = thread_uses_get();
    uint64_t generation;
    ho_registry_read_begin();
    ho_registry_bounds(&t->lo, &t->hi, &generation);
    if (t->u != NULL && t->u->generation != generation) {
        for (unsigned i = 0; i < USE_CACHE; i++)
            if (atomic_load_explicit(&t->u->cache_id[i], memory_order_relaxed) != 0)
                entry_flush(t->u, i);
        t->u->generation = generation;
    }
    scan_launch(func, params, extra, t);
}

void ho_track_launch(const void *func, void **params, void **extra) {
    struct touch_set t;
    launch_scan(func, params, extra, &t);
    ho_trace_uses(t.b, t.n);
    ho_registry_read_end();
    touch_done(&t);
    ho_count(&ho_stats.counts_launches, 1);
}

void ho_track_launch_begin(const void *func, void **params, void **extra, CUstream s,
                           bool per_thread, struct ho_engine_touch *et) {
    struct touch_set t;
    launch_scan(func, params, extra, &t);
    ho_trace_uses(t.b, t.n);
    /* Inside the read side: a buffer found here cannot be freed before its use is announced. */
    ho_engine_prepare_ex(t.b, t.n, s, per_thread, true, t.unseen, et);
    et->func = (uint64_t)(uintptr_t)func;
    ho_registry_read_end();
    touch_done(&t);
}

void ho_track_launch_end(struct ho_engine_touch *et, CUstream s, bool per_thread, CUresult rc) {
    ho_engine_finish(et, s, per_thread, rc == CUDA_SUCCESS);
    if (rc == CUDA_SUCCESS) ho_count(&ho_stats.counts_launches, 1);
}

void ho_track_touch(uint64_t addr) {
    if (!ho_registry_maybe(addr)) return;
    ho_registry_read_begin();
    struct ho_buffer *b = ho_registry_lookup_locked(addr);
    if (b != NULL) atomic_fetch_add_explicit(&b->uses, 1, memory_order_relaxed);
    ho_registry_read_end();
}

void ho_track_access_begin(const uint64_t *addrs, int n, CUstream s, bool per_thread, bool restore,
                           struct ho_engine_touch *et) {
    ho_track_access_begin_ex(addrs, n, s, per_thread, restore, false, et);
}

void ho_track_access_begin_ex(const uint64_t *addrs, int n, CUstream s, bool per_thread,
                              bool restore, bool unseen, struct ho_engine_touch *et) {
    struct touch_set t;
    touch_init(&t);
    t.u = NULL;
    t.unseen = unseen;
    uint64_t generation;
    ho_registry_read_begin();
    ho_registry_bounds(&t.lo, &t.hi, &generation);
    for (int i = 0; i < n; i++) {
        if (!ho_registry_maybe(addrs[i])) continue;
        touch_word(addrs[i], &t);
    }
    ho_engine_prepare_ex(t.b, t.n, s, per_thread, restore, t.unseen, et);
    ho_registry_read_end();
    touch_done(&t);
}

void ho_track_reset(void) {
    ho_track_graph_reset();            /* the parent's graphs mean nothing in a fork child */
    ho_thread_slots_forget(&all_uses); /* nor its use counts (the structures are left behind) */
    my_uses = NULL;
}
