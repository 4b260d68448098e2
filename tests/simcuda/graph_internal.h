/* The graph internals graph.c (graphs, capture, execs, launch) shares with graph_nodes.c (child
 * graph and conditional nodes, the generic node API). Everything here is used with sim.lock held.
 * The model is described at the top of graph.c. */
#ifndef SIMCUDA_GRAPH_INTERNAL_H
#define SIMCUDA_GRAPH_INTERNAL_H

#include "sim.h"

/* ------------------------------------------------------------------------------ node bodies */

struct node_body {
    CUgraphNodeType type;
    struct sim_op *tmpl;            /* what one execution does; NULL for empty nodes */
    CUcontext ctx;                  /* as given (kernel, memcpy and memset nodes) */
    CUkernel kern;                  /* kernel nodes made from a CUkernel, for GetParams */
    CUDA_MEMCPY3D copy;             /* memcpy nodes: parameters as reported */
    CUDA_MEMSET_NODE_PARAMS memset; /* memset nodes: parameters as reported */
};

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

typedef CUresult (*body_builder)(struct node_body *b, const void *params, CUcontext ctx);

/* A fresh, unqueued copy of an operation without a stream. */
struct sim_op *op_clone(const struct sim_op *t);
void body_free(struct node_body *b);
CUresult body_clone(struct node_body *dst, const struct node_body *src);
struct sim_graph *graph_from(CUgraph h);
struct sim_graph_node *node_from(CUgraphNode h);
struct sim_graph *graph_new(void);
void graph_free(struct sim_graph *g);
/* Copies every node and edge of g. */
CUresult graph_clone(const struct sim_graph *g, struct sim_graph **out);
CUresult deps_check(const struct sim_graph *g, const CUgraphNode *deps, size_t n);
/* Adds a node after deps (checked by the caller). Consumes the body: on failure it is freed. */
CUresult graph_add_node(struct sim_graph *g, struct node_body *b, const CUgraphNode *deps, size_t n,
                        CUgraphNode *out);
/* Node indices with every node after its dependencies; NULL on a cycle or no memory. */
size_t *topo_order(const struct sim_graph *g, bool *cycle);
/* The entry points' shared bodies: add a node, set a node's or an exec node's parameters. */
CUresult add_node(CUgraphNode *out, CUgraph hg, const CUgraphNode *deps, size_t n,
                  body_builder build, const void *params, CUcontext ctx);
CUresult node_set(CUgraphNode h, body_builder build, const void *params, CUcontext ctx);
struct sim_graph_exec *exec_from(CUgraphExec h);
struct exec_node *exec_find(struct sim_graph_exec *x, CUgraphNode h);
CUresult exec_set(CUgraphExec hx, CUgraphNode h, body_builder build, const void *params,
                  CUcontext ctx);
/* Body builders for each plain node type. */
CUresult kernel_body(struct node_body *b, const void *params, CUcontext ctx);
CUresult copy_body(struct node_body *b, const void *params, CUcontext ctx);
CUresult memset_body(struct node_body *b, const void *params, CUcontext ctx);
CUresult host_body(struct node_body *b, const void *params, CUcontext ctx);
CUresult empty_body(struct node_body *b, const void *params, CUcontext ctx);

#endif
