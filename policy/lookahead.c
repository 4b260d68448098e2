/* The lookahead policy (see lookahead.h for what it does and why). */
#include "lookahead_internal.h"
#include "plan.h"

#include <stdlib.h>
#include <string.h>

struct ho_lookahead *ho_la_create(unsigned lead0) {
    struct ho_lookahead *la = calloc(1, sizeof *la);
    if (la == NULL) return NULL;
    la->lead0 = lead0 ? lead0 : 1;
    la->ctx_last = calloc(1u << CTX_BITS, sizeof *la->ctx_last);
    la->budget = UINT64_MAX;
    la->history = la_history_create(); /* none: the first pattern comes a step later */
    /* The maps start empty (zeroed) and grow on their first puts; a put that finds no memory
     * only forgets an entry, which costs a decision, never correctness. */
    if (la->ctx_last == NULL) {
        ho_la_destroy(la);
        return NULL;
    }
    return la;
}

static void pattern_clear(struct pattern *p) {
    free(p->uses);
    free(p->sched_start);
    free(p->sched);
    p->uses = NULL;
    p->sched_start = NULL;
    p->sched = NULL;
    p->n = 0;
    p->valid = false;
    p->trusted = false;
    u64map_clear(&p->first);
    u64map_clear(&p->evict_at);
    u64map_clear(&p->life);
}

void ho_la_destroy(struct ho_lookahead *la) {
    if (la == NULL) return;
    free(la->ctx_last);
    u64map_free(&la->key_of);
    u64map_free(&la->serial_of);
    u64map_free(&la->id_of);
    u64map_free(&la->late);
    free(la->dur);
    u64map_free(&la->bytes_of);
    u64map_free(&la->site_count);
    u64map_free(&la->born);
    u64map_free(&la->dies);
    u64map_free(&la->sig_ord);
    u64map_free(&la->site_ord);
    pattern_clear(&la->pat);
    u64map_free(&la->pat.first);
    u64map_free(&la->pat.evict_at);
    u64map_free(&la->pat.life);
    free(la->rec);
    la_history_destroy(la->history);
    free(la);
}

static unsigned doublings(const struct ho_lookahead *la, uint64_t key) {
    uint64_t v;
    return u64map_get(&la->late, key, &v) ? (unsigned)v : 0;
}

/* The ordinal of `v` in `map` (numbered by first appearance, from 1); 0 when out of memory (a
 * forgotten name costs a decision, never correctness). */
static uint64_t ordinal(struct u64map *map, uint64_t *count, uint64_t v) {
    uint64_t o;
    if (u64map_get(map, v, &o)) return o;
    if (!u64map_put(map, v, *count + 1)) return 0;
    return ++*count;
}

/* The lead in launches, used while kernel durations are unknown: the first lead, doubled per
 * late restore, at most a quarter of a step. */
static unsigned lead_of_key(const struct ho_lookahead *la, uint64_t key) {
    uint64_t lead = (uint64_t)la->lead0 << doublings(la, key);
    uint64_t cap = la->period > 4 ? la->period / 4 : 1;
    return (unsigned)(lead < cap ? lead : (cap > la->lead0 ? cap : la->lead0));
}

