/* Launch and graph hooks: each launch is attributed to the tracked buffers its parameters point
 * into; each instantiated graph's references are collected once and applied at every launch. */
#include "hook.h"

#include "paramcache.h"

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                        CUstream s, void **params, void **extra) {
    HO_ENTER(cuLaunchKernel);
    CUresult rc = HO_REAL(cuLaunchKernel, f, gx, gy, gz, bx, by, bz, shared, s, params, extra);
    if (rc == CUDA_SUCCESS && ho_tracking()) ho_track_launch(f, params, extra);
    return rc;
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                             unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                             CUstream s, void **params, void **extra) {
    HO_ENTER(cuLaunchKernel_ptsz);
    CUresult rc =
        HO_REAL(cuLaunchKernel_ptsz, f, gx, gy, gz, bx, by, bz, shared, s, params, extra);
    if (rc == CUDA_SUCCESS && ho_tracking()) ho_track_launch(f, params, extra);
    return rc;
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params, void **extra) {
    HO_ENTER(cuLaunchKernelEx);
    CUresult rc = HO_REAL(cuLaunchKernelEx, config, f, params, extra);
    if (rc == CUDA_SUCCESS && ho_tracking()) ho_track_launch(f, params, extra);
    return rc;
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **params,
                               void **extra) {
    HO_ENTER(cuLaunchKernelEx_ptsz);
    CUresult rc = HO_REAL(cuLaunchKernelEx_ptsz, config, f, params, extra);
    if (rc == CUDA_SUCCESS && ho_tracking()) ho_track_launch(f, params, extra);
    return rc;
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                   unsigned int bx, unsigned int by, unsigned int bz,
                                   unsigned int shared, CUstream s, void **params) {
    HO_ENTER(cuLaunchCooperativeKernel);
    CUresult rc = HO_REAL(cuLaunchCooperativeKernel, f, gx, gy, gz, bx, by, bz, shared, s, params);
    if (rc == CUDA_SUCCESS && ho_tracking()) ho_track_launch(f, params, NULL);
    return rc;
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                        unsigned int gz, unsigned int bx, unsigned int by,
                                        unsigned int bz, unsigned int shared, CUstream s,
                                        void **params) {
    HO_ENTER(cuLaunchCooperativeKernel_ptsz);
    CUresult rc =
        HO_REAL(cuLaunchCooperativeKernel_ptsz, f, gx, gy, gz, bx, by, bz, shared, s, params);
    if (rc == CUDA_SUCCESS && ho_tracking()) ho_track_launch(f, params, NULL);
    return rc;
}

/* An unloaded module's function handles may be reused for other functions. */
CUresult cuModuleUnload(CUmodule m) {
    HO_ENTER(cuModuleUnload);
    CUresult rc = HO_REAL(cuModuleUnload, m);
    if (rc == CUDA_SUCCESS) ho_paramcache_invalidate();
    return rc;
}

CUresult cuLibraryUnload(CUlibrary l) {
    HO_ENTER(cuLibraryUnload);
    CUresult rc = HO_REAL(cuLibraryUnload, l);
    if (rc == CUDA_SUCCESS) ho_paramcache_invalidate();
    return rc;
}

/* ------------------------------------------------------------------------------------ graphs */

CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph, unsigned long long flags) {
    HO_ENTER(cuGraphInstantiateWithFlags);
    CUresult rc = HO_REAL(cuGraphInstantiateWithFlags, exec, graph, flags);
    if (rc == CUDA_SUCCESS && ho_tracking()) ho_track_graph_instantiate(*exec, graph);
    return rc;
}

CUresult cuGraphInstantiateWithParams(CUgraphExec *exec, CUgraph graph,
                                      CUDA_GRAPH_INSTANTIATE_PARAMS *params) {
    HO_ENTER(cuGraphInstantiateWithParams);
    CUresult rc = HO_REAL(cuGraphInstantiateWithParams, exec, graph, params);
    if (rc == CUDA_SUCCESS && ho_tracking()) ho_track_graph_instantiate(*exec, graph);
    return rc;
}

CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *exec, CUgraph graph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS *params) {
    HO_ENTER(cuGraphInstantiateWithParams_ptsz);
    CUresult rc = HO_REAL(cuGraphInstantiateWithParams_ptsz, exec, graph, params);
    if (rc == CUDA_SUCCESS && ho_tracking()) ho_track_graph_instantiate(*exec, graph);
    return rc;
}

CUresult cuGraphLaunch(CUgraphExec exec, CUstream s) {
    HO_ENTER(cuGraphLaunch);
    CUresult rc = HO_REAL(cuGraphLaunch, exec, s);
    if (rc == CUDA_SUCCESS && ho_tracking()) ho_track_graph_launch(exec);
    return rc;
}

CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream s) {
    HO_ENTER(cuGraphLaunch_ptsz);
    CUresult rc = HO_REAL(cuGraphLaunch_ptsz, exec, s);
    if (rc == CUDA_SUCCESS && ho_tracking()) ho_track_graph_launch(exec);
    return rc;
}

CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec exec, CUgraphNode node,
                                           const CUDA_KERNEL_NODE_PARAMS *params) {
    HO_ENTER(cuGraphExecKernelNodeSetParams_v2);
    CUresult rc = HO_REAL(cuGraphExecKernelNodeSetParams_v2, exec, node, params);
    if (rc == CUDA_SUCCESS && ho_tracking()) ho_track_graph_kernel_params(exec, params);
    return rc;
}

CUresult cuGraphExecUpdate_v2(CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResultInfo *info) {
    HO_ENTER(cuGraphExecUpdate_v2);
    CUresult rc = HO_REAL(cuGraphExecUpdate_v2, exec, graph, info);
    if (rc == CUDA_SUCCESS && ho_tracking()) ho_track_graph_instantiate(exec, graph);
    return rc;
}

CUresult cuGraphExecDestroy(CUgraphExec exec) {
    HO_ENTER(cuGraphExecDestroy);
    if (ho_tracking()) ho_track_graph_destroy(exec);
    return HO_REAL(cuGraphExecDestroy, exec);
}
