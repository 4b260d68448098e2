/* Stream capture and CUDA graphs.
 *
 * Graphs: a node holds a template operation (struct sim_op, never enqueued) describing what one
 * execution of it does, plus the parameters the query API reports. Instantiation copies every
 * template into the executable graph in topological order, so an exec no longer needs its source
 * graph. Each launch clones the templates again (the executor owns and rewrites the ops it runs:
 * kernel argument buffers, resolved range refs), chains them with sim_op_add_dep along the graph's
 * edges, and brackets them with two stream-ordered no-ops: a start op (after the stream's previous
 * work and the exec's previous launch) that the root nodes wait for, and a join op (after every
 * leaf) that the stream's next work waits for. Nodes are not stream-ordered, so parallel branches
 * overlap in virtual time, as on the device.
 *
 * Capture: a capture is a graph being built plus one dependency set per member stream (the nodes
 * the next operation captured in that stream will depend on). The stream that began it is the
 * origin; other streams join by waiting on an event recorded in the capture (fork) and must be
 * joined back into the origin before the capture ends. sim_capture_intercept turns an operation
 * into a node instead of enqueueing it.
 *
 * Illegal-during-capture rules, as the driver applies them:
 * - potentially unsafe calls (allocation, synchronous copies, event queries...) obey the calling
 *   thread's mode (cuThreadExchangeStreamCaptureMode): GLOBAL forbids them while this thread has a
 *   non-RELAXED capture or any other thread has a GLOBAL one; THREAD_LOCAL only while this thread
 *   has a non-RELAXED capture; RELAXED never. A forbidden call returns
 *   CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the captures that forbade it.
 * - calls that necessarily conflict with capture fail in every mode: synchronising or querying a
 *   capturing stream, synchronising the context of a capturing stream, querying an event recorded
 *   in a live capture (CUDA_ERROR_CAPTURED_EVENT).
 * - the legacy stream synchronises implicitly with every blocking stream of its context, so any
 *   use of it while such a stream captures is CUDA_ERROR_STREAM_CAPTURE_IMPLICIT and invalidates
 *   those captures (cuStreamIsCapturing/cuStreamGetCaptureInfo only report it).
 *
 * Not modelled: programmatic edges and ports, event/semaphore/conditional/allocation nodes, child
 * graph nodes (a captured cuGraphLaunch inlines the exec's nodes into the capture instead), 3D
 * copies whose slices are not evenly pitched. A captured prefetch runs as a node of type EMPTY: the
 * node API has no prefetch type. cuStreamAddCallback cannot be captured, as on the device. */
/* Declares every legacy ABI next to the current ones, so the compiler checks each entry point
 * defined below against cuda.h's own prototype. */
#define __CUDA_API_VERSION_INTERNAL 1
#include "sim.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------ node bodies */

struct node_body {
    CUgraphNodeType type;
    struct sim_op *tmpl;            /* what one execution does; NULL for empty nodes */
    CUcontext ctx;                  /* as given (kernel, memcpy and memset nodes) */
    CUkernel kern;                  /* kernel nodes made from a CUkernel, for GetParams */
    CUDA_MEMCPY3D copy;             /* memcpy nodes: parameters as reported */
    CUDA_MEMSET_NODE_PARAMS memset; /* memset nodes: parameters as reported */
};

static bool kernel_args_copy(struct sim_kernel_op *dst, const struct sim_kernel_op *src) {
    const struct sim_func *f = src->func;
    dst->argbuf = NULL;
    dst->params = NULL;
    if (src->argbuf == NULL || f->nparams == 0) return true;
    dst->argbuf = malloc(f->argbytes);
    dst->params = calloc((size_t)f->nparams, sizeof *dst->params);
    if (dst->argbuf == NULL || dst->params == NULL) return false; /* freed with the op */
    memcpy(dst->argbuf, src->argbuf, f->argbytes);
    for (int i = 0; i < f->nparams; i++)
        dst->params[i] = dst->argbuf + f->params[i].offset;
    return true;
}

/* A fresh, unqueued copy of an operation without a stream (lock held). A pageable source is read
 * when the copy runs, not snapshotted: graph memcpy nodes read their source at execution. */
static struct sim_op *op_clone(const struct sim_op *t) {
    struct sim_op *op = sim_op_new(t->kind, NULL);
    if (op == NULL) return NULL;
    op->u = t->u;
    bool ok = true;
    if (t->kind == SIM_OP_KERNEL)
        ok = kernel_args_copy(&op->u.kernel, &t->u.kernel);
    else if (t->kind == SIM_OP_COPY)
        op->u.copy.staging = NULL;
    if (ok && t->nrefs > 0) {
        op->refs_list = malloc((size_t)t->nrefs * sizeof *op->refs_list);
        ok = op->refs_list != NULL;
        if (ok) {
            memcpy(op->refs_list, t->refs_list, (size_t)t->nrefs * sizeof *op->refs_list);
            op->nrefs = t->nrefs;
        }
    }
    if (!ok) {
        sim_op_release(op);
        return NULL;
    }
    return op;
}

static void body_free(struct node_body *b) {
    sim_op_release(b->tmpl);
    b->tmpl = NULL;
}

