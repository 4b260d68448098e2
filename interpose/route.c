/* The real -> hook identity map.
 *
 * Each hook is chosen by the identity of the real function it stands for: whatever route
 * reached the real pointer (dlsym, cuGetProcAddress with any version and flags), the pointer
 * tells which ABI variant it is, so each _v2/_ptsz/_ptds variant gets the hook of its own ABI.
 * The map holds both what dlsym returns for the exported name and what the driver's own
 * cuGetProcAddress returns for (base, version, flags): a driver may hand out different addresses
 * for the same variant through the two routes. */
#include "route.h"

#include <stdint.h>
#include <string.h>

_Atomic unsigned char ho_hook_routed[HO_NHOOKS];

#define HO_HOOK(exp, family) {#exp, HO_FAM_##family, (void *)(uintptr_t)&exp, HO_REAL_ID_##exp},
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations" /* see route.h */
const struct ho_hook_info ho_hooks[HO_NHOOKS] = {
#include "hooks.def"
};
#pragma GCC diagnostic pop
#undef HO_HOOK

/* Open addressing, pointer -> hook id + 1; written once at load, then only read. */
#define MAP_SLOTS 1024
static struct {
    const void *real;
    int id;
} map[MAP_SLOTS];

static size_t slot_of(const void *p) {
    return (size_t)(((uintptr_t)p * 11400714819323198485ull) >> 54) & (MAP_SLOTS - 1);
}

static void map_put(const void *real, int id) {
    if (real == NULL) return;
    size_t s = slot_of(real);
    while (map[s].real != NULL && map[s].real != real)
        s = (s + 1) & (MAP_SLOTS - 1);
    map[s].real = real;
    map[s].id = id;
}

static _Atomic bool loaded;

void *ho_route_hook_for(const void *real_fn, int *id) {
    if (real_fn == NULL || !atomic_load_explicit(&loaded, memory_order_acquire)) return NULL;
    size_t s = slot_of(real_fn);
    while (map[s].real != NULL) {
        if (map[s].real == real_fn) {
            if (id != NULL) *id = map[s].id;
            return ho_hooks[map[s].id].hook;
        }
        s = (s + 1) & (MAP_SLOTS - 1);
    }
    return NULL;
}

bool ho_route_load(const char *path) {
    if (!ho_real_load(path)) return false;
    for (int i = 0; i < HO_NHOOKS; i++) {
        void **slot = ho_real_slot(ho_hooks[i].real_id);
        if (*slot == ho_hooks[i].hook) *slot = NULL; /* found ourselves: not the driver */
        map_put(*slot, i);
    }
    /* The same variants as the driver's resolver hands them out. */
    if (ho_real.cuGetProcAddress_v2 != NULL) {
        for (int i = 0; i < HO_NHOOKS; i++) {
            const struct ho_real_entry *e = &ho_real_entries[ho_hooks[i].real_id];
            void *fn = NULL;
            cuuint64_t flags = e->per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                             : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
            if (ho_real.cuGetProcAddress_v2(e->base, &fn, e->version, flags, NULL) ==
                    CUDA_SUCCESS &&
                fn != ho_hooks[i].hook)
                map_put(fn, i);
        }
    }
    atomic_store_explicit(&loaded, true, memory_order_release);
    return true;
}