void ho_la_alloc(struct ho_lookahead *la, uint64_t id, uint64_t bytes, uint64_t site) {
    /* Outside a step: the buffer's own serial (the allocation order, never its address). */
    uint64_t key = ++la->serial & ~ROLE_BIT;
    site = site != 0 ? ordinal(&la->site_ord, &la->nsite, site) : 0;
    if (la->period != 0 && la->launches >= la->anchor) {
        /* Inside a known step: the buffer is the step's n-th allocation of this size from this
         * site. A step begins with its first launch's index; allocations made after the last
         * launch of a step already belong to the next one. */
        uint64_t into = la->launches - la->anchor, step = into / la->period;
        if (step != la->alloc_step || la->step_allocs == 0) {
            if (step != la->alloc_step) la->step_allocs = 0;
            la->alloc_step = step;
            if (la->step_allocs == 0) la->first_alloc = into % la->period;
        }
        if (la->step_allocs == 0) la->alloc_gen++; /* the per-site counts start afresh */
        uint64_t kind = la_kind(site, bytes), v = 0, n = 0;
        if (u64map_get(&la->site_count, kind, &v) && (v >> 32) == (la->alloc_gen & 0xffffffffu))
            n = v & 0xffffffffu;
        u64map_put(&la->site_count, kind, (la->alloc_gen & 0xffffffffu) << 32 | (n + 1));
        key = la_role_key(kind, n);
        la->step_allocs++;
        u64map_put(&la->born, key, la->launches + 1);
        u64map_del(&la->dies, key);
    }
    if (la->period == 0) la_history_alloc(la, id, la->serial, site, bytes);
    u64map_put(&la->key_of, id, key);
    u64map_put(&la->serial_of, id, la->serial);
    u64map_put(&la->id_of, key, id);
    u64map_put(&la->bytes_of, id, bytes ? bytes : 1);
}

void ho_la_free(struct ho_lookahead *la, uint64_t id) {
    uint64_t key, live;
    if (!u64map_get(&la->key_of, id, &key)) return;
    if (key & ROLE_BIT) u64map_put(&la->dies, key, la->launches + 1);
    uint64_t serial;
    if (la->period == 0 && u64map_get(&la->serial_of, id, &serial)) la_history_free(la, serial);
    u64map_del(&la->key_of, id);
    u64map_del(&la->serial_of, id);
    u64map_del(&la->bytes_of, id);
    if (u64map_get(&la->id_of, key, &live) && live == id) u64map_del(&la->id_of, key);
}

static int by_key_pos(const void *a, const void *b) {
    const struct use *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->pos < y->pos ? -1 : (x->pos > y->pos ? 1 : 0);
}

/* The share of this step's uses (sorted) that the previous pattern also had. */
static double similarity(const struct pattern *old, const struct use *rec, size_t n) {
    if (!old->valid || n == 0) return 0;
    size_t i = 0, j = 0, same = 0;
    while (i < old->n && j < n) {
        int c = by_key_pos(&old->uses[i], &rec[j]);
        if (c == 0) {
            same++;
            i++;
            j++;
        } else if (c < 0) {
            i++;
        } else {
            j++;
        }
    }
    size_t most = old->n > n ? old->n : n;
    return (double)same / (double)most;
}

static uint64_t evict_key(uint64_t key, uint32_t pos) {
    uint64_t k = mix(key) ^ ((uint64_t)pos * 0x9E3779B97F4A7C15ull);
    return k != 0 ? k : 1;
}

/* The step's start times, from the measured durations: false until all but an eighth of the
 * positions have one. Durations arrive once the device has run the launches, so the last ones
 * of a timed step may still be missing when it closes; they count as the mean of the others
 * (a plan in device time one step earlier, rather than one in launches). */
static bool step_times(const struct ho_lookahead *la, uint64_t *t) {
    if (la->dur == NULL || la->dur_period != la->period) return false;
    uint64_t known = 0, sum = 0;
    for (uint64_t q = 0; q < la->period; q++)
        if (la->dur[q] != 0) {
            known++;
            sum += la->dur[q];
        }
    if (known == 0 || known < la->period - la->period / 8) return false;
    uint64_t mean = sum / known ? sum / known : 1;
    t[0] = 0;
    for (uint64_t q = 0; q < la->period; q++)
        t[q + 1] = t[q] + (la->dur[q] != 0 ? la->dur[q] : mean);
    return true;
}

/* Chooses which gaps to spend off the device so that the step fits the budget, and when to
 * prefetch (plan.h). The step's device footprint at each position is estimated from the pattern:
 * a buffer made within the step occupies the device from its allocation to its free (from its
 * first use to its last when those were not seen); one that outlives steps, always. A tenth of
 * the budget is kept back for moves in flight (RESERVE_SHARE). */
