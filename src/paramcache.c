#include "paramcache.h"

#include "real.h"

#include <stdatomic.h>
#include <stdlib.h>

#define SLOTS 8192

struct entry {
    const void *func;
    unsigned generation;
    const struct ho_param_layout *layout;
};

static _Atomic(struct entry *) slots[SLOTS];
static _Atomic unsigned generation;
static const struct ho_param_layout unknown = {.nparams = -1};

static size_t slot_of(const void *f) {
    return (size_t)(((uintptr_t)f * 11400714819323198485ull) >> 40) & (SLOTS - 1);
}

/* Parameters of f through one route (0: cuFuncGetParamInfo, 1: cuKernelGetParamInfo): the
 * count, or -1 when the route does not know f. */
static int query_route(const void *f, int route, size_t *offs, size_t *sizes) {
    for (int n = 0; n < HO_MAX_PARAMS; n++) {
        CUresult rc = CUDA_ERROR_NOT_SUPPORTED;
        if (route == 0 && ho_real.cuFuncGetParamInfo != NULL)
            rc = ho_real.cuFuncGetParamInfo((CUfunction)f, (size_t)n, &offs[n], &sizes[n]);
        else if (route == 1 && ho_real.cuKernelGetParamInfo != NULL)
            rc = ho_real.cuKernelGetParamInfo((CUkernel)f, (size_t)n, &offs[n], &sizes[n]);
        if (rc == CUDA_ERROR_INVALID_VALUE) return n; /* past the last parameter */
        if (rc != CUDA_SUCCESS) return n == 0 ? -1 : n;
    }
    return HO_MAX_PARAMS;
}

static const struct ho_param_layout *query(const void *f) {
    size_t offs[HO_MAX_PARAMS], sizes[HO_MAX_PARAMS];
    /* A CUkernel used as a CUfunction may be unknown to the function route, or look like a
     * function with no parameters there: ask the kernel route too before settling. */
    int n = query_route(f, 0, offs, sizes);
    if (n <= 0) {
        int k = query_route(f, 1, offs, sizes);
        if (k > 0 || n < 0) n = k;
    }
    if (n < 0) return &unknown;
    struct ho_param_layout *l = malloc(sizeof *l + (size_t)n * sizeof l->p[0]);
    if (l == NULL) return &unknown;
    l->nparams = n;
    l->argbytes = 0;
    for (int i = 0; i < n; i++) {
        l->p[i].offset = (uint32_t)offs[i];
        l->p[i].size = (uint32_t)sizes[i];
        if (offs[i] + sizes[i] > l->argbytes) l->argbytes = offs[i] + sizes[i];
    }
    return l;
}

const struct ho_param_layout *ho_param_layout(const void *f) {
    unsigned gen = atomic_load_explicit(&generation, memory_order_acquire);
    size_t s = slot_of(f);
    for (size_t probe = 0; probe < 16; probe++, s = (s + 1) & (SLOTS - 1)) {
        struct entry *e = atomic_load_explicit(&slots[s], memory_order_acquire);
        if (e == NULL) {
            struct entry *ne = malloc(sizeof *ne);
            if (ne == NULL) return query(f);
            ne->func = f;
            ne->generation = gen;
            ne->layout = query(f);
            struct entry *expected = NULL;
            if (atomic_compare_exchange_strong(&slots[s], &expected, ne)) return ne->layout;
            /* Another thread filled the slot first: keep ours unpublished, use it once. */
            const struct ho_param_layout *l = ne->layout;
            free(ne);
            if (expected->func == f && expected->generation == gen) return expected->layout;
            return l;
        }
        if (e->func == f) {
            if (e->generation == gen) return e->layout;
            /* Stale after an unload: replace it. Old entries stay allocated (a reader may hold
             * them); unloads are rare, so this is bounded by functions times unloads. */
            struct entry *ne = malloc(sizeof *ne);
            if (ne == NULL) return query(f);
            ne->func = f;
            ne->generation = gen;
            ne->layout = query(f);
            atomic_compare_exchange_strong(&slots[s], &e, ne);
            return ne->layout;
        }
    }
    return query(f); /* a crowded neighbourhood: correct, uncached */
}

void ho_paramcache_invalidate(void) {
    atomic_fetch_add_explicit(&generation, 1, memory_order_acq_rel);
}

void ho_paramcache_reset(void) {
    /* A fork child, single-threaded: nobody holds an entry, free what the slots hold. */
    for (size_t i = 0; i < SLOTS; i++) {
        struct entry *e = atomic_exchange(&slots[i], NULL);
        if (e == NULL) continue;
        if (e->layout != &unknown) free((void *)(uintptr_t)e->layout);
        free(e);
    }
}
