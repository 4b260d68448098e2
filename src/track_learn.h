/* What the library learns from the calls that make pointers invisible to a launch's scan
 * (docs/ARCHITECTURE.md, "How a use reaches the device"):
 *  - tensor-memory-access descriptors (CUtensorMap, 128 opaque bytes): cuTensorMapEncode* and
 *    cuTensorMapReplaceAddress name the global address; a launch parameter holding those bytes
 *    is attributed to it;
 *  - pointer arrays in device memory: a host-to-device copy of at most HO_LEARN_COPY_MAX bytes
 *    into a tracked buffer whose words point into tracked buffers makes that buffer a pointer
 *    array; a launch using it uses what it points to. */
#ifndef HOSTOFF_TRACK_LEARN_H
#define HOSTOFF_TRACK_LEARN_H

#include "registry.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HO_LEARN_COPY_MAX (64u << 10)

/* A descriptor was encoded (or re-pointed) for `addr`: its 128 bytes now name that address. */
void ho_learn_tmap(const void *map, uint64_t addr);
/* Whether any descriptor is known (lock-free). */
bool ho_learn_tmaps_known(void);
/* The address the 128 bytes at p were encoded for, if they are a known descriptor. */
bool ho_learn_tmap_lookup(const unsigned char *p, uint64_t *addr);

/* Whether any buffer holds learnt pointers (lock-free): the launch path reads a buffer's record
 * for it only then, so a job without pointer arrays pays nothing for them. */
bool ho_learn_ptrs_known(void);
/* `bytes` from host memory `src` were copied to `dst`. */
void ho_learn_copy_in(uint64_t dst, const void *src, size_t bytes);
/* Calls fn for each address the pointer array b holds (registry read side held). */
void ho_learn_ptrs_of(struct ho_buffer *b, void (*fn)(uint64_t addr, void *arg), void *arg);

void ho_learn_reset(void);

#endif