static void plan(struct ho_lookahead *la, struct pattern *p) {
    uint64_t period = la->period;
    if (la->budget == UINT64_MAX || period == 0) return;
    int64_t *over = calloc(period + 1, sizeof *over);
    struct ho_gap *gaps = malloc((p->n + 1) * sizeof *gaps);
    uint64_t *t = malloc((period + 1) * sizeof *t);
    if (over == NULL || gaps == NULL || t == NULL) goto out;
    int64_t always = 0;
    size_t ngaps = 0;
    for (size_t i = 0; i < p->n;) {
        size_t j = i;
        while (j < p->n && p->uses[j].key == p->uses[i].key)
            j++;
        uint64_t key = p->uses[i].key, bytes = p->uses[i].bytes;
        bool persistent = (key & ROLE_BIT) == 0;
        unsigned lead = lead_of_key(la, key);
        uint64_t life;
        if (persistent) {
            always += (int64_t)bytes;
        } else if (u64map_get(&p->life, key, &life)) { /* from its allocation to its free */
            over[life >> 32] += (int64_t)bytes;
            over[life & 0xffffffffu] -= (int64_t)bytes;
        } else { /* not seen allocated in the step: from its first use to its last */
            over[p->uses[i].pos] += (int64_t)bytes;
            over[p->uses[j - 1].pos + 1] -= (int64_t)bytes;
        }
        for (size_t k = i; k + 1 < j; k++)
            gaps[ngaps++] = (struct ho_gap){.key = key,
                                            .bytes = bytes,
                                            .from = p->uses[k].pos,
                                            .to = p->uses[k + 1].pos,
                                            .lead = lead};
        if (persistent) /* into the next step */
            gaps[ngaps++] = (struct ho_gap){.key = key,
                                            .bytes = bytes,
                                            .from = p->uses[j - 1].pos,
                                            .to = p->uses[i].pos + period,
                                            .lead = lead};
        i = j;
    }
    int64_t limit = (int64_t)(la->budget - la->budget / RESERVE_SHARE);
    int64_t run = always;
    for (uint64_t q = 0; q < period; q++) {
        run += over[q];
        over[q] = run - limit;
    }
    struct ho_plan_run r = {.npos = period,
                            .wrap = true,
                            .t = step_times(la, t) ? t : NULL,
                            .link_bytes_per_ns = la->link,
                            .over = over,
                            .move_fixed_ns = la->move_fixed,
                            .margin = (int64_t)(la->budget / RESERVE_SHARE)};
    ho_plan_gaps(&r, gaps, ngaps);
    /* The evictions, and the prefetch schedule (CSR by position): a taken gap's restore is
     * issued `lead` launches before the use that closes it. */
    p->sched_start = calloc(period + 1, sizeof *p->sched_start);
    if (p->sched_start == NULL) goto out;
    size_t nsel = 0;
    for (size_t g = 0; g < ngaps; g++) {
        if (!gaps[g].taken) continue;
        u64map_put(&p->evict_at, evict_key(gaps[g].key, (uint32_t)gaps[g].from), 1);
        uint64_t at = (gaps[g].to + period - gaps[g].lead % period) % period;
        p->sched_start[at + 1]++;
        nsel++;
    }
    for (uint64_t q = 0; q < period; q++)
        p->sched_start[q + 1] += p->sched_start[q];
    p->sched = malloc((nsel + 1) * sizeof *p->sched);
    uint32_t *fill = calloc(period, sizeof *fill);
    if (p->sched == NULL || fill == NULL) {
        free(fill);
        free(p->sched);
        p->sched = NULL;
        goto out;
    }
    for (size_t g = 0; g < ngaps; g++) {
        if (!gaps[g].taken) continue;
        uint64_t at = (gaps[g].to + period - gaps[g].lead % period) % period;
        p->sched[p->sched_start[at] + fill[at]++] = gaps[g].key;
    }
    free(fill);
out:
    free(over);
    free(gaps);
    free(t);
}

