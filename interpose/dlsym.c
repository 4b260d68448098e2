/* The dlsym route: hand out a hook when a program looks up a driver entry point.
 *
 * Called from dlsym_entry.S with the caller's (handle, name). Returns the hook to return, or NULL
 * to let the entry tail-jump to the real dlsym. Rules (DESIGN facts 2 and 3): only exact
 * cu[A-Z]* names are considered; cuGetExportTable is never touched; the pass-through path takes
 * no lock, allocates nothing and logs nothing; a thread-local flag guards against re-entry
 * (profilers that call dlsym from inside dlsym). */
#include "driver.h"
#include "init.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <string.h>

typedef void *(*dlsym_fn)(void *, const char *);

/* Read by dlsym_entry.S: the real dlsym to jump to. Hidden so the entry can reach it PC-relative.
 */
__attribute__((visibility("hidden"))) dlsym_fn ho_real_dlsym;

static _Thread_local bool in_route;

/* The pass-through path runs in whatever state the caller is in, before any constructor: the
 * ASan runtime, for one, looks its interceptors up with dlsym while it initialises, when its
 * shadow memory is not there yet. So this path is never instrumented by a sanitizer. */
#define HO_PASS_THROUGH __attribute__((no_sanitize("address", "undefined", "thread")))

/* Finds glibc's dlsym with dlvsym (which the library does not interpose). */
HO_PASS_THROUGH static void find_real_dlsym(void) {
    if (__atomic_load_n(&ho_real_dlsym, __ATOMIC_ACQUIRE) != NULL) return;
    void *p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
#if defined(__x86_64__)
    if (p == NULL) p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
#else
    if (p == NULL) p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.17");
#endif
    __atomic_store_n(&ho_real_dlsym, (dlsym_fn)(uintptr_t)p, __ATOMIC_RELEASE);
}

void *ho_real_dlsym_fn(void *handle, const char *name) {
    find_real_dlsym();
    return ho_real_dlsym != NULL ? ho_real_dlsym(handle, name) : NULL;
}

HO_PASS_THROUGH static bool driver_name(const char *name) {
    return name != NULL && name[0] == 'c' && name[1] == 'u' && name[2] >= 'A' && name[2] <= 'Z' &&
           strcmp(name, "cuGetExportTable") != 0;
}

__attribute__((visibility("hidden"))) void *ho_dlsym_route(void *handle, const char *name);

HO_PASS_THROUGH void *ho_dlsym_route(void *handle, const char *name) {
    find_real_dlsym();
    if (!driver_name(name) || in_route || ho_real_dlsym == NULL) return NULL;
    in_route = true;
    void *hook = NULL;
    if (ho_init()) {
        /* The library is not the caller the program meant for RTLD_NEXT, but for driver names
         * the answer is the driver either way. */
        void *real = ho_real_dlsym(handle, name);
        int id = -1;
        hook = ho_mode() == HO_MODE_OFF ? NULL : ho_driver_hook_for(real, &id);
        if (hook != NULL) atomic_store_explicit(&ho_hook_routed[id], 1, memory_order_relaxed);
        if (hook == NULL) hook = real;
        /* NULL real: let the real dlsym answer (and set dlerror) by passing through. */
    }
    in_route = false;
    return hook;
}
