/* Victim choice: lru (least recently used first; reactive: asked only under pressure, restores
 * on demand) and furthest (the predicted next use furthest away first: what lookahead uses once
 * it knows the step). */
#include "policy.h"

#include <stdlib.h>

static int by_last_use(const void *a, const void *b) {
    const struct ho_policy_candidate *x = a, *y = b;
    if (x->last_use != y->last_use) return x->last_use < y->last_use ? -1 : 1;
    /* Equal recency: the older buffer (smaller id) first, so the order is total. */
    return x->id < y->id ? -1 : (x->id > y->id ? 1 : 0);
}

static int by_next_use_desc(const void *a, const void *b) {
    const struct ho_policy_candidate *x = a, *y = b;
    if (x->next_use != y->next_use) return x->next_use > y->next_use ? -1 : 1;
    return by_last_use(a, b);
}

static size_t take(uint64_t need, const struct ho_policy_candidate *c, size_t n, uint64_t *out,
                   size_t cap) {
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
    qsort(candidates, n, sizeof *candidates,
          kind == HO_POLICY_FURTHEST ? by_next_use_desc : by_last_use);
    return take(need, candidates, n, out, cap);
}
