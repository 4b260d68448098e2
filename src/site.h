/* Allocation sites: where in the program a buffer was allocated, named by the return addresses
 * of the first HO_SITE_FRAMES frames outside this library (libunwind's unw_backtrace). The
 * lookahead policy uses the site to tell buffers apart across steps; traces and reports name it.
 *
 * Captured only on slow paths (allocations the engine manages, or tracked ones of at least
 * HOSTOFF_MIN_BYTES): an unwind costs microseconds. Code without unwind information (JIT-compiled
 * frames) ends the walk early; what was walked still names the site. Thread-safe. */
#ifndef HOSTOFF_SITE_H
#define HOSTOFF_SITE_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#define HO_SITE_FRAMES 8

/* The calling code's site (a nonzero hash), or 0 when it cannot be had. */
uint64_t ho_site_capture(void);

/* The return addresses a site was named by (at most cap); 0 when the site is unknown. */
size_t ho_site_frames(uint64_t site, uintptr_t *out, size_t cap);

/* "module+0xoffset" (or "symbol+0xoffset" when exported) for an address, into buf. */
void ho_site_describe(uintptr_t pc, char *buf, size_t cap);
/* Where pc lies, for resolving it later to a function and file:line from the module's debug
 * information (hostoff report does, with addr2line): the module's path (cap bytes) and its
 * load base. False when dladdr does not know pc. */
bool ho_site_locate(uintptr_t pc, char *path, size_t cap, uintptr_t *base);

#endif
