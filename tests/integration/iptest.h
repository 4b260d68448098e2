/* Helpers shared by the interposition test programs (tests/integration). Each program runs in its
 * own process, with and without libhostoff.so preloaded, against the simulated driver; it checks
 * its own data bit-exactly and exits non-zero on any mismatch. What it prints on stdout is
 * compared across runs by ip_harness.py, so it prints only what must not depend on the library. */
#ifndef HOSTOFF_IPTEST_H
#define HOSTOFF_IPTEST_H

#include <cuda.h>
#include <cudaTypedefs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../progcheck.h"

#define ip_primary(ordinal) progcheck_primary(ordinal)

/* FNV-1a over bytes: the data lines the harness compares across runs. */
static inline uint64_t ip_hash(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* Compares n bytes and names the first differing 32-bit word. */
static inline void ip_same(const char *what, const void *got, const void *want, size_t n) {
    if (memcmp(got, want, n) == 0) return;
    const unsigned char *g = got, *w = want;
    size_t i = 0;
    while (i < n && g[i] == w[i])
        i++;
    fprintf(stderr, "%s: data differs at byte %zu (got 0x%02x, expected 0x%02x)\n", what, i, g[i],
            w[i]);
    exit(1);
}

#endif
