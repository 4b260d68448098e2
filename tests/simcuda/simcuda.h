/* simcuda.h: what a program running on the simulated CUDA driver may call besides cuda.h.
 *
 * Kernel bodies are host functions `void <name>(void **params)` named in a text module image
 * (see docs/simcuda.md); they run on the simulator's device executor. */
#ifndef SIMCUDA_H
#define SIMCUDA_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Called from a kernel body: sets this launch's virtual duration in nanoseconds (overrides the
 * image's ns= value). */
void simcuda_set_duration_ns(uint64_t ns);

/* The host's virtual clock, in nanoseconds. */
uint64_t simcuda_now_ns(void);

/* Called from a kernel body: declares that this launch touches [ptr, ptr + bytes) through a
 * pointer the launch's parameters do not hold (a pointer array in device memory): hazard
 * detection then covers it as it covers pointer parameters. */
void simcuda_kernel_access(const void *ptr, uint64_t bytes);

/* The global address a CUtensorMap the simulator encoded points to (0: not such a descriptor);
 * a kernel body reaches its tensor through it (docs/simcuda.md, "Tensor maps"). */
uint64_t simcuda_tensor_map_address(const void *tensor_map);

/* Where the memory at ptr lives now: 'D' a device-located VMM handle, 'H' a host-located one,
 * 'N' a VMM reservation with nothing mapped there, 'L' memory that is no VMM mapping (linear,
 * managed, pinned host), 'U' memory the simulator does not manage. For test programs that must
 * look without calling the driver API (which a library interposing it would see). */
char simcuda_where(const void *ptr);

/* Called from a kernel body: sets a graph conditional handle's value for the rest of this graph
 * launch, as cudaGraphSetConditional does in device code (docs/simcuda.md, "Graphs"). */
void simcuda_graph_set_conditional(uint64_t handle, unsigned value);

/* Calls charged so far under a key of the report's "calls" object ("cuMemCreate.host",
 * "cuMemMap.device", "default.device"); 0 for a key it does not know. */
uint64_t simcuda_calls(const char *key);

/* The host link the simulator charges, in GB/s, once cuInit has run (after the cost file and the
 * SIMCUDA_* variables, docs/simcuda.md): out[0] host-to-device alone, out[1] device-to-host
 * alone, out[2] and out[3] each while the other also runs. 1 when filled; 0 before cuInit. */
int simcuda_link_gbps(double out[4]);

#ifdef __cplusplus
}
#endif

#endif
