/* Graphs: each instantiated graph's buffers, node by node, so an exec update re-derives the
 * node it changes; child graphs and conditional bodies are walked; what cannot be read makes
 * the exec's launches unattributed (a barrier, engine_unseen.c).
 *
 * An exec's record is a list of entries, one per node of the graph it was instantiated from
 * (keyed by that node's handle, which the exec setters name): the addresses the node references,
 * re-resolved at each launch (a buffer freed and reallocated in between is looked up afresh),
 * and whether the node holds something unreadable (a kernel whose layout is unknown, a
 * conditional node whose bodies were never seen, a node type with no getter). A child node's
 * entry holds everything its child graph references, recursively; a conditional node's the same
 * for every body, which only cuGraphAddNode tells (the driver has no getter for them): the hook
 * remembers them. Graph calls are rare next to launches: one mutex guards it all. */
#include "track.h"

#include "log.h"
#include "paramcache.h"
#include "real.h"
#include "stats.h"
#include "track_learn.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct node_refs {
    CUgraphNode node;
    uint64_t *addrs;
    size_t n, cap;
    bool unseen;
};

struct graph_refs {
    CUgraphExec exec;
    struct node_refs *nodes;
    size_t n, cap;
    struct graph_refs *next;
};

/* Conditional nodes and their bodies, as cuGraphAddNode created them. */
struct cond_node {
    CUgraphNode node;
    CUgraph *bodies; /* the driver's array, valid for the node's life */
    unsigned n;
    struct cond_node *next;
};

static pthread_mutex_t graphs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct graph_refs *graphs;
static struct cond_node *conds;

#define WALK_DEPTH 16 /* nesting of child graphs and conditional bodies followed */

static void refs_add(struct node_refs *r, uint64_t a) {
    if (a == 0) return;
    for (size_t i = 0; i < r->n; i++)
        if (r->addrs[i] == a) return;
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 8;
        uint64_t *na = realloc(r->addrs, cap * sizeof *na);
        if (na == NULL) {
            r->unseen = true; /* a reference not kept is one not waited for: wait for all */
            return;
        }
        r->addrs = na;
        r->cap = cap;
    }
    r->addrs[r->n++] = a;
}

static void collect_addr(uint64_t v, struct node_refs *r) {
    if (!ho_registry_maybe(v)) return;
    ho_registry_read_begin();
    bool hit = ho_registry_lookup_locked(v) != NULL;
    ho_registry_read_end();
    if (hit) refs_add(r, v);
}