static CUresult body_clone(struct node_body *dst, const struct node_body *src) {
    *dst = *src;
    if (src->tmpl == NULL) return CUDA_SUCCESS;
    dst->tmpl = op_clone(src->tmpl);
    return dst->tmpl != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* What cuGraphMemcpyNodeGetParams reports for a captured copy. */
static CUDA_MEMCPY3D copy3d_from_op(const struct sim_copy_op *c) {
    CUDA_MEMCPY3D p;
    memset(&p, 0, sizeof p);
    bool src_dev = c->dir == SIM_D2H || c->dir == SIM_D2D;
    bool dst_dev = c->dir == SIM_H2D || c->dir == SIM_D2D;
    p.srcMemoryType = src_dev ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    p.dstMemoryType = dst_dev ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    if (src_dev)
        p.srcDevice = (CUdeviceptr)(uintptr_t)c->src;
    else
        p.srcHost = c->src;
    if (dst_dev)
        p.dstDevice = (CUdeviceptr)(uintptr_t)c->dst;
    else
        p.dstHost = c->dst;
    p.WidthInBytes = c->bytes;
    p.Height = c->height < 1 ? 1 : c->height;
    p.Depth = 1;
    p.srcPitch = c->src_pitch;
    p.dstPitch = c->dst_pitch;
    p.srcHeight = p.dstHeight = p.Height;
    return p;
}

static CUDA_MEMSET_NODE_PARAMS memset_params_from_op(const struct sim_memset_op *m) {
    CUDA_MEMSET_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.dst = (CUdeviceptr)(uintptr_t)m->dst;
    p.pitch = m->pitch;
    p.value = m->value;
    p.elementSize = m->elem;
    p.width = m->count;
    p.height = m->height < 1 ? 1 : m->height;
    return p;
}

/* The node a captured operation becomes (lock held). */
static CUresult body_from_op(struct node_body *b, const struct sim_op *op, struct sim_ctx *ctx) {
    memset(b, 0, sizeof *b);
    b->ctx = (CUcontext)ctx;
    switch (op->kind) {
    case SIM_OP_KERNEL:
        b->type = CU_GRAPH_NODE_TYPE_KERNEL;
        break;
    case SIM_OP_COPY:
        b->type = CU_GRAPH_NODE_TYPE_MEMCPY;
        b->copy = copy3d_from_op(&op->u.copy);
        break;
    case SIM_OP_MEMSET:
        b->type = CU_GRAPH_NODE_TYPE_MEMSET;
        b->memset = memset_params_from_op(&op->u.memset);
        break;
    case SIM_OP_HOST_FUNC:
        /* A stream callback takes the stream and a status: it has no graph form. */
        if (op->u.host.cb != NULL) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        b->type = CU_GRAPH_NODE_TYPE_HOST;
        break;
    case SIM_OP_FREE:
        b->type = CU_GRAPH_NODE_TYPE_MEM_FREE;
        break;
    case SIM_OP_PREFETCH:
        b->type = CU_GRAPH_NODE_TYPE_EMPTY;
        break;
    default:
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    b->tmpl = op_clone(op);
    return b->tmpl != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* ---------------------------------------------------------------------------------- graphs */

struct sim_graph_node {
    uint32_t magic;
    struct sim_graph *graph;
    size_t index; /* position in graph->nodes */
    struct node_body body;
    CUgraphNode *deps; /* incoming edges, in the order they were added */
    size_t ndeps;
    CUgraphNode cloned_from; /* cuGraphNodeFindInClone; compared, never dereferenced */
};

struct sim_graph {
    uint32_t magic;
    struct sim_graph_node **nodes; /* insertion order */
    size_t nnodes;
    struct sim_capture *capture; /* the capture writing into this graph, or NULL */
};

static struct sim_graph_node *N(CUgraphNode h) {
    return (struct sim_graph_node *)h;
}

static struct sim_graph *graph_from(CUgraph h) {
    struct sim_graph *g = (struct sim_graph *)h;
    return g != NULL && g->magic == SIM_MAGIC_GRAPH ? g : NULL;
}

static struct sim_graph_node *node_from(CUgraphNode h) {
    struct sim_graph_node *n = N(h);
    return n != NULL && n->magic == SIM_MAGIC_NODE ? n : NULL;
}

static bool node_in(const CUgraphNode *set, size_t n, CUgraphNode x) {
    for (size_t i = 0; i < n; i++)
        if (set[i] == x) return true;
    return false;
}

static struct sim_graph *graph_new(void) {
    struct sim_graph *g = calloc(1, sizeof *g);
    if (g != NULL) g->magic = SIM_MAGIC_GRAPH;
    return g;
}

static void node_free(struct sim_graph_node *n) {
    body_free(&n->body);
    free(n->deps);
    n->magic = SIM_MAGIC_DEAD;
    free(n);
}

static void graph_free(struct sim_graph *g) {
    for (size_t i = 0; i < g->nnodes; i++)
        node_free(g->nodes[i]);
    free(g->nodes);
    g->magic = SIM_MAGIC_DEAD;
    free(g);
}

/* Dependencies named by the caller: nodes of g, no duplicates. */
static CUresult deps_check(const struct sim_graph *g, const CUgraphNode *deps, size_t n) {
    if (n > 0 && deps == NULL) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < n; i++) {
        const struct sim_graph_node *d = node_from(deps[i]);
        if (d == NULL || d->graph != g || node_in(deps, i, deps[i]))
            return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/* Adds a node after deps (checked by the caller). Consumes the body: on failure it is freed. */
static CUresult graph_add_node(struct sim_graph *g, struct node_body *b, const CUgraphNode *deps,
                               size_t n, CUgraphNode *out) {
    struct sim_graph_node *node = calloc(1, sizeof *node);
    struct sim_graph_node **list = realloc(g->nodes, (g->nnodes + 1) * sizeof *list);
    if (list != NULL) g->nodes = list;
    if (node != NULL && n > 0) node->deps = malloc(n * sizeof *node->deps);
    if (node == NULL || list == NULL || (n > 0 && node->deps == NULL)) {
        if (node != NULL) free(node->deps);
        free(node);
        body_free(b);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    node->magic = SIM_MAGIC_NODE;
    node->graph = g;
    node->index = g->nnodes;
    node->body = *b;
    if (n > 0) memcpy(node->deps, deps, n * sizeof *deps);
    node->ndeps = n;
    g->nodes[g->nnodes++] = node;
    *out = (CUgraphNode)node;
    return CUDA_SUCCESS;
}

static void node_remove_dep(struct sim_graph_node *n, size_t i) {
    memmove(&n->deps[i], &n->deps[i + 1], (n->ndeps - i - 1) * sizeof *n->deps);
    n->ndeps--;
}

/* Removes a node and every edge that touches it. */
static void graph_remove_node(struct sim_graph_node *node) {
    struct sim_graph *g = node->graph;
    for (size_t i = 0; i < g->nnodes; i++) {
        struct sim_graph_node *o = g->nodes[i];
        for (size_t j = 0; j < o->ndeps; j++)
            if (o->deps[j] == (CUgraphNode)node) node_remove_dep(o, j--);
    }
    memmove(&g->nodes[node->index], &g->nodes[node->index + 1],
            (g->nnodes - node->index - 1) * sizeof *g->nodes);
    g->nnodes--;
    for (size_t i = node->index; i < g->nnodes; i++)
        g->nodes[i]->index = i;
    node_free(node);
}

/* The driver's convention for returning node lists: with a NULL array only the count is returned;
 * otherwise up to *n entries are written, the rest of the caller's *n entries become NULL, and *n
 * becomes the number written. Edge data, when asked for, is all default (zero). */
static void nodes_out(const CUgraphNode *src, size_t count, CUgraphNode *dst,
                      CUgraphEdgeData *edata, size_t *n) {
    if (dst == NULL) {
        *n = count;
        return;
    }
    size_t k = count < *n ? count : *n;
    for (size_t i = 0; i < *n; i++) {
        dst[i] = i < k ? src[i] : NULL;
        if (edata != NULL) memset(&edata[i], 0, sizeof edata[i]);
    }
    *n = k;
}

/* Edge data other than the default (full dependency) is not modelled. */
static bool edata_default(const CUgraphEdgeData *edata, size_t n) {
    static const CUgraphEdgeData zero;
    for (size_t i = 0; edata != NULL && i < n; i++)
        if (memcmp(&edata[i], &zero, sizeof zero) != 0) return false;
    return true;
}

/* Node indices in an order where every node follows its dependencies (Kahn's algorithm, roots in
 * insertion order, so launches are deterministic). NULL on a cycle (*cycle set) or no memory. */
static size_t *topo_order(const struct sim_graph *g, bool *cycle) {
    size_t n = g->nnodes, nedges = 0;
    *cycle = false;
    for (size_t i = 0; i < n; i++)
        nedges += g->nodes[i]->ndeps;
    size_t *order = malloc((n + 1) * sizeof *order);
    size_t *indeg = calloc(n + 1, sizeof *indeg);
    size_t *off = calloc(n + 2, sizeof *off); /* dependents of u: adj[off[u] .. off[u+1]) */
    size_t *adj = malloc((nedges + 1) * sizeof *adj);
    bool ok = order != NULL && indeg != NULL && off != NULL && adj != NULL;
    for (size_t v = 0; ok && v < n; v++)
        for (size_t j = 0; j < g->nodes[v]->ndeps; j++)
            off[N(g->nodes[v]->deps[j])->index + 2]++;
    for (size_t u = 0; ok && u < n; u++)
        off[u + 2] += off[u + 1];
    for (size_t v = 0; ok && v < n; v++) {
        indeg[v] = g->nodes[v]->ndeps;
        for (size_t j = 0; j < g->nodes[v]->ndeps; j++)
            adj[off[N(g->nodes[v]->deps[j])->index + 1]++] = v;
    }
    size_t head = 0, tail = 0;
    for (size_t v = 0; ok && v < n; v++)
        if (indeg[v] == 0) order[tail++] = v;
    while (ok && head < tail) {
        size_t u = order[head++];
        for (size_t k = off[u]; k < off[u + 1]; k++)
            if (--indeg[adj[k]] == 0) order[tail++] = adj[k];
    }
    if (ok && tail != n) *cycle = true;
    free(indeg);
    free(off);
    free(adj);
    if (!ok || *cycle) {
        free(order);
        return NULL;
    }
    return order;
}

/* -------------------------------------------------------------------------- capture state */

struct capture_member {
    struct sim_stream *stream; /* referenced */
    CUgraphNode *deps;         /* what the next node captured in this stream depends on */
    size_t ndeps;
    CUgraphEdgeData *edges; /* zeroed, parallel to deps, made on demand for GetCaptureInfo_v3 */
};

struct sim_capture {
    int refs; /* one while live, plus one per event recorded in it */
    unsigned long long id;
    CUstreamCaptureStatus status; /* ACTIVE or INVALIDATED */
    bool ended;
    CUstreamCaptureMode mode;
    pthread_t thread; /* the thread that began it */
    struct sim_stream *origin;
    struct sim_graph *graph;
    bool user_graph;                /* cuStreamBeginCaptureToGraph: the caller owns the graph */
    struct capture_member *members; /* members[0] is the origin */
    size_t nmembers;
    struct sim_capture *next; /* live captures */
};

static struct sim_capture *live_captures;
static unsigned long long capture_ids;
/* This thread's capture interaction mode; zero is CU_STREAM_CAPTURE_MODE_GLOBAL, the default. */
static _Thread_local CUstreamCaptureMode thread_mode;

/* A capture keeps each member stream alive, since a stream may be destroyed mid-capture; this
 * mirrors how executor.c drops an operation's stream reference. */
static void stream_unref(struct sim_stream *s) {
    if (--s->refs == 0 && s->destroyed) {
        s->magic = SIM_MAGIC_DEAD;
        free(s);
    }
}

static void capture_unref(struct sim_capture *c) {
    if (--c->refs == 0) free(c);
}

static void invalidate(struct sim_capture *c) {
    c->status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
}

static struct capture_member *member_of(struct sim_capture *c, const struct sim_stream *s) {
    for (size_t i = 0; i < c->nmembers; i++)
        if (c->members[i].stream == s) return &c->members[i];
    return NULL;
}

static CUresult member_set_deps(struct capture_member *m, const CUgraphNode *deps, size_t n) {
    CUgraphNode *d = NULL;
    if (n > 0 && (d = malloc(n * sizeof *d)) == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    if (n > 0) memcpy(d, deps, n * sizeof *d);
    free(m->deps);
    free(m->edges);
    m->edges = NULL;
    m->deps = d;
    m->ndeps = n;
    return CUDA_SUCCESS;
}

/* A join: the stream's dependency set becomes the union of both. */
static CUresult member_add_deps(struct capture_member *m, const CUgraphNode *deps, size_t n) {
    CUgraphNode *d = malloc((m->ndeps + n + 1) * sizeof *d);
    if (d == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    size_t k = m->ndeps;
    if (k > 0) memcpy(d, m->deps, k * sizeof *d);
    for (size_t i = 0; i < n; i++)
        if (!node_in(d, k, deps[i])) d[k++] = deps[i];
    CUresult rc = member_set_deps(m, d, k);
    free(d);
    return rc;
}

/* Makes s a member of c (a fork, or the origin when the capture begins). */
static CUresult capture_join(struct sim_capture *c, struct sim_stream *s, const CUgraphNode *deps,
                             size_t n) {
    struct capture_member *mm = realloc(c->members, (c->nmembers + 1) * sizeof *mm);
    if (mm == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    c->members = mm;
    struct capture_member *m = &mm[c->nmembers];
    memset(m, 0, sizeof *m);
    if (member_set_deps(m, deps, n) != CUDA_SUCCESS) return CUDA_ERROR_OUT_OF_MEMORY;
    m->stream = s;
    c->nmembers++;
    s->refs++;
    s->capture = c;
    return CUDA_SUCCESS;
}

/* Takes every member stream out of capture mode and retires c from the live list. */
static void capture_end(struct sim_capture *c) {
    for (size_t i = 0; i < c->nmembers; i++) {
        struct capture_member *m = &c->members[i];
        m->stream->capture = NULL;
        stream_unref(m->stream);
        free(m->deps);
        free(m->edges);
    }
    free(c->members);
    c->members = NULL;
    c->nmembers = 0;
    for (struct sim_capture **pp = &live_captures; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    c->graph->capture = NULL;
    c->graph = NULL;
    c->ended = true;
}

/* The live capture an event was last recorded in, or NULL. */
static struct sim_capture *event_capture(const struct sim_event *e) {
    return e->capture != NULL && !e->capture->ended ? e->capture : NULL;
}

static bool capture_on_device(const struct sim_capture *c, const struct sim_device *dev) {
    for (size_t i = 0; i < c->nmembers; i++)
        if (c->members[i].stream->ctx->dev == dev) return true;
    return false;
}

/* Whether the legacy stream `legacy` would implicitly synchronise with a capturing stream: a
 * blocking member stream of its context. Invalidates those captures when asked to. */
static bool legacy_conflicts(const struct sim_stream *legacy, bool invalidate_them) {
    bool hit = false;
    for (struct sim_capture *c = live_captures; c != NULL; c = c->next) {
        for (size_t i = 0; i < c->nmembers; i++) {
            const struct sim_stream *s = c->members[i].stream;
            if (s->ctx == legacy->ctx && !(s->flags & CU_STREAM_NON_BLOCKING)) {
                if (invalidate_them) invalidate(c);
                hit = true;
                break;
            }
        }
    }
    return hit;
}

/* Whether capture c forbids this thread's potentially unsafe calls. */
static bool capture_forbids(const struct sim_capture *c, pthread_t me) {
    if (thread_mode == CU_STREAM_CAPTURE_MODE_RELAXED) return false;
    if (pthread_equal(c->thread, me)) return c->mode != CU_STREAM_CAPTURE_MODE_RELAXED;
    return thread_mode == CU_STREAM_CAPTURE_MODE_GLOBAL && c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
}

/* All nodes the origin stream's dependency set reaches: a forked stream is joined when its own
 * dependency set lies inside it. */
static bool capture_joined(const struct sim_capture *c) {
    if (c->nmembers <= 1) return true;
    size_t n = c->graph->nnodes;
    unsigned char *seen = calloc(n + 1, 1);
    CUgraphNode *stack = malloc((n + 1) * sizeof *stack);
    if (seen == NULL || stack == NULL) {
        free(seen);
        free(stack);
        return true; /* cannot tell: let the capture end rather than fail it spuriously */
    }
    size_t top = 0;
    const struct capture_member *origin = &c->members[0];
    for (size_t i = 0; i < origin->ndeps; i++)
        stack[top++] = origin->deps[i];
    while (top > 0) {
        struct sim_graph_node *x = N(stack[--top]);
        if (seen[x->index]) continue;
        seen[x->index] = 1;
        for (size_t j = 0; j < x->ndeps; j++)
            if (!seen[N(x->deps[j])->index]) stack[top++] = x->deps[j];
    }
    bool joined = true;
    for (size_t i = 1; joined && i < c->nmembers; i++)
        for (size_t j = 0; joined && j < c->members[i].ndeps; j++)
            joined = seen[N(c->members[i].deps[j])->index];
    free(seen);
    free(stack);
    return joined;
}

/* Appends a node to the capture graph after the stream's dependencies; the node becomes the
 * stream's only dependency. */
static CUresult capture_append(struct sim_capture *c, struct sim_stream *s, struct node_body *b) {
    struct capture_member *m = member_of(c, s);
    CUgraphNode node;
    CUresult rc = graph_add_node(c->graph, b, m->deps, m->ndeps, &node);
    if (rc == CUDA_SUCCESS) rc = member_set_deps(m, &node, 1);
    if (rc != CUDA_SUCCESS) invalidate(c);
    return rc;
}

/* ------------------------------------------------------------------- hooks for other files */

bool sim_capture_intercept(struct sim_stream *s, struct sim_op *op, CUresult *err) {
    if (s->legacy) {
        if (!legacy_conflicts(s, true)) return false;
        *err = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
        return true;
    }
    struct sim_capture *c = s->capture;
    if (c == NULL) return false;
    if (c->status != CU_STREAM_CAPTURE_STATUS_ACTIVE) {
        *err = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        return true;
    }
    struct node_body b;
    *err = body_from_op(&b, op, s->ctx);
    if (*err == CUDA_SUCCESS)
        *err = capture_append(c, s, &b);
    else
        invalidate(c);
    return true;
}

CUresult sim_capture_check_unsafe(void) {
    if (thread_mode == CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_SUCCESS;
    pthread_t me = pthread_self();
    bool hit = false;
    sim_lock();
    for (struct sim_capture *c = live_captures; c != NULL; c = c->next) {
        if (capture_forbids(c, me)) {
            invalidate(c);
            hit = true;
        }
    }
    sim_unlock();
    return hit ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

CUresult sim_capture_check_sync(struct sim_stream *s) {
    CUresult rc = CUDA_SUCCESS;
    sim_lock();
    if (s->capture != NULL) {
        invalidate(s->capture);
        rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    } else if (s->legacy && legacy_conflicts(s, true)) {
        rc = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    }
    sim_unlock();
    return rc != CUDA_SUCCESS ? rc : sim_capture_check_unsafe();
}

CUresult sim_capture_check_ctx(struct sim_ctx *ctx) {
    bool hit = false;
    sim_lock();
    for (struct sim_capture *c = live_captures; c != NULL; c = c->next) {
        if (capture_on_device(c, ctx->dev)) {
            invalidate(c);
            hit = true;
        }
    }
    sim_unlock();
    return hit ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : sim_capture_check_unsafe();
}

CUresult sim_capture_check_event(struct sim_event *e) {
    sim_lock();
    struct sim_capture *c = event_capture(e);
    if (c != NULL) invalidate(c);
    sim_unlock();
    return c != NULL ? CUDA_ERROR_CAPTURED_EVENT : sim_capture_check_unsafe();
}

void sim_capture_event_clear(struct sim_event *e) {
    free(e->capture_deps);
    e->capture_deps = NULL;
    e->capture_ndeps = 0;
    if (e->capture != NULL) capture_unref(e->capture);
    e->capture = NULL;
}

void sim_capture_event_record(struct sim_stream *s, struct sim_event *e) {
    struct sim_capture *c = s->capture;
    const struct capture_member *m = member_of(c, s);
    CUgraphNode *deps = NULL;
    if (m->ndeps > 0 && (deps = malloc(m->ndeps * sizeof *deps)) == NULL) {
        invalidate(c);
        return;
    }
    if (m->ndeps > 0) memcpy(deps, m->deps, m->ndeps * sizeof *deps);
    sim_capture_event_clear(e);
    c->refs++;
    e->capture = c;
    e->capture_deps = deps;
    e->capture_ndeps = m->ndeps;
}

bool sim_capture_stream_wait(struct sim_stream *s, struct sim_event *e, CUresult *err) {
    *err = CUDA_SUCCESS;
    if (s->legacy && legacy_conflicts(s, true)) {
        *err = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
        return true;
    }
    struct sim_capture *ec = event_capture(e), *c = s->capture;
    if (ec == NULL) {
        if (c == NULL) return false;
        /* Work recorded outside the capture cannot become a dependency of a node inside it. */
        if (c->status != CU_STREAM_CAPTURE_STATUS_ACTIVE) {
            *err = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        } else if (e->record != NULL) {
            invalidate(c);
            *err = CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
        }
        return true;
    }
    if (c != NULL && c != ec) {
        invalidate(c);
        invalidate(ec);
        *err = CUDA_ERROR_STREAM_CAPTURE_MERGE;
        return true;
    }
    if (ec->status != CU_STREAM_CAPTURE_STATUS_ACTIVE) {
        *err = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        return true;
    }
    if (s->legacy) { /* the legacy stream cannot be captured */
        invalidate(ec);
        *err = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        return true;
    }
    const CUgraphNode *deps = e->capture_deps;
    if (c == NULL)
        *err = capture_join(ec, s, deps, e->capture_ndeps);
    else
        *err = member_add_deps(member_of(c, s), deps, e->capture_ndeps);
    if (*err != CUDA_SUCCESS) invalidate(ec);
    return true;
}

/* ------------------------------------------------------------------- capture entry points */

static CUresult capture_stream(CUstream h, bool pt, struct sim_stream **out) {
    struct sim_ctx *c;
    CUresult rc = sim_require_ctx(&c);
    if (rc != CUDA_SUCCESS) return rc;
    *out = sim_stream_resolve(h, pt, &rc);
    return rc;
}

static CUresult capture_begin_locked(struct sim_stream *s, struct sim_graph *user_graph,
                                     const CUgraphNode *deps, size_t n, CUstreamCaptureMode mode) {
    if (s->capture != NULL) return CUDA_ERROR_ILLEGAL_STATE;
    struct sim_graph *g = user_graph != NULL ? user_graph : graph_new();
    struct sim_capture *c = calloc(1, sizeof *c);
    if (g == NULL || c == NULL || capture_join(c, s, deps, n) != CUDA_SUCCESS) {
        if (g != NULL && g != user_graph) graph_free(g);
        if (c != NULL) free(c->members);
        free(c);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    c->refs = 1;
    c->id = ++capture_ids;
    c->status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    c->mode = mode;
    c->thread = pthread_self();
    c->origin = s;
    c->graph = g;
    c->user_graph = user_graph != NULL;
    g->capture = c;
    c->next = live_captures;
    live_captures = c;
    return CUDA_SUCCESS;
}

static CUresult capture_begin(CUstream h, bool pt, CUgraph hg, const CUgraphNode *deps,
                              const CUgraphEdgeData *edata, size_t n, CUstreamCaptureMode mode) {
    struct sim_stream *s;
    CUresult rc = capture_stream(h, pt, &s);
    if (rc != CUDA_SUCCESS) return rc;
    if ((unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_ERROR_INVALID_VALUE;
    if (s->legacy) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (!edata_default(edata, n)) return CUDA_ERROR_NOT_SUPPORTED;
    sim_lock();
    struct sim_graph *g = NULL;
    if (hg != NULL) {
        g = graph_from(hg);
        if (g == NULL || g->capture != NULL)
            rc = CUDA_ERROR_INVALID_VALUE;
        else
            rc = deps_check(g, deps, n);
    } else if (n > 0) {
        rc = CUDA_ERROR_INVALID_VALUE;
    }
    if (rc == CUDA_SUCCESS) rc = capture_begin_locked(s, g, deps, n, mode);
    sim_unlock();
    return rc;
}

/* Ends c, owned by the calling thread: the graph on success, else NULL and the reason. */
static CUresult capture_finish(struct sim_capture *c, CUgraph *out) {
    CUresult rc = CUDA_SUCCESS;
    if (c->status != CU_STREAM_CAPTURE_STATUS_ACTIVE)
        rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    else if (!capture_joined(c))
        rc = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
    struct sim_graph *g = c->graph;
    bool user_graph = c->user_graph;
    capture_end(c);
    capture_unref(c);
    if (rc != CUDA_SUCCESS && !user_graph) graph_free(g);
    *out = rc == CUDA_SUCCESS ? (CUgraph)g : NULL;
    return rc;
}

static CUresult capture_end_entry(CUstream h, bool pt, CUgraph *out) {
    struct sim_stream *s;
    CUresult rc = capture_stream(h, pt, &s);
    if (rc != CUDA_SUCCESS) return rc;
    if (out == NULL) return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    struct sim_capture *c = s->capture;
    if (c == NULL) {
        rc = CUDA_ERROR_ILLEGAL_STATE;
    } else if (c->origin != s) {
        invalidate(c);
        rc = CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    } else if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
               !pthread_equal(c->thread, pthread_self())) {
        rc = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    } else {
        rc = capture_finish(c, out);
    }
    sim_unlock();
    return rc;
}

static CUresult capture_is_capturing(CUstream h, bool pt, CUstreamCaptureStatus *status) {
    struct sim_stream *s;
    CUresult rc = capture_stream(h, pt, &s);
    if (rc != CUDA_SUCCESS) return rc;
    if (status == NULL) return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    if (s->legacy && legacy_conflicts(s, false))
        rc = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    else
        *status = s->capture != NULL ? s->capture->status : CU_STREAM_CAPTURE_STATUS_NONE;
    sim_unlock();
    return rc;
}

struct capture_info {
    CUstreamCaptureStatus *status;
    cuuint64_t *id;
    CUgraph *graph;
    const CUgraphNode **deps;
    const CUgraphEdgeData **edges;
    size_t *ndeps;
};

static void capture_info_fill(struct sim_capture *c, struct sim_stream *s,
                              const struct capture_info *q) {
    *q->status = c->status;
    if (q->id != NULL) *q->id = c->id;
    if (c->status != CU_STREAM_CAPTURE_STATUS_ACTIVE) return;
    struct capture_member *m = member_of(c, s);
    if (q->graph != NULL) *q->graph = (CUgraph)c->graph;
    if (q->deps != NULL) *q->deps = m->deps;
    if (q->ndeps != NULL) *q->ndeps = m->ndeps;
    if (q->edges != NULL) {
        if (m->edges == NULL) m->edges = calloc(m->ndeps + 1, sizeof *m->edges);
        *q->edges = m->edges;
    }
}

static CUresult capture_get_info(CUstream h, bool pt, const struct capture_info *q) {
    struct sim_stream *s;
    CUresult rc = capture_stream(h, pt, &s);
    if (rc != CUDA_SUCCESS) return rc;
    if (q->status == NULL || (q->edges != NULL && q->deps == NULL)) return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    if (s->legacy && legacy_conflicts(s, false))
        rc = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    else if (s->capture == NULL)
        *q->status = CU_STREAM_CAPTURE_STATUS_NONE;
    else
        capture_info_fill(s->capture, s, q);
    sim_unlock();
    return rc;
}

static CUresult capture_update_deps(CUstream h, bool pt, CUgraphNode *deps,
                                    const CUgraphEdgeData *edata, size_t n, unsigned flags) {
    struct sim_stream *s;
    CUresult rc = capture_stream(h, pt, &s);
    if (rc != CUDA_SUCCESS) return rc;
    if (flags > CU_STREAM_SET_CAPTURE_DEPENDENCIES) return CUDA_ERROR_INVALID_VALUE;
    if (!edata_default(edata, n)) return CUDA_ERROR_NOT_SUPPORTED;
    sim_lock();
    struct sim_capture *c = s->capture;
    if (c == NULL)
        rc = CUDA_ERROR_ILLEGAL_STATE;
    else if (c->status != CU_STREAM_CAPTURE_STATUS_ACTIVE)
        rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    else
        rc = deps_check(c->graph, deps, n);
    if (rc == CUDA_SUCCESS) {
        struct capture_member *m = member_of(c, s);
        if (flags == CU_STREAM_SET_CAPTURE_DEPENDENCIES)
            rc = member_set_deps(m, deps, n);
        else
            rc = member_add_deps(m, deps, n);
    }
    sim_unlock();
    return rc;
}

#define CAPTURE_ENTRY_POINTS(SUFFIX, PT)                                                           \
    SIM_EXPORT CUresult cuStreamBeginCapture##SUFFIX(CUstream h) {                                 \
        return capture_begin(h, PT, NULL, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL);           \
    }                                                                                              \
    SIM_EXPORT CUresult cuStreamBeginCapture_v2##SUFFIX(CUstream h, CUstreamCaptureMode mode) {    \
        return capture_begin(h, PT, NULL, NULL, NULL, 0, mode);                                    \
    }                                                                                              \
    SIM_EXPORT CUresult cuStreamBeginCaptureToGraph##SUFFIX(                                       \
        CUstream h, CUgraph g, const CUgraphNode *deps, const CUgraphEdgeData *edata, size_t n,    \
        CUstreamCaptureMode mode) {                                                                \
        return capture_begin(h, PT, g, deps, edata, n, mode);                                      \
    }                                                                                              \
    SIM_EXPORT CUresult cuStreamEndCapture##SUFFIX(CUstream h, CUgraph *g) {                       \
        return capture_end_entry(h, PT, g);                                                        \
    }                                                                                              \
    SIM_EXPORT CUresult cuStreamIsCapturing##SUFFIX(CUstream h, CUstreamCaptureStatus *st) {       \
        return capture_is_capturing(h, PT, st);                                                    \
    }                                                                                              \
    SIM_EXPORT CUresult cuStreamGetCaptureInfo##SUFFIX(CUstream h, CUstreamCaptureStatus *st,      \
                                                       cuuint64_t *id) {                           \
        return capture_get_info(h, PT, &(struct capture_info){st, id, NULL, NULL, NULL, NULL});    \
    }                                                                                              \
    SIM_EXPORT CUresult cuStreamGetCaptureInfo_v2##SUFFIX(CUstream h, CUstreamCaptureStatus *st,   \
                                                          cuuint64_t *id, CUgraph *g,              \
                                                          const CUgraphNode **deps, size_t *n) {   \
        return capture_get_info(h, PT, &(struct capture_info){st, id, g, deps, NULL, n});          \
    }                                                                                              \
    SIM_EXPORT CUresult cuStreamGetCaptureInfo_v3##SUFFIX(                                         \
        CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g,                         \
        const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *n) {                      \
        return capture_get_info(h, PT, &(struct capture_info){st, id, g, deps, edges, n});         \
    }                                                                                              \
    SIM_EXPORT CUresult cuStreamUpdateCaptureDependencies##SUFFIX(CUstream h, CUgraphNode *deps,   \
                                                                  size_t n, unsigned int flags) {  \
        return capture_update_deps(h, PT, deps, NULL, n, flags);                                   \
    }                                                                                              \
    SIM_EXPORT CUresult cuStreamUpdateCaptureDependencies_v2##SUFFIX(                              \
        CUstream h, CUgraphNode *deps, const CUgraphEdgeData *edata, size_t n,                     \
        unsigned int flags) {                                                                      \
        return capture_update_deps(h, PT, deps, edata, n, flags);                                  \
    }

CAPTURE_ENTRY_POINTS(, false)
CAPTURE_ENTRY_POINTS(_ptsz, true)

SIM_EXPORT CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (mode == NULL || (unsigned)*mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode old = thread_mode;
    thread_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ building node bodies */

typedef CUresult (*body_builder)(struct node_body *b, const void *params, CUcontext ctx);

/* Kernel nodes copy the argument values now, through the function's parameter layout, as the
 * driver does: the caller may reuse its argument storage at once. */
static CUresult kernel_body(struct node_body *b, const void *params, CUcontext ctx) {
    const CUDA_KERNEL_NODE_PARAMS *p = params;
    (void)ctx;
    if (p == NULL) return CUDA_ERROR_INVALID_VALUE;
    const void *h = p->func != NULL ? (const void *)p->func : (const void *)p->kern;
    struct sim_func *f = sim_func_from_handle(h);
    if (f == NULL) return CUDA_ERROR_INVALID_VALUE;
    const unsigned grid[3] = {p->gridDimX, p->gridDimY, p->gridDimZ};
    const unsigned block[3] = {p->blockDimX, p->blockDimY, p->blockDimZ};
    struct sim_op *op = NULL;
    CUresult rc = sim_build_kernel_op(f, NULL, grid, block, p->sharedMemBytes, p->kernelParams,
                                      p->extra, &op);
    if (rc != CUDA_SUCCESS) return rc;
    memset(b, 0, sizeof *b);
    b->type = CU_GRAPH_NODE_TYPE_KERNEL;
    b->tmpl = op;
    b->kern = p->func == NULL ? p->kern : NULL;
    b->ctx = p->func == NULL && p->ctx != NULL ? p->ctx : (CUcontext)sim_current_ctx();
    return CUDA_SUCCESS;
}

static CUDA_KERNEL_NODE_PARAMS kernel_params_v2(const CUDA_KERNEL_NODE_PARAMS_v1 *p) {
    CUDA_KERNEL_NODE_PARAMS q;
    memset(&q, 0, sizeof q);
    q.func = p->func;
    q.gridDimX = p->gridDimX;
    q.gridDimY = p->gridDimY;
    q.gridDimZ = p->gridDimZ;
    q.blockDimX = p->blockDimX;
    q.blockDimY = p->blockDimY;
    q.blockDimZ = p->blockDimZ;
    q.sharedMemBytes = p->sharedMemBytes;
    q.kernelParams = p->kernelParams;
    q.extra = p->extra;
    return q;
}

static void kernel_params_out(const struct node_body *b, CUDA_KERNEL_NODE_PARAMS *p) {
    const struct sim_kernel_op *k = &b->tmpl->u.kernel;
    memset(p, 0, sizeof *p);
    p->func = (CUfunction)k->func;
    p->gridDimX = k->grid[0];
    p->gridDimY = k->grid[1];
    p->gridDimZ = k->grid[2];
    p->blockDimX = k->block[0];
    p->blockDimY = k->block[1];
    p->blockDimZ = k->block[2];
    p->sharedMemBytes = k->shared_bytes;
    p->kernelParams = k->params; /* the node's own copies, valid while the node lives */
    p->kern = b->kern;
    p->ctx = b->ctx;
}

/* One end of a CUDA_MEMCPY3D: an address the simulator can copy from or to. */
static CUresult copy_end(CUmemorytype type, const void *host, CUdeviceptr dev, uint64_t *out) {
    switch (type) {
    case CU_MEMORYTYPE_HOST:
        *out = (uint64_t)(uintptr_t)host;
        break;
    case CU_MEMORYTYPE_DEVICE:
        if (sim_range_find(dev) == NULL) return CUDA_ERROR_INVALID_VALUE;
        *out = dev;
        break;
    case CU_MEMORYTYPE_UNIFIED:
        *out = dev;
        break;
    case CU_MEMORYTYPE_ARRAY:
        return CUDA_ERROR_NOT_SUPPORTED; /* arrays are not simulated */
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    return *out != 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* A 3D copy runs as Height * Depth rows: slices must be pitched like rows (srcHeight == dstHeight
 * == Height), which covers every 1D, 2D and contiguous 3D copy. */
static CUresult copy_body(struct node_body *b, const void *params, CUcontext ctx) {
    const CUDA_MEMCPY3D *p = params;
    if (p == NULL || p->WidthInBytes == 0 || p->Height == 0 || p->Depth == 0)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t src, dst;
    CUresult rc = copy_end(p->srcMemoryType, p->srcHost, p->srcDevice, &src);
    if (rc == CUDA_SUCCESS) rc = copy_end(p->dstMemoryType, p->dstHost, p->dstDevice, &dst);
    if (rc != CUDA_SUCCESS) return rc;
    size_t w = p->WidthInBytes, rows = p->Height * p->Depth;
    size_t sp = rows > 1 ? p->srcPitch : w, dp = rows > 1 ? p->dstPitch : w;
    size_t sh = p->srcHeight != 0 ? p->srcHeight : p->Height;
    size_t dh = p->dstHeight != 0 ? p->dstHeight : p->Height;
    if (rows > 1 && (sp < w || dp < w)) return CUDA_ERROR_INVALID_VALUE;
    if (p->Depth > 1 && (sh != p->Height || dh != p->Height)) return CUDA_ERROR_NOT_SUPPORTED;
    src += (p->srcZ * sh + p->srcY) * sp + p->srcXInBytes;
    dst += (p->dstZ * dh + p->dstY) * dp + p->dstXInBytes;
    struct sim_op *op = sim_op_new(SIM_OP_COPY, NULL);
    if (op == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    struct sim_copy_op *c = &op->u.copy;
    c->dst = (void *)(uintptr_t)dst;
    c->src = (const void *)(uintptr_t)src;
    c->bytes = w;
    c->height = rows;
    c->dst_pitch = dp;
    c->src_pitch = sp;
    c->dir = sim_classify_copy(dst, src);
    sim_op_add_ref(op, dst, (rows - 1) * dp + w);
    sim_op_add_ref(op, src, (rows - 1) * sp + w);
    memset(b, 0, sizeof *b);
    b->type = CU_GRAPH_NODE_TYPE_MEMCPY;
    b->tmpl = op;
    b->ctx = ctx;
    b->copy = *p;
    return CUDA_SUCCESS;
}

static CUresult memset_body(struct node_body *b, const void *params, CUcontext ctx) {
    const CUDA_MEMSET_NODE_PARAMS *p = params;
    if (p == NULL) return CUDA_ERROR_INVALID_VALUE;
    unsigned e = p->elementSize;
    if ((e != 1 && e != 2 && e != 4) || p->width == 0 || p->height == 0 || p->dst % e != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (p->height > 1 && p->pitch < p->width * e) return CUDA_ERROR_INVALID_VALUE;
    if (sim_range_find(p->dst) == NULL) return CUDA_ERROR_INVALID_VALUE;
    struct sim_op *op = sim_op_new(SIM_OP_MEMSET, NULL);
    if (op == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    struct sim_memset_op *m = &op->u.memset;
    m->dst = (void *)(uintptr_t)p->dst;
    m->value = p->value;
    m->elem = e;
    m->count = p->width;
    m->height = p->height;
    m->pitch = p->height > 1 ? p->pitch : p->width * e;
    sim_op_add_ref(op, p->dst, (p->height - 1) * m->pitch + p->width * e);
    memset(b, 0, sizeof *b);
    b->type = CU_GRAPH_NODE_TYPE_MEMSET;
    b->tmpl = op;
    b->ctx = ctx;
    b->memset = *p;
    return CUDA_SUCCESS;
}

static CUresult host_body(struct node_body *b, const void *params, CUcontext ctx) {
    const CUDA_HOST_NODE_PARAMS *p = params;
    (void)ctx;
    if (p == NULL || p->fn == NULL) return CUDA_ERROR_INVALID_VALUE;
    struct sim_op *op = sim_op_new(SIM_OP_HOST_FUNC, NULL);
    if (op == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.host.fn = p->fn;
    op->u.host.user = p->userData;
    memset(b, 0, sizeof *b);
    b->type = CU_GRAPH_NODE_TYPE_HOST;
    b->tmpl = op;
    return CUDA_SUCCESS;
}

static CUresult empty_body(struct node_body *b, const void *params, CUcontext ctx) {
    (void)params;
    (void)ctx;
    memset(b, 0, sizeof *b);
    b->type = CU_GRAPH_NODE_TYPE_EMPTY;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------- graph entry points */

SIM_EXPORT CUresult cuGraphCreate(CUgraph *out, unsigned int flags) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (out == NULL || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    struct sim_graph *g = graph_new();
    if (g == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    *out = (CUgraph)g;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGraphDestroy(CUgraph h) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    sim_lock();
    struct sim_graph *g = graph_from(h);
    /* A graph being captured into belongs to the capture until it ends. */
    if (g == NULL || g->capture != NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        graph_free(g);
    sim_unlock();
    return rc;
}

static CUresult add_node(CUgraphNode *out, CUgraph hg, const CUgraphNode *deps, size_t n,
                         body_builder build, const void *params, CUcontext ctx) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (out == NULL) return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    struct sim_graph *g = graph_from(hg);
    struct node_body b;
    if (g == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    else if ((rc = deps_check(g, deps, n)) == CUDA_SUCCESS &&
             (rc = build(&b, params, ctx)) == CUDA_SUCCESS)
        rc = graph_add_node(g, &b, deps, n, out);
    sim_unlock();
    return rc;
}

SIM_EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
                                            size_t n, const CUDA_KERNEL_NODE_PARAMS *p) {
    return add_node(out, g, deps, n, kernel_body, p, NULL);
}

SIM_EXPORT CUresult cuGraphAddKernelNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
                                         size_t n, const CUDA_KERNEL_NODE_PARAMS_v1 *p) {
    if (p == NULL) return CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS q = kernel_params_v2(p);
    return add_node(out, g, deps, n, kernel_body, &q, NULL);
}

SIM_EXPORT CUresult cuGraphAddMemcpyNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
                                         size_t n, const CUDA_MEMCPY3D *p, CUcontext ctx) {
    return add_node(out, g, deps, n, copy_body, p, ctx);
}

SIM_EXPORT CUresult cuGraphAddMemsetNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
                                         size_t n, const CUDA_MEMSET_NODE_PARAMS *p,
                                         CUcontext ctx) {
    return add_node(out, g, deps, n, memset_body, p, ctx);
}

SIM_EXPORT CUresult cuGraphAddHostNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
                                       size_t n, const CUDA_HOST_NODE_PARAMS *p) {
    return add_node(out, g, deps, n, host_body, p, NULL);
}

SIM_EXPORT CUresult cuGraphAddEmptyNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
                                        size_t n) {
    return add_node(out, g, deps, n, empty_body, NULL, NULL);
}

/* Replaces a node's parameters with a freshly built body of the same type. */
static CUresult node_set(CUgraphNode h, body_builder build, const void *params, CUcontext ctx) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    sim_lock();
    struct sim_graph_node *n = node_from(h);
    struct node_body b;
    if (n == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    else if ((rc = build(&b, params, ctx)) == CUDA_SUCCESS) {
        if (b.type != n->body.type) {
            body_free(&b);
            rc = CUDA_ERROR_INVALID_VALUE;
        } else {
            body_free(&n->body);
            n->body = b;
        }
    }
    sim_unlock();
    return rc;
}

SIM_EXPORT CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode h, const CUDA_KERNEL_NODE_PARAMS *p) {
    return node_set(h, kernel_body, p, NULL);
}

SIM_EXPORT CUresult cuGraphKernelNodeSetParams(CUgraphNode h, const CUDA_KERNEL_NODE_PARAMS_v1 *p) {
    if (p == NULL) return CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS q = kernel_params_v2(p);
    return node_set(h, kernel_body, &q, NULL);
}

SIM_EXPORT CUresult cuGraphMemcpyNodeSetParams(CUgraphNode h, const CUDA_MEMCPY3D *p) {
    return node_set(h, copy_body, p, NULL);
}

SIM_EXPORT CUresult cuGraphMemsetNodeSetParams(CUgraphNode h, const CUDA_MEMSET_NODE_PARAMS *p) {
    return node_set(h, memset_body, p, NULL);
}

SIM_EXPORT CUresult cuGraphHostNodeSetParams(CUgraphNode h, const CUDA_HOST_NODE_PARAMS *p) {
    return node_set(h, host_body, p, NULL);
}

/* Looks up a node of the given type for a parameter query (lock held). */
static const struct node_body *node_body_of(CUgraphNode h, CUgraphNodeType type) {
    const struct sim_graph_node *n = node_from(h);
    return n != NULL && n->body.type == type ? &n->body : NULL;
}

SIM_EXPORT CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode h, CUDA_KERNEL_NODE_PARAMS *p) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (p == NULL) return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    const struct node_body *b = node_body_of(h, CU_GRAPH_NODE_TYPE_KERNEL);
    if (b == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        kernel_params_out(b, p);
    sim_unlock();
    return rc;
}

SIM_EXPORT CUresult cuGraphKernelNodeGetParams(CUgraphNode h, CUDA_KERNEL_NODE_PARAMS_v1 *p) {
    if (p == NULL) return CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS q;
    CUresult rc = cuGraphKernelNodeGetParams_v2(h, &q);
    if (rc != CUDA_SUCCESS) return rc;
    /* The v1 structure is the leading part of v2. */
    memcpy(p, &q, sizeof *p);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGraphMemcpyNodeGetParams(CUgraphNode h, CUDA_MEMCPY3D *p) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (p == NULL) return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    const struct node_body *b = node_body_of(h, CU_GRAPH_NODE_TYPE_MEMCPY);
    if (b == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        *p = b->copy;
    sim_unlock();
    return rc;
}

SIM_EXPORT CUresult cuGraphMemsetNodeGetParams(CUgraphNode h, CUDA_MEMSET_NODE_PARAMS *p) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (p == NULL) return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    const struct node_body *b = node_body_of(h, CU_GRAPH_NODE_TYPE_MEMSET);
    if (b == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        *p = b->memset;
    sim_unlock();
    return rc;
}

SIM_EXPORT CUresult cuGraphHostNodeGetParams(CUgraphNode h, CUDA_HOST_NODE_PARAMS *p) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (p == NULL) return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    const struct node_body *b = node_body_of(h, CU_GRAPH_NODE_TYPE_HOST);
    if (b == NULL) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else {
        p->fn = b->tmpl->u.host.fn;
        p->userData = b->tmpl->u.host.user;
    }
    sim_unlock();
    return rc;
}

SIM_EXPORT CUresult cuGraphMemFreeNodeGetParams(CUgraphNode h, CUdeviceptr *dptr) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (dptr == NULL) return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    const struct node_body *b = node_body_of(h, CU_GRAPH_NODE_TYPE_MEM_FREE);
    if (b == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        *dptr = (CUdeviceptr)b->tmpl->u.free.addr;
    sim_unlock();
    return rc;
}

SIM_EXPORT CUresult cuGraphNodeGetType(CUgraphNode h, CUgraphNodeType *type) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (type == NULL) return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    const struct sim_graph_node *n = node_from(h);
    if (n == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        *type = n->body.type;
    sim_unlock();
    return rc;
}

SIM_EXPORT CUresult cuGraphDestroyNode(CUgraphNode h) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    sim_lock();
    struct sim_graph_node *n = node_from(h);
    /* Node removal is the one edit a graph under capture does not allow. */
    if (n == NULL || n->graph->capture != NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        graph_remove_node(n);
    sim_unlock();
    return rc;
}

/* ------------------------------------------------------------------------ edges and lists */

/* Checks a batch of edges of g: both ends in g, no self edge. */
static CUresult edges_check(const struct sim_graph *g, const CUgraphNode *from,
                            const CUgraphNode *to, const CUgraphEdgeData *edata, size_t n) {
    if (n > 0 && (from == NULL || to == NULL)) return CUDA_ERROR_INVALID_VALUE;
    if (!edata_default(edata, n)) return CUDA_ERROR_NOT_SUPPORTED;
    for (size_t i = 0; i < n; i++) {
        const struct sim_graph_node *a = node_from(from[i]), *b = node_from(to[i]);
        if (a == NULL || b == NULL || a->graph != g || b->graph != g || a == b)
            return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

static bool edge_repeated(const CUgraphNode *from, const CUgraphNode *to, size_t i) {
    for (size_t j = 0; j < i; j++)
        if (from[j] == from[i] && to[j] == to[i]) return true;
    return false;
}

static CUresult add_deps(CUgraph hg, const CUgraphNode *from, const CUgraphNode *to,
                         const CUgraphEdgeData *edata, size_t n) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    sim_lock();
    struct sim_graph *g = graph_from(hg);
    rc = g == NULL ? CUDA_ERROR_INVALID_VALUE : edges_check(g, from, to, edata, n);
    /* All or nothing: an edge that exists already (or twice in the batch) fails the call. */
    for (size_t i = 0; rc == CUDA_SUCCESS && i < n; i++) {
        const struct sim_graph_node *b = N(to[i]);
        if (node_in(b->deps, b->ndeps, from[i]) || edge_repeated(from, to, i))
            rc = CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i = 0; rc == CUDA_SUCCESS && i < n; i++) {
        struct sim_graph_node *b = N(to[i]);
        CUgraphNode *d = realloc(b->deps, (b->ndeps + 1) * sizeof *d);
        if (d == NULL) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
            break;
        }
        b->deps = d;
        b->deps[b->ndeps++] = from[i];
    }
    sim_unlock();
    return rc;
}

SIM_EXPORT CUresult cuGraphAddDependencies_v2(CUgraph g, const CUgraphNode *from,
                                              const CUgraphNode *to, const CUgraphEdgeData *edata,
                                              size_t n) {
    return add_deps(g, from, to, edata, n);
}

SIM_EXPORT CUresult cuGraphAddDependencies(CUgraph g, const CUgraphNode *from,
                                           const CUgraphNode *to, size_t n) {
    return add_deps(g, from, to, NULL, n);
}

static CUresult remove_deps(CUgraph hg, const CUgraphNode *from, const CUgraphNode *to,
                            const CUgraphEdgeData *edata, size_t n) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    sim_lock();
    struct sim_graph *g = graph_from(hg);
    rc = g == NULL ? CUDA_ERROR_INVALID_VALUE : edges_check(g, from, to, edata, n);
    for (size_t i = 0; rc == CUDA_SUCCESS && i < n; i++) {
        const struct sim_graph_node *b = N(to[i]);
        if (!node_in(b->deps, b->ndeps, from[i])) rc = CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i = 0; rc == CUDA_SUCCESS && i < n; i++) {
        struct sim_graph_node *b = N(to[i]);
        for (size_t j = 0; j < b->ndeps; j++)
            if (b->deps[j] == from[i]) node_remove_dep(b, j--);
    }
    sim_unlock();
    return rc;
}

SIM_EXPORT CUresult cuGraphRemoveDependencies_v2(CUgraph g, const CUgraphNode *from,
                                                 const CUgraphNode *to,
                                                 const CUgraphEdgeData *edata, size_t n) {
    return remove_deps(g, from, to, edata, n);
}

SIM_EXPORT CUresult cuGraphRemoveDependencies(CUgraph g, const CUgraphNode *from,
                                              const CUgraphNode *to, size_t n) {
    return remove_deps(g, from, to, NULL, n);
}

/* Which nodes of a graph a list query returns. */
enum node_list { LIST_ALL, LIST_ROOTS };

static CUresult graph_list(CUgraph hg, enum node_list which, CUgraphNode *out, size_t *n) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (n == NULL) return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    const struct sim_graph *g = graph_from(hg);
    CUgraphNode *list = g != NULL ? malloc((g->nnodes + 1) * sizeof *list) : NULL;
    if (g == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    else if (list == NULL)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS) {
        size_t k = 0;
        for (size_t i = 0; i < g->nnodes; i++)
            if (which == LIST_ALL || g->nodes[i]->ndeps == 0) list[k++] = (CUgraphNode)g->nodes[i];
        nodes_out(list, k, out, NULL, n);
    }
    free(list);
    sim_unlock();
    return rc;
}

SIM_EXPORT CUresult cuGraphGetNodes(CUgraph g, CUgraphNode *nodes, size_t *n) {
    return graph_list(g, LIST_ALL, nodes, n);
}

SIM_EXPORT CUresult cuGraphGetRootNodes(CUgraph g, CUgraphNode *nodes, size_t *n) {
    return graph_list(g, LIST_ROOTS, nodes, n);
}

static CUresult graph_edges(CUgraph hg, CUgraphNode *from, CUgraphNode *to, CUgraphEdgeData *edata,
                            size_t *n) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (n == NULL || (from == NULL) != (to == NULL) || (edata != NULL && from == NULL))
        return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    const struct sim_graph *g = graph_from(hg);
    size_t count = 0, k = 0;
    if (g == NULL) rc = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; rc == CUDA_SUCCESS && i < g->nnodes; i++)
        count += g->nodes[i]->ndeps;
    if (rc == CUDA_SUCCESS && from != NULL) {
        size_t cap = *n;
        for (size_t i = 0; i < g->nnodes; i++) {
            for (size_t j = 0; j < g->nodes[i]->ndeps && k < cap; j++, k++) {
                from[k] = g->nodes[i]->deps[j];
                to[k] = (CUgraphNode)g->nodes[i];
            }
        }
        for (size_t i = 0; i < cap; i++) {
            if (i >= k) from[i] = to[i] = NULL;
            if (edata != NULL) memset(&edata[i], 0, sizeof edata[i]);
        }
        count = k;
    }
    if (rc == CUDA_SUCCESS) *n = count;
    sim_unlock();
    return rc;
}

SIM_EXPORT CUresult cuGraphGetEdges_v2(CUgraph g, CUgraphNode *from, CUgraphNode *to,
                                       CUgraphEdgeData *edata, size_t *n) {
    return graph_edges(g, from, to, edata, n);
}

SIM_EXPORT CUresult cuGraphGetEdges(CUgraph g, CUgraphNode *from, CUgraphNode *to, size_t *n) {
    return graph_edges(g, from, to, NULL, n);
}

/* A node's dependencies or its dependents. */
static CUresult node_neighbours(CUgraphNode h, bool dependents, CUgraphNode *out,
                                CUgraphEdgeData *edata, size_t *n) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (n == NULL || (edata != NULL && out == NULL)) return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    const struct sim_graph_node *x = node_from(h);
    if (x == NULL) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else if (!dependents) {
        nodes_out(x->deps, x->ndeps, out, edata, n);
    } else {
        const struct sim_graph *g = x->graph;
        CUgraphNode *list = malloc((g->nnodes + 1) * sizeof *list);
        size_t k = 0;
        for (size_t i = 0; list != NULL && i < g->nnodes; i++)
            if (node_in(g->nodes[i]->deps, g->nodes[i]->ndeps, h))
                list[k++] = (CUgraphNode)g->nodes[i];
        if (list == NULL)
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        else
            nodes_out(list, k, out, edata, n);
        free(list);
    }
    sim_unlock();
    return rc;
}

