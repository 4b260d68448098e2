/* Child-graph and conditional nodes, conditional handles, and the generic node API
 * (cuGraphAddNode, cuGraphNodeSetParams, cuGraphExecNodeSetParams,
 * cuGraphExecChildGraphNodeSetParams). The driver has no call that reads a conditional node's
 * parameters back: a library that needs its bodies learns them from cuGraphAddNode.
 *
 * Both node kinds hold graphs: a child node a clone of the graph it was given (the driver clones
 * it when the node is made), a conditional node the body graphs the driver creates for it and
 * hands back through phGraph_out for the program to fill. An exec copies them at instantiation,
 * like every node. When the node runs, its graphs run inline, inside the node's one operation:
 * their nodes in dependency order, one after another in virtual time (parallel branches of a
 * body do not overlap), and every range they touch becomes the node's, for hazard detection.
 *
 * Conditional handles (cuGraphConditionalHandleCreate) hold a value. Device code sets it with
 * cudaGraphSetConditional; here a kernel body calls simcuda_graph_set_conditional(handle, value).
 * IF runs body 0 when the value is non-zero (body 1, if there is one, when it is zero); WHILE runs
 * body 0 while it is non-zero, reading it again after each pass; SWITCH runs body[value] when
 * value < size. With CU_GRAPH_COND_ASSIGN_DEFAULT the default value is assigned once the
 * conditional node has run, so each launch of the graph starts from it (the driver assigns it
 * when a launch begins: the same for a handle read by one conditional node per launch). */
#define __CUDA_API_VERSION_INTERNAL 1
#include "graph_internal.h"

#include <simcuda.h>
#include <stdlib.h>
#include <string.h>

#define COND_MAGIC 0x5c7c00c0u
#define MAX_BODIES 64

struct cond_handle {
    uint32_t magic;
    _Atomic unsigned value; /* set by kernel bodies on the executor, read by the node there */
    unsigned def;
    bool assign_default;
};

/* What a child or conditional node runs. */
struct graph_call {
    CUgraphNodeType type;
    CUgraphConditionalNodeType cond;
    struct cond_handle *handle;
    unsigned nbodies;
    CUgraph bodies[MAX_BODIES]; /* struct sim_graph *; the child graph is bodies[0] */
};

static void call_drop(void *d) {
    struct graph_call *c = d;
    if (c == NULL) return;
    for (unsigned i = 0; i < c->nbodies; i++)
        if (c->bodies[i] != NULL) graph_free((struct sim_graph *)c->bodies[i]);
    free(c);
}

static void *call_copy(const void *d) {
    const struct graph_call *src = d;
    struct graph_call *c = calloc(1, sizeof *c);
    if (c == NULL) return NULL;
    *c = *src;
    for (unsigned i = 0; i < c->nbodies; i++) {
        struct sim_graph *g = NULL;
        if (graph_clone((const struct sim_graph *)src->bodies[i], &g) != CUDA_SUCCESS) {
            c->nbodies = i;
            call_drop(c);
            return NULL;
        }
        c->bodies[i] = (CUgraph)g;
    }
    return c;
}

/* Runs g's nodes one after another from *t on outer's device; their ranges become outer's. */
static bool run_graph(struct sim_op *outer, const struct sim_graph *g, uint64_t *t, int depth) {
    bool cycle = false;
    size_t *order = topo_order(g, &cycle);
    if (order == NULL) return false;
    bool ok = true;
    for (size_t k = 0; ok && k < g->nnodes; k++) {
        const struct sim_op *tmpl = g->nodes[order[k]]->body.tmpl;
        if (tmpl == NULL) continue;
        struct sim_op *op = depth < 16 ? op_clone(tmpl) : NULL;
        if (op == NULL) {
            ok = false;
            break;
        }
        op->dev = outer->dev;
        uint64_t start = *t;
        sim_op_run(op, &start);
        *t = op->end_ns;
        for (int i = 0; i < op->nrefs; i++)
            sim_op_add_ref(outer, op->refs_list[i].addr, op->refs_list[i].bytes);
        ok = !op->failed;
        sim_op_release(op);
    }
    free(order);
    return ok;
}

