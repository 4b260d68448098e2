/* The bounds on evicted bytes (see move_bound.h for the model).
 *
 * The covering problem: choose stretches g (a managed buffer's b_g bytes away over the launches
 * lo_g..hi_g) so that at every launch q the chosen ones away there hold at least over_q, the
 * bytes above the budget; the cost is the sum of the chosen b_g. Its linear relaxation (each x_g
 * in [0, 1]) has the dual: maximise sum_q y_q over_q - sum_g z_g subject to
 * b_g (Y_g - 1) <= z_g and y, z >= 0, where Y_g is the sum of y over g's launches. For any
 * y >= 0 the best z is b_g max(0, Y_g - 1), so every y >= 0 gives a lower bound (weak duality):
 *
 *     D(y) = sum_q y_q over_q - sum_g b_g max(0, Y_g - 1)
 *
 * With y = 1 at the peak alone, D = E. Two constructions of y are tried and the better kept:
 * - a set Q of launches with y = 1, grown greedily from the most over down: a launch joins when
 *   its excess is more than the bytes of the stretches that would then hold two of Q's launches
 *   (one buffer away across both may count once);
 * - projected subgradient ascent on y (Polyak's step, aimed at the schedule below): the 0/1 set
 *   cannot give two launches half each, which a long-idle buffer across both calls for (a caching
 *   allocator's segments: on gpt2-1k.segment at 70% the set alone gave 0.28 E a step, the ascent
 *   1.39 E).
 * The schedule (`cover`) is Belady's rule by bytes on the same relaxed problem: from the first
 * launch on, where the bytes away fall short, the stretches there that stay away longest are
 * taken. Any schedule of the relaxation evicts at least the relaxed minimum, so the minimum lies
 * between the two; on the recordings' tensor views they are within 2% of each other. */
#include "move_bound.h"

#include "stretches.h"

#include <math.h>
#include <stdlib.h>

/* Launches y may weigh: the most over of every WINDOW, and every peak of the excess (at least
 * its neighbours; the first of a run of equals), which a window may hold two of. A launch next to
 * one of them shares nearly every stretch with it and adds little. Every launch over the budget
 * made the ascent converge more slowly (llama-4k.tensor at 70%: 0.88 E a step against 0.94 E);
 * the peaks alone left it too few on the caching allocator's segments, whose excess rises in
 * long steps (gpt2-1k.segment at 70%: 0.17 E against 1.47 E). */
#define WINDOW 4
/* Ascent steps: the bound grew by under 2% from 2,000 to 8,000 on gpt2-1k and llama-4k segments
 * (0.7 s for gpt2-1k.segment on this machine). */
#define ASCENT_STEPS 2000
/* Work limits, in stretch visits, so that a trace far larger than the recordings (a million
 * launches) still gets its bounds in seconds, only weaker: the greedy set tries at most
 * SET_WORK / stretches launches (the most over first; the recordings' 15,000 or fewer all fit),
 * the ascent takes at most ASCENT_WORK / (launches + stretches) steps (the recordings' 2,000 fit).
 */
#define SET_WORK    4000000000.0
#define ASCENT_WORK 1000000000.0

static int by_lo(const void *a, const void *b) {
    const struct stretch *x = a, *y = b;
    if (x->lo != y->lo) return x->lo < y->lo ? -1 : 1;
    return x->hi < y->hi ? -1 : x->hi > y->hi ? 1 : 0;
}

static const int64_t *sort_over; /* qsort has no context argument */

static int by_over_desc(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    if (sort_over[x] != sort_over[y]) return sort_over[x] > sort_over[y] ? -1 : 1;
    return x < y ? -1 : x > y ? 1 : 0;
}