static void collect_bytes(const unsigned char *p, size_t size, struct node_refs *r) {
    for (size_t off = 0; off + 8 <= size; off += 8) {
        uint64_t v;
        memcpy(&v, p + off, sizeof v);
        collect_addr(v, r);
    }
    for (size_t off = 0; size >= 128 && off + 128 <= size && ho_learn_tmaps_known(); off += 64) {
        uint64_t a;
        if (ho_learn_tmap_lookup(p + off, &a)) collect_addr(a, r);
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

static void collect_kernel(const CUDA_KERNEL_NODE_PARAMS *kp, struct node_refs *r) {
    const void *f = kp->func != NULL ? (const void *)kp->func : (const void *)kp->kern;
    const struct ho_param_layout *l = ho_param_layout(f);
    const unsigned char *buf;
    size_t size;
    if (kp->kernelParams != NULL && l->nparams >= 0) {
        for (int i = 0; i < l->nparams; i++)
            if (l->p[i].size >= 8 && kp->kernelParams[i] != NULL)
                collect_bytes(kp->kernelParams[i], l->p[i].size, r);
        if (l->nparams >= HO_MAX_PARAMS) r->unseen = true;
    } else if (kp->extra != NULL && extra_buffer(kp->extra, &buf, &size)) {
        collect_bytes(buf, size, r);
    } else if (kp->kernelParams != NULL || kp->extra != NULL) {
        r->unseen = true;
    }
}

static uint64_t memcpy_side(CUmemorytype t, const void *host, CUdeviceptr dev) {
    if (t == CU_MEMORYTYPE_DEVICE || t == CU_MEMORYTYPE_UNIFIED) return dev;
    if (t == CU_MEMORYTYPE_HOST) return (uint64_t)(uintptr_t)host;
    return 0;
}

static void collect_copy(const CUDA_MEMCPY3D *cp, struct node_refs *r) {
    collect_addr(memcpy_side(cp->srcMemoryType, cp->srcHost, cp->srcDevice), r);
    collect_addr(memcpy_side(cp->dstMemoryType, cp->dstHost, cp->dstDevice), r);
    if (cp->srcMemoryType == CU_MEMORYTYPE_ARRAY || cp->dstMemoryType == CU_MEMORYTYPE_ARRAY)
        r->unseen = true; /* an array's backing memory is not the engine's; its peer side is */
}

static const struct cond_node *cond_find(CUgraphNode n) {
    for (const struct cond_node *c = conds; c != NULL; c = c->next)
        if (c->node == n) return c;
    return NULL;
}

static void collect_graph(CUgraph graph, struct node_refs *r, int depth);

/* One node's references into r (graphs_lock held). */
static void collect_node(CUgraphNode node, struct node_refs *r, int depth) {
    CUgraphNodeType type;
    if (ho_real.cuGraphNodeGetType(node, &type) != CUDA_SUCCESS) {
        r->unseen = true;
        return;
    }
    switch (type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
        CUDA_KERNEL_NODE_PARAMS kp;
        if (ho_real.cuGraphKernelNodeGetParams_v2 != NULL &&
            ho_real.cuGraphKernelNodeGetParams_v2(node, &kp) == CUDA_SUCCESS)
            collect_kernel(&kp, r);
        else
            r->unseen = true;
        break;
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY: {
        CUDA_MEMCPY3D cp;
        if (ho_real.cuGraphMemcpyNodeGetParams != NULL &&
            ho_real.cuGraphMemcpyNodeGetParams(node, &cp) == CUDA_SUCCESS)
            collect_copy(&cp, r);
        else
            r->unseen = true;
        break;
    }
    case CU_GRAPH_NODE_TYPE_MEMSET: {
        CUDA_MEMSET_NODE_PARAMS mp;
        if (ho_real.cuGraphMemsetNodeGetParams != NULL &&
            ho_real.cuGraphMemsetNodeGetParams(node, &mp) == CUDA_SUCCESS)
            collect_addr(mp.dst, r);
        else
            r->unseen = true;
        break;
    }
    case CU_GRAPH_NODE_TYPE_GRAPH: {
        CUgraph child;
        if (depth < WALK_DEPTH && ho_real.cuGraphChildGraphNodeGetGraph != NULL &&
            ho_real.cuGraphChildGraphNodeGetGraph(node, &child) == CUDA_SUCCESS)
            collect_graph(child, r, depth + 1);
        else
            r->unseen = true;
        break;
    }
    case CU_GRAPH_NODE_TYPE_CONDITIONAL: {
        const struct cond_node *c = cond_find(node);
        if (c == NULL || depth >= WALK_DEPTH) {
            r->unseen = true; /* bodies never seen (made by a clone, say): wait for it */
            break;
        }
        for (unsigned i = 0; i < c->n; i++)
            collect_graph(c->bodies[i], r, depth + 1);
        break;
    }
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP: {
        CUDA_BATCH_MEM_OP_NODE_PARAMS bp;
        if (ho_real.cuGraphBatchMemOpNodeGetParams == NULL ||
            ho_real.cuGraphBatchMemOpNodeGetParams(node, &bp) != CUDA_SUCCESS) {
            r->unseen = true;
            break;
        }
        for (unsigned i = 0; i < bp.count; i++) {
            const CUstreamBatchMemOpParams *o = &bp.paramArray[i];
            if (o->operation == CU_STREAM_MEM_OP_WAIT_VALUE_32 ||
                o->operation == CU_STREAM_MEM_OP_WAIT_VALUE_64)
                collect_addr(o->waitValue.address, r);
            else if (o->operation == CU_STREAM_MEM_OP_WRITE_VALUE_32 ||
                     o->operation == CU_STREAM_MEM_OP_WRITE_VALUE_64)
                collect_addr(o->writeValue.address, r);
        }
        break;
    }
    case CU_GRAPH_NODE_TYPE_EMPTY:
    case CU_GRAPH_NODE_TYPE_HOST:
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL:
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT:
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: /* graph memory: the driver's, never the engine's */
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
        break; /* no device memory of a tracked buffer */
    default:
        r->unseen = true;
        break;
    }
}

static void collect_graph(CUgraph graph, struct node_refs *r, int depth) {
    size_t n = 0;
    if (ho_real.cuGraphGetNodes == NULL ||
        ho_real.cuGraphGetNodes(graph, NULL, &n) != CUDA_SUCCESS) {
        r->unseen = true;
        return;
    }
    CUgraphNode *nodes = calloc(n ? n : 1, sizeof *nodes);
    if (nodes == NULL || ho_real.cuGraphGetNodes(graph, nodes, &n) != CUDA_SUCCESS) {
        free(nodes);
        r->unseen = true;
        return;
    }
    for (size_t i = 0; i < n; i++)
        collect_node(nodes[i], r, depth);
    free(nodes);
}

static struct graph_refs *graph_find(CUgraphExec exec) {
    for (struct graph_refs *g = graphs; g != NULL; g = g->next)
        if (g->exec == exec) return g;
    return NULL;
}

static void graph_clear(struct graph_refs *g) {
    for (size_t i = 0; i < g->n; i++)
        free(g->nodes[i].addrs);
    g->n = 0;
}

/* The entry for node (added when new); NULL when out of memory. */
static struct node_refs *entry(struct graph_refs *g, CUgraphNode node) {
    for (size_t i = 0; i < g->n; i++)
        if (g->nodes[i].node == node) return &g->nodes[i];
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 16;
        struct node_refs *nn = realloc(g->nodes, cap * sizeof *nn);
        if (nn == NULL) return NULL;
        g->nodes = nn;
        g->cap = cap;
    }
    struct node_refs *r = &g->nodes[g->n++];
    memset(r, 0, sizeof *r);
    r->node = node;
    return r;
}

static struct graph_refs *graph_get(CUgraphExec exec) {
    struct graph_refs *g = graph_find(exec);
    if (g == NULL && (g = calloc(1, sizeof *g)) != NULL) {
        g->exec = exec;
        g->next = graphs;
        graphs = g;
    }
    return g;
}

void ho_track_graph_instantiate(CUgraphExec exec, CUgraph graph) {
    pthread_mutex_lock(&graphs_lock);
    struct graph_refs *g = graph_get(exec);
    if (g != NULL) {
        graph_clear(g);
        size_t n = 0;
        CUgraphNode *nodes = NULL;
        bool ok = ho_real.cuGraphGetNodes != NULL &&
                  ho_real.cuGraphGetNodes(graph, NULL, &n) == CUDA_SUCCESS &&
                  (nodes = calloc(n ? n : 1, sizeof *nodes)) != NULL &&
                  ho_real.cuGraphGetNodes(graph, nodes, &n) == CUDA_SUCCESS;
        for (size_t i = 0; ok && i < n; i++) {
            struct node_refs *r = entry(g, nodes[i]);
            if (r == NULL) {
                ok = false;
                break;
            }
            collect_node(nodes[i], r, 0);
        }
        if (!ok) {
            struct node_refs *r = entry(g, NULL);
            if (r != NULL) r->unseen = true; /* unreadable: every launch is a barrier */
        }
        free(nodes);
    }
    pthread_mutex_unlock(&graphs_lock);
}

/* An exec node changed: its entry is derived again from what it now holds. */
static struct node_refs *node_reset(CUgraphExec exec, CUgraphNode node) {
    struct graph_refs *g = graph_get(exec);
    struct node_refs *r = g != NULL ? entry(g, node) : NULL;
    if (r != NULL) {
        r->n = 0;
        r->unseen = false;
    }
    return r;
}

void ho_track_graph_kernel_params(CUgraphExec exec, CUgraphNode node,
                                  const CUDA_KERNEL_NODE_PARAMS *params) {
    pthread_mutex_lock(&graphs_lock);
    struct node_refs *r = node_reset(exec, node);
    if (r != NULL && params != NULL) collect_kernel(params, r);
    pthread_mutex_unlock(&graphs_lock);
}

void ho_track_graph_copy_params(CUgraphExec exec, CUgraphNode node, const CUDA_MEMCPY3D *cp) {
    pthread_mutex_lock(&graphs_lock);
    struct node_refs *r = node_reset(exec, node);
    if (r != NULL && cp != NULL) collect_copy(cp, r);
    pthread_mutex_unlock(&graphs_lock);
}

void ho_track_graph_memset_params(CUgraphExec exec, CUgraphNode node, CUdeviceptr dst) {
    pthread_mutex_lock(&graphs_lock);
    struct node_refs *r = node_reset(exec, node);
    if (r != NULL) collect_addr(dst, r);
    pthread_mutex_unlock(&graphs_lock);
}

void ho_track_graph_child_params(CUgraphExec exec, CUgraphNode node, CUgraph child) {
    pthread_mutex_lock(&graphs_lock);
    struct node_refs *r = node_reset(exec, node);
    if (r != NULL) collect_graph(child, r, 1);
    pthread_mutex_unlock(&graphs_lock);
}

void ho_track_graph_node_params(CUgraphExec exec, CUgraphNode node, const CUgraphNodeParams *p) {
    if (p == NULL) return;
    switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
        /* CUDA_KERNEL_NODE_PARAMS_v3 has the layout of the _v2 the getter fills. */
        CUDA_KERNEL_NODE_PARAMS kp;
        memcpy(&kp, &p->kernel, sizeof kp);
        ho_track_graph_kernel_params(exec, node, &kp);
        break;
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        ho_track_graph_copy_params(exec, node, &p->memcpy.copyParams);
        break;
    case CU_GRAPH_NODE_TYPE_MEMSET:
        ho_track_graph_memset_params(exec, node, p->memset.dst);
        break;
    case CU_GRAPH_NODE_TYPE_GRAPH:
        ho_track_graph_child_params(exec, node, p->graph.graph);
        break;
    default: {
        /* Anything else is read from the node as it now stands in the graph. */
        pthread_mutex_lock(&graphs_lock);
        struct node_refs *r = node_reset(exec, node);
        if (r != NULL) collect_node(node, r, 0);
        pthread_mutex_unlock(&graphs_lock);
        break;
    }
    }
}

