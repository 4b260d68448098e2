#include "track.h"

#include "driver.h"
#include "init.h"
#include "log.h"
#include "paramcache.h"
#include "stats.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define KIND_BIT(k) (1u << (k))

void ho_track_alloc(uint64_t base, uint64_t size, enum ho_buffer_kind kind) {
    CUdevice dev = 0;
    if (ho_real.cuCtxGetDevice == NULL || ho_real.cuCtxGetDevice(&dev) != CUDA_SUCCESS) dev = 0;
    if (ho_registry_add(base, size, (int)dev, kind) == NULL) {
        ho_degrade("out of memory tracking an allocation");
        return;
    }
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

/* The distinct buffers one launch touches. */
#define TOUCH_MAX 64
struct touch_set {
    struct ho_buffer *b[TOUCH_MAX];
    int n;
};

static inline void touch_word(uint64_t v, struct touch_set *t) {
    if (!ho_registry_maybe(v)) return;
    struct ho_buffer *b = ho_registry_lookup_locked(v);
    if (b == NULL) return;
    for (int i = 0; i < t->n; i++)
        if (t->b[i] == b) return;
    if (t->n < TOUCH_MAX) t->b[t->n++] = b;
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
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) *buf = extra[i + 1];
        else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) *size = *(size_t *)extra[i + 1];
    }
    return *buf != NULL && *size > 0;
}

static void scan_launch(const void *func, void **params, void **extra, struct touch_set *t) {
    const struct ho_param_layout *l = ho_param_layout(func);
    if (params != NULL && l->nparams >= 0) {
        for (int i = 0; i < l->nparams; i++)
            if (l->p[i].size >= 8 && params[i] != NULL)
                scan_bytes(params[i], l->p[i].size, t);
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

void ho_track_launch(const void *func, void **params, void **extra) {
    struct touch_set t;
    t.n = 0;
    ho_registry_read_begin();
    scan_launch(func, params, extra, &t);
    for (int i = 0; i < t.n; i++) atomic_fetch_add_explicit(&t.b[i]->uses, 1, memory_order_relaxed);
    ho_registry_read_end();
    ho_count(&ho_stats.counts_launches, 1);
}

void ho_track_touch(uint64_t addr) {
    if (!ho_registry_maybe(addr)) return;
    ho_registry_read_begin();
    struct ho_buffer *b = ho_registry_lookup_locked(addr);
    if (b != NULL) atomic_fetch_add_explicit(&b->uses, 1, memory_order_relaxed);
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

void ho_track_graph_launch(CUgraphExec exec) {
    pthread_mutex_lock(&graphs_lock);
    struct graph_refs *g = graph_find(exec);
    if (g != NULL)
        for (size_t i = 0; i < g->n; i++) ho_track_touch(g->addrs[i]);
    pthread_mutex_unlock(&graphs_lock);
    ho_count(&ho_stats.counts_graph_launches, 1);
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
    graphs = NULL; /* the parent's graphs mean nothing in a fork child */
}
