/* Lazy, thread-safe initialisation on the first intercepted call (never in a constructor). */
#ifndef HOSTOFF_INIT_H
#define HOSTOFF_INIT_H

#include <stdbool.h>

/* Initialises once; true when the real driver is available. Re-entry on the initialising thread
 * (a driver constructor that looks a symbol up) returns false: pass through. */
bool ho_init(void);

#endif
