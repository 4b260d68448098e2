/* What happened before the lookahead policy knew its step, and the first pattern made from it.
 *
 * A period is adopted once it has held for a whole period (lookahead.c, detect): the launches
 * that proved it are a whole step already. Without them the policy would start recording at
 * adoption, from wherever in the step that falls, then realign on the loop's first allocation
 * and record a whole step before it could plan: on the recorded Llama-class per-tensor trace,
 * adopted 2.8 steps in, its first plan came 4.9 steps in. So while no period is known, the policy
 * keeps the recent allocations, frees and uses (by allocation serial, which never changes, as a
 * buffer's address may be reused). At adoption it names them by role as if the period had been
 * known all along, plans from the last whole step before the step under way, and carries the
 * step under way on from its own first allocation.
 *
 * Bounds: HISTORY_USES uses and HISTORY_EVENTS allocations and frees (3 MiB and 1.25 MiB). A
 * step whose history no longer fits (more than half the uses or events of the rings between the
 * two steps' starts) is primed from nothing: the policy records and plans a step later, as
 * before. The rings are emptied at adoption and when a period is dropped, and are filled only
 * while no period is known (under step markers, until the second one gives it). The cost on the
 * launch path while they are: one map lookup and one ring store per buffer a launch uses, and
 * one store per allocation or free; once a period is known, none. */
#include "lookahead_internal.h"

#include <stdlib.h>

#define HISTORY_USES   (1u << 17)
#define HISTORY_EVENTS (1u << 15)

struct hist_use {
    uint64_t launch, serial, bytes;
};

struct hist_event {
    uint64_t launch; /* launches seen when it happened: it came before launch `launch` */
    uint64_t serial, id, site, bytes;
    bool freed; /* a free (of serial), else an allocation */
};

struct la_history {
    struct hist_use *use;
    struct hist_event *ev;
    uint64_t nuse, nev; /* appended since the rings were last emptied */
    uint64_t since;     /* the launch they were last emptied at: nothing before it is held */
};

struct la_history *la_history_create(void) {
    struct la_history *h = calloc(1, sizeof *h);
    if (h == NULL) return NULL;
    h->use = malloc(HISTORY_USES * sizeof *h->use);
    h->ev = malloc(HISTORY_EVENTS * sizeof *h->ev);
    if (h->use == NULL || h->ev == NULL) {
        la_history_destroy(h);
        return NULL;
    }
    return h;
}

void la_history_destroy(struct la_history *h) {
    if (h == NULL) return;
    free(h->use);
    free(h->ev);
    free(h);
}

void la_history_reset(struct ho_lookahead *la) {
    struct la_history *h = la->history;
    if (h == NULL) return;
    h->nuse = h->nev = 0;
    h->since = la->launches;
}

static void event(struct ho_lookahead *la, struct hist_event e) {
    struct la_history *h = la->history;
    if (h == NULL) return;
    h->ev[h->nev++ % HISTORY_EVENTS] = e;
}

void la_history_alloc(struct ho_lookahead *la, uint64_t id, uint64_t serial, uint64_t site,
                      uint64_t bytes) {
    event(la, (struct hist_event){la->launches, serial, id, site, bytes, false});
}

void la_history_free(struct ho_lookahead *la, uint64_t serial) {
    event(la, (struct hist_event){la->launches, serial, 0, 0, 0, true});
}

void la_history_use(struct ho_lookahead *la, uint64_t serial, uint64_t bytes) {
    struct la_history *h = la->history;
    h->use[h->nuse++ % HISTORY_USES] = (struct hist_use){la->launches, serial, bytes};
}

/* Whether a ring holds everything from launch `from` on: either nothing was overwritten, or the
 * oldest entry it holds is from an earlier launch. */
static bool holds_from(uint64_t n, uint64_t cap, uint64_t oldest_launch, uint64_t from) {
    return n <= cap || oldest_launch < from;
}

static uint64_t first_held(uint64_t n, uint64_t cap) {
    return n > cap ? n - cap : 0;
}

/* Names the allocations of [from, to) by role, counting each kind from `from` (as ho_la_alloc
 * counts from a step's start), into `role` (serial -> key), with their births and deaths in
 * la->born and la->dies. Returns how many it named; `counts` ends as kind -> count. */
static uint64_t name_roles(struct ho_lookahead *la, uint64_t from, uint64_t to, struct u64map *role,
                           struct u64map *counts) {
    struct la_history *h = la->history;
    uint64_t named = 0;
    u64map_clear(role);
    u64map_clear(counts);
    for (uint64_t k = first_held(h->nev, HISTORY_EVENTS); k < h->nev; k++) {
        const struct hist_event *e = &h->ev[k % HISTORY_EVENTS];
        if (e->launch < from || e->launch >= to) continue;
        uint64_t key;
        if (e->freed) {
            if (u64map_get(role, e->serial, &key)) u64map_put(&la->dies, key, e->launch + 1);
            continue;
        }
        uint64_t kind = la_kind(e->site, e->bytes), n = 0;
        u64map_get(counts, kind, &n);
        u64map_put(counts, kind, n + 1);
        key = la_role_key(kind, n);
        u64map_put(role, e->serial, key);
        u64map_put(&la->born, key, e->launch + 1);
        u64map_del(&la->dies, key);
        named++;
    }
    return named;
}