/* The step that ran launches [end - period, end) is complete: it becomes the pattern. */
void la_close_step(struct ho_lookahead *la, uint64_t end) {
    struct pattern *p = &la->pat;
    uint64_t period = la->period;
    if (la->nrec == 0 || period == 0) goto reset;
    qsort(la->rec, la->nrec, sizeof *la->rec, by_key_pos);
    /* The first step of a period is trusted at once: the launch sequence itself repeated for a
     * whole period before it was adopted (or markers said it). Later steps must look like the
     * step before (the buffers' roles held). */
    bool trusted = !p->valid || similarity(p, la->rec, la->nrec) >= TRUST;
    /* A pattern with less than half this step's uses came from a partial window (the one the
     * period was adopted in): this step is the first whole one, trusted at once like a first. */
    if (p->valid && 2 * p->n < la->nrec) trusted = true;
    pattern_clear(p);
    p->trusted = trusted;
    p->uses = malloc(la->nrec * sizeof *p->uses);
    if (p->uses == NULL) goto reset;
    /* Distinct (key, pos) only: several launches at one position cannot happen, but a buffer
     * used twice by one launch is recorded once already. */
    for (size_t i = 0; i < la->nrec; i++) {
        if (p->n > 0 && p->uses[p->n - 1].key == la->rec[i].key &&
            p->uses[p->n - 1].pos == la->rec[i].pos)
            continue;
        if (p->n == 0 || p->uses[p->n - 1].key != la->rec[i].key)
            u64map_put(&p->first, la->rec[i].key, p->n);
        p->uses[p->n++] = la->rec[i];
    }
    /* Each role's lifetime within the step, where it was seen being allocated in it. */
    uint64_t start = end >= period ? end - period : 0;
    for (size_t i = 0; i < p->n; i++) {
        uint64_t key = p->uses[i].key, b, d;
        if ((key & ROLE_BIT) == 0 || (i > 0 && p->uses[i - 1].key == key)) continue;
        if (!u64map_get(&la->born, key, &b) || b - 1 < start || b - 1 >= end) continue;
        uint64_t born = b - 1 - start, dies = period;
        if (u64map_get(&la->dies, key, &d) && d - 1 >= b - 1 && d - 1 < end) dies = d - 1 - start;
        if (dies > born) u64map_put(&p->life, key, born << 32 | dies);
    }
    p->valid = true;
    plan(la, p);
    la->nrec = 0;
    /* Time the next step when the durations are not all known yet, or have grown old. */
    uint64_t *t = malloc((period + 1) * sizeof *t);
    bool known = t != NULL && step_times(la, t);
    free(t);
    la->timing = !known || la->steps + 1 - la->timed_at >= RETIME_STEPS;
    if (la->timing) la->timed_at = la->steps + 1;
    return;
reset:
    pattern_clear(p);
    la->nrec = 0;
}

void la_record(struct ho_lookahead *la, uint32_t pos, uint64_t key, uint64_t bytes) {
    if (la->nrec == la->caprec) {
        size_t cap = la->caprec ? la->caprec * 2 : 4096;
        struct use *n = realloc(la->rec, cap * sizeof *n);
        if (n == NULL) return;
        la->rec = n;
        la->caprec = cap;
    }
    la->rec[la->nrec++] = (struct use){pos, key, bytes};
}

/* Names buffer id (now keyed by role) by its allocation serial instead, as a buffer made outside
 * a step is. */
static void rekey(struct ho_lookahead *la, uint64_t id, uint64_t key) {
    uint64_t serial, live;
    if ((key & ROLE_BIT) == 0 || !u64map_get(&la->serial_of, id, &serial)) return;
    uint64_t own = serial & ~ROLE_BIT;
    if (!u64map_put(&la->key_of, id, own)) return; /* the key is there: updated in place */
    if (u64map_get(&la->id_of, key, &live) && live == id) u64map_del(&la->id_of, key);
    u64map_put(&la->id_of, own, id);
}

