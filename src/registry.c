#include "registry.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_SHIFT 21
/* Records kept for the report; past this, freed buffers' records are dropped (live ones never). */
#define MAX_RECORDS 100000

struct chunk {
    uint64_t key; /* addr >> CHUNK_SHIFT */
    struct chunk *next;
    unsigned n, cap;
    struct ho_buffer **bufs; /* overlapping buffers, sorted by base */
};

static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
static struct chunk **buckets;
static size_t nbuckets, nchunks;
static _Atomic uint64_t lowest = UINT64_MAX, highest;
static uint64_t next_id;
static uint64_t live;
/* Bumped by every change to the set of live buffers (under the write lock): what the launch path
 * cached from a lookup is still true while it has not moved. */
static _Atomic uint64_t generation = 1;
/* Every record, in creation order. */
static struct ho_buffer **records;
static size_t nrecords, records_cap;

const char *ho_buffer_kind_name(enum ho_buffer_kind k) {
    switch (k) {
    case HO_BUF_DEVICE:
        return "device";
    case HO_BUF_ASYNC:
        return "async";
    case HO_BUF_MANAGED:
        return "managed";
    case HO_BUF_HOST:
        return "host";
    case HO_BUF_REGISTERED:
        return "registered";
    case HO_BUF_VMM_APP:
        return "vmm";
    }
    return "unknown";
}

static size_t bucket_of(uint64_t key, size_t n) {
    /* Fibonacci hashing: chunk keys are sequential, this spreads them. */
    return (size_t)((key * 11400714819323198485ull) >> 20) & (n - 1);
}

bool ho_registry_init(void) {
    pthread_rwlock_wrlock(&lock);
    if (buckets == NULL) {
        nbuckets = 4096;
        buckets = calloc(nbuckets, sizeof *buckets);
    }
    bool ok = buckets != NULL;
    pthread_rwlock_unlock(&lock);
    return ok;
}

static void grow(void) {
    size_t n = nbuckets * 2;
    struct chunk **nb = calloc(n, sizeof *nb);
    if (nb == NULL) return; /* longer chains, still correct */
    for (size_t i = 0; i < nbuckets; i++) {
        struct chunk *c = buckets[i];
        while (c != NULL) {
            struct chunk *next = c->next;
            size_t b = bucket_of(c->key, n);
            c->next = nb[b];
            nb[b] = c;
            c = next;
        }
    }
    free(buckets);
    buckets = nb;
    nbuckets = n;
}

static struct chunk *chunk_get(uint64_t key, bool create) {
    size_t b = bucket_of(key, nbuckets);
    for (struct chunk *c = buckets[b]; c != NULL; c = c->next)
        if (c->key == key) return c;
    if (!create) return NULL;
    struct chunk *c = calloc(1, sizeof *c);
    if (c == NULL) return NULL;
    c->key = key;
    c->next = buckets[b];
    buckets[b] = c;
    if (++nchunks > nbuckets) grow();
    return c;
}

static bool chunk_insert(struct chunk *c, struct ho_buffer *buf) {
    if (c->n == c->cap) {
        unsigned cap = c->cap ? c->cap * 2 : 2;
        struct ho_buffer **nb = realloc(c->bufs, cap * sizeof *nb);
        if (nb == NULL) return false;
        c->bufs = nb;
        c->cap = cap;
    }
    unsigned at = c->n;
    while (at > 0 && c->bufs[at - 1]->base > buf->base) {
        c->bufs[at] = c->bufs[at - 1];
        at--;
    }
    c->bufs[at] = buf;
    c->n++;
    return true;
}

static void chunk_erase(uint64_t key, struct ho_buffer *buf) {
    size_t b = bucket_of(key, nbuckets);
    for (struct chunk **pp = &buckets[b]; *pp != NULL; pp = &(*pp)->next) {
        struct chunk *c = *pp;
        if (c->key != key) continue;
        for (unsigned i = 0; i < c->n; i++) {
            if (c->bufs[i] == buf) {
                memmove(&c->bufs[i], &c->bufs[i + 1], (c->n - i - 1) * sizeof *c->bufs);
                c->n--;
                break;
            }
        }
        if (c->n == 0) {
            *pp = c->next;
            free(c->bufs);
            free(c);
            nchunks--;
        }
        return;
    }
}

