/* The lru policy: evict the least recently used candidates first. Reactive: it is asked only
 * under pressure, and restores happen on demand. */
#include "policy.h"

#include <stdlib.h>

static int by_last_use(const void *a, const void *b) {
    const struct ho_policy_candidate *x = a, *y = b;
    if (x->last_use != y->last_use) return x->last_use < y->last_use ? -1 : 1;
    /* Equal recency: the older buffer (smaller id) first, so the order is total. */
    return x->id < y->id ? -1 : (x->id > y->id ? 1 : 0);
}

static size_t lru_victims(uint64_t need, struct ho_policy_candidate *c, size_t n, uint64_t *out,
                          size_t cap) {
    qsort(c, n, sizeof *c, by_last_use);
    size_t k = 0;
    uint64_t got = 0;
    for (size_t i = 0; i < n && k < cap && got < need; i++) {
        out[k++] = c[i].id;
        got += c[i].bytes;
    }
    return k;
}

size_t ho_policy_victims(enum ho_policy_kind kind, uint64_t need,
                         struct ho_policy_candidate *candidates, size_t n, uint64_t *out,
                         size_t cap) {
    switch (kind) {
    case HO_POLICY_LRU:
        return lru_victims(need, candidates, n, out, cap);
    }
    return 0;
}
