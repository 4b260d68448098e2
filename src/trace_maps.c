/* The trace's numbering of streams, events and kernels: small open-addressing tables keyed by
 * the driver's handles, guarded by the trace lock. They only grow (a handle the driver reuses
 * keeps its number: a destroyed stream's successor at the same address is numbered like it,
 * which orders nothing the replay would not order anyway). */
#include "trace_internal.h"

#include "real.h"

#include <stdlib.h>
#include <string.h>

struct slot {
    uintptr_t key; /* 0: empty */
    int64_t value;
};

struct table {
    struct slot *s;
    size_t cap, n; /* cap: a power of two */
};

static struct table streams, events, kernels;
static int next_stream = 1;              /* 0 is the legacy default stream */
static _Thread_local int my_ptds_stream; /* this thread's per-thread default stream (0: none yet) */
static char **names;                     /* kernel names, by index */
static uint32_t nnames, capnames;

static size_t hash(uintptr_t k) {
    uint64_t x = (uint64_t)k * 0x9e3779b97f4a7c15ull;
    return (size_t)(x ^ (x >> 29));
}

static struct slot *find(struct table *t, uintptr_t key) {
    if (t->cap == 0) return NULL;
    for (size_t i = hash(key) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        if (t->s[i].key == key) return &t->s[i];
        if (t->s[i].key == 0) return NULL;
    }
}

/* Inserts or updates; false when out of memory. */
static bool put(struct table *t, uintptr_t key, int64_t value) {
    struct slot *hit = find(t, key);
    if (hit != NULL) {
        hit->value = value;
        return true;
    }
    if ((t->n + 1) * 4 > t->cap * 3) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        struct slot *s = calloc(cap, sizeof *s);
        if (s == NULL) return false;
        for (size_t i = 0; i < t->cap; i++) {
            if (t->s[i].key == 0) continue;
            size_t j = hash(t->s[i].key) & (cap - 1);
            while (s[j].key != 0)
                j = (j + 1) & (cap - 1);
            s[j] = t->s[i];
        }
        free(t->s);
        t->s = s;
        t->cap = cap;
    }
    size_t j = hash(key) & (t->cap - 1);
    while (t->s[j].key != 0)
        j = (j + 1) & (t->cap - 1);
    t->s[j] = (struct slot){key, value};
    t->n++;
    return true;
}

int ho_trace_stream_num(CUstream s, bool per_thread) {
    if (s == CU_STREAM_LEGACY || (s == NULL && !per_thread)) return 0;
    if (s == NULL || s == CU_STREAM_PER_THREAD) {
        if (my_ptds_stream == 0) my_ptds_stream = next_stream++;
        return my_ptds_stream;
    }
    struct slot *hit = find(&streams, (uintptr_t)s);
    if (hit != NULL) return (int)hit->value;
    int n = next_stream++;
    if (!put(&streams, (uintptr_t)s, n)) ho_trace_fail("out of memory");
    return n;
}

void ho_trace_event_set(CUevent e, int stream) {
    if (e != NULL && !put(&events, (uintptr_t)e, stream)) ho_trace_fail("out of memory");
}

int ho_trace_event_stream(CUevent e) {
    struct slot *hit = e != NULL ? find(&events, (uintptr_t)e) : NULL;
    return hit != NULL ? (int)hit->value : -1;
}

/* The name the driver gives the function, copied (the driver's string lives only as long as
 * its module), once per function. */
uint32_t ho_trace_kernel_name(const void *func) {
    if (func == NULL) return UINT32_MAX;
    struct slot *hit = find(&kernels, (uintptr_t)func);
    if (hit != NULL) return (uint32_t)hit->value;
    const char *name = NULL;
    if (ho_real.cuFuncGetName != NULL) {
        uint64_t t = ho_trace_self_begin();
        if (ho_real.cuFuncGetName(&name, (CUfunction)(uintptr_t)func) != CUDA_SUCCESS) name = NULL;
        ho_trace_self_end(t);
    }
    if (nnames == capnames) {
        uint32_t cap = capnames ? capnames * 2 : 64;
        char **n2 = realloc(names, cap * sizeof *n2);
        if (n2 == NULL) return UINT32_MAX;
        names = n2;
        capnames = cap;
    }
    names[nnames] = strdup(name != NULL ? name : "unknown");
    if (names[nnames] == NULL) return UINT32_MAX;
    if (!put(&kernels, (uintptr_t)func, nnames)) return UINT32_MAX;
    return nnames++;
}

const char *ho_trace_kernel_name_at(uint32_t idx) {
    return idx < nnames ? names[idx] : "unknown";
}
