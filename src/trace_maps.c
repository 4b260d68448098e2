/* The trace's numbering of streams, events and kernels: maps (policy/u64map.h) keyed by the
 * driver's handles, guarded by the trace lock. They only grow (a handle the driver reuses keeps
 * its number: a destroyed stream's successor at the same address is numbered like it,
 * which orders nothing the replay would not order anyway). */
#include "trace_internal.h"

#include "real.h"
#include "u64map.h"

#include <stdlib.h>
#include <string.h>

static struct u64map streams, events, kernels; /* handle -> number */
static int next_stream = 1;                    /* 0 is the legacy default stream */
static _Thread_local int my_ptds_stream; /* this thread's per-thread default stream (0: none yet) */
static char **names;                     /* kernel names, by index */
static uint32_t nnames, capnames;

int ho_trace_stream_num(CUstream s, bool per_thread) {
    HO_ASSERT_HELD(&tr.lock);
    if (s == CU_STREAM_LEGACY || (s == NULL && !per_thread)) return 0;
    if (s == NULL || s == CU_STREAM_PER_THREAD) {
        if (my_ptds_stream == 0) my_ptds_stream = next_stream++;
        return my_ptds_stream;
    }
    uint64_t num;
    if (u64map_get(&streams, (uintptr_t)s, &num)) return (int)num;
    int n = next_stream++;
    if (!u64map_put(&streams, (uintptr_t)s, (uint64_t)n)) ho_trace_fail("out of memory");
    return n;
}

void ho_trace_event_set(CUevent e, int stream) {
    HO_ASSERT_HELD(&tr.lock);
    if (e != NULL && !u64map_put(&events, (uintptr_t)e, (uint64_t)stream))
        ho_trace_fail("out of memory");
}

int ho_trace_event_stream(CUevent e) {
    HO_ASSERT_HELD(&tr.lock);
    uint64_t stream;
    return e != NULL && u64map_get(&events, (uintptr_t)e, &stream) ? (int)stream : -1;
}

/* The name the driver gives the function, copied (the driver's string lives only as long as
 * its module), once per function. */
uint32_t ho_trace_kernel_name(const void *func) {
    HO_ASSERT_HELD(&tr.lock);
    if (func == NULL) return UINT32_MAX;
    uint64_t idx;
    if (u64map_get(&kernels, (uintptr_t)func, &idx)) return (uint32_t)idx;
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
    if (!u64map_put(&kernels, (uintptr_t)func, nnames)) return UINT32_MAX;
    return nnames++;
}

const char *ho_trace_kernel_name_at(uint32_t idx) {
    HO_ASSERT_HELD(&tr.lock);
    return idx < nnames ? names[idx] : "unknown";
}
