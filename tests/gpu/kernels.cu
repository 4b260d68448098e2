/* The GPU kit's kernels for a real GPU: the same kernels, names and parameter lists as
 * KIT_SIM_IMAGE and kit_sim.c (see kit.h), compiled by
 *     nvcc -cubin -arch=sm_90 -O3 -o kernels.cubin tests/gpu/kernels.cu
 * and loaded by integrity.c and vmmfacts.c with cuModuleLoadData. Grid-stride loops: any grid
 * works; the host programs launch 256 threads a block. */
#include "kit.h"

#include <stdint.h>

/* Adds this thread's mismatches to *errors (rarely non-zero: one atomic per failing thread). */
static __device__ __forceinline__ void report(unsigned long long *errors, uint64_t bad) {
    if (bad != 0) atomicAdd(errors, (unsigned long long)bad);
}

static __device__ __forceinline__ uint64_t first_index() {
    return (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
}

static __device__ __forceinline__ uint64_t stride() {
    return (uint64_t)gridDim.x * blockDim.x;
}

extern "C" __global__ void kit_fill(uint64_t *buf, uint64_t id, uint64_t version, uint64_t words) {
    for (uint64_t i = first_index(); i < words; i += stride())
        buf[i] = kit_word(id, version, i);
}

extern "C" __global__ void kit_check(const uint64_t *buf, uint64_t id, uint64_t version,
                                     uint64_t words, unsigned long long *errors) {
    uint64_t bad = 0;
    for (uint64_t i = first_index(); i < words; i += stride())
        bad += buf[i] != kit_word(id, version, i);
    report(errors, bad);
}

static __device__ __forceinline__ uint64_t verify_update(uint64_t *buf, uint64_t id,
                                                         uint64_t version, uint64_t words) {
    uint64_t bad = 0;
    if (buf == nullptr) return 0;
    for (uint64_t i = first_index(); i < words; i += stride()) {
        bad += buf[i] != kit_word(id, version, i);
        buf[i] = kit_word(id, version + 1, i);
    }
    return bad;
}

extern "C" __global__ void kit_vu3(uint64_t *b0, uint64_t id0, uint64_t v0, uint64_t n0,
                                   uint64_t *b1, uint64_t id1, uint64_t v1, uint64_t n1,
                                   uint64_t *b2, uint64_t id2, uint64_t v2, uint64_t n2,
                                   unsigned long long *errors) {
    uint64_t bad = verify_update(b0, id0, v0, n0);
    bad += verify_update(b1, id1, v1, n1);
    bad += verify_update(b2, id2, v2, n2);
    report(errors, bad);
}

/* Reads 16 bytes per thread and iteration (the widest plain load); words is a multiple of 2. */
extern "C" __global__ void kit_read(const uint64_t *buf, uint64_t words, unsigned long long *sink) {
    const ulonglong2 *v = reinterpret_cast<const ulonglong2 *>(buf);
    uint64_t n = words / 2, acc = 0;
    for (uint64_t i = first_index(); i < n; i += stride()) {
        ulonglong2 x = v[i];
        acc ^= x.x ^ x.y;
    }
    if (acc == KIT_READ_MAGIC) sink[0] = acc;
}

/* Waits `ns` nanoseconds of the global timer (%globaltimer: nanoseconds, updated about every
 * microsecond on recent GPUs), so its duration does not depend on the clock rate as clock64's
 * cycles would. Every thread waits; none touches memory. */
static __device__ __forceinline__ uint64_t global_ns() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

extern "C" __global__ void kit_spin(uint64_t ns) {
    uint64_t start = global_ns();
    while (global_ns() - start < ns) {
    }
}

/* The multi-tensor-apply shape: block row y takes buffers y, y + gridDim.y, ... */
extern "C" __global__ void kit_wide(const kit_wide_args a, unsigned long long *errors) {
    uint64_t bad = 0;
    for (uint64_t b = blockIdx.y; b < a.count; b += gridDim.y) {
        uint64_t *buf = a.buf[b];
        for (uint64_t i = first_index(); i < a.words; i += stride()) {
            bad += buf[i] != kit_word(a.id[b], a.version, i);
            buf[i] = kit_word(a.id[b], a.version + 1, i);
        }
    }
    report(errors, bad);
}
