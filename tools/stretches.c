/* The stretches and the excess (see stretches.h for the model). */
#include "stretches.h"

#include "u64map.h"

#include <stdlib.h>

#define GRANULE (2ull << 20) /* the engine maps whole 2 MiB granules (oracle_input.c) */

struct buf {
    uint64_t bytes;
    uint64_t next; /* the first launch it could be away from: its allocation's, or after a use */
    bool used;     /* a use came before `next`: leaving then takes an eviction */
};

static bool add(struct stretches *g, const struct buf *b, uint64_t hi, bool restores) {
    if (b->next > hi) return true;
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 4096;
        struct stretch *s = realloc(g->s, cap * sizeof *s);
        if (s == NULL) return false;
        g->s = s;
        g->cap = cap;
    }
    g->s[g->n++] = (struct stretch){b->next, hi, b->bytes, 0, b->used, restores};
    return true;
}

/* Whether the engine manages the allocation in a replay (oracle_input.c's test). */
static bool engine_takes(const struct tev *e, uint64_t min_bytes) {
    return !e->managed && e->bytes >= min_bytes;
}

static uint64_t mapped(uint64_t bytes) {
    uint64_t m = (bytes + GRANULE - 1) / GRANULE * GRANULE;
    return m ? m : GRANULE;
}

bool stretches_collect(const struct trace *t, uint64_t budget, uint64_t min_bytes, int64_t *over,
                       struct stretches *g) {
    struct u64map live = {0}, index = {0};
    struct buf *bufs = NULL;
    size_t nbufs = 0, cap = 0;
    bool ok = false;
    uint64_t now = 0, q = 0, v;
    for (size_t i = 0; i < t->n; i++) {
        const struct tev *e = &t->ev[i];
        if (e->kind == TEV_ALLOC) {
            bool takes = engine_takes(e, min_bytes);
            uint64_t bytes = takes ? mapped(e->bytes) : e->bytes;
            if (u64map_put(&live, e->id, bytes)) now += bytes;
            if (!takes) continue;
            if (nbufs == cap) {
                size_t c = cap ? cap * 2 : 1024;
                struct buf *b = realloc(bufs, c * sizeof *b);
                if (b == NULL) goto out;
                bufs = b;
                cap = c;
            }
            bufs[nbufs++] = (struct buf){bytes, q, false};
            u64map_put(&index, e->id, nbufs);
        } else if (e->kind == TEV_FREE) {
            if (u64map_get(&live, e->id, &v)) {
                now -= v;
                u64map_del(&live, e->id);
            }
            if (u64map_get(&index, e->id, &v)) {
                if (q > 0 && !add(g, &bufs[v - 1], q - 1, false)) goto out;
                u64map_del(&index, e->id);
            }
        } else if (e->kind == TEV_LAUNCH) {
            over[q] = (int64_t)now - (int64_t)budget;
            for (uint32_t u = 0; u < e->nuse; u++) {
                if (!u64map_get(&index, t->uses[e->use_at + u], &v)) continue;
                struct buf *b = &bufs[v - 1];
                if (b->next < q && !add(g, b, q - 1, true)) goto out;
                b->next = q + 1;
                b->used = true;
            }
            q++;
        }
    }
    /* Never freed: it could stay away to the end. */
    for (size_t i = 0; i < index.cap; i++)
        if (index.s[i].key != 0 && !add(g, &bufs[index.s[i].value - 1], t->launches - 1, false))
            goto out;
    if (index.has_zero && !add(g, &bufs[index.zero_value - 1], t->launches - 1, false)) goto out;
    ok = true;
out:
    free(bufs);
    u64map_free(&live);
    u64map_free(&index);
    return ok;
}

bool stretches_cap(int64_t *over, const struct stretches *g, size_t nl, uint64_t *uncovered) {
    int64_t *room = calloc(nl + 1, sizeof *room);
    uint64_t worst = 0;
    int64_t can = 0;
    if (room == NULL) return false;
    for (size_t j = 0; j < g->n; j++) {
        room[g->s[j].lo] += (int64_t)g->s[j].bytes;
        room[g->s[j].hi + 1] -= (int64_t)g->s[j].bytes;
    }
    for (size_t p = 0; p < nl; p++) {
        can += room[p];
        if (over[p] > can) {
            if ((uint64_t)(over[p] - can) > worst) worst = (uint64_t)(over[p] - can);
            over[p] = can;
        }
    }
    free(room);
    *uncovered = worst;
    return true;
}

void stretches_free(struct stretches *g) {
    free(g->s);
    *g = (struct stretches){0};
}
