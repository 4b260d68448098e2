/* The dlsym route: hand out a hook when a program looks up a driver entry point.
 *
 * Called from dlsym_entry.S with the caller's (handle, name). Returns the hook to return, or NULL
 * to let the entry tail-jump to the real dlsym. Rules (DESIGN facts 2 and 3): only exact
 * cu[A-Z]* names are considered; cuGetExportTable is never touched; the pass-through path takes
 * no lock, allocates nothing and logs nothing; a thread-local flag guards against re-entry
 * (profilers that call dlsym from inside dlsym). */
#include "init.h"
#include "mode.h"
#include "route.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <string.h>

static _Thread_local bool in_route;

HO_PASS_THROUGH static bool driver_name(const char *name) {
    return name != NULL && name[0] == 'c' && name[1] == 'u' && name[2] >= 'A' && name[2] <= 'Z' &&
           strcmp(name, "cuGetExportTable") != 0;
}

__attribute__((visibility("hidden"))) void *ho_dlsym_route(void *handle, const char *name);

HO_PASS_THROUGH void *ho_dlsym_route(void *handle, const char *name) {
    ho_real_find_dlsym();
    if (!driver_name(name) || in_route || ho_real_dlsym == NULL) return NULL;
    in_route = true;
    void *hook = NULL;
    if (ho_init()) {
        /* The library is not the caller the program meant for RTLD_NEXT, but for driver names
         * the answer is the driver either way. */
        void *real = ho_real_dlsym(handle, name);
        int id = -1;
        hook = ho_mode() == HO_MODE_OFF ? NULL : ho_route_hook_for(real, &id);
        if (hook != NULL) atomic_store_explicit(&ho_hook_routed[id], 1, memory_order_relaxed);
        if (hook == NULL) hook = real;
        /* NULL real: let the real dlsym answer (and set dlerror) by passing through. */
    }
    in_route = false;
    return hook;
}
