/* The CUDA declarations the whole library sees: cuda.h and the PFN_ typedefs of
 * cudaTypedefs.h, with the plain-name macros that would rename a hooked export undone (cuda.h
 * maps cuGetProcAddress to cuGetProcAddress_v2, cuStreamWriteValue32 to cuStreamWriteValue32_v2
 * and so on; the library exports every ABI, each declared from its real.def row). */
#ifndef HOSTOFF_CUDA_API_H
#define HOSTOFF_CUDA_API_H

#include <cuda.h>
#include <cudaTypedefs.h>

#undef cuGetProcAddress
#undef cuMemcpyBatchAsync
#undef cuMemcpy3DBatchAsync
#undef cuStreamWriteValue32
#undef cuStreamWriteValue64
#undef cuStreamWaitValue32
#undef cuStreamWaitValue64
#undef cuStreamBatchMemOp
#undef cuGraphAddNode

#endif