/* The period the live buffers' roles were counted in was not the step (a loop inside it, or the
 * program changed phase): a role is a buffer's order among its step's allocations, so under a
 * period of a few launches buffers allocated in different "steps" shared roles, and their uses
 * merged into one key's (a caching allocator's segments made while a layer loop held the
 * period: on gpt2-1k.segment 244 of 414 segments fell into 13 keys, and the plan saw 22 of
 * their 60 GB). Every live buffer named by a role is named by its own serial again; each one's
 * new name depends on it alone, so the map's slot order (ids are addresses) decides nothing. */
static void rekey_roles(struct ho_lookahead *la) {
    struct u64map *m = &la->key_of;
    for (size_t i = 0; i < m->cap; i++)
        if (m->s[i].key != 0) rekey(la, m->s[i].key, m->s[i].value);
    if (m->has_zero) rekey(la, 0, m->zero_value);
}

static void drop_period(struct ho_lookahead *la) {
    rekey_roles(la);
    /* A period that held for a while and then broke was a loop inside the step (a model's
     * identical layers): the step is longer than everything it held for. */
    if (la->held < INNER_LIMIT * la->period) {
        if (la->held > la->inner) la->inner = la->held;
    } else {
        la->inner = 0; /* it held for many steps: the program changed phase; learn afresh */
    }
    la->held = 0;
    la->period = 0;
    la->candidate = la->confirmed = 0;
    la->mismatches = 0;
    la->nrec = 0;
    pattern_clear(&la->pat);
    la_history_reset(la); /* what follows is recorded afresh, for the next period */
}

/* Learns the period from the launch sequence (when no markers say it). Each launch's context
 * (the last CTX functions) proposes a candidate: the distance to the last launch with the same
 * context. A candidate is then checked at every launch (does this launch repeat the one a period
 * ago?) and adopted once it has held for a whole period. A model's identical layers repeat too,
 * for as long as the layer loop lasts: when an adopted period breaks after holding for a while,
 * that run marks it as a loop inside the step, and only longer candidates are taken afterwards. */
static void detect(struct ho_lookahead *la, uint64_t func) {
    uint64_t i = la->launches;
    la->hist[i & (HIST - 1)] = func;
    uint64_t cand = 0;
    if (i + 1 >= CTX) {
        uint64_t h = 0;
        for (unsigned k = 0; k < CTX; k++)
            h = mix(h ^ la->hist[(i - k) & (HIST - 1)]);
        uint64_t *slot = &la->ctx_last[h & ((1u << CTX_BITS) - 1)];
        if (*slot != 0) cand = i + 1 - *slot;
        *slot = i + 1;
    }
    if (la->period != 0) {
        /* Still repeating? */
        if (i >= la->period && la->hist[(i - la->period) & (HIST - 1)] != func) {
            if (++la->mismatches > MISMATCH_LIMIT) drop_period(la);
        } else {
            la->mismatches = 0;
            la->held++;
        }
        return;
    }
    if (la->candidate != 0) {
        if (la->hist[(i - la->candidate) & (HIST - 1)] != func) {
            la->candidate = 0; /* broken: propose again below */
        } else if (++la->confirmed >= la->candidate) {
            /* Held for a whole period: adopt it; the next launch starts a step. */
            la->period = la->candidate;
            la->anchor = i + 1;
            la->step_allocs = 0;
            la->alloc_step = 0;
            la->first_alloc = UINT64_MAX;
            la->aligned = false;
            la->nrec = 0;
            la->held = 0;
            la_prime(la, i);
            return;
        } else {
            return;
        }
    }
    if (cand >= HIST / 2 || cand < MIN_PERIOD || cand <= la->inner) return;
    la->candidate = cand;
    la->confirmed = 1;
}

