/* The real driver, at the bottom of the library: its entry points (src/real.def), how they are
 * found, and the real dlsym the library's own lookups go through. Everything above calls the
 * driver through struct ho_real; nothing here knows which entry points are hooked. */
#ifndef HOSTOFF_REAL_H
#define HOSTOFF_REAL_H

#include "cuda_api.h"

#include <stdbool.h>
#include <stddef.h>

/* Entry point ids, in real.def order. */
#define HO_REAL(exp, base, ver, pt) HO_REAL_ID_##exp,
enum ho_real_id {
#include "real.def"
    HO_NREAL
};
#undef HO_REAL

/* The real entry points, typed by the real headers' PFN typedefs; NULL where the driver lacks
 * one. Written once by ho_real_load before any hook uses them, then only read. */
struct ho_real {
#define HO_REAL(exp, base, ver, pt) PFN_##base##_v##ver##pt exp;
#include "real.def"
#undef HO_REAL
};

extern struct ho_real ho_real;

/* How an entry point is found: by dlsym under its exported name, by cuGetProcAddress under
 * (base, version, per-thread flag). */
struct ho_real_entry {
    const char *name;
    const char *base;
    int version;
    bool per_thread;
    size_t offset; /* of its pointer in struct ho_real */
};

extern const struct ho_real_entry ho_real_entries[HO_NREAL];

/* The pointer slot of entry id in ho_real. */
static inline void **ho_real_slot(int id) {
    return (void **)(void *)((char *)&ho_real + ho_real_entries[id].offset);
}

/* Loads the driver (path, or libcuda.so.1 when NULL) and resolves every entry point with the
 * real dlsym; false, with one line logged, when it cannot be loaded. The handle stays open. */
bool ho_real_load(const char *path);

/* The loaded driver's handle (NULL before ho_real_load succeeded). */
void *ho_real_handle(void);

/* glibc's own dlsym (found with dlvsym, which the library does not interpose), for the library's
 * lookups; NULL when it cannot be found. Safe before any constructor and never instrumented. */
void *ho_real_dlsym_fn(void *handle, const char *name);

/* The real dlsym the exported dlsym entry jumps to (dlsym_entry.S reads it PC-relative). */
typedef void *(*ho_dlsym_fn)(void *, const char *);
__attribute__((visibility("hidden"))) extern ho_dlsym_fn ho_real_dlsym;

/* The pass-through path runs in whatever state the caller is in, before any constructor: the
 * ASan runtime, for one, looks its interceptors up with dlsym while it initialises, when its
 * shadow memory is not there yet. So such paths are never instrumented by a sanitizer. */
#define HO_PASS_THROUGH __attribute__((no_sanitize("address", "undefined", "thread")))

/* Finds glibc's dlsym once (lock-free, idempotent). */
void ho_real_find_dlsym(void);

#endif
