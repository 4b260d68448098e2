#include "u64map.h"

#include <stdlib.h>
#include <string.h>

/* A multiplicative mix: ids and addresses are sequential or aligned, this spreads them. */
static size_t home_of(uint64_t key, size_t cap) {
    uint64_t x = key * 0x9e3779b97f4a7c15ull;
    return (size_t)(x ^ (x >> 31)) & (cap - 1);
}

static bool rehash(struct u64map *m, size_t cap) {
    struct u64map_slot *s = calloc(cap, sizeof *s);
    if (s == NULL) return false;
    for (size_t i = 0; i < m->cap; i++) {
        if (m->s[i].key == 0) continue;
        size_t j = home_of(m->s[i].key, cap);
        while (s[j].key != 0)
            j = (j + 1) & (cap - 1);
        s[j] = m->s[i];
    }
    free(m->s);
    m->s = s;
    m->cap = cap;
    return true;
}

/* The slot holding key (not 0), or NULL. */
static struct u64map_slot *find(const struct u64map *m, uint64_t key) {
    if (m->cap == 0) return NULL;
    for (size_t i = home_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->s[i].key == key) return &m->s[i];
        if (m->s[i].key == 0) return NULL;
    }
}

bool u64map_put(struct u64map *m, uint64_t key, uint64_t value) {
    if (key == 0) {
        if (!m->has_zero) m->n++;
        m->has_zero = true;
        m->zero_value = value;
        return true;
    }
    struct u64map_slot *hit = find(m, key);
    if (hit != NULL) {
        hit->value = value;
        return true;
    }
    /* At most half full: probe runs stay short. */
    if ((m->n + 1) * 2 > m->cap && !rehash(m, m->cap ? m->cap * 2 : 64)) return false;
    size_t j = home_of(key, m->cap);
    while (m->s[j].key != 0)
        j = (j + 1) & (m->cap - 1);
    m->s[j] = (struct u64map_slot){key, value};
    m->n++;
    return true;
}

bool u64map_get(const struct u64map *m, uint64_t key, uint64_t *value) {
    if (key == 0) {
        if (m->has_zero) *value = m->zero_value;
        return m->has_zero;
    }
    const struct u64map_slot *hit = find(m, key);
    if (hit == NULL) return false;
    *value = hit->value;
    return true;
}

bool u64map_del(struct u64map *m, uint64_t key) {
    if (key == 0) {
        if (!m->has_zero) return false;
        m->has_zero = false;
        m->n--;
        return true;
    }
    struct u64map_slot *hit = find(m, key);
    if (hit == NULL) return false;
    size_t i = (size_t)(hit - m->s);
    m->s[i].key = 0;
    m->n--;
    /* Backward shift: move later members of the probe run into the hole when their home slot
     * is at or before it (cyclically), so lookups never stop early at the hole. */
    for (size_t j = (i + 1) & (m->cap - 1); m->s[j].key != 0; j = (j + 1) & (m->cap - 1)) {
        size_t home = home_of(m->s[j].key, m->cap);
        bool movable = i <= j ? (home <= i || home > j) : (home <= i && home > j);
        if (movable) {
            m->s[i] = m->s[j];
            m->s[j].key = 0;
            i = j;
        }
    }
    return true;
}

void u64map_clear(struct u64map *m) {
    if (m->s != NULL) memset(m->s, 0, m->cap * sizeof *m->s);
    m->n = 0;
    m->has_zero = false;
}

void u64map_free(struct u64map *m) {
    free(m->s);
    *m = (struct u64map){0};
}
