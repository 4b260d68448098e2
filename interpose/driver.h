/* The real driver: its entry points (hooked and auxiliary), how they were found, and the
 * identity map from a real entry point's address to the hook that stands in for it. */
#ifndef HOSTOFF_DRIVER_H
#define HOSTOFF_DRIVER_H

#include "cuda_api.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#define HO_EXPORT __attribute__((visibility("default")))

/* Hook ids, in table order. */
#define HO_HOOK(exp, base, ver, pt, family) HO_ID_##exp,
enum ho_hook_id {
#include "hooks.def"
    HO_NHOOKS
};
#undef HO_HOOK

/* The real entry points, typed by the real headers' PFN typedefs. */
struct ho_real {
#define HO_HOOK(exp, base, ver, pt, family) PFN_##base##_v##ver##pt exp;
#define HO_DRIVER(exp, base, ver, pt)       PFN_##base##_v##ver##pt exp;
#include "hooks.def"
#include "aux.def"
#undef HO_HOOK
#undef HO_DRIVER
};

extern struct ho_real ho_real;

/* Every hook, declared with its real type: the definitions in hooks_*.c must match. */
#define HO_HOOK(exp, base, ver, pt, family)                                                        \
    HO_EXPORT extern __typeof__(*(PFN_##base##_v##ver##pt)0) exp;
#include "hooks.def"
#undef HO_HOOK

enum ho_family {
    HO_FAM_ALLOC,
    HO_FAM_VMM,
    HO_FAM_LAUNCH,
    HO_FAM_GRAPH,
    HO_FAM_COPY,
    HO_FAM_MEMSET,
    HO_FAM_SYNC,
    HO_FAM_CAPTURE,
    HO_FAM_CONTEXT,
    HO_FAM_PROC
};

struct ho_hook_info {
    const char *name; /* exported name */
    const char *base; /* cuGetProcAddress name */
    int version;
    bool per_thread;
    enum ho_family family;
    void *hook;         /* the library's function */
    size_t real_offset; /* where its real pointer lives in struct ho_real */
};

extern const struct ho_hook_info ho_hooks[HO_NHOOKS];

/* Set once a hook has been handed out or called: the report's "hooked" list. */
extern _Atomic unsigned char ho_hook_routed[HO_NHOOKS];

/* Loads the real driver and resolves every entry point; false if it cannot be loaded. */
bool ho_driver_load(const char *path);
/* The hook standing in for a real entry point, or NULL (lock-free; after ho_driver_load). */
void *ho_driver_hook_for(const void *real_fn, int *id);
/* The real dlsym (found with dlvsym), for the library's own lookups. */
void *ho_real_dlsym_fn(void *handle, const char *name);

#endif
