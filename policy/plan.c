/* The gap planner (see plan.h for what it decides and why). */
#include "plan.h"

#include <stdlib.h>
#include <string.h>

/* Device time at the start of position q (which may lie in the next step when the run wraps),
 * or q itself without times. */
static uint64_t at(const struct ho_plan_run *r, uint64_t q) {
    if (r->t == NULL) return q;
    return (q / r->npos) * r->t[r->npos] + r->t[q % r->npos];
}

static bool timed(const struct ho_plan_run *r) {
    return r->t != NULL && r->link_bytes_per_ns > 0;
}

/* The time a restore of g needs, ns. */
static uint64_t transfer_ns(const struct ho_plan_run *r, const struct ho_gap *g) {
    double ns = (double)g->bytes / r->link_bytes_per_ns;
    return (uint64_t)(ns * 9.0 / 8.0) + 1;
}

/* The fewest launches ahead of g->to whose device time covers `ns` (at least one). */
static unsigned lead_for(const struct ho_plan_run *r, const struct ho_gap *g, uint64_t ns) {
    uint64_t end = at(r, g->to), lead = 1;
    while (g->to - lead > g->from && end - at(r, g->to - lead) < ns)
        lead++;
    return lead > UINT32_MAX ? UINT32_MAX : (unsigned)lead;
}

/* Whether g's bytes take the link at least as long as a round trip's fixed driver time. */
static bool worth_moving(const struct ho_plan_run *r, const struct ho_gap *g) {
    double rate = r->link_bytes_per_ns > 0 ? r->link_bytes_per_ns : 55.0;
    return r->move_fixed_ns == 0 || (double)g->bytes >= rate * (double)r->move_fixed_ns;
}

static uint64_t length(const struct ho_plan_run *r, const struct ho_gap *g) {
    return at(r, g->to) - at(r, g->from + 1);
}

static const struct ho_plan_run *sort_run; /* qsort has no context argument */

static int by_length_desc(const void *a, const void *b) {
    const struct ho_gap *x = a, *y = b;
    uint64_t lx = length(sort_run, x), ly = length(sort_run, y);
    if (lx != ly) return lx > ly ? -1 : 1;
    if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->from < y->from ? -1 : (x->from > y->from ? 1 : 0);
}

static int by_deadline_desc(const void *a, const void *b) {
    const struct ho_gap *x = *(const struct ho_gap *const *)a,
                        *y = *(const struct ho_gap *const *)b;
    uint64_t dx = at(sort_run, x->to), dy = at(sort_run, y->to);
    if (dx != dy) return dx > dy ? -1 : 1;
    return x->key < y->key ? -1 : (x->key > y->key ? 1 : 0);
}

/* Restores share the link: latest deadline first, each one finishes before the next one (in
 * deadline order) starts, so the leads account for the restores queued behind each other. */
static void share_link(const struct ho_plan_run *r, struct ho_gap *gaps, size_t n, size_t taken) {
    struct ho_gap **order = malloc((taken + 1) * sizeof *order);
    if (order == NULL) return; /* the leads stay as each gap alone needs them */
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (gaps[i].taken && !gaps[i].final) order[k++] = &gaps[i];
    sort_run = r;
    qsort(order, k, sizeof *order, by_deadline_desc);
    uint64_t cursor = UINT64_MAX;
    for (size_t i = 0; i < k; i++) {
        struct ho_gap *g = order[i];
        uint64_t deadline = at(r, g->to), finish = deadline < cursor ? deadline : cursor;
        uint64_t need = transfer_ns(r, g);
        uint64_t start = finish > need ? finish - need : 0;
        g->lead = lead_for(r, g, deadline - start);
        cursor = start;
    }
    free(order);
}

/* The first position at or after `from` whose start is at least `t_ns`. */
static uint64_t position_at(const struct ho_plan_run *r, uint64_t from, uint64_t limit,
                            uint64_t t_ns) {
    uint64_t q = from;
    while (q < limit && at(r, q) < t_ns)
        q++;
    return q;
}

static int by_leave_time(const void *a, const void *b) {
    const struct ho_gap *x = *(const struct ho_gap *const *)a,
                        *y = *(const struct ho_gap *const *)b;
    uint64_t tx = at(sort_run, x->from + 1), ty = at(sort_run, y->from + 1);
    if (tx != ty) return tx < ty ? -1 : 1;
    return x->key < y->key ? -1 : (x->key > y->key ? 1 : 0);
}

/* Evictions share the other direction of the link, first come first served in the order the
 * buffers' last uses run: a buffer is away only once its copy is through. Sets each taken gap's
 * `away` (the first position it no longer occupies the device). */
static void queue_evictions(const struct ho_plan_run *r, struct ho_gap *gaps, size_t n) {
    struct ho_gap **order = malloc((n + 1) * sizeof *order);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (gaps[i].taken) {
            gaps[i].away = gaps[i].from + 1;
            if (order != NULL) order[k++] = &gaps[i];
        }
    if (order == NULL || !timed(r)) {
        free(order);
        return;
    }
    sort_run = r;
    qsort(order, k, sizeof *order, by_leave_time);
    uint64_t link_free = 0;
    for (size_t i = 0; i < k; i++) {
        struct ho_gap *g = order[i];
        uint64_t start = at(r, g->from + 1);
        if (link_free > start) start = link_free;
        link_free = start + transfer_ns(r, g);
        g->away = position_at(r, g->from + 1, g->to, link_free);
    }
    free(order);
}