static void keep_record(struct ho_buffer *b) {
    if (nrecords == records_cap) {
        size_t cap = records_cap ? records_cap * 2 : 1024;
        struct ho_buffer **nr = realloc(records, cap * sizeof *nr);
        if (nr == NULL) return;
        records = nr;
        records_cap = cap;
    }
    records[nrecords++] = b;
}

/* Drops the oldest freed records once there are too many (lock held). */
static void trim_records(void) {
    if (nrecords < MAX_RECORDS) return;
    size_t w = 0;
    size_t drop = nrecords / 2;
    for (size_t r = 0; r < nrecords; r++) {
        struct ho_buffer *b = records[r];
        if (!b->live && drop > 0) {
            free(b);
            drop--;
            continue;
        }
        records[w++] = b;
    }
    nrecords = w;
}

struct ho_buffer *ho_registry_add(uint64_t base, uint64_t size, int device,
                                  enum ho_buffer_kind kind) {
    if (size == 0) return NULL;
    struct ho_buffer *b = calloc(1, sizeof *b);
    if (b == NULL) return NULL;
    b->base = base;
    b->size = size;
    b->device = device;
    b->kind = kind;
    b->live = true;
    pthread_rwlock_wrlock(&lock);
    if (buckets == NULL) {
        pthread_rwlock_unlock(&lock);
        free(b);
        return NULL;
    }
    b->id = ++next_id;
    uint64_t first = base >> CHUNK_SHIFT, last = (base + size - 1) >> CHUNK_SHIFT;
    for (uint64_t k = first; k <= last; k++) {
        struct chunk *c = chunk_get(k, true);
        if (c == NULL || !chunk_insert(c, b)) {
            for (uint64_t u = first; u < k; u++)
                chunk_erase(u, b);
            pthread_rwlock_unlock(&lock);
            free(b);
            return NULL;
        }
    }
    if (base < atomic_load(&lowest)) atomic_store(&lowest, base);
    if (base + size > atomic_load(&highest)) atomic_store(&highest, base + size);
    live++;
    atomic_fetch_add_explicit(&generation, 1, memory_order_relaxed);
    trim_records();
    keep_record(b);
    pthread_rwlock_unlock(&lock);
    return b;
}

/* Removes the first live buffer starting at base that `match` accepts. */
static struct ho_buffer *remove_at(uint64_t base, bool (*match)(const struct ho_buffer *, unsigned),
                                   unsigned arg) {
    pthread_rwlock_wrlock(&lock);
    struct ho_buffer *found = NULL;
    struct chunk *c = buckets != NULL ? chunk_get(base >> CHUNK_SHIFT, false) : NULL;
    for (unsigned i = 0; c != NULL && i < c->n; i++) {
        struct ho_buffer *b = c->bufs[i];
        if (b->base == base && b->live && match(b, arg)) {
            found = b;
            break;
        }
    }
    if (found != NULL) {
        uint64_t first = base >> CHUNK_SHIFT, last = (base + found->size - 1) >> CHUNK_SHIFT;
        for (uint64_t k = first; k <= last; k++)
            chunk_erase(k, found);
        found->live = false;
        live--;
        atomic_fetch_add_explicit(&generation, 1, memory_order_relaxed);
    }
    pthread_rwlock_unlock(&lock);
    return found;
}

static bool kind_in(const struct ho_buffer *b, unsigned kinds) {
    return (kinds & (1u << b->kind)) != 0;
}

static bool managed(const struct ho_buffer *b, unsigned unused) {
    (void)unused;
    return b->engine != NULL;
}

struct ho_buffer *ho_registry_remove(uint64_t base, unsigned kinds) {
    return remove_at(base, kind_in, kinds);
}

