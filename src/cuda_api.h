/* The CUDA declarations the whole library sees: cuda.h and the PFN_ typedefs of
 * cudaTypedefs.h, with the one plain-name macro that would rename a hooked export undone
 * (cuda.h maps cuGetProcAddress to cuGetProcAddress_v2; the library exports both ABIs). */
#ifndef HOSTOFF_CUDA_API_H
#define HOSTOFF_CUDA_API_H

#include <cuda.h>
#include <cudaTypedefs.h>

#undef cuGetProcAddress

#endif