static uint64_t call_run(struct sim_op *op, uint64_t *start) {
    struct graph_call *c = op->u.call.data;
    uint64_t t = *start;
    bool ok = true;
    if (c->type == CU_GRAPH_NODE_TYPE_GRAPH) {
        ok = run_graph(op, (struct sim_graph *)c->bodies[0], &t, 0);
    } else {
        unsigned v = atomic_load(&c->handle->value);
        switch (c->cond) {
        case CU_GRAPH_COND_TYPE_IF:
            if (v != 0)
                ok = run_graph(op, (struct sim_graph *)c->bodies[0], &t, 0);
            else if (c->nbodies == 2)
                ok = run_graph(op, (struct sim_graph *)c->bodies[1], &t, 0);
            break;
        case CU_GRAPH_COND_TYPE_WHILE:
            while (ok && atomic_load(&c->handle->value) != 0)
                ok = run_graph(op, (struct sim_graph *)c->bodies[0], &t, 0);
            break;
        default: /* SWITCH */
            if (v < c->nbodies) ok = run_graph(op, (struct sim_graph *)c->bodies[v], &t, 0);
            break;
        }
        if (c->handle->assign_default) atomic_store(&c->handle->value, c->handle->def);
    }
    if (!ok) op->failed = true;
    return t - *start;
}

SIM_EXPORT void simcuda_graph_set_conditional(uint64_t handle, unsigned value) {
    struct cond_handle *h = (struct cond_handle *)(uintptr_t)handle;
    if (h != NULL && h->magic == COND_MAGIC) atomic_store(&h->value, value);
}