void ho_track_graph_node_added(CUgraphNode node, const CUgraphNodeParams *p) {
    if (p == NULL || p->type != CU_GRAPH_NODE_TYPE_CONDITIONAL ||
        p->conditional.phGraph_out == NULL)
        return;
    struct cond_node *c = calloc(1, sizeof *c);
    if (c == NULL) return; /* not remembered: graphs holding it are barriers */
    c->node = node;
    c->bodies = p->conditional.phGraph_out;
    c->n = p->conditional.size;
    pthread_mutex_lock(&graphs_lock);
    c->next = conds;
    conds = c;
    pthread_mutex_unlock(&graphs_lock);
}

/* The addresses an instantiated graph references (a copy the caller frees), or NULL; *unseen
 * when part of it cannot be attributed; *known false when the exec was never seen. */
static uint64_t *graph_addrs(CUgraphExec exec, int *n, bool *unseen, bool *known) {
    pthread_mutex_lock(&graphs_lock);
    struct graph_refs *g = graph_find(exec);
    uint64_t *copy = NULL;
    size_t total = 0;
    *n = 0;
    *unseen = false;
    *known = g != NULL;
    for (size_t i = 0; g != NULL && i < g->n; i++) {
        total += g->nodes[i].n;
        *unseen |= g->nodes[i].unseen;
    }
    if (total > 0 && (copy = malloc(total * sizeof *copy)) != NULL) {
        for (size_t i = 0; i < g->n; i++) {
            if (g->nodes[i].n == 0) continue; /* its list may never have been allocated */
            memcpy(copy + *n, g->nodes[i].addrs, g->nodes[i].n * sizeof *copy);
            *n += (int)g->nodes[i].n;
        }
    } else if (total > 0) {
        *unseen = true;
    }
    pthread_mutex_unlock(&graphs_lock);
    return copy;
}

