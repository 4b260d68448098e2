/* The cuGetProcAddress route: ask the real resolver with the same (symbol, version, flags), then
 * substitute a hook only for a non-NULL answer, chosen by the identity of the pointer returned,
 * so every ABI variant gets the hook of its own ABI. The real return code and symbolStatus pass
 * through unchanged (symbolStatus may be NULL). Asked for "cuGetProcAddress" itself, the real
 * resolver returns itself, and the identity map turns that into these wrappers. */
#include "hook.h"

static void substitute(CUresult rc, void **pfn) {
    atomic_fetch_add_explicit(&ho_stats.proc_lookups, 1, memory_order_relaxed);
    if (rc != CUDA_SUCCESS || pfn == NULL || *pfn == NULL || ho_mode() == HO_MODE_OFF) return;
    int id = -1;
    void *hook = ho_route_hook_for(*pfn, &id);
    if (hook != NULL) {
        *pfn = hook;
        atomic_store_explicit(&ho_hook_routed[id], 1, memory_order_relaxed);
    }
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags) {
    HO_ENTER(cuGetProcAddress);
    CUresult rc = HO_REAL(cuGetProcAddress, symbol, pfn, version, flags);
    substitute(rc, pfn);
    return rc;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status) {
    HO_ENTER(cuGetProcAddress_v2);
    CUresult rc = HO_REAL(cuGetProcAddress_v2, symbol, pfn, version, flags, status);
    substitute(rc, pfn);
    return rc;
}