/* Records the uses of launches [from, to) at their positions from `from`, keyed by role where
 * `role` names them, else by serial (as a buffer made outside a step is). */
static void record_uses(struct ho_lookahead *la, uint64_t from, uint64_t to,
                        const struct u64map *role) {
    struct la_history *h = la->history;
    la->nrec = 0;
    for (uint64_t k = first_held(h->nuse, HISTORY_USES); k < h->nuse; k++) {
        const struct hist_use *u = &h->use[k % HISTORY_USES];
        if (u->launch < from || u->launch >= to) continue;
        uint64_t key;
        if (!u64map_get(role, u->serial, &key)) key = u->serial & ~ROLE_BIT;
        la_record(la, (uint32_t)(u->launch - from), key, u->bytes);
    }
}

/* The live buffers allocated in the step under way take their roles, and the per-kind counts
 * go on from there for the step's later allocations (ho_la_alloc). */
static void rename_live(struct ho_lookahead *la, uint64_t from, const struct u64map *role,
                        const struct u64map *counts, uint64_t named) {
    struct la_history *h = la->history;
    for (uint64_t k = first_held(h->nev, HISTORY_EVENTS); k < h->nev; k++) {
        const struct hist_event *e = &h->ev[k % HISTORY_EVENTS];
        uint64_t key, serial, old, live;
        if (e->launch < from || e->freed || !u64map_get(role, e->serial, &key)) continue;
        if (!u64map_get(&la->serial_of, e->id, &serial) || serial != e->serial) continue;
        if (u64map_get(&la->key_of, e->id, &old) && u64map_get(&la->id_of, old, &live) &&
            live == e->id)
            u64map_del(&la->id_of, old);
        u64map_put(&la->key_of, e->id, key);
        u64map_put(&la->id_of, key, e->id);
    }
    la->alloc_gen++;
    uint64_t gen = la->alloc_gen & 0xffffffffu;
    for (size_t i = 0; i < counts->cap; i++)
        if (counts->s[i].key != 0)
            u64map_put(&la->site_count, counts->s[i].key, gen << 32 | counts->s[i].value);
    la->step_allocs = named;
    la->alloc_step = 0;
    la->first_alloc = 0;
}

/* Plans from the whole step [a - period, a) and names the step under way, [a, i + 1) so far
 * (none of it when i + 1 == a), when the history holds them. */
static bool prime_from(struct ho_lookahead *la, uint64_t a, uint64_t i) {
    struct la_history *h = la->history;
    uint64_t period = la->period;
    if (a < period || a - period < h->since || h->nuse == 0) return false;
    const struct hist_use *ou = &h->use[first_held(h->nuse, HISTORY_USES) % HISTORY_USES];
    const struct hist_event *oe = &h->ev[first_held(h->nev, HISTORY_EVENTS) % HISTORY_EVENTS];
    if (!holds_from(h->nuse, HISTORY_USES, ou->launch, a - period) ||
        !holds_from(h->nev, HISTORY_EVENTS, oe->launch, a - period))
        return false;
    struct u64map role = {0}, counts = {0};
    /* The whole step before the one under way: its pattern, and a plan from it. */
    name_roles(la, a - period, a, &role, &counts);
    record_uses(la, a - period, a, &role);
    la->anchor = a - period;
    la_close_step(la, a);
    la->steps++;
    /* The step under way, from its first allocation to now (launch i's uses are recorded by
     * ho_la_launch as it goes on, under the names given here). */
    uint64_t named = name_roles(la, a, i + 1, &role, &counts);
    record_uses(la, a, i, &role);
    rename_live(la, a, &role, &counts, named);
    la->anchor = a;
    la->aligned = true;
    u64map_free(&role);
    u64map_free(&counts);
    return la->pat.valid;
}

bool la_prime(struct ho_lookahead *la, uint64_t i) {
    struct la_history *h = la->history;
    uint64_t period = la->period;
    bool primed = false;
    if (h == NULL || period == 0 || i + 1 < period) goto out;
    /* The step under way began with the first allocation of the window that proved the period. */
    uint64_t a = UINT64_MAX;
    for (uint64_t k = first_held(h->nev, HISTORY_EVENTS); k < h->nev; k++) {
        const struct hist_event *e = &h->ev[k % HISTORY_EVENTS];
        if (!e->freed && e->launch + period > i && e->launch <= i) {
            a = e->launch;
            break;
        }
    }
    /* None (a caching allocator's segments, made once): any phase is a step; the one that
     * proved the period is the last whole one, and the next launch starts the next. */
    if (a == UINT64_MAX) a = i + 1;
    primed = prime_from(la, a, i);
out:
    la_history_reset(la);
    return primed;
}

bool la_prime_marked(struct ho_lookahead *la) {
    bool primed =
        la->history != NULL && la->period != 0 && prime_from(la, la->launches, la->launches - 1);
    la_history_reset(la);
    return primed;
}