SIM_EXPORT CUresult cuGraphNodeGetDependencies_v2(CUgraphNode h, CUgraphNode *deps,
                                                  CUgraphEdgeData *edata, size_t *n) {
    return node_neighbours(h, false, deps, edata, n);
}

SIM_EXPORT CUresult cuGraphNodeGetDependencies(CUgraphNode h, CUgraphNode *deps, size_t *n) {
    return node_neighbours(h, false, deps, NULL, n);
}

SIM_EXPORT CUresult cuGraphNodeGetDependentNodes_v2(CUgraphNode h, CUgraphNode *nodes,
                                                    CUgraphEdgeData *edata, size_t *n) {
    return node_neighbours(h, true, nodes, edata, n);
}

SIM_EXPORT CUresult cuGraphNodeGetDependentNodes(CUgraphNode h, CUgraphNode *nodes, size_t *n) {
    return node_neighbours(h, true, nodes, NULL, n);
}

/* Copies every node and edge of g (lock held). */
static CUresult graph_clone(const struct sim_graph *g, struct sim_graph **out) {
    struct sim_graph *c = graph_new();
    CUgraphNode *deps = malloc((g->nnodes + 1) * sizeof *deps);
    CUresult rc = c != NULL && deps != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; rc == CUDA_SUCCESS && i < g->nnodes; i++) {
        const struct sim_graph_node *src = g->nodes[i];
        struct node_body b;
        for (size_t j = 0; j < src->ndeps; j++)
            deps[j] = (CUgraphNode)c->nodes[N(src->deps[j])->index];
        CUgraphNode node;
        if ((rc = body_clone(&b, &src->body)) == CUDA_SUCCESS)
            rc = graph_add_node(c, &b, deps, src->ndeps, &node);
        if (rc == CUDA_SUCCESS) N(node)->cloned_from = (CUgraphNode)src;
    }
    free(deps);
    if (rc != CUDA_SUCCESS && c != NULL) graph_free(c);
    if (rc == CUDA_SUCCESS) *out = c;
    return rc;
}

