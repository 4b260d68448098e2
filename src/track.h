/* Tracking (HOSTOFF_MODE=track and up): what the hooks tell the engine about allocations, frees,
 * launches, copies and graphs. Every function here is called after the real driver call
 * succeeded and never fails the application: on an internal failure it degrades to pass-through. */
#ifndef HOSTOFF_TRACK_H
#define HOSTOFF_TRACK_H

#include "cuda_api.h"
#include "engine.h"
#include "registry.h"

#include <stdint.h>

void ho_track_alloc(uint64_t base, uint64_t size, enum ho_buffer_kind kind);
void ho_track_free(uint64_t base, unsigned kinds);
/* Marks the buffer holding addr as pinned (IPC-exported). */
void ho_track_pin(uint64_t addr);
/* A kernel launch: attributes it to every tracked buffer a parameter word points into. */
void ho_track_launch(const void *func, void **params, void **extra);
/* A copy or memset touching [addr, addr + bytes). */
void ho_track_touch(uint64_t addr);

/* Offload mode: the same, around the real call, so the engine can make the buffers usable first
 * (launches restore them; copies use them wherever they are) and knows when the use is issued. */
void ho_track_launch_begin(const void *func, void **params, void **extra, CUstream s,
                           bool per_thread, struct ho_engine_touch *et);
void ho_track_launch_end(struct ho_engine_touch *et, CUstream s, bool per_thread, CUresult rc);
void ho_track_access_begin(const uint64_t *addrs, int n, CUstream s, bool per_thread, bool restore,
                           struct ho_engine_touch *et);
/* The same for a call that may also use memory no address names (unseen: a barrier). */
void ho_track_access_begin_ex(const uint64_t *addrs, int n, CUstream s, bool per_thread,
                              bool restore, bool unseen, struct ho_engine_touch *et);
void ho_track_graph_launch_begin(CUgraphExec exec, CUstream s, bool per_thread,
                                 struct ho_engine_touch *et);

/* Graphs (track_graph.c): an exec's buffers node by node, child graphs and conditional bodies
 * walked, re-derived for the node an exec setter changes. */
void ho_track_graph_instantiate(CUgraphExec exec, CUgraph graph);
void ho_track_graph_kernel_params(CUgraphExec exec, CUgraphNode node,
                                  const CUDA_KERNEL_NODE_PARAMS *params);
void ho_track_graph_copy_params(CUgraphExec exec, CUgraphNode node, const CUDA_MEMCPY3D *cp);
void ho_track_graph_memset_params(CUgraphExec exec, CUgraphNode node, CUdeviceptr dst);
void ho_track_graph_child_params(CUgraphExec exec, CUgraphNode node, CUgraph child);
void ho_track_graph_node_params(CUgraphExec exec, CUgraphNode node, const CUgraphNodeParams *p);
/* cuGraphAddNode made node: a conditional node's bodies are remembered (no getter has them). */
void ho_track_graph_node_added(CUgraphNode node, const CUgraphNodeParams *p);
void ho_track_graph_launch(CUgraphExec exec);
void ho_track_graph_destroy(CUgraphExec exec);
void ho_track_graph_reset(void);
void ho_track_reset(void);
/* A buffer's uses so far: its own count plus every thread's table (for the report). */
uint64_t ho_track_uses(const struct ho_buffer *b);

#endif