void ho_la_step(struct ho_lookahead *la) {
    uint64_t i = la->launches;
    bool primed = false;
    /* What came before the first marker is no step's (the model's weights, made before the loop,
     * at the same launch count as the first step's first allocations). */
    if (la->last_marker == 0 && la->period == 0) la_history_reset(la);
    if (la->last_marker != 0) {
        uint64_t p = i - (la->last_marker - 1);
        if (p > 0 && p < HIST / 2) {
            bool first = la->period == 0; /* nothing to drop, and the history is the step's */
            if (la->period != p && !first) {
                if (la->marker_mode && p < la->period) {
                    /* A step shorter than the one before (a first step that also made the
                     * optimizer's state): its record is whole, each use at its position from
                     * the marker, and is the first pattern of the new length. */
                    pattern_clear(&la->pat);
                } else {
                    drop_period(la);
                }
            }
            la->period = p;
            la->marker_mode = true;
            /* The step the two markers bound is a whole one: planned from at once, as a
             * period found in the launches is (lookahead_history.c). */
            if (first) primed = la_prime_marked(la);
        }
    }
    la->last_marker = i + 1;
    if (la->period != 0) {
        la->anchor = i;
        la->aligned = true;
        if (la->nrec > 0 && !primed) {
            la_close_step(la, i);
            la->steps++;
        }
        la->step_allocs = 0;
        la->alloc_step = 0;
    }
}

/* Steps now begin `shift` launches later than the window just recorded began (where the loop
 * first allocates): the launches from there on are the first part of the step now under way, and
 * their uses are kept, at their positions in it; the ones before belong to the step before and
 * are dropped. The first pattern is then a whole step, a step sooner than if the window's record
 * were dropped. The kept buffers' roles hold: nothing was allocated before the shift, so each
 * one's count from the window's start is its count from the step's. */
static void keep_realigned(struct ho_lookahead *la, uint32_t shift) {
    size_t kept = 0;
    for (size_t k = 0; k < la->nrec; k++)
        if (la->rec[k].pos >= shift) {
            la->rec[kept] = la->rec[k];
            la->rec[kept++].pos -= shift;
        }
    la->nrec = kept;
}

void ho_la_launch(struct ho_lookahead *la, uint64_t func, const uint64_t *ids, size_t n,
                  struct ho_policy_actions *out) {
    out->nevict = out->nrestore = 0;
    func = ordinal(&la->sig_ord, &la->nsig, func);
    if (la->period == 0 && la->history != NULL)
        for (size_t k = 0; k < n; k++) {
            uint64_t serial, bytes = 1;
            if (!u64map_get(&la->serial_of, ids[k], &serial)) continue;
            u64map_get(&la->bytes_of, ids[k], &bytes);
            la_history_use(la, serial, bytes);
        }
    if (!la->marker_mode) detect(la, func);
    uint64_t i = la->launches++;
    if (la->period == 0 || i < la->anchor) return;
    uint64_t period = la->period;
    uint32_t pos = (uint32_t)((i - la->anchor) % period);
    if (pos == 0 && i > la->anchor && !la->marker_mode) {
        if (!la->aligned && la->first_alloc != UINT64_MAX && la->first_alloc != 0) {
            /* The loop allocates in the middle of this window: start steps there instead, so a
             * buffer's whole life falls within one step. This window's record is dropped. */
            la->anchor += la->first_alloc;
            la->aligned = true;
            keep_realigned(la, (uint32_t)la->first_alloc);
            la->step_allocs = 0;
            la->alloc_step = UINT64_MAX;
            pos = (uint32_t)((i - la->anchor) % period);
        } else {
            la->aligned = true;
            la_close_step(la, i);
            la->steps++;
        }
    }
    la->pos = pos;
    struct pattern *p = &la->pat;
    for (size_t k = 0; k < n; k++) {
        uint64_t key;
        uint64_t bytes = 1, planned;
        if (!u64map_get(&la->key_of, ids[k], &key)) continue;
        u64map_get(&la->bytes_of, ids[k], &bytes);
        la_record(la, pos, key, bytes);
        if (p->trusted && u64map_get(&p->evict_at, evict_key(key, pos), &planned) &&
            out->nevict < HO_LA_MAX_ACTIONS)
            out->evict[out->nevict++] = ids[k];
    }
    if (p->valid && p->trusted && p->sched != NULL) {
        /* What must start coming back now to be there `lead` launches from here. */
        uint32_t next = (pos + 1) % (uint32_t)period;
        for (uint32_t s = p->sched_start[next]; s < p->sched_start[next + 1]; s++) {
            uint64_t id;
            if (u64map_get(&la->id_of, p->sched[s], &id) && out->nrestore < HO_LA_MAX_ACTIONS)
                out->restore[out->nrestore++] = id;
        }
    }
}

