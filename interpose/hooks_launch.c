/* Launch and graph hooks: each launch is attributed to the tracked buffers its parameters point
 * into; each instantiated graph's references are collected once and applied at every launch. In
 * offload mode the engine makes those buffers usable before the real launch. */
#include "hook.h"

#include "paramcache.h"

/* The body every launch hook shares: CALL is the real launch. The trace (HOSTOFF_TRACE) times
 * the kernel by events recorded right before and right after CALL (trace.h,
 * ho_trace_launch_issued: not after the engine's work that follows), and writes the launch at the
 * end; the tracking scan hands it the buffers in between. */
#define LAUNCH(exp, f, params, extra, s, pt, CALL)                                                 \
    do {                                                                                           \
        HO_ENTER(exp);                                                                             \
        struct ho_trace_launch tl_;                                                                \
        ho_trace_launch_begin(&tl_);                                                               \
        if (ho_offloading()) {                                                                     \
            struct ho_engine_touch et_;                                                            \
            ho_track_launch_begin(f, params, extra, s, pt, &et_);                                  \
            ho_trace_launch_issue(&tl_, s, pt);                                                    \
            CUresult rc_ = ho_real.exp != NULL ? CALL : CUDA_ERROR_NOT_SUPPORTED;                  \
            ho_trace_launch_issued(&tl_, s, pt, rc_);                                              \
            ho_track_launch_end(&et_, s, pt, rc_);                                                 \
            ho_trace_launch_end(&tl_, f, s, pt, rc_);                                              \
            return rc_;                                                                            \
        }                                                                                          \
        ho_trace_launch_issue(&tl_, s, pt);                                                        \
        CUresult rc_ = ho_real.exp != NULL ? CALL : CUDA_ERROR_NOT_SUPPORTED;                      \
        ho_trace_launch_issued(&tl_, s, pt, rc_);                                                  \
        if (rc_ == CUDA_SUCCESS && ho_tracking()) ho_track_launch(f, params, extra);               \
        ho_trace_launch_end(&tl_, f, s, pt, rc_);                                                  \
        return rc_;                                                                                \
    } while (0)

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                        CUstream s, void **params, void **extra) {
    LAUNCH(cuLaunchKernel, f, params, extra, s, false,
           ho_real.cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, s, params, extra));
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                             unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                             CUstream s, void **params, void **extra) {
    LAUNCH(cuLaunchKernel_ptsz, f, params, extra, s, true,
           ho_real.cuLaunchKernel_ptsz(f, gx, gy, gz, bx, by, bz, shared, s, params, extra));
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params, void **extra) {
    CUstream s = config != NULL ? config->hStream : NULL;
    LAUNCH(cuLaunchKernelEx, f, params, extra, s, false,
           ho_real.cuLaunchKernelEx(config, f, params, extra));
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **params,
                               void **extra) {
    CUstream s = config != NULL ? config->hStream : NULL;
    LAUNCH(cuLaunchKernelEx_ptsz, f, params, extra, s, true,
           ho_real.cuLaunchKernelEx_ptsz(config, f, params, extra));
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                   unsigned int bx, unsigned int by, unsigned int bz,
                                   unsigned int shared, CUstream s, void **params) {
    LAUNCH(cuLaunchCooperativeKernel, f, params, NULL, s, false,
           ho_real.cuLaunchCooperativeKernel(f, gx, gy, gz, bx, by, bz, shared, s, params));
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                        unsigned int gz, unsigned int bx, unsigned int by,
                                        unsigned int bz, unsigned int shared, CUstream s,
                                        void **params) {
    LAUNCH(cuLaunchCooperativeKernel_ptsz, f, params, NULL, s, true,
           ho_real.cuLaunchCooperativeKernel_ptsz(f, gx, gy, gz, bx, by, bz, shared, s, params));
}

/* Deprecated, still exported: kernels on several devices at once, each on its own stream. The
 * library does not scan this form: the launch is unattributed, a barrier on every stream it
 * names (engine_unseen.c). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
CUresult cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS *list, unsigned int n,
                                              unsigned int flags) {
    HO_ENTER(cuLaunchCooperativeKernelMultiDevice);
    if (!ho_offloading() || list == NULL || n == 0)
        return HO_REAL(cuLaunchCooperativeKernelMultiDevice, list, n, flags);
    struct ho_engine_touch t;
    ho_engine_prepare_ex(NULL, 0, list[0].hStream, false, false, true, &t);
    CUresult rc = HO_REAL(cuLaunchCooperativeKernelMultiDevice, list, n, flags);
    for (unsigned i = 1; i < n; i++)
        ho_engine_unseen_also(&t, list[i].hStream, false);
    ho_engine_finish(&t, list[0].hStream, false, rc == CUDA_SUCCESS);
    if (rc == CUDA_SUCCESS) ho_count(&ho_stats.counts_launches, n);
    return rc;
}
#pragma GCC diagnostic pop

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

#define GRAPH_LAUNCH(exp, exec, s, pt)                                                             \
    do {                                                                                           \
        HO_ENTER(exp);                                                                             \
        if (ho_offloading()) {                                                                     \
            struct ho_engine_touch et_;                                                            \
            ho_track_graph_launch_begin(exec, s, pt, &et_);                                        \
            CUresult rc_ = HO_REAL(exp, exec, s);                                                  \
            ho_engine_finish(&et_, s, pt, rc_ == CUDA_SUCCESS);                                    \
            if (rc_ == CUDA_SUCCESS) ho_count(&ho_stats.counts_graph_launches, 1);                 \
            return rc_;                                                                            \
        }                                                                                          \
        CUresult rc_ = HO_REAL(exp, exec, s);                                                      \
        if (rc_ == CUDA_SUCCESS && ho_tracking()) ho_track_graph_launch(exec);                     \
        return rc_;                                                                                \
    } while (0)

CUresult cuGraphLaunch(CUgraphExec exec, CUstream s) {
    GRAPH_LAUNCH(cuGraphLaunch, exec, s, false);
}

CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream s) {
    GRAPH_LAUNCH(cuGraphLaunch_ptsz, exec, s, true);
}

CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec exec, CUgraphNode node,
                                           const CUDA_KERNEL_NODE_PARAMS *params) {
    HO_ENTER(cuGraphExecKernelNodeSetParams_v2);
    CUresult rc = HO_REAL(cuGraphExecKernelNodeSetParams_v2, exec, node, params);
    if (rc == CUDA_SUCCESS && ho_tracking()) ho_track_graph_kernel_params(exec, node, params);
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
