/* A mutex that, in checked builds, knows which thread holds it, so that code which must run
 * under it can say so and be checked: HO_ASSERT_HELD(&eng.lock) aborts with the file and line
 * when the calling thread does not hold the lock. Checked builds are the debug builds
 * (meson buildtype=debug defines HO_CHECKS: the tests' ASan/UBSan and TSan builds); in the
 * others the owner is never written and the assertion compiles to nothing. */
#ifndef HOSTOFF_MUTEX_H
#define HOSTOFF_MUTEX_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#ifndef HO_CHECKS
#define HO_CHECKS 0
#endif

struct ho_mutex {
    pthread_mutex_t m;
    _Atomic uintptr_t owner; /* checked builds: the holder's ho_mutex_self() (0: nobody) */
};
#define HO_MUTEX_INITIALIZER                                                                       \
    { PTHREAD_MUTEX_INITIALIZER, 0 }

/* A number for the calling thread, unique among live threads (never 0). */
uintptr_t ho_mutex_self(void);
/* Reports a failed check at file:line and aborts. */
_Noreturn void ho_check_failed(const char *file, int line, const char *what);

static inline void ho_mutex_lock(struct ho_mutex *l) {
    pthread_mutex_lock(&l->m);
    if (HO_CHECKS) atomic_store_explicit(&l->owner, ho_mutex_self(), memory_order_relaxed);
}

static inline bool ho_mutex_trylock(struct ho_mutex *l) {
    if (pthread_mutex_trylock(&l->m) != 0) return false;
    if (HO_CHECKS) atomic_store_explicit(&l->owner, ho_mutex_self(), memory_order_relaxed);
    return true;
}

static inline void ho_mutex_unlock(struct ho_mutex *l) {
    if (HO_CHECKS) atomic_store_explicit(&l->owner, 0, memory_order_relaxed);
    pthread_mutex_unlock(&l->m);
}

/* A fork child: the lock may have been held by a thread of the parent; it starts afresh. */
static inline void ho_mutex_reinit(struct ho_mutex *l) {
    pthread_mutex_init(&l->m, NULL);
    atomic_store_explicit(&l->owner, 0, memory_order_relaxed);
}

/* Whether the calling thread holds l (checked builds; elsewhere it cannot tell: true). Only
 * the holder writes its own number, so a relaxed load is exact for the question asked. */
static inline bool ho_mutex_held(struct ho_mutex *l) {
    return !HO_CHECKS || atomic_load_explicit(&l->owner, memory_order_relaxed) == ho_mutex_self();
}

#if HO_CHECKS
#define HO_ASSERT_HELD(l)                                                                          \
    ((void)(ho_mutex_held(l) || (ho_check_failed(__FILE__, __LINE__, "not held: " #l), 0)))
#else
#define HO_ASSERT_HELD(l) ((void)0)
#endif

#endif
