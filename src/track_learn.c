/* Descriptors and pointer arrays learnt from the calls that make them (track_learn.h). Both
 * tables are read by launches (read locks, taken only when a launch has a parameter large
 * enough to hold a descriptor, or uses a buffer known to hold pointers) and written by the
 * calls that teach them. */
#include "track_learn.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------- tensor maps */

/* Open addressing by a hash of the 128 bytes; a full table overwrites the slot a probe ends
 * on (the oldest descriptors of a long run fall out: a launch with one is then unattributed if
 * it is a 128-byte parameter, see track.c). */
#define TMAP_SLOTS (1u << 16)
#define TMAP_PROBE 16

struct tmap_slot {
    uint64_t key; /* 0: empty */
    uint64_t addr;
};

static pthread_rwlock_t tmap_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct tmap_slot *tmaps;
static _Atomic bool tmaps_known;

static uint64_t tmap_key(const unsigned char *p) {
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < 16; i++) {
        uint64_t w;
        memcpy(&w, p + 8 * i, sizeof w);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
    }
    return h != 0 ? h : 1;
}

void ho_learn_tmap(const void *map, uint64_t addr) {
    uint64_t key = tmap_key(map);
    pthread_rwlock_wrlock(&tmap_lock);
    if (tmaps == NULL) tmaps = calloc(TMAP_SLOTS, sizeof *tmaps);
    if (tmaps != NULL) {
        size_t at = key & (TMAP_SLOTS - 1), end = at;
        for (size_t i = 0; i < TMAP_PROBE; i++) {
            size_t s = (at + i) & (TMAP_SLOTS - 1);
            end = s;
            if (tmaps[s].key == 0 || tmaps[s].key == key) break;
        }
        tmaps[end] = (struct tmap_slot){key, addr};
        atomic_store_explicit(&tmaps_known, true, memory_order_release);
    }
    pthread_rwlock_unlock(&tmap_lock);
}

bool ho_learn_tmaps_known(void) {
    return atomic_load_explicit(&tmaps_known, memory_order_acquire);
}

bool ho_learn_tmap_lookup(const unsigned char *p, uint64_t *addr) {
    uint64_t key = tmap_key(p);
    bool found = false;
    pthread_rwlock_rdlock(&tmap_lock);
    for (size_t i = 0; tmaps != NULL && i < TMAP_PROBE && !found; i++) {
        const struct tmap_slot *s = &tmaps[(key + i) & (TMAP_SLOTS - 1)];
        if (s->key == 0) break;
        if (s->key == key) {
            *addr = s->addr;
            found = true;
        }
    }
    pthread_rwlock_unlock(&tmap_lock);
    return found;
}

/* ------------------------------------------------------------------------- pointer arrays */

struct ptr_array {
    uint64_t buffer_id;
    size_t n;
    uint64_t *addrs;
    struct ptr_array *next;
};

#define PTRS_MAX 4096 /* addresses remembered per array */

static pthread_rwlock_t ptrs_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct ptr_array *arrays;
static _Atomic bool ptrs_known;

bool ho_learn_ptrs_known(void) {
    return atomic_load_explicit(&ptrs_known, memory_order_relaxed);
}

static struct ptr_array *array_of(uint64_t id) {
    for (struct ptr_array *a = arrays; a != NULL; a = a->next)
        if (a->buffer_id == id) return a;
    return NULL;
}

void ho_learn_copy_in(uint64_t dst, const void *src, size_t bytes) {
    if (src == NULL || bytes < 8 || bytes > HO_LEARN_COPY_MAX || !ho_registry_maybe(dst)) return;
    uint64_t found[256];
    size_t nfound = 0;
    uint64_t lo, hi, gen;
    ho_registry_read_begin();
    struct ho_buffer *b = ho_registry_lookup_locked(dst);
    ho_registry_bounds(&lo, &hi, &gen);
    const unsigned char *p = src;
    for (size_t off = 0; b != NULL && off + 8 <= bytes && nfound < 256; off += 8) {
        uint64_t v;
        memcpy(&v, p + off, sizeof v);
        if (v < lo || v >= hi) continue;
        struct ho_buffer *t = ho_registry_lookup_locked(v);
        if (t != NULL && t != b) found[nfound++] = v;
    }
    if (b == NULL || (nfound == 0 && !atomic_load(&b->holds_ptrs))) {
        ho_registry_read_end();
        return;
    }
    pthread_rwlock_wrlock(&ptrs_lock);
    struct ptr_array *a = array_of(b->id);
    if (a == NULL && (a = calloc(1, sizeof *a)) != NULL) {
        a->buffer_id = b->id;
        a->next = arrays;
        arrays = a;
    }
    if (a != NULL) {
        /* A copy to the array's start rewrites it; one elsewhere adds to what it holds. */
        if (dst == b->base) a->n = 0;
        if (a->addrs == NULL) a->addrs = malloc(PTRS_MAX * sizeof *a->addrs);
        for (size_t i = 0; a->addrs != NULL && i < nfound && a->n < PTRS_MAX; i++)
            a->addrs[a->n++] = found[i];
        atomic_store(&b->holds_ptrs, a->n > 0);
        if (a->n > 0) atomic_store(&ptrs_known, true);
    }
    pthread_rwlock_unlock(&ptrs_lock);
    ho_registry_read_end();
}

void ho_learn_ptrs_of(struct ho_buffer *b, void (*fn)(uint64_t addr, void *arg), void *arg) {
    uint64_t copy[64];
    size_t n = 0, done = 0;
    /* The callback may grow the caller's set (it allocates): call it outside the lock, in
     * batches. */
    for (;;) {
        pthread_rwlock_rdlock(&ptrs_lock);
        const struct ptr_array *a = array_of(b->id);
        n = 0;
        for (size_t i = done; a != NULL && i < a->n && n < 64; i++)
            copy[n++] = a->addrs[i];
        pthread_rwlock_unlock(&ptrs_lock);
        for (size_t i = 0; i < n; i++)
            fn(copy[i], arg);
        done += n;
        if (n < 64) break;
    }
}

void ho_learn_reset(void) {
    pthread_rwlock_init(&tmap_lock, NULL);
    pthread_rwlock_init(&ptrs_lock, NULL);
    tmaps = NULL; /* the parent's tables are left behind in a fork child */
    arrays = NULL;
    atomic_store(&tmaps_known, false);
    atomic_store(&ptrs_known, false);
}