struct ho_buffer *ho_registry_remove_managed(uint64_t base) {
    return remove_at(base, managed, 0);
}

int ho_registry_remove_range(uint64_t base, uint64_t size, unsigned kinds,
                             void (*each)(struct ho_buffer *b, void *arg), void *arg) {
    int removed = 0;
    pthread_rwlock_wrlock(&lock);
    uint64_t first = base >> CHUNK_SHIFT, last = (base + size - 1) >> CHUNK_SHIFT;
    for (uint64_t k = first; buckets != NULL && size > 0 && k <= last; k++) {
        struct chunk *c;
        /* Restart the scan of this chunk after each removal: erasing changes its array. */
        while ((c = chunk_get(k, false)) != NULL) {
            struct ho_buffer *hit = NULL;
            for (unsigned i = 0; i < c->n; i++) {
                struct ho_buffer *b = c->bufs[i];
                if (b->live && b->base >= base && b->base < base + size &&
                    (kinds & (1u << b->kind))) {
                    hit = b;
                    break;
                }
            }
            if (hit == NULL) break;
            uint64_t hf = hit->base >> CHUNK_SHIFT, hl = (hit->base + hit->size - 1) >> CHUNK_SHIFT;
            for (uint64_t u = hf; u <= hl; u++)
                chunk_erase(u, hit);
            hit->live = false;
            live--;
            atomic_fetch_add_explicit(&generation, 1, memory_order_relaxed);
            removed++;
            if (each != NULL) each(hit, arg);
        }
    }
    pthread_rwlock_unlock(&lock);
    return removed;
}

void ho_registry_reset(void) {
    /* Called in a fork child, single-threaded: the parent's lock state is irrelevant. */
    pthread_rwlock_init(&lock, NULL);
    for (size_t i = 0; buckets != NULL && i < nbuckets; i++) {
        struct chunk *c = buckets[i];
        while (c != NULL) {
            struct chunk *next = c->next;
            free(c->bufs);
            free(c);
            c = next;
        }
        buckets[i] = NULL;
    }
    nchunks = 0;
    for (size_t r = 0; r < nrecords; r++)
        free(records[r]);
    nrecords = 0;
    live = 0;
    atomic_store(&lowest, UINT64_MAX);
    atomic_store(&highest, 0);
    atomic_fetch_add(&generation, 1);
}

void ho_registry_read_begin(void) {
    pthread_rwlock_rdlock(&lock);
}

void ho_registry_read_end(void) {
    pthread_rwlock_unlock(&lock);
}

bool ho_registry_maybe(uint64_t addr) {
    return addr >= atomic_load_explicit(&lowest, memory_order_relaxed) &&
           addr < atomic_load_explicit(&highest, memory_order_relaxed);
}

struct ho_buffer *ho_registry_lookup_locked(uint64_t addr) {
    if (buckets == NULL) return NULL;
    struct chunk *c = chunk_get(addr >> CHUNK_SHIFT, false);
    if (c == NULL) return NULL;
    for (unsigned i = 0; i < c->n; i++) {
        struct ho_buffer *b = c->bufs[i];
        if (addr < b->base) break;
        if (addr < b->base + b->size) return b;
    }
    return NULL;
}

void ho_registry_bounds(uint64_t *lo, uint64_t *hi, uint64_t *gen) {
    *lo = atomic_load_explicit(&lowest, memory_order_relaxed);
    *hi = atomic_load_explicit(&highest, memory_order_relaxed);
    *gen = atomic_load_explicit(&generation, memory_order_relaxed);
}

void ho_registry_foreach(void (*fn)(const struct ho_buffer *b, void *arg), void *arg) {
    pthread_rwlock_rdlock(&lock);
    for (size_t r = 0; r < nrecords; r++)
        fn(records[r], arg);
    pthread_rwlock_unlock(&lock);
}

uint64_t ho_registry_live_count(void) {
    pthread_rwlock_rdlock(&lock);
    uint64_t n = live;
    pthread_rwlock_unlock(&lock);
    return n;
}
