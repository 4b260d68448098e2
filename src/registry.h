/* The buffer registry: every allocation the library tracks, found by any address inside it.
 *
 * Lookup is a hash on 2 MiB chunks (addr >> 21) whose chains hold the few buffers overlapping
 * each chunk, so finding the buffer behind a pointer costs one hash probe and a short scan, never
 * a walk over all buffers. A global [lowest, highest) bound rejects most non-pointer words
 * before any probe. Readers (every launch) take the read side of a rwlock once per launch;
 * writers are allocations and frees. */
#ifndef HOSTOFF_REGISTRY_H
#define HOSTOFF_REGISTRY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct ho_managed;

enum ho_buffer_kind {
    HO_BUF_DEVICE,     /* cuMemAlloc / cuMemAllocPitch */
    HO_BUF_ASYNC,      /* cuMemAllocAsync / FromPoolAsync */
    HO_BUF_MANAGED,    /* cuMemAllocManaged */
    HO_BUF_HOST,       /* cuMemHostAlloc / cuMemAllocHost */
    HO_BUF_REGISTERED, /* cuMemHostRegister */
    HO_BUF_VMM_APP,    /* a range the application mapped itself with cuMemMap */
};

const char *ho_buffer_kind_name(enum ho_buffer_kind k);

struct ho_buffer {
    uint64_t id;
    uint64_t base, size;
    int device;
    enum ho_buffer_kind kind;
    bool pinned;   /* never moved (IPC-exported, app-owned VMM, small) */
    uint64_t site; /* where it was allocated (site.h); 0: not captured */
    bool live;
    struct ho_managed *engine; /* the engine's state while it manages the buffer, else NULL */
    _Atomic uint64_t uses;     /* some of the launches and copies that touched it: the launch
                                * path counts per thread, ho_track_uses() adds it all up */
    _Atomic bool holds_ptrs;   /* the program copied pointers to tracked buffers into it
                                * (track_learn.c): a launch using it uses those too */
};

bool ho_registry_init(void);
/* Adds a buffer; returns it (owned by the registry) or NULL when out of memory. */
struct ho_buffer *ho_registry_add(uint64_t base, uint64_t size, int device,
                                  enum ho_buffer_kind kind);
/* Removes the live buffer that starts at base (of one of `kinds`, a bit mask of 1 << kind);
 * returns it (kept as a record for the report) or NULL. */
struct ho_buffer *ho_registry_remove(uint64_t base, unsigned kinds);
/* Removes every live buffer of `kinds` that starts inside [base, base + size); returns how many.
 * `each` (may be NULL) sees each removed buffer. */
int ho_registry_remove_range(uint64_t base, uint64_t size, unsigned kinds,
                             void (*each)(struct ho_buffer *b, void *arg), void *arg);
/* Removes the live engine-managed buffer that starts at base; returns it or NULL. */
struct ho_buffer *ho_registry_remove_managed(uint64_t base);
/* Forgets everything (fork child). */
void ho_registry_reset(void);

/* Readers: take the read lock once, look up many addresses, release. */
void ho_registry_read_begin(void);
void ho_registry_read_end(void);
/* The live buffer containing addr, or NULL (read lock held). */
struct ho_buffer *ho_registry_lookup_locked(uint64_t addr);
/* Cheap reject: false when addr cannot be inside any tracked buffer (no lock needed). */
bool ho_registry_maybe(uint64_t addr);
/* For the launch path (read lock held): the [lo, hi) bound of every live buffer, and the
 * generation, which every add and remove bumps (what was looked up under an unchanged generation
 * is still true). */
void ho_registry_bounds(uint64_t *lo, uint64_t *hi, uint64_t *gen);

/* Iterates over every buffer record, live or freed, in creation order (for the report). */
void ho_registry_foreach(void (*fn)(const struct ho_buffer *b, void *arg), void *arg);
uint64_t ho_registry_live_count(void);

#endif