void ho_la_set_budget(struct ho_lookahead *la, uint64_t bytes) {
    la->budget = bytes;
}

void ho_la_late(struct ho_lookahead *la, uint64_t id) {
    uint64_t key;
    if (!u64map_get(&la->key_of, id, &key)) return;
    unsigned d = doublings(la, key);
    if (d < MAX_DOUBLINGS) u64map_put(&la->late, key, d + 1);
}

uint64_t ho_la_launches(const struct ho_lookahead *la) {
    return la->launches;
}

bool ho_la_wants_timing(const struct ho_lookahead *la) {
    return la->period != 0 && la->timing;
}

void ho_la_duration(struct ho_lookahead *la, uint64_t launch, uint64_t ns) {
    if (la->period == 0 || ns == 0) return;
    if (la->dur_period != la->period) {
        free(la->dur);
        la->dur = calloc(la->period, sizeof *la->dur);
        la->dur_period = la->dur != NULL ? la->period : 0;
        if (la->dur == NULL) return;
    }
    /* Durations arrive after the launches ran, possibly once a later step has begun: steps are a
     * period apart, so an earlier launch's position counts back from the anchor. */
    uint64_t pos = launch >= la->anchor
                       ? (launch - la->anchor) % la->period
                       : (la->period - (la->anchor - launch) % la->period) % la->period;
    la->dur[pos] = ns;
}

void ho_la_set_move_fixed(struct ho_lookahead *la, uint64_t ns) {
    la->move_fixed = ns;
}

void ho_la_set_link(struct ho_lookahead *la, double bytes_per_s) {
    la->link = bytes_per_s > 0 ? bytes_per_s / 1e9 : 0;
}

bool ho_la_predicts(const struct ho_lookahead *la) {
    return la->period != 0 && la->pat.valid && la->pat.trusted;
}

uint64_t ho_la_next_use(const struct ho_lookahead *la, uint64_t id) {
    uint64_t key, at;
    if (!ho_la_predicts(la) || !u64map_get(&la->key_of, id, &key) ||
        !u64map_get(&la->pat.first, key, &at))
        return HO_NEXT_USE_UNKNOWN; /* nothing says it will be needed */
    const struct pattern *p = &la->pat;
    uint32_t cur = (uint32_t)la->pos;
    for (size_t i = at; i < p->n && p->uses[i].key == key; i++)
        if (p->uses[i].pos > cur) return p->uses[i].pos - cur;
    /* No use left in this step: one that lives across steps comes back at its first use in the
     * next; one made within the step is dead (it will be freed). */
    if ((key & ROLE_BIT) == 0) return p->uses[at].pos + la->period - cur;
    return HO_NEXT_USE_NEVER;
}

uint64_t ho_la_period(const struct ho_lookahead *la) {
    return la->period;
}

uint64_t ho_la_steps(const struct ho_lookahead *la) {
    return la->steps;
}

unsigned ho_la_lead_of(const struct ho_lookahead *la, uint64_t id) {
    uint64_t key;
    return u64map_get(&la->key_of, id, &key) ? lead_of_key(la, key) : la->lead0;
}