SIM_EXPORT CUresult cuGraphClone(CUgraph *out, CUgraph hg) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (out == NULL) return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    const struct sim_graph *g = graph_from(hg);
    struct sim_graph *c = NULL;
    rc = g == NULL ? CUDA_ERROR_INVALID_VALUE : graph_clone(g, &c);
    if (rc == CUDA_SUCCESS) *out = (CUgraph)c;
    sim_unlock();
    return rc;
}

SIM_EXPORT CUresult cuGraphNodeFindInClone(CUgraphNode *out, CUgraphNode orig, CUgraph clone) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (out == NULL) return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    const struct sim_graph *g = graph_from(clone);
    rc = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; g != NULL && i < g->nnodes; i++) {
        if (g->nodes[i]->cloned_from == orig) {
            *out = (CUgraphNode)g->nodes[i];
            rc = CUDA_SUCCESS;
            break;
        }
    }
    sim_unlock();
    return rc;
}

/* ------------------------------------------------------------------------ executable graphs */

struct exec_node {
    struct node_body body;
    size_t *deps; /* positions in exec->nodes, which is in topological order */
    size_t ndeps;
    size_t graph_index;       /* position in the graph it came from (cuGraphExecUpdate) */
    CUgraphNode origin;       /* the node it was instantiated from; compared, never dereferenced */
    CUgraphNode updated_from; /* the paired node of the last cuGraphExecUpdate, likewise */
    bool has_dependents;
};

