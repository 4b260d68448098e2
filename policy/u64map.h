/* A growable map from 64-bit keys to 64-bit values: open addressing with linear probing and
 * backward-shift deletion. Pure C and in the lowest layer, so the policies, the engine (the
 * trace's handle numbering) and the tools (buffer ids) share this one copy.
 *
 * Every key is allowed: 0 marks an empty slot, so the value of key 0 is kept beside the slots.
 * A zeroed struct is an empty map; nothing is allocated until the first put. Not thread-safe:
 * each user guards its own maps. */
#ifndef HOSTOFF_POLICY_U64MAP_H
#define HOSTOFF_POLICY_U64MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct u64map_slot {
    uint64_t key, value; /* key 0: empty */
};

struct u64map {
    struct u64map_slot *s;
    size_t cap, n; /* cap: a power of two, or 0; n counts key 0 too */
    bool has_zero;
    uint64_t zero_value;
};

/* Sets key to value; false when out of memory (the map is then unchanged). */
bool u64map_put(struct u64map *m, uint64_t key, uint64_t value);
/* The value, or false when absent (*value untouched). */
bool u64map_get(const struct u64map *m, uint64_t key, uint64_t *value);
/* Removes key; false when absent. */
bool u64map_del(struct u64map *m, uint64_t key);
/* Empties the map and keeps its slots for reuse. */
void u64map_clear(struct u64map *m);
/* Frees the slots; the map is empty (and usable) again. */
void u64map_free(struct u64map *m);

#endif
