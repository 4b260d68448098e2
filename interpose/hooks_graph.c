/* Graph edits the launch path must know of: conditional nodes (their bodies are only ever told
 * by cuGraphAddNode) and every exec setter, after which the exec's buffers are derived again
 * for the node it changed (track_graph.c). */
#include "hook.h"

CUresult cuGraphAddNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t n,
                        CUgraphNodeParams *p) {
    HO_ENTER(cuGraphAddNode);
    CUresult rc = HO_REAL(cuGraphAddNode, node, g, deps, n, p);
    if (rc == CUDA_SUCCESS && node != NULL && ho_tracking()) ho_track_graph_node_added(*node, p);
    return rc;
}

CUresult cuGraphAddNode_v2(CUgraphNode *node, CUgraph g, const CUgraphNode *deps,
                           const CUgraphEdgeData *edata, size_t n, CUgraphNodeParams *p) {
    HO_ENTER(cuGraphAddNode_v2);
    CUresult rc = HO_REAL(cuGraphAddNode_v2, node, g, deps, edata, n, p);
    if (rc == CUDA_SUCCESS && node != NULL && ho_tracking()) ho_track_graph_node_added(*node, p);
    return rc;
}

CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec x, CUgraphNode node, const CUDA_MEMCPY3D *p,
                                        CUcontext ctx) {
    HO_ENTER(cuGraphExecMemcpyNodeSetParams);
    CUresult rc = HO_REAL(cuGraphExecMemcpyNodeSetParams, x, node, p, ctx);
    if (rc == CUDA_SUCCESS && ho_tracking()) ho_track_graph_copy_params(x, node, p);
    return rc;
}

CUresult cuGraphExecMemsetNodeSetParams(CUgraphExec x, CUgraphNode node,
                                        const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx) {
    HO_ENTER(cuGraphExecMemsetNodeSetParams);
    CUresult rc = HO_REAL(cuGraphExecMemsetNodeSetParams, x, node, p, ctx);
    if (rc == CUDA_SUCCESS && p != NULL && ho_tracking())
        ho_track_graph_memset_params(x, node, p->dst);
    return rc;
}

CUresult cuGraphExecChildGraphNodeSetParams(CUgraphExec x, CUgraphNode node, CUgraph child) {
    HO_ENTER(cuGraphExecChildGraphNodeSetParams);
    CUresult rc = HO_REAL(cuGraphExecChildGraphNodeSetParams, x, node, child);
    if (rc == CUDA_SUCCESS && ho_tracking()) ho_track_graph_child_params(x, node, child);
    return rc;
}

CUresult cuGraphExecNodeSetParams(CUgraphExec x, CUgraphNode node, CUgraphNodeParams *p) {
    HO_ENTER(cuGraphExecNodeSetParams);
    CUresult rc = HO_REAL(cuGraphExecNodeSetParams, x, node, p);
    if (rc == CUDA_SUCCESS && ho_tracking()) ho_track_graph_node_params(x, node, p);
    return rc;
}
