/* Helpers shared by the residency engine's test programs (tests/engine). Each program runs in its
 * own process under LD_PRELOAD=libhostoff.so against the full-data simulator, checks its own
 * data bit-exactly and exits non-zero on any mismatch; engine_harness.py checks the reports.
 *
 * Every word a test writes is a function of (buffer id, version, index): a lost, stale or
 * misplaced byte shows wherever it is read. Kernel bodies run in this process (on the
 * simulator's executor thread), so they count mismatches in a process global instead of through
 * a memory parameter: a pointer to pinned host memory would make every launch a "remote access"
 * in the simulator's report and hide the accesses the engine causes. */
#ifndef HOSTOFF_ENGTEST_H
#define HOSTOFF_ENGTEST_H

#include <cuda.h>
#include <simcuda.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../progcheck.h"

#define eng_primary(ordinal) progcheck_primary(ordinal)

#define MIB (1ull << 20)

/* The value of word i of buffer `id` at `version`. */
static inline uint64_t eng_word(uint64_t id, uint64_t version, uint64_t i) {
    return (id << 40) ^ (version * 0x9E3779B97F4A7C15ull) ^ (i * 0xBF58476D1CE4E5B9ull) ^ 1u;
}

/* Mismatches found by kernels (see above). */
extern _Atomic uint64_t eng_errors;

/* The kernels every program's image declares (ENG_KERNELS). Parameters are (ptr buf, u64 id,
 * u64 version, u64 words):
 *   eng_fill   writes `version` into every word;
 *   eng_check  counts words that do not hold `version`;
 *   eng_vu     counts words that do not hold `version`, then writes version + 1. */
#define ENG_KERNELS                                                                                \
    "kernel eng_fill ptr u64 u64 u64 ns=4000\n"                                                    \
    "kernel eng_check ptr u64 u64 u64 ns=4000\n"                                                   \
    "kernel eng_vu ptr u64 u64 u64 ns=8000\n"

/* The kernel bodies (engtest.c; programs link with -rdynamic so the simulator finds them). */
void eng_fill(void **p);
void eng_check(void **p);
void eng_vu(void **p);

struct eng_module {
    CUmodule mod;
    CUfunction fill, check, vu;
};

/* Loads `image` (which must declare ENG_KERNELS) in the current context. */
static inline void eng_load(struct eng_module *m, const char *image) {
    CK(cuModuleLoadData(&m->mod, image));
    CK(cuModuleGetFunction(&m->fill, m->mod, "eng_fill"));
    CK(cuModuleGetFunction(&m->check, m->mod, "eng_check"));
    CK(cuModuleGetFunction(&m->vu, m->mod, "eng_vu"));
}

/* Launches f(buf, id, version, bytes / 8) on s. */
static inline CUresult eng_launch(CUfunction f, CUstream s, CUdeviceptr buf, uint64_t id,
                                  uint64_t version, uint64_t bytes) {
    uint64_t words = bytes / 8;
    void *args[] = {&buf, &id, &version, &words};
    return cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL);
}

/* Copies the buffer back with a synchronous copy and counts words that do not hold `version`. */
static inline uint64_t eng_host_check(CUdeviceptr buf, uint64_t id, uint64_t version,
                                      uint64_t bytes) {
    uint64_t n = bytes / 8, bad = 0;
    uint64_t *h = malloc(bytes);
    EXPECT(h != NULL, "out of memory");
    CK(cuMemcpyDtoH(h, buf, bytes));
    for (uint64_t i = 0; i < n; i++)
        bad += h[i] != eng_word(id, version, i);
    free(h);
    return bad;
}

/* An unsigned integer from the environment, or `def`. */
static inline unsigned long eng_env(const char *name, unsigned long def) {
    const char *v = getenv(name);
    return v != NULL && *v != '\0' ? strtoul(v, NULL, 10) : def;
}

#endif
