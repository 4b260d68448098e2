/* The library's mode (off, track, offload) as it is in force, and dropping to pass-through after
 * an internal failure. Read on every hook: one relaxed atomic load. */
#ifndef HOSTOFF_MODE_H
#define HOSTOFF_MODE_H

#include "options.h"

#include <stdatomic.h>

extern _Atomic int ho_mode_value;

/* The mode in force: off before initialisation, after a failed one, or in a fork child. */
static inline enum ho_mode ho_mode(void) {
    return (enum ho_mode)atomic_load_explicit(&ho_mode_value, memory_order_relaxed);
}

/* Sets the mode once initialisation has decided it. */
void ho_mode_set(enum ho_mode mode);

/* Drops to pass-through after an internal failure, with one line on stderr (once). */
void ho_degrade(const char *why);

#endif
