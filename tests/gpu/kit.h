/* The GPU kit's shared definitions: included by the host programs (integrity.c, vmmfacts.c, C11)
 * and by the CUDA kernels (kernels.cu, nvcc), so both kernel images compute the same words.
 *
 * One host source, two kernel images:
 *   - on the simulator: KIT_SIM_IMAGE, a simcuda text module whose kernel bodies are the host
 *     functions of kit_sim.c (programs link with -rdynamic so the simulator finds them);
 *   - on a GPU: kernels.cu compiled by nvcc -cubin -arch=sm_90, loaded with cuModuleLoadData.
 * Every parameter of KIT_KERNELS is 8 bytes (a pointer or a u64), so both images lay them out at
 * 8 * i; kit_wide takes one by-value struct and a pointer. kit_load checks both layouts with
 * cuFuncGetParamInfo on whichever image was loaded. */
#ifndef HOSTOFF_GPU_KIT_H
#define HOSTOFF_GPU_KIT_H

#include <stdint.h>

#ifdef __CUDACC__
#define KIT_HD static __host__ __device__ __forceinline__
#else
#define KIT_HD static inline
#endif

/* The value of word i of content `id` at `version`: any lost, stale or misplaced word shows. */
KIT_HD uint64_t kit_word(uint64_t id, uint64_t version, uint64_t i) {
    return (id << 40) ^ (version * 0x9E3779B97F4A7C15ull) ^ (i * 0xBF58476D1CE4E5B9ull) ^ 1u;
}

/* Slots of kit_vu3: a launch verifies and updates up to three buffers. */
#define KIT_SLOTS 3

/* The kernels, their parameter counts (all 8-byte) and what they do:
 *   kit_fill  (buf, id, version, words)                 buf[i] = word(id, version, i)
 *   kit_check (buf, id, version, words, errors)         *errors += words that differ
 *   kit_vu3   ((buf, id, version, words) x 3, errors)   for each slot with buf != NULL: count
 *                                                       words that differ from `version`, then
 *                                                       write version + 1
 *   kit_read  (buf, words, sink)                        reads every word (bandwidth); writes
 *                                                       sink[0] only if the xor is a magic value
 *   kit_spin  (ns)                                      waits `ns` nanoseconds of the GPU's
 *                                                       global timer and touches no memory (a
 *                                                       kernel of known duration: vmmfacts'
 *                                                       launch queue); in the simulator's image
 *                                                       it has no body, its duration is ns
 * `errors` and `sink` point to device memory (a small pass-through allocation). */
#define KIT_KERNELS(X)                                                                             \
    X(kit_fill, 4)                                                                                 \
    X(kit_check, 5)                                                                                \
    X(kit_vu3, 4 * KIT_SLOTS + 1)                                                                  \
    X(kit_read, 3)                                                                                 \
    X(kit_spin, 1)

/* The simulator's image of the same kernels (virtual durations are set by the bodies). */
#define KIT_SIM_IMAGE                                                                              \
    "simcuda-module 1\n"                                                                           \
    "kernel kit_fill ptr u64 u64 u64\n"                                                            \
    "kernel kit_check ptr u64 u64 u64 ptr\n"                                                       \
    "kernel kit_vu3 ptr u64 u64 u64 ptr u64 u64 u64 ptr u64 u64 u64 ptr\n"                         \
    "kernel kit_read ptr u64 ptr\n"                                                                \
    "kernel kit_spin u64 ns=param:0\n" KIT_WIDE_IMAGE

#define KIT_READ_MAGIC 0x5EED5EED5EED5EEDull

/* kit_wide: the multi-tensor-apply shape (PyTorch's foreach and fused optimizers pass hundreds
 * of tensor pointers in one by-value struct). One launch verifies and rewrites `count` buffers,
 * each of `words` words holding kit_word(id[b], version, i), and writes version + 1. 128
 * buffers: 128 * 16 + 24 = 2072 bytes, inside the 4 KiB every driver accepts for parameters.
 * Parameters: (struct kit_wide_args, errors): the struct at offset 0, errors right after it. */
#define KIT_WIDE_MAX 128
struct kit_wide_args {
    uint64_t *buf[KIT_WIDE_MAX];
    uint64_t id[KIT_WIDE_MAX];
    uint64_t words, version, count;
};
#define KIT_WIDE_BYTES 2072 /* sizeof(struct kit_wide_args), checked below */
#define KIT_WIDE_IMAGE "kernel kit_wide b2072 ptr\n"

#ifndef __CUDACC__
#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>

#define KIT_MIB (1ull << 20)

_Static_assert(sizeof(struct kit_wide_args) == KIT_WIDE_BYTES, "KIT_WIDE_BYTES");

struct kit_module {
    CUmodule mod;
    CUfunction fill, check, vu3, read, spin, wide;
    int sms;           /* multiprocessors: sizes the grids on a GPU */
    const char *image; /* "simulator text image" or the cubin's path */
};

/* A driver call that must succeed; prints the call and exits 1 otherwise. */
#define KIT_CK(call)                                                                               \
    do {                                                                                           \
        CUresult kit_rc_ = (call);                                                                 \
        if (kit_rc_ != CUDA_SUCCESS) kit_die_rc(kit_rc_, #call, __FILE__, __LINE__);               \
    } while (0)

void kit_die_rc(CUresult rc, const char *what, const char *file, int line);

/* When set, kit_die_rc calls it (after printing) instead of exiting: vmmfacts records the failed
 * section and goes on with the next one. It must not return (it longjmps). */
extern void (*kit_on_failure)(CUresult rc, const char *what);

/* cuInit, device 0's primary context made current on this thread; returns it. */
CUcontext kit_primary(CUdevice *dev);

/* Loads the kernels: the cubin at `cubin` (a GPU), or KIT_SIM_IMAGE when it is NULL (the
 * simulator); checks every kernel's parameter layout. Exits 1 on failure. */
void kit_load(struct kit_module *m, const char *cubin);

/* Grid for a kernel over `words` 8-byte words (256 threads a block; ignored by the simulator). */
unsigned kit_blocks(const struct kit_module *m, uint64_t words);

/* Launches: see KIT_KERNELS. */
CUresult kit_fill_launch(const struct kit_module *m, CUstream s, CUdeviceptr buf, uint64_t id,
                         uint64_t version, uint64_t bytes);
CUresult kit_check_launch(const struct kit_module *m, CUstream s, CUdeviceptr buf, uint64_t id,
                          uint64_t version, uint64_t bytes, CUdeviceptr errors);
CUresult kit_read_launch(const struct kit_module *m, CUstream s, CUdeviceptr buf, uint64_t bytes,
                         CUdeviceptr sink);
CUresult kit_spin_launch(const struct kit_module *m, CUstream s, uint64_t ns);
CUresult kit_wide_launch(const struct kit_module *m, CUstream s, const struct kit_wide_args *a,
                         CUdeviceptr errors);

/* The median of v[0..n) (sorts v); 0 when n == 0. */
double kit_median(double *v, int n);

/* Monotonic wall clock in seconds. */
double kit_now(void);

/* A human name for a CUresult ("CUDA_ERROR_OUT_OF_MEMORY"), never NULL. */
const char *kit_rc_name(CUresult rc);
#endif

#endif