/* The greedy set's bound (the stretches sorted by lo; marks `chosen`). */
static uint64_t greedy_set(struct stretches *g, const int64_t *over, const uint64_t *cand,
                           size_t ncand) {
    uint64_t bound = 0;
    for (size_t c = 0; c < ncand; c++) {
        uint64_t p = cand[c], cost = 0;
        /* What p would cost: the stretches covering it that already cover a launch of Q. */
        for (size_t j = 0; j < g->n && g->s[j].lo <= p; j++)
            if (g->s[j].hi >= p && g->s[j].chosen > 0) cost += g->s[j].bytes;
        if (cost >= (uint64_t)over[p]) continue;
        bound += (uint64_t)over[p] - cost;
        for (size_t j = 0; j < g->n && g->s[j].lo <= p; j++)
            if (g->s[j].hi >= p) g->s[j].chosen++;
    }
    return bound;
}

/* D(y); sets Y on the way. */
static double dual_value(const struct stretches *g, const int64_t *over, const double *y, size_t nl,
                         double *prefix, double *Y) {
    prefix[0] = 0;
    double d = 0;
    for (size_t q = 0; q < nl; q++) {
        prefix[q + 1] = prefix[q] + y[q];
        if (y[q] > 0) d += y[q] * (double)over[q];
    }
    for (size_t j = 0; j < g->n; j++) {
        Y[j] = prefix[g->s[j].hi + 1] - prefix[g->s[j].lo];
        if (Y[j] > 1) d -= (double)g->s[j].bytes * (Y[j] - 1);
    }
    return d;
}

/* The best D found by projected subgradient ascent from y = 0, y on the candidates only;
 * `target` (an upper bound of the optimum) sets Polyak's step. 0 when out of memory. */
static double dual_ascent(const struct stretches *g, const int64_t *over, size_t nl,
                          const uint64_t *cand, size_t ncand, double target) {
    double *y = calloc(nl, sizeof *y), *prefix = malloc((nl + 1) * sizeof *prefix);
    double *Y = malloc((g->n + 1) * sizeof *Y), *sub = malloc((nl + 1) * sizeof *sub);
    double best = 0;
    if (y == NULL || prefix == NULL || Y == NULL || sub == NULL) goto out;
    double fit = ASCENT_WORK / (double)(nl + g->n + 1);
    int steps = fit < ASCENT_STEPS ? (fit < 20 ? 20 : (int)fit) : ASCENT_STEPS;
    for (int it = 0; it < steps; it++) {
        double d = dual_value(g, over, y, nl, prefix, Y);
        if (d > best) best = d;
        /* The subgradient: each launch's excess, less the bytes of the stretches over it that
         * already count more than once. */
        for (size_t q = 0; q <= nl; q++)
            sub[q] = 0;
        for (size_t j = 0; j < g->n; j++)
            if (Y[j] > 1) {
                sub[g->s[j].lo] -= (double)g->s[j].bytes;
                sub[g->s[j].hi + 1] += (double)g->s[j].bytes;
            }
        double run = 0, norm = 0;
        for (size_t q = 0; q < nl; q++) {
            run += sub[q];
            sub[q] = run;
        }
        for (size_t c = 0; c < ncand; c++) {
            sub[cand[c]] += (double)over[cand[c]];
            norm += sub[cand[c]] * sub[cand[c]];
        }
        if (norm == 0) break;
        double eta = target > d ? (target - d) / norm : 1.0 / sqrt(norm) / sqrt((double)it + 1);
        for (size_t c = 0; c < ncand; c++) {
            double *v = &y[cand[c]];
            *v += eta * sub[cand[c]];
            if (*v < 0) *v = 0;
        }
    }
out:
    free(y);
    free(prefix);
    free(Y);
    free(sub);
    return best;
}

/* A max-heap of stretch indices by the last launch they cover. */
struct heap {
    size_t *a;
    size_t n;
    const struct stretch *s;
};

static void heap_push(struct heap *h, size_t v) {
    size_t i = h->n++;
    h->a[i] = v;
    while (i > 0 && h->s[h->a[(i - 1) / 2]].hi < h->s[h->a[i]].hi) {
        size_t p = (i - 1) / 2, x = h->a[p];
        h->a[p] = h->a[i];
        h->a[i] = x;
        i = p;
    }
}