struct sim_graph_exec {
    uint32_t magic;
    struct exec_node *nodes;
    size_t nnodes;
    cuuint64_t flags;
    struct sim_op *last_join; /* the previous launch's completion (referenced), or NULL */
};

static struct sim_graph_exec *exec_from(CUgraphExec h) {
    struct sim_graph_exec *x = (struct sim_graph_exec *)h;
    return x != NULL && x->magic == SIM_MAGIC_GRAPH_EXEC ? x : NULL;
}

static void exec_free(struct sim_graph_exec *x) {
    for (size_t i = 0; i < x->nnodes; i++) {
        body_free(&x->nodes[i].body);
        free(x->nodes[i].deps);
    }
    free(x->nodes);
    sim_op_release(x->last_join);
    x->magic = SIM_MAGIC_DEAD;
    free(x);
}

/* Fills x from g in topological order (lock held). */
static CUresult exec_fill(struct sim_graph_exec *x, const struct sim_graph *g,
                          const size_t *order) {
    size_t n = g->nnodes;
    size_t *pos = malloc((n + 1) * sizeof *pos);
    x->nodes = calloc(n + 1, sizeof *x->nodes);
    if (pos == NULL || x->nodes == NULL) {
        free(pos);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (size_t k = 0; k < n; k++)
        pos[order[k]] = k;
    CUresult rc = CUDA_SUCCESS;
    for (size_t k = 0; rc == CUDA_SUCCESS && k < n; k++) {
        const struct sim_graph_node *src = g->nodes[order[k]];
        struct exec_node *en = &x->nodes[k];
        en->deps = malloc((src->ndeps + 1) * sizeof *en->deps);
        if (en->deps == NULL)
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        else if ((rc = body_clone(&en->body, &src->body)) != CUDA_SUCCESS)
            free(en->deps);
        if (rc != CUDA_SUCCESS) break;
        x->nnodes = k + 1; /* what exec_free releases */
        for (size_t j = 0; j < src->ndeps; j++) {
            en->deps[j] = pos[N(src->deps[j])->index];
            x->nodes[en->deps[j]].has_dependents = true;
        }
        en->ndeps = src->ndeps;
        en->graph_index = src->index;
        en->origin = (CUgraphNode)src;
    }
    free(pos);
    return rc;
}

static CUresult instantiate(CUgraphExec *out, CUgraph hg, cuuint64_t flags) {
    struct sim_ctx *ctx;
    CUresult rc = sim_require_ctx(&ctx);
    if (rc != CUDA_SUCCESS) return rc;
    const cuuint64_t known =
        CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
        CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
    if (out == NULL || (flags & ~known) != 0) return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    const struct sim_graph *g = graph_from(hg);
    bool cycle = false;
    size_t *order = NULL;
    struct sim_graph_exec *x = NULL;
    if (g == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    else if (g->capture != NULL)
        rc = CUDA_ERROR_ILLEGAL_STATE; /* not until the capture ends */
    else if ((order = topo_order(g, &cycle)) == NULL)
        rc = cycle ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_OUT_OF_MEMORY;
    else if ((x = calloc(1, sizeof *x)) == NULL)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS) {
        x->magic = SIM_MAGIC_GRAPH_EXEC;
        x->flags = flags;
        rc = exec_fill(x, g, order);
        if (rc == CUDA_SUCCESS)
            *out = (CUgraphExec)x;
        else
            exec_free(x);
    }
    free(order);
    sim_unlock();
    return rc;
}

SIM_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *out, CUgraph g,
                                                unsigned long long flags) {
    /* Upload-on-instantiate needs a stream: only cuGraphInstantiateWithParams takes one. */
    if (flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) return CUDA_ERROR_INVALID_VALUE;
    return instantiate(out, g, flags);
}

