/* Kernel parameter layouts, cached per CUfunction (or CUkernel used as one).
 *
 * The layout comes from cuFuncGetParamInfo, else cuKernelGetParamInfo, queried until
 * CUDA_ERROR_INVALID_VALUE on the first launch of each function. Lookups on later launches are
 * lock-free: an insert-only open-addressing table of published entries. A module or library
 * unload bumps a generation, so an address the driver reuses for another function is queried
 * afresh. */
#ifndef HOSTOFF_PARAMCACHE_H
#define HOSTOFF_PARAMCACHE_H

#include <stddef.h>
#include <stdint.h>

#define HO_MAX_PARAMS 256

struct ho_param_layout {
    int nparams;     /* -1: unknown (no layout query answered) */
    size_t argbytes; /* end of the last parameter */
    struct {
        uint32_t offset, size;
    } p[];
};

/* The layout of f; never NULL (an unknown layout has nparams -1). */
const struct ho_param_layout *ho_param_layout(const void *f);
void ho_paramcache_invalidate(void);
void ho_paramcache_reset(void);

#endif