static size_t heap_pop(struct heap *h) {
    size_t top = h->a[0];
    h->a[0] = h->a[--h->n];
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && h->s[h->a[l]].hi > h->s[h->a[m]].hi) m = l;
        if (r < h->n && h->s[h->a[r]].hi > h->s[h->a[m]].hi) m = r;
        if (m == i) break;
        size_t x = h->a[m];
        h->a[m] = h->a[i];
        h->a[i] = x;
        i = m;
    }
    return top;
}

/* Belady's schedule of the relaxation (the stretches sorted by lo). UINT64_MAX when out of
 * memory. */
static uint64_t greedy_cover(const struct stretches *g, const int64_t *over, size_t nl) {
    struct heap h = {malloc((g->n + 1) * sizeof(size_t)), 0, g->s};
    int64_t *expire = calloc(nl + 1, sizeof *expire);
    uint64_t cost = UINT64_MAX;
    if (h.a == NULL || expire == NULL) goto out;
    cost = 0;
    int64_t away = 0;
    size_t k = 0;
    for (uint64_t q = 0; q < nl; q++) {
        away += expire[q];
        while (k < g->n && g->s[k].lo <= q)
            heap_push(&h, k++);
        while (over[q] > away && h.n > 0) {
            size_t j = heap_pop(&h);
            if (g->s[j].hi < q) continue; /* over before q; and every one left below it too */
            away += (int64_t)g->s[j].bytes;
            expire[g->s[j].hi + 1] -= (int64_t)g->s[j].bytes;
            cost += g->s[j].bytes;
        }
    }
out:
    free(h.a);
    free(expire);
    return cost;
}

int move_bound(const struct trace *t, uint64_t budget, uint64_t min_bytes, struct move_bound *out) {
    *out = (struct move_bound){0};
    size_t nl = t->launches;
    if (nl == 0) return 0;
    int64_t *over = calloc(nl, sizeof *over);
    uint64_t *cand = calloc(nl + 1, sizeof *cand);
    struct stretches g = {0};
    int rc = -1;
    if (over == NULL || cand == NULL || !stretches_collect(t, budget, min_bytes, over, &g))
        goto done;
    if (g.n > 0) qsort(g.s, g.n, sizeof *g.s, by_lo);
    /* Launches where the managed buffers that could be away hold less than the excess: no
     * schedule keeps them within the budget. What they lack is reported, and the bounds are
     * taken over what can be covered (else the relaxation has no solution and its dual no
     * bound). */
    if (!stretches_cap(over, &g, nl, &out->uncovered)) goto done;
    size_t ncand = 0;
    for (uint64_t w = 0; w < nl; w += WINDOW) {
        uint64_t best = w;
        for (uint64_t p = w; p < nl && p < w + WINDOW; p++)
            if (over[p] > over[best]) best = p;
        for (uint64_t p = w; p < nl && p < w + WINDOW; p++) {
            bool peak =
                (p == 0 || over[p] > over[p - 1]) && (p + 1 == nl || over[p] >= over[p + 1]);
            if (over[p] > 0 && (p == best || peak)) cand[ncand++] = p;
        }
    }
    sort_over = over;
    qsort(cand, ncand, sizeof *cand, by_over_desc);
    double fit = SET_WORK / (double)(g.n + 1);
    uint64_t set = greedy_set(&g, over, cand, fit < (double)ncand ? (size_t)fit : ncand);
    out->cover = greedy_cover(&g, over, nl);
    if (out->cover == UINT64_MAX) goto done;
    double ascent = dual_ascent(&g, over, nl, cand, ncand, (double)out->cover);
    out->bytes = ascent > (double)set ? (uint64_t)ascent : set;
    rc = 0;
done:
    free(over);
    free(cand);
    stretches_free(&g);
    return rc;
}