/* The pre-12.0 ABIs report the failing node and a log; nothing here fails on a node. */
static CUresult instantiate_logged(CUgraphExec *out, CUgraph g, CUgraphNode *err_node, char *log,
                                   size_t log_size) {
    CUresult rc = instantiate(out, g, 0);
    if (err_node != NULL) *err_node = NULL;
    if (log != NULL && log_size > 0) log[0] = '\0';
    return rc;
}

SIM_EXPORT CUresult cuGraphInstantiate(CUgraphExec *out, CUgraph g, CUgraphNode *err_node,
                                       char *log, size_t log_size) {
    return instantiate_logged(out, g, err_node, log, log_size);
}

SIM_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec *out, CUgraph g, CUgraphNode *err_node,
                                          char *log, size_t log_size) {
    return instantiate_logged(out, g, err_node, log, log_size);
}

static CUresult graph_upload(CUgraphExec hx, CUstream hs, bool pt);

static CUresult instantiate_params(CUgraphExec *out, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p,
                                   bool pt) {
    if (p == NULL) return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = instantiate(out, g, p->flags);
    if (rc == CUDA_SUCCESS && (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD))
        rc = graph_upload(*out, p->hUploadStream, pt);
    p->hErrNode_out = NULL;
    p->result_out =
        rc == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
    return rc;
}

