/* The hooks: their ids and declarations (interpose/hooks.def), and the identity map from a real
 * entry point's address to the hook that stands in for it. The real driver itself is src/real.h. */
#ifndef HOSTOFF_ROUTE_H
#define HOSTOFF_ROUTE_H

#include "real.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#define HO_EXPORT __attribute__((visibility("default")))

/* Hook ids, in table order. */
#define HO_HOOK(exp, family) HO_ID_##exp,
enum ho_hook_id {
#include "hooks.def"
    HO_NHOOKS
};
#undef HO_HOOK

/* Every hook, declared with the type of its real entry point: the definitions in hooks_*.c must
 * match, and a hook without a row in src/real.def does not compile. */
#define HO_HOOK(exp, family) HO_EXPORT extern __typeof__(*((struct ho_real *)0)->exp) exp;
/* The table names deprecated exports too (cuLaunchCooperativeKernelMultiDevice): hooked all the
 * same, since programs still call them. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include "hooks.def"
#pragma GCC diagnostic pop
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
    HO_FAM_PROC,
    HO_FAM_MEMOP,
    HO_FAM_TMAP,
    HO_FAM_GRAPHEDIT
};

struct ho_hook_info {
    const char *name; /* exported name */
    enum ho_family family;
    void *hook;  /* the library's function */
    int real_id; /* its real entry point: src/real.def row (enum ho_real_id) */
};

extern const struct ho_hook_info ho_hooks[HO_NHOOKS];

/* Set once a hook has been handed out or called: the report's "hooked" list. */
extern _Atomic unsigned char ho_hook_routed[HO_NHOOKS];

/* Loads the real driver (src/real.c) and builds the identity map; false if it cannot be loaded. */
bool ho_route_load(const char *path);
/* The hook standing in for a real entry point, or NULL (lock-free; after ho_route_load). */
void *ho_route_hook_for(const void *real_fn, int *id);

#endif
