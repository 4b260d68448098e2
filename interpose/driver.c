/* Finding the real driver and building the identity map.
 *
 * Each hook is chosen by the identity of the real function it stands for: whatever route
 * reached the real pointer (dlsym, cuGetProcAddress with any version and flags), the pointer
 * tells which ABI variant it is, so each _v2/_ptsz/_ptds variant gets the hook of its own ABI.
 * The map holds both what dlsym returns for the exported name and what the driver's own
 * cuGetProcAddress returns for (base, version, flags): a driver may hand out different addresses
 * for the same variant through the two routes. */
#include "driver.h"

#include "log.h"

#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

struct ho_real ho_real;
_Atomic unsigned char ho_hook_routed[HO_NHOOKS];

#define HO_HOOK(exp, base, ver, pt, family)                                                        \
    {#exp,                                                                                         \
     #base,                                                                                        \
     ver,                                                                                          \
     sizeof(#pt) > 1,                                                                              \
     HO_FAM_##family,                                                                              \
     (void *)(uintptr_t)&exp,                                                                      \
     offsetof(struct ho_real, exp)},
const struct ho_hook_info ho_hooks[HO_NHOOKS] = {
#include "hooks.def"
};
#undef HO_HOOK

struct aux_info {
    const char *name;
    size_t offset;
};

#define HO_DRIVER(exp, base, ver, pt) {#exp, offsetof(struct ho_real, exp)},
static const struct aux_info aux[] = {
#include "aux.def"
};
#undef HO_DRIVER

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

void *ho_driver_hook_for(const void *real_fn, int *id) {
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

bool ho_driver_load(const char *path) {
    const char *lib = path != NULL ? path : "libcuda.so.1";
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        /* A HOSTOFF_LIBCUDA that cannot be loaded: init falls back to libcuda.so.1, untracked. */
        const char *err = dlerror();
        ho_log(HO_LOG_ERROR, "cannot load the CUDA driver %s%s%s: %s", lib, err ? ": " : "",
               err ? err : "",
               path != NULL ? "calls pass straight through to libcuda.so.1, untracked"
                            : "calls fail as without a driver");
        return false;
    }
    for (int i = 0; i < HO_NHOOKS; i++) {
        void *real = ho_real_dlsym_fn(h, ho_hooks[i].name);
        if (real == ho_hooks[i].hook) real = NULL; /* found ourselves: not the driver */
        memcpy((char *)&ho_real + ho_hooks[i].real_offset, &real, sizeof real);
        map_put(real, i);
    }
    for (size_t i = 0; i < sizeof aux / sizeof aux[0]; i++) {
        void *real = ho_real_dlsym_fn(h, aux[i].name);
        memcpy((char *)&ho_real + aux[i].offset, &real, sizeof real);
    }
    /* The same variants as the driver's resolver hands them out. */
    if (ho_real.cuGetProcAddress_v2 != NULL) {
        for (int i = 0; i < HO_NHOOKS; i++) {
            void *fn = NULL;
            cuuint64_t flags = ho_hooks[i].per_thread
                                   ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                   : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
            if (ho_real.cuGetProcAddress_v2(ho_hooks[i].base, &fn, ho_hooks[i].version, flags,
                                            NULL) == CUDA_SUCCESS &&
                fn != ho_hooks[i].hook)
                map_put(fn, i);
        }
    }
    atomic_store_explicit(&loaded, true, memory_order_release);
    return true;
}
