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

/* Calls charged so far under a key of the report's "calls" object ("cuMemCreate.host",
 * "cuMemMap.device", "default.device"); 0 for a key it does not know. */
uint64_t simcuda_calls(const char *key);

#ifdef __cplusplus
}
#endif

#endif