SIM_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec *out, CUgraph g,
                                                 CUDA_GRAPH_INSTANTIATE_PARAMS *p) {
    return instantiate_params(out, g, p, false);
}

SIM_EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *out, CUgraph g,
                                                      CUDA_GRAPH_INSTANTIATE_PARAMS *p) {
    return instantiate_params(out, g, p, true);
}

SIM_EXPORT CUresult cuGraphExecDestroy(CUgraphExec h) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    sim_lock();
    struct sim_graph_exec *x = exec_from(h);
    /* Launches already enqueued run on their own copies of the nodes. */
    if (x == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        exec_free(x);
    sim_unlock();
    return rc;
}

SIM_EXPORT CUresult cuGraphExecGetFlags(CUgraphExec h, cuuint64_t *flags) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (flags == NULL) return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    const struct sim_graph_exec *x = exec_from(h);
    if (x == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        *flags = x->flags;
    sim_unlock();
    return rc;
}

/* ---------------------------------------------------------------------------------- launch */

static void ops_release(struct sim_op **ops, size_t n) {
    for (size_t i = 0; i < n; i++)
        sim_op_release(ops[i]);
    free(ops);
}

/* Builds one launch's operations up front, so running out of memory enqueues nothing. */
static struct sim_op **exec_build_ops(const struct sim_graph_exec *x, struct sim_device *dev) {
    struct sim_op **ops = calloc(x->nnodes + 1, sizeof *ops);
    for (size_t k = 0; ops != NULL && k < x->nnodes; k++) {
        const struct sim_op *t = x->nodes[k].body.tmpl;
        ops[k] = t != NULL ? op_clone(t) : sim_op_new(SIM_OP_WAIT, NULL);
        if (ops[k] == NULL) {
            ops_release(ops, k);
            return NULL;
        }
        ops[k]->dev = dev;
    }
    return ops;
}