static CUresult call_body(struct node_body *b, struct graph_call *c, CUcontext ctx) {
    struct sim_op *op = sim_op_new(SIM_OP_CALL, NULL);
    if (op == NULL) {
        call_drop(c);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    op->u.call = (struct sim_call_op){call_run, call_drop, call_copy, c};
    memset(b, 0, sizeof *b);
    b->type = c->type;
    b->tmpl = op;
    b->ctx = ctx;
    return CUDA_SUCCESS;
}

/* params: the CUgraph to clone. */
static CUresult child_body(struct node_body *b, const void *params, CUcontext ctx) {
    const struct sim_graph *g = graph_from((CUgraph)(uintptr_t)params);
    if (g == NULL || g->capture != NULL) return CUDA_ERROR_INVALID_VALUE;
    struct graph_call *c = calloc(1, sizeof *c);
    struct sim_graph *copy = NULL;
    if (c == NULL || graph_clone(g, &copy) != CUDA_SUCCESS) {
        free(c);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    c->type = CU_GRAPH_NODE_TYPE_GRAPH;
    c->nbodies = 1;
    c->bodies[0] = (CUgraph)copy;
    return call_body(b, c, ctx);
}

/* params: CUDA_CONDITIONAL_NODE_PARAMS; fills its phGraph_out with the new bodies. */
static CUresult cond_body(struct node_body *b, const void *params, CUcontext ctx) {
    CUDA_CONDITIONAL_NODE_PARAMS *p = (CUDA_CONDITIONAL_NODE_PARAMS *)(uintptr_t)params;
    struct cond_handle *h = (struct cond_handle *)(uintptr_t)p->handle;
    if (h == NULL || h->magic != COND_MAGIC) return CUDA_ERROR_INVALID_VALUE;
    bool size_ok = (p->type == CU_GRAPH_COND_TYPE_IF && (p->size == 1 || p->size == 2)) ||
                   (p->type == CU_GRAPH_COND_TYPE_WHILE && p->size == 1) ||
                   (p->type == CU_GRAPH_COND_TYPE_SWITCH && p->size >= 1 && p->size <= MAX_BODIES);
    if (!size_ok) return CUDA_ERROR_INVALID_VALUE;
    struct graph_call *c = calloc(1, sizeof *c);
    if (c == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    c->type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    c->cond = p->type;
    c->handle = h;
    for (unsigned i = 0; i < p->size; i++) {
        struct sim_graph *g = graph_new();
        if (g == NULL) {
            call_drop(c);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        c->bodies[c->nbodies++] = (CUgraph)g;
    }
    CUresult rc = call_body(b, c, ctx != NULL ? ctx : p->ctx);
    if (rc == CUDA_SUCCESS) p->phGraph_out = c->bodies; /* owned by the node, as documented */
    return rc;
}

SIM_EXPORT CUresult cuGraphAddChildGraphNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
                                             size_t n, CUgraph child) {
    return add_node(out, g, deps, n, child_body, (const void *)child, NULL);
}

static struct graph_call *node_call(const struct node_body *b) {
    if ((b->type != CU_GRAPH_NODE_TYPE_GRAPH && b->type != CU_GRAPH_NODE_TYPE_CONDITIONAL) ||
        b->tmpl == NULL)
        return NULL;
    return b->tmpl->u.call.data;
}

SIM_EXPORT CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode h, CUgraph *out) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (out == NULL) return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    const struct sim_graph_node *n = node_from(h);
    const struct graph_call *c = n != NULL ? node_call(&n->body) : NULL;
    if (c == NULL || c->type != CU_GRAPH_NODE_TYPE_GRAPH)
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        *out = c->bodies[0];
    sim_unlock();
    return rc;
}

SIM_EXPORT CUresult cuGraphConditionalHandleCreate(CUgraphConditionalHandle *out, CUgraph g,
                                                   CUcontext ctx, unsigned int def,
                                                   unsigned int flags) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    (void)ctx;
    if (out == NULL || (flags & ~(unsigned)CU_GRAPH_COND_ASSIGN_DEFAULT) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    if (graph_from(g) == NULL) rc = CUDA_ERROR_INVALID_VALUE;
    sim_unlock();
    if (rc != CUDA_SUCCESS) return rc;
    /* Handles live as long as the process (the driver frees them with their graph; a handle is
     * a few bytes and programs make a handful). */
    struct cond_handle *h = calloc(1, sizeof *h);
    if (h == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    h->magic = COND_MAGIC;
    h->def = def;
    h->assign_default = (flags & CU_GRAPH_COND_ASSIGN_DEFAULT) != 0;
    atomic_store(&h->value, def);
    *out = (CUgraphConditionalHandle)(uintptr_t)h;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------- the generic node API */

/* The builder and the parameters it takes for one CUgraphNodeParams. */
static CUresult generic(CUgraphNodeParams *p, body_builder *build, const void **params,
                        CUcontext *ctx, CUDA_MEMSET_NODE_PARAMS *ms) {
    if (p == NULL) return CUDA_ERROR_INVALID_VALUE;
    *ctx = NULL;
    switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
        *build = kernel_body; /* CUDA_KERNEL_NODE_PARAMS_v3 has the _v2 layout */
        *params = &p->kernel;
        return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        *build = copy_body;
        *params = &p->memcpy.copyParams;
        *ctx = p->memcpy.copyCtx;
        return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_MEMSET:
        memset(ms, 0, sizeof *ms);
        ms->dst = p->memset.dst;
        ms->pitch = p->memset.pitch;
        ms->value = p->memset.value;
        ms->elementSize = p->memset.elementSize;
        ms->width = p->memset.width;
        ms->height = p->memset.height;
        *build = memset_body;
        *params = ms;
        *ctx = p->memset.ctx;
        return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_HOST:
        *build = host_body; /* CUDA_HOST_NODE_PARAMS_v2 has the v1 layout */
        *params = &p->host;
        return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_EMPTY:
        *build = empty_body;
        *params = NULL;
        return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_GRAPH:
        *build = child_body;
        *params = (const void *)p->graph.graph;
        return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_CONDITIONAL:
        *build = cond_body;
        *params = &p->conditional;
        *ctx = p->conditional.ctx;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_NOT_SUPPORTED; /* event, semaphore, allocation, batch-memop nodes */
    }
}

static CUresult add_generic(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
                            const CUgraphEdgeData *edata, size_t n, CUgraphNodeParams *p) {
    if (edata != NULL) {
        for (size_t i = 0; i < n; i++)
            if (edata[i].type != CU_GRAPH_DEPENDENCY_TYPE_DEFAULT || edata[i].from_port != 0 ||
                edata[i].to_port != 0)
                return CUDA_ERROR_NOT_SUPPORTED;
    }
    body_builder build;
    const void *params;
    CUcontext ctx;
    CUDA_MEMSET_NODE_PARAMS ms;
    CUresult rc = generic(p, &build, &params, &ctx, &ms);
    if (rc != CUDA_SUCCESS) return rc;
    return add_node(out, g, deps, n, build, params, ctx);
}

SIM_EXPORT CUresult cuGraphAddNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
                                   CUgraphNodeParams *p) {
    return add_generic(out, g, deps, NULL, n, p);
}

SIM_EXPORT CUresult cuGraphAddNode_v2(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
                                      const CUgraphEdgeData *edata, size_t n,
                                      CUgraphNodeParams *p) {
    return add_generic(out, g, deps, edata, n, p);
}

SIM_EXPORT CUresult cuGraphNodeSetParams(CUgraphNode h, CUgraphNodeParams *p) {
    body_builder build;
    const void *params;
    CUcontext ctx;
    CUDA_MEMSET_NODE_PARAMS ms;
    CUresult rc = generic(p, &build, &params, &ctx, &ms);
    if (rc != CUDA_SUCCESS) return rc;
    /* A conditional node's bodies are edited in place; its type and size cannot change. */
    if (p->type == CU_GRAPH_NODE_TYPE_CONDITIONAL) return CUDA_ERROR_INVALID_VALUE;
    return node_set(h, build, params, ctx);
}

/* An exec's node takes new parameters for future launches. A child graph must have the
 * topology of the one it replaces (same node count and types, as the driver requires). */
SIM_EXPORT CUresult cuGraphExecNodeSetParams(CUgraphExec x, CUgraphNode h, CUgraphNodeParams *p) {
    body_builder build;
    const void *params;
    CUcontext ctx;
    CUDA_MEMSET_NODE_PARAMS ms;
    CUresult rc = generic(p, &build, &params, &ctx, &ms);
    if (rc != CUDA_SUCCESS) return rc;
    if (p->type == CU_GRAPH_NODE_TYPE_CONDITIONAL) return CUDA_ERROR_INVALID_VALUE;
    return exec_set(x, h, build, params, ctx);
}

SIM_EXPORT CUresult cuGraphExecChildGraphNodeSetParams(CUgraphExec x, CUgraphNode h,
                                                       CUgraph child) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    sim_lock();
    struct sim_graph_exec *xe = exec_from(x);
    struct exec_node *en = xe != NULL ? exec_find(xe, h) : NULL;
    const struct graph_call *c = en != NULL ? node_call(&en->body) : NULL;
    const struct sim_graph *g = graph_from(child);
    bool same = c != NULL && c->type == CU_GRAPH_NODE_TYPE_GRAPH && g != NULL &&
                g->nnodes == ((struct sim_graph *)c->bodies[0])->nnodes;
    for (size_t i = 0; same && i < g->nnodes; i++)
        same = g->nodes[i]->body.type == ((struct sim_graph *)c->bodies[0])->nodes[i]->body.type;
    sim_unlock();
    if (!same) return CUDA_ERROR_INVALID_VALUE;
    return exec_set(x, h, child_body, (const void *)child, NULL);
}