/* Takes gap g if it covers a position still over by more than `above`: lowers `over` where it
 * is away. */
static bool take(const struct ho_plan_run *r, struct ho_gap *g, uint64_t away, unsigned lead,
                 int64_t above, size_t *positive) {
    if (g->to < (uint64_t)lead + 1 || away >= g->to - lead) return false;
    uint64_t hi = g->to - lead; /* away during [away, hi) */
    bool helps = false;
    for (uint64_t q = away; q < hi && !helps; q++)
        helps = r->over[q % r->npos] > above;
    if (!helps) return false;
    for (uint64_t q = away; q < hi; q++) {
        int64_t *o = &r->over[q % r->npos];
        bool was = *o > 0;
        *o -= (int64_t)g->bytes;
        if (was && *o <= 0) (*positive)--;
    }
    g->lead = lead;
    g->away = away;
    g->taken = true;
    return true;
}

/* Whether some position is over by more than `above`. */
static bool any_over(const struct ho_plan_run *r, int64_t above) {
    for (uint64_t q = 0; q < r->npos; q++)
        if (r->over[q] > above) return true;
    return false;
}

#define ROUNDS 4  /* times the queues are settled and the remaining excess covered again */
#define TRIES  16 /* times the infeasible gaps are thinned within one round */

static int by_length_asc_ptr(const void *a, const void *b) {
    return -by_length_desc(*(const struct ho_gap *const *)a, *(const struct ho_gap *const *)b);
}

/* With the taken gaps' copies queued on the link, some may no longer be away at all. Drops the
 * shorter half of those (at least one) and queues again, until every taken gap is away for a
 * while: when the link is oversubscribed, the gaps it can carry are kept rather than all lost. */
static size_t settle_queues(const struct ho_plan_run *r, struct ho_gap *gaps, size_t n,
                            size_t taken) {
    struct ho_gap **bad = malloc((n + 1) * sizeof *bad);
    for (int t = 0; t < TRIES && taken > 0; t++) {
        share_link(r, gaps, n, taken);
        queue_evictions(r, gaps, n);
        size_t nbad = 0;
        for (size_t i = 0; i < n; i++) {
            struct ho_gap *g = &gaps[i];
            if (g->taken && g->away >= g->to - g->lead) {
                if (bad != NULL) bad[nbad] = g;
                nbad++;
            }
        }
        if (nbad == 0) break;
        size_t drop = bad != NULL && t + 1 < TRIES ? (nbad + 1) / 2 : nbad;
        if (bad != NULL) {
            sort_run = r;
            qsort(bad, nbad, sizeof *bad, by_length_asc_ptr);
            for (size_t i = 0; i < drop; i++) {
                bad[i]->taken = false;
                bad[i]->rejected = true;
            }
        } else { /* no memory to rank them: drop every infeasible one */
            for (size_t i = 0; i < n; i++)
                if (gaps[i].taken && gaps[i].away >= gaps[i].to - gaps[i].lead) {
                    gaps[i].taken = false;
                    gaps[i].rejected = true;
                }
        }
        taken -= drop;
    }
    free(bad);
    return taken;
}

/* Drops the taken gaps the budget no longer needs: those without which every position they keep
 * their buffer away would still be within it. Longest gaps first takes a long gap wherever it
 * covers a position still over, however little of its bytes that needs; the gaps taken after it
 * may cover the same positions again, and the first is then bytes on the link for nothing. The
 * shortest go first (their restores are the most likely to be late), the fewest bytes first
 * among equals. A dropped gap only frees the link, so the leads and departures the others were
 * given still hold. On the policy benchmark (docs/policy-benchmark.md, sixth round) lookahead's
 * steady step was shorter on 47 of 84 rows (up to 28%, llama-4k.segment pcie5 80%) and longer on
 * 8 (up to 33%, llama-32k.segment c2c 80%); dropping the largest first instead did as well on the
 * whole table and worse on the tuning rows. */
static size_t prune(const struct ho_plan_run *r, struct ho_gap *gaps, size_t n, size_t taken) {
    struct ho_gap **order = malloc((taken + 1) * sizeof *order);
    if (order == NULL) return taken;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (gaps[i].taken) order[k++] = &gaps[i];
    sort_run = r;
    qsort(order, k, sizeof *order, by_length_asc_ptr);
    for (size_t i = 0; i < k; i++) {
        struct ho_gap *g = order[i];
        bool needed = false;
        for (uint64_t q = g->away; q < g->to - g->lead && !needed; q++)
            needed = r->over[q % r->npos] + (int64_t)g->bytes > 0;
        if (needed) continue;
        for (uint64_t q = g->away; q < g->to - g->lead; q++)
            r->over[q % r->npos] += (int64_t)g->bytes;
        g->taken = false;
        taken--;
    }
    free(order);
    return taken;
}