/* Enqueues one launch of x on s (lock held): start op, the nodes in topological order, join op. */
static CUresult exec_enqueue(struct sim_graph_exec *x, struct sim_stream *s) {
    struct sim_op **ops = exec_build_ops(x, s->ctx->dev);
    struct sim_op *start = sim_op_new(SIM_OP_WAIT, s), *join = sim_op_new(SIM_OP_WAIT, s);
    if (ops == NULL || start == NULL || join == NULL) {
        if (ops != NULL) ops_release(ops, x->nnodes);
        sim_op_release(start);
        sim_op_release(join);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    /* Launches of one exec run one at a time, in launch order, whatever their streams. */
    if (x->last_join != NULL) sim_op_add_dep(start, x->last_join);
    sim_op_enqueue(start);
    for (size_t k = 0; k < x->nnodes; k++) {
        const struct exec_node *en = &x->nodes[k];
        if (en->ndeps == 0) sim_op_add_dep(ops[k], start);
        for (size_t j = 0; j < en->ndeps; j++)
            sim_op_add_dep(ops[k], ops[en->deps[j]]);
        sim_op_enqueue(ops[k]);
        if (!en->has_dependents) sim_op_add_dep(join, ops[k]);
    }
    if (x->nnodes == 0) sim_op_add_dep(join, start);
    sim_op_enqueue(join);
    sim_op_release(x->last_join);
    x->last_join = join; /* keeps the reference sim_op_new gave us */
    sim_op_release(start);
    ops_release(ops, x->nnodes);
    return CUDA_SUCCESS;
}

/* A graph launched into a capturing stream: the exec's nodes are inlined into the capture graph
 * (the driver would add one child-graph node; the work and its ordering are the same). */
static CUresult capture_add_exec(struct sim_capture *c, struct sim_stream *s,
                                 const struct sim_graph_exec *x) {
    if (c->status != CU_STREAM_CAPTURE_STATUS_ACTIVE) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    size_t n = x->nnodes, nleaves = 0, maxdeps = 1;
    for (size_t k = 0; k < n; k++)
        if (x->nodes[k].ndeps > maxdeps) maxdeps = x->nodes[k].ndeps;
    CUgraphNode *added = calloc(n + 1, sizeof *added), *leaves = calloc(n + 1, sizeof *leaves);
    CUgraphNode *tmp = calloc(maxdeps, sizeof *tmp);
    CUresult rc = added && leaves && tmp ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    struct capture_member *m = member_of(c, s);
    for (size_t k = 0; rc == CUDA_SUCCESS && k < n; k++) {
        const struct exec_node *en = &x->nodes[k];
        for (size_t j = 0; j < en->ndeps; j++)
            tmp[j] = added[en->deps[j]];
        struct node_body b;
        if ((rc = body_clone(&b, &en->body)) != CUDA_SUCCESS) break;
        if (en->ndeps > 0)
            rc = graph_add_node(c->graph, &b, tmp, en->ndeps, &added[k]);
        else
            rc = graph_add_node(c->graph, &b, m->deps, m->ndeps, &added[k]);
        if (rc == CUDA_SUCCESS && !en->has_dependents) leaves[nleaves++] = added[k];
    }
    if (rc == CUDA_SUCCESS && n > 0) rc = member_set_deps(m, leaves, nleaves);
    if (rc != CUDA_SUCCESS) invalidate(c);
    free(added);
    free(leaves);
    free(tmp);
    return rc;
}

static CUresult graph_launch(CUgraphExec hx, CUstream hs, bool pt) {
    struct sim_ctx *ctx;
    sim_bill(SIM_COST_GRAPH_LAUNCH, SIM_AT_DEVICE, 0);
    CUresult rc = sim_require_ctx(&ctx);
    if (rc != CUDA_SUCCESS) return rc;
    struct sim_stream *s = sim_stream_resolve(hs, pt, &rc);
    if (s == NULL) return rc;
    sim_lock();
    struct sim_graph_exec *x = exec_from(hx);
    if (x == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    else if (sim.sticky != CUDA_SUCCESS)
        rc = sim.sticky;
    else if (s->legacy && legacy_conflicts(s, true))
        rc = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    else if (s->capture != NULL)
        rc = capture_add_exec(s->capture, s, x);
    else
        rc = exec_enqueue(x, s);
    sim_unlock();
    return rc;
}

SIM_EXPORT CUresult cuGraphLaunch(CUgraphExec x, CUstream s) {
    return graph_launch(x, s, false);
}

SIM_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec x, CUstream s) {
    return graph_launch(x, s, true);
}

/* Nothing to upload: node copies live in host memory the executor reads directly. */
static CUresult graph_upload(CUgraphExec hx, CUstream hs, bool pt) {
    struct sim_ctx *ctx;
    CUresult rc = sim_require_ctx(&ctx);
    if (rc != CUDA_SUCCESS) return rc;
    struct sim_stream *s = sim_stream_resolve(hs, pt, &rc);
    if (s == NULL) return rc;
    sim_lock();
    if (exec_from(hx) == NULL) rc = CUDA_ERROR_INVALID_VALUE;
    sim_unlock();
    return rc;
}

SIM_EXPORT CUresult cuGraphUpload(CUgraphExec x, CUstream s) {
    return graph_upload(x, s, false);
}

SIM_EXPORT CUresult cuGraphUpload_ptsz(CUgraphExec x, CUstream s) {
    return graph_upload(x, s, true);
}

/* ------------------------------------------------------------------------ updating an exec */

static struct exec_node *exec_find(struct sim_graph_exec *x, CUgraphNode h) {
    for (size_t k = 0; h != NULL && k < x->nnodes; k++)
        if (x->nodes[k].origin == h || x->nodes[k].updated_from == h) return &x->nodes[k];
    return NULL;
}

/* Sets one node's parameters in an exec; future launches only, as the driver does. */
static CUresult exec_set(CUgraphExec hx, CUgraphNode h, body_builder build, const void *params,
                         CUcontext ctx) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    sim_lock();
    struct sim_graph_exec *x = exec_from(hx);
    struct exec_node *en = x != NULL ? exec_find(x, h) : NULL;
    struct node_body b;
    if (en == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    else if ((rc = build(&b, params, ctx)) == CUDA_SUCCESS) {
        if (b.type != en->body.type) {
            body_free(&b);
            rc = CUDA_ERROR_INVALID_VALUE;
        } else {
            body_free(&en->body);
            en->body = b;
        }
    }
    sim_unlock();
    return rc;
}

SIM_EXPORT CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec x, CUgraphNode h,
                                                      const CUDA_KERNEL_NODE_PARAMS *p) {
    return exec_set(x, h, kernel_body, p, NULL);
}

SIM_EXPORT CUresult cuGraphExecKernelNodeSetParams(CUgraphExec x, CUgraphNode h,
                                                   const CUDA_KERNEL_NODE_PARAMS_v1 *p) {
    if (p == NULL) return CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS q = kernel_params_v2(p);
    return exec_set(x, h, kernel_body, &q, NULL);
}

SIM_EXPORT CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec x, CUgraphNode h,
                                                   const CUDA_MEMCPY3D *p, CUcontext ctx) {
    return exec_set(x, h, copy_body, p, ctx);
}

SIM_EXPORT CUresult cuGraphExecMemsetNodeSetParams(CUgraphExec x, CUgraphNode h,
                                                   const CUDA_MEMSET_NODE_PARAMS *p,
                                                   CUcontext ctx) {
    return exec_set(x, h, memset_body, p, ctx);
}

SIM_EXPORT CUresult cuGraphExecHostNodeSetParams(CUgraphExec x, CUgraphNode h,
                                                 const CUDA_HOST_NODE_PARAMS *p) {
    return exec_set(x, h, host_body, p, NULL);
}

/* Whether graph node gn can update exec node en: same type, same dependencies (by position in
 * the graph), same memory types for copies. Sets the driver's reason otherwise. */
static bool update_pairs(const struct sim_graph_exec *x, const struct exec_node *en,
                         const struct sim_graph_node *gn, CUgraphExecUpdateResultInfo *info) {
    info->errorNode = (CUgraphNode)gn;
    if (gn->ndeps != en->ndeps) {
        info->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        return false;
    }
    for (size_t j = 0; j < gn->ndeps; j++) {
        if (x->nodes[en->deps[j]].graph_index != N(gn->deps[j])->index) {
            info->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
            info->errorFromNode = gn->deps[j];
            return false;
        }
    }
    const struct node_body *a = &en->body, *b = &gn->body;
    bool same_kind = (a->tmpl == NULL) == (b->tmpl == NULL) &&
                     (a->tmpl == NULL || a->tmpl->kind == b->tmpl->kind);
    if (a->type != b->type || !same_kind) {
        info->result = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
        return false;
    }
    if (a->type == CU_GRAPH_NODE_TYPE_MEMCPY && (a->copy.srcMemoryType != b->copy.srcMemoryType ||
                                                 a->copy.dstMemoryType != b->copy.dstMemoryType)) {
        info->result = CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
        return false;
    }
    return true;
}

static CUresult exec_update_locked(struct sim_graph_exec *x, const struct sim_graph *g,
                                   CUgraphExecUpdateResultInfo *info) {
    if (g->nnodes != x->nnodes) {
        info->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    }
    size_t n = x->nnodes;
    size_t *pos = malloc((n + 1) * sizeof *pos);
    struct node_body *fresh = calloc(n + 1, sizeof *fresh);
    CUresult rc = pos != NULL && fresh != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t k = 0; rc == CUDA_SUCCESS && k < n; k++)
        pos[x->nodes[k].graph_index] = k;
    for (size_t i = 0; rc == CUDA_SUCCESS && i < n; i++)
        if (!update_pairs(x, &x->nodes[pos[i]], g->nodes[i], info))
            rc = CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    size_t built = 0;
    for (; rc == CUDA_SUCCESS && built < n; built++)
        rc = body_clone(&fresh[built], &g->nodes[built]->body);
    if (rc == CUDA_SUCCESS) {
        for (size_t i = 0; i < n; i++) {
            struct exec_node *en = &x->nodes[pos[i]];
            body_free(&en->body);
            en->body = fresh[i];
            en->updated_from = (CUgraphNode)g->nodes[i];
        }
        *info = (CUgraphExecUpdateResultInfo){CU_GRAPH_EXEC_UPDATE_SUCCESS, NULL, NULL};
    } else {
        for (size_t i = 0; i < built; i++)
            body_free(&fresh[i]);
    }
    free(pos);
    free(fresh);
    return rc;
}

static CUresult exec_update(CUgraphExec hx, CUgraph hg, CUgraphExecUpdateResultInfo *info) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    *info = (CUgraphExecUpdateResultInfo){CU_GRAPH_EXEC_UPDATE_ERROR, NULL, NULL};
    sim_lock();
    struct sim_graph_exec *x = exec_from(hx);
    const struct sim_graph *g = graph_from(hg);
    if (x == NULL || g == NULL)
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        rc = exec_update_locked(x, g, info);
    sim_unlock();
    return rc;
}

SIM_EXPORT CUresult cuGraphExecUpdate_v2(CUgraphExec x, CUgraph g,
                                         CUgraphExecUpdateResultInfo *info) {
    if (info == NULL) return CUDA_ERROR_INVALID_VALUE;
    return exec_update(x, g, info);
}

SIM_EXPORT CUresult cuGraphExecUpdate(CUgraphExec x, CUgraph g, CUgraphNode *err_node,
                                      CUgraphExecUpdateResult *result) {
    if (err_node == NULL || result == NULL) return CUDA_ERROR_INVALID_VALUE;
    CUgraphExecUpdateResultInfo info;
    CUresult rc = exec_update(x, g, &info);
    *err_node = info.errorNode;
    *result = info.result;
    return rc;
}
