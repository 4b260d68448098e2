/* Loading the real driver and resolving its entry points (src/real.def). */
#include "real.h"

#include "log.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

struct ho_real ho_real;
ho_dlsym_fn ho_real_dlsym;

#define HO_REAL(exp, base, ver, pt)                                                                \
    {#exp, #base, ver, sizeof(#pt) > 1, offsetof(struct ho_real, exp)},
const struct ho_real_entry ho_real_entries[HO_NREAL] = {
#include "real.def"
};
#undef HO_REAL

static void *_Atomic handle;

HO_PASS_THROUGH void ho_real_find_dlsym(void) {
    if (__atomic_load_n(&ho_real_dlsym, __ATOMIC_ACQUIRE) != NULL) return;
    void *p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
#if defined(__x86_64__)
    if (p == NULL) p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
#else
    if (p == NULL) p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.17");
#endif
    __atomic_store_n(&ho_real_dlsym, (ho_dlsym_fn)(uintptr_t)p, __ATOMIC_RELEASE);
}

void *ho_real_dlsym_fn(void *h, const char *name) {
    ho_real_find_dlsym();
    return ho_real_dlsym != NULL ? ho_real_dlsym(h, name) : NULL;
}

void *ho_real_handle(void) {
    return atomic_load_explicit(&handle, memory_order_acquire);
}

bool ho_real_load(const char *path) {
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
    for (int i = 0; i < HO_NREAL; i++)
        *ho_real_slot(i) = ho_real_dlsym_fn(h, ho_real_entries[i].name);
    atomic_store_explicit(&handle, h, memory_order_release);
    return true;
}