void ho_track_graph_launch(CUgraphExec exec) {
    int n;
    bool unseen, known;
    uint64_t *addrs = graph_addrs(exec, &n, &unseen, &known);
    for (int i = 0; i < n; i++)
        ho_track_touch(addrs[i]);
    free(addrs);
    ho_count(&ho_stats.counts_graph_launches, 1);
}

/* Every buffer a graph references is made resident before the graph runs (graph nodes cannot
 * wait for the engine). An exec the library never saw instantiated, or one with a node it
 * cannot read, is a barrier as well. */
void ho_track_graph_launch_begin(CUgraphExec exec, CUstream s, bool per_thread,
                                 struct ho_engine_touch *et) {
    int n;
    bool unseen, known;
    uint64_t *addrs = graph_addrs(exec, &n, &unseen, &known);
    ho_track_access_begin_ex(addrs, n, s, per_thread, true, unseen || !known, et);
    et->func = (uint64_t)(uintptr_t)exec; /* to the policy, a graph launch is one launch */
    free(addrs);
}

void ho_track_graph_destroy(CUgraphExec exec) {
    pthread_mutex_lock(&graphs_lock);
    for (struct graph_refs **pp = &graphs; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->exec == exec) {
            struct graph_refs *g = *pp;
            *pp = g->next;
            graph_clear(g);
            free(g->nodes);
            free(g);
            break;
        }
    }
    pthread_mutex_unlock(&graphs_lock);
}

void ho_track_graph_reset(void) {
    pthread_mutex_init(&graphs_lock, NULL);
    graphs = NULL;
    conds = NULL;
    ho_learn_reset();
}
