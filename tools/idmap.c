#include "idmap.h"

#include <stdlib.h>

static size_t slot_of(uint64_t key, size_t cap) {
    uint64_t x = key * 0x9e3779b97f4a7c15ull;
    return (size_t)(x ^ (x >> 31)) & (cap - 1);
}

static bool rehash(struct idmap *m, size_t cap) {
    struct idmap_slot *s = calloc(cap, sizeof *s);
    if (s == NULL) return false;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->s[i].used) continue;
        size_t j = slot_of(m->s[i].key, cap);
        while (s[j].used)
            j = (j + 1) & (cap - 1);
        s[j] = m->s[i];
    }
    free(m->s);
    m->s = s;
    m->cap = cap;
    return true;
}

static struct idmap_slot *find(const struct idmap *m, uint64_t key) {
    if (m->cap == 0) return NULL;
    for (size_t i = slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (!m->s[i].used) return NULL;
        if (m->s[i].key == key) return &m->s[i];
    }
}

bool idmap_put(struct idmap *m, uint64_t key, uint64_t value) {
    struct idmap_slot *hit = find(m, key);
    if (hit != NULL) {
        hit->value = value;
        return true;
    }
    if ((m->n + 1) * 2 > m->cap && !rehash(m, m->cap ? m->cap * 2 : 64)) return false;
    size_t j = slot_of(key, m->cap);
    while (m->s[j].used)
        j = (j + 1) & (m->cap - 1);
    m->s[j] = (struct idmap_slot){key, value, true};
    m->n++;
    return true;
}

bool idmap_get(const struct idmap *m, uint64_t key, uint64_t *value) {
    const struct idmap_slot *hit = find(m, key);
    if (hit == NULL) return false;
    *value = hit->value;
    return true;
}

bool idmap_del(struct idmap *m, uint64_t key) {
    struct idmap_slot *hit = find(m, key);
    if (hit == NULL) return false;
    size_t i = (size_t)(hit - m->s);
    m->s[i].used = false;
    m->n--;
    /* Backward shift: move later members of the probe run into the hole when their home slot
     * is at or before it, so lookups never stop early. */
    for (size_t j = (i + 1) & (m->cap - 1); m->s[j].used; j = (j + 1) & (m->cap - 1)) {
        size_t home = slot_of(m->s[j].key, m->cap);
        bool movable = i <= j ? (home <= i || home > j) : (home <= i && home > j);
        if (movable) {
            m->s[i] = m->s[j];
            m->s[j].used = false;
            i = j;
        }
    }
    return true;
}

void idmap_free(struct idmap *m) {
    free(m->s);
    m->s = NULL;
    m->cap = m->n = 0;
}