static size_t plan_once(const struct ho_plan_run *r, struct ho_gap *gaps, size_t n) {
    int64_t *base = malloc(r->npos * sizeof *base);
    if (base == NULL) return 0;
    memcpy(base, r->over, r->npos * sizeof *base);
    sort_run = r;
    qsort(gaps, n, sizeof *gaps, by_length_desc);
    for (size_t i = 0; i < n; i++)
        gaps[i].taken = gaps[i].rejected = false;
    size_t taken = 0;
    for (int round = 0; round < ROUNDS; round++) {
        size_t positive = 0;
        for (uint64_t q = 0; q < r->npos; q++)
            if (r->over[q] > 0) positive++;
        /* Cover what is still over, longest gaps first; a new gap's own copy delays when it is
         * away, and its restore needs its own transfer time. The buffers worth their move's
         * fixed cost first; then the others, where a position is still over the budget itself
         * (not only into the margin): an excess the plan leaves uncovered is not avoided, the
         * engine makes the room when an allocation or a restore needs it, with no lead, and the
         * buffer it took comes back on demand. The margin is not worth their fixed costs. */
        for (int pass = 0; pass < 2 && positive > 0; pass++) {
            if (pass == 1 && !any_over(r, r->margin)) break;
            for (size_t i = 0; i < n && positive > 0; i++) {
                struct ho_gap *g = &gaps[i];
                bool worth = worth_moving(r, g);
                if (g->taken || g->rejected || (pass == 0 && !worth) || (pass == 1 && worth))
                    continue;
                unsigned lead = g->final   ? 0
                                : timed(r) ? lead_for(r, g, transfer_ns(r, g))
                                           : (g->lead ? g->lead : 1);
                uint64_t away = g->from + 1;
                if (timed(r))
                    away =
                        position_at(r, g->from + 1, g->to, at(r, g->from + 1) + transfer_ns(r, g));
                if (take(r, g, away, lead, pass == 0 ? 0 : r->margin, &positive)) taken++;
            }
        }
        if (!timed(r) || taken == 0) break;
        /* Settle both queues, then recount the excess with the times they give. */
        taken = settle_queues(r, gaps, n, taken);
        memcpy(r->over, base, r->npos * sizeof *base);
        for (size_t i = 0; i < n; i++) {
            struct ho_gap *g = &gaps[i];
            if (!g->taken) continue;
            for (uint64_t q = g->away; q < g->to - g->lead; q++)
                r->over[q % r->npos] -= (int64_t)g->bytes;
        }
        bool over = false;
        for (uint64_t q = 0; q < r->npos && !over; q++)
            over = r->over[q] > 0;
        if (!over) break;
    }
    taken = prune(r, gaps, n, taken);
    free(base);
    return taken;
}

/* Whether the link could not carry some gap the plan wanted (settle_queues dropped it). */
static bool any_rejected(const struct ho_gap *gaps, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (gaps[i].rejected) return true;
    return false;
}

#define STRETCHES 6 /* times a plan the link cannot carry is tried on a longer step */

/* When the bytes above the budget cannot cross the link within the step's device time, no plan
 * hides them all: the step will take longer, waiting on the link. Planning on the device's times
 * alone would then reject almost every gap as infeasible and leave the step to demand restores.
 * Instead the step is planned as it will run: every position's time stretched by one factor, at
 * first what the excess needs on the link (out and back, the two directions sharing it: the
 * physical limit, DESIGN.md "Measuring"), and by half again while the link still cannot carry
 * a gap the plan wanted. */
size_t ho_plan_gaps(const struct ho_plan_run *r, struct ho_gap *gaps, size_t n) {
    if (r->npos == 0) return 0;
    if (!timed(r) || r->t[r->npos] == 0) return plan_once(r, gaps, n);
    int64_t *base = malloc(r->npos * sizeof *base);
    uint64_t *t = malloc((r->npos + 1) * sizeof *t);
    if (base == NULL || t == NULL) {
        free(base);
        free(t);
        return plan_once(r, gaps, n);
    }
    memcpy(base, r->over, r->npos * sizeof *base);
    int64_t excess = 0;
    for (uint64_t q = 0; q < r->npos; q++)
        if (base[q] > excess) excess = base[q];
    double step = (double)r->t[r->npos];
    double need = 2.5 * (double)excess / r->link_bytes_per_ns; /* out and back, duplex 1.6x */
    double stretch = need > step ? need / step : 1.0;
    struct ho_plan_run s = *r;
    s.t = t;
    size_t taken = 0;
    for (int k = 0; k < STRETCHES; k++) {
        for (uint64_t q = 0; q <= r->npos; q++)
            t[q] = (uint64_t)((double)r->t[q] * stretch);
        memcpy(r->over, base, r->npos * sizeof *base);
        taken = plan_once(&s, gaps, n);
        if (!any_rejected(gaps, n)) break;
        stretch *= 1.5;
    }
    free(base);
    free(t);
    return taken;
}
