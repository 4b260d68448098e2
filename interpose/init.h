/* Lazy, thread-safe initialisation on the first intercepted call (never in a constructor). */
#ifndef HOSTOFF_INIT_H
#define HOSTOFF_INIT_H

#include "options.h"

#include <stdatomic.h>
#include <stdbool.h>

/* Initialises once; true when the real driver is available. Re-entry on the initialising thread
 * (a driver constructor that looks a symbol up) returns false: pass through. */
bool ho_init(void);

extern _Atomic int ho_mode_value;

/* The mode in force: off after a failed initialisation or in a fork child. */
static inline enum ho_mode ho_mode(void) {
    return (enum ho_mode)atomic_load_explicit(&ho_mode_value, memory_order_relaxed);
}

/* Drops to pass-through after an internal failure, with one line on stderr. */
void ho_degrade(const char *why);

#endif
