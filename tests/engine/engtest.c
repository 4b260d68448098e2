/* The kernel bodies every engine test program shares (see engtest.h). */
#include "engtest.h"

_Atomic uint64_t eng_errors;

void eng_fill(void **p) {
    uint64_t *b = *(uint64_t **)p[0], id = *(uint64_t *)p[1], v = *(uint64_t *)p[2];
    uint64_t n = *(uint64_t *)p[3];
    for (uint64_t i = 0; i < n; i++)
        b[i] = eng_word(id, v, i);
}

void eng_check(void **p) {
    const uint64_t *b = *(uint64_t **)p[0];
    uint64_t id = *(uint64_t *)p[1], v = *(uint64_t *)p[2], n = *(uint64_t *)p[3], bad = 0;
    for (uint64_t i = 0; i < n; i++)
        bad += b[i] != eng_word(id, v, i);
    if (bad) atomic_fetch_add(&eng_errors, bad);
}

void eng_vu(void **p) {
    uint64_t *b = *(uint64_t **)p[0], id = *(uint64_t *)p[1], v = *(uint64_t *)p[2];
    uint64_t n = *(uint64_t *)p[3], bad = 0;
    for (uint64_t i = 0; i < n; i++) {
        bad += b[i] != eng_word(id, v, i);
        b[i] = eng_word(id, v + 1, i);
    }
    if (bad) atomic_fetch_add(&eng_errors, bad);
}
