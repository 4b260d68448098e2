/* A map from 64-bit ids to 64-bit values (buffer ids to sizes or device pointers): open
 * addressing with linear probing and backward-shift deletion. */
#ifndef HOSTOFF_TOOLS_IDMAP_H
#define HOSTOFF_TOOLS_IDMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct idmap_slot {
    uint64_t key, value;
    bool used;
};

struct idmap {
    struct idmap_slot *s;
    size_t cap, n; /* cap: a power of two, or 0 */
};

/* Sets key to value; false when out of memory. */
bool idmap_put(struct idmap *m, uint64_t key, uint64_t value);
/* The value, or false when absent. */
bool idmap_get(const struct idmap *m, uint64_t key, uint64_t *value);
/* Removes key; false when absent. */
bool idmap_del(struct idmap *m, uint64_t key);
void idmap_free(struct idmap *m);

#endif
