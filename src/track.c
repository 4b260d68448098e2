#include "track.h"
#include "site.h"
#include "options.h"

#include "real.h"
#include "mode.h"
#include "log.h"
#include "paramcache.h"
#include "stats.h"
#include "engine.h"
#include "trace.h"

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
    struct thread_uses *next; /* every one made, newest first */
    _Atomic bool free;        /* its thread has exited */
    uint64_t generation;      /* the registry generation the cache was filled at */
    struct use_entry cache[USE_CACHE];
    _Atomic uint64_t cache_id[USE_CACHE]; /* each entry's buffer id (0: none) */
    _Atomic(_Atomic uint64_t *) page[USE_PAGES];
};

static _Atomic(struct thread_uses *) all_uses;
static _Thread_local struct thread_uses *my_uses;
static pthread_key_t uses_key;
static bool uses_key_ok;
static pthread_once_t uses_key_once = PTHREAD_ONCE_INIT;

static void thread_uses_release(void *p) {
    struct thread_uses *u = p;
    my_uses = NULL;
    atomic_store_explicit(&u->free, true, memory_order_release);
}

static void uses_key_make(void) {
    uses_key_ok = pthread_key_create(&uses_key, thread_uses_release) == 0;
}

/* This thread's structure: one an exited thread left, else a new one; NULL when out of memory. */
static struct thread_uses *thread_uses_get(void) {
    if (my_uses != NULL) return my_uses;
    pthread_once(&uses_key_once, uses_key_make);
    struct thread_uses *u;
    for (u = atomic_load_explicit(&all_uses, memory_order_acquire); u != NULL; u = u->next) {
        bool was_free = true;
        if (atomic_compare_exchange_strong_explicit(&u->free, &was_free, false,
                                                    memory_order_acquire, memory_order_relaxed))
            break;
    }
    if (u == NULL) {
        u = calloc(1, sizeof *u);
        if (u == NULL) return NULL;
        u->next = atomic_load_explicit(&all_uses, memory_order_relaxed);
        while (!atomic_compare_exchange_weak_explicit(&all_uses, &u->next, u, memory_order_release,
                                                      memory_order_relaxed)) {
        }
    }
    if (uses_key_ok) pthread_setspecific(uses_key, u);
    my_uses = u;
    return u;
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
    for (struct thread_uses *u = atomic_load_explicit(&all_uses, memory_order_acquire); u != NULL;
         u = u->next) {
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

/* The distinct buffers one launch touches. */
#define TOUCH_MAX 64
struct touch_set {
    struct ho_buffer *b[TOUCH_MAX];
    int n;
    struct thread_uses *u; /* NULL: out of memory, count on the buffers themselves */
    uint64_t lo, hi;       /* the registry's bounds */
};

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
    if (t->n == TOUCH_MAX) return;
    t->b[t->n++] = b;
    if (e != NULL)
        bump(&e->count, 1);
    else
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
static void scan_launch(const void *func, void **params, void **extra, struct touch_set *t) {
    const struct ho_param_layout *l = ho_param_layout(func);
    if (params != NULL && l->nparams >= 0) {
        for (int i = 0; i < l->nparams; i++)
            if (l->p[i].size >= 8 && params[i] != NULL) scan_bytes(params[i], l->p[i].size, t);
        return;
    }
    const unsigned char *buf;
    size_t size;
    if (extra != NULL && extra_buffer(extra, &buf, &size)) {
        if (l->nparams >= 0) {
            for (int i = 0; i < l->nparams; i++)
                if (l->p[i].size >= 8 && (size_t)l->p[i].offset + l->p[i].size <= size)
                    scan_bytes(buf + l->p[i].offset, l->p[i].size, t);
        } else {
            scan_bytes(buf, size, t); /* no layout: every aligned word of the packed buffer */
        }
        return;
    }
    if (params != NULL || extra != NULL) ho_count(&ho_stats.counts_unknown_layout_launches, 1);
}

/* Scans a launch's parameters with the registry's read side held (the caller releases it). */
static void launch_scan(const void *func, void **params, void **extra, struct touch_set *t) {
    t->n = 0;
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
    ho_count(&ho_stats.counts_launches, 1);
}

void ho_track_launch_begin(const void *func, void **params, void **extra, CUstream s,
                           bool per_thread, struct ho_engine_touch *et) {
    struct touch_set t;
    launch_scan(func, params, extra, &t);
    ho_trace_uses(t.b, t.n);
    /* Inside the read side: a buffer found here cannot be freed before its use is announced. */
    ho_engine_prepare(t.b, t.n, s, per_thread, true, et);
    et->func = (uint64_t)(uintptr_t)func;
    ho_registry_read_end();
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
    struct ho_buffer *bufs[HO_TOUCH_MAX];
    int nb = 0;
    ho_registry_read_begin();
    for (int i = 0; i < n && nb < HO_TOUCH_MAX; i++) {
        if (!ho_registry_maybe(addrs[i])) continue;
        struct ho_buffer *b = ho_registry_lookup_locked(addrs[i]);
        if (b == NULL) continue;
        bool seen = false;
        for (int k = 0; k < nb && !seen; k++)
            seen = bufs[k] == b;
        if (seen) continue;
        atomic_fetch_add_explicit(&b->uses, 1, memory_order_relaxed);
        bufs[nb++] = b;
    }
    ho_engine_prepare(bufs, nb, s, per_thread, restore, et);
    ho_registry_read_end();
}

/* ---------------------------------------------------------------------------------- graphs */

/* Each instantiated graph and the addresses its nodes reference (re-resolved at each launch,
 * so a buffer freed and reallocated in between is looked up afresh). Graph calls are rare next
 * to launches: one mutex guards the list. */
struct graph_refs {
    CUgraphExec exec;
    uint64_t *addrs;
    size_t n, cap;
    struct graph_refs *next;
};

static pthread_mutex_t graphs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct graph_refs *graphs;

static void refs_add(struct graph_refs *g, uint64_t a) {
    if (a == 0) return;
    for (size_t i = 0; i < g->n; i++)
        if (g->addrs[i] == a) return;
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 16;
        uint64_t *na = realloc(g->addrs, cap * sizeof *na);
        if (na == NULL) return;
        g->addrs = na;
        g->cap = cap;
    }
    g->addrs[g->n++] = a;
}

static void collect_addr(uint64_t v, void *arg) {
    struct graph_refs *g = arg;
    ho_registry_read_begin();
    bool hit = ho_registry_lookup_locked(v) != NULL;
    ho_registry_read_end();
    if (hit) refs_add(g, v);
}

static void collect_bytes(const unsigned char *p, size_t size, struct graph_refs *g) {
    for (size_t off = 0; off + 8 <= size; off += 8) {
        uint64_t v;
        memcpy(&v, p + off, sizeof v);
        if (ho_registry_maybe(v)) collect_addr(v, g);
    }
}

static void collect_kernel(const CUDA_KERNEL_NODE_PARAMS *kp, struct graph_refs *g) {
    const void *f = kp->func != NULL ? (const void *)kp->func : (const void *)kp->kern;
    const struct ho_param_layout *l = ho_param_layout(f);
    if (kp->kernelParams != NULL && l->nparams >= 0) {
        for (int i = 0; i < l->nparams; i++)
            if (l->p[i].size >= 8) collect_bytes(kp->kernelParams[i], l->p[i].size, g);
    } else if (kp->extra != NULL) {
        const unsigned char *buf;
        size_t size;
        if (extra_buffer(kp->extra, &buf, &size)) collect_bytes(buf, size, g);
    }
}

static uint64_t memcpy_side(CUmemorytype t, const void *host, CUdeviceptr dev) {
    if (t == CU_MEMORYTYPE_DEVICE || t == CU_MEMORYTYPE_UNIFIED) return dev;
    if (t == CU_MEMORYTYPE_HOST) return (uint64_t)(uintptr_t)host;
    return 0;
}

static void collect_graph(CUgraph graph, struct graph_refs *g) {
    size_t n = 0;
    if (ho_real.cuGraphGetNodes == NULL || ho_real.cuGraphGetNodes(graph, NULL, &n) != CUDA_SUCCESS)
        return;
    CUgraphNode *nodes = calloc(n ? n : 1, sizeof *nodes);
    if (nodes == NULL || ho_real.cuGraphGetNodes(graph, nodes, &n) != CUDA_SUCCESS) {
        free(nodes);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        CUgraphNodeType type;
        if (ho_real.cuGraphNodeGetType(nodes[i], &type) != CUDA_SUCCESS) continue;
        if (type == CU_GRAPH_NODE_TYPE_KERNEL && ho_real.cuGraphKernelNodeGetParams_v2) {
            CUDA_KERNEL_NODE_PARAMS kp;
            if (ho_real.cuGraphKernelNodeGetParams_v2(nodes[i], &kp) == CUDA_SUCCESS)
                collect_kernel(&kp, g);
        } else if (type == CU_GRAPH_NODE_TYPE_MEMCPY && ho_real.cuGraphMemcpyNodeGetParams) {
            CUDA_MEMCPY3D cp;
            if (ho_real.cuGraphMemcpyNodeGetParams(nodes[i], &cp) == CUDA_SUCCESS) {
                collect_addr(memcpy_side(cp.srcMemoryType, cp.srcHost, cp.srcDevice), g);
                collect_addr(memcpy_side(cp.dstMemoryType, cp.dstHost, cp.dstDevice), g);
            }
        } else if (type == CU_GRAPH_NODE_TYPE_MEMSET && ho_real.cuGraphMemsetNodeGetParams) {
            CUDA_MEMSET_NODE_PARAMS mp;
            if (ho_real.cuGraphMemsetNodeGetParams(nodes[i], &mp) == CUDA_SUCCESS)
                collect_addr(mp.dst, g);
        }
    }
    free(nodes);
}

static struct graph_refs *graph_find(CUgraphExec exec) {
    for (struct graph_refs *g = graphs; g != NULL; g = g->next)
        if (g->exec == exec) return g;
    return NULL;
}

void ho_track_graph_instantiate(CUgraphExec exec, CUgraph graph) {
    pthread_mutex_lock(&graphs_lock);
    struct graph_refs *g = graph_find(exec);
    if (g == NULL) {
        g = calloc(1, sizeof *g);
        if (g == NULL) {
            pthread_mutex_unlock(&graphs_lock);
            return;
        }
        g->exec = exec;
        g->next = graphs;
        graphs = g;
    }
    g->n = 0;
    collect_graph(graph, g);
    pthread_mutex_unlock(&graphs_lock);
}

void ho_track_graph_kernel_params(CUgraphExec exec, const CUDA_KERNEL_NODE_PARAMS *params) {
    pthread_mutex_lock(&graphs_lock);
    struct graph_refs *g = graph_find(exec);
    /* The exec's other parameters cannot be read back: keep the union (conservative). */
    if (g != NULL && params != NULL) collect_kernel(params, g);
    pthread_mutex_unlock(&graphs_lock);
}

/* The addresses an instantiated graph references (a copy the caller frees), or NULL. */
static uint64_t *graph_addrs(CUgraphExec exec, int *n) {
    pthread_mutex_lock(&graphs_lock);
    struct graph_refs *g = graph_find(exec);
    uint64_t *copy = NULL;
    *n = 0;
    if (g != NULL && g->n > 0 && (copy = malloc(g->n * sizeof *copy)) != NULL) {
        memcpy(copy, g->addrs, g->n * sizeof *copy);
        *n = (int)g->n;
    }
    pthread_mutex_unlock(&graphs_lock);
    return copy;
}

void ho_track_graph_launch(CUgraphExec exec) {
    int n;
    uint64_t *addrs = graph_addrs(exec, &n);
    for (int i = 0; i < n; i++)
        ho_track_touch(addrs[i]);
    free(addrs);
    ho_count(&ho_stats.counts_graph_launches, 1);
}

/* Every buffer a graph references is made resident before the graph runs (graph nodes cannot
 * wait for the engine). Beyond HO_TOUCH_MAX buffers the rest stay wherever they are: host-mapped
 * buffers still read correctly, slowly. */
void ho_track_graph_launch_begin(CUgraphExec exec, CUstream s, bool per_thread,
                                 struct ho_engine_touch *et) {
    int n;
    uint64_t *addrs = graph_addrs(exec, &n);
    ho_track_access_begin(addrs, n, s, per_thread, true, et);
    et->func = (uint64_t)(uintptr_t)exec; /* to the policy, a graph launch is one launch */
    free(addrs);
}

void ho_track_graph_destroy(CUgraphExec exec) {
    pthread_mutex_lock(&graphs_lock);
    for (struct graph_refs **pp = &graphs; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->exec == exec) {
            struct graph_refs *g = *pp;
            *pp = g->next;
            free(g->addrs);
            free(g);
            break;
        }
    }
    pthread_mutex_unlock(&graphs_lock);
}

void ho_track_reset(void) {
    pthread_mutex_init(&graphs_lock, NULL);
    graphs = NULL;                 /* the parent's graphs mean nothing in a fork child */
    atomic_store(&all_uses, NULL); /* nor its use counts (the structures are left behind) */
    my_uses = NULL;
}
