/* The ordered bound on a step's time (see link_bound.h for the argument). */
#include "link_bound.h"

#include "stretches.h"

#include <stdbool.h>
#include <stdlib.h>

/* Whether every launch is on one stream: then they run in the trace's order. */
static bool one_stream(const struct trace *t) {
    bool any = false;
    uint32_t s = 0;
    for (size_t i = 0; i < t->n; i++) {
        const struct tev *e = &t->ev[i];
        if (e->kind != TEV_LAUNCH) continue;
        if (any && e->s != s) return false;
        s = e->s;
        any = true;
    }
    return true;
}

/* Each step's first launch: a recording's step lines (trace.step_at), else the markers. Returns
 * how many (at most t->n + 1 are written). */
static size_t step_starts(const struct trace *t, uint64_t *start) {
    size_t n = 0, k = 0;
    uint64_t launches = 0;
    bool lines = t->nstep_at > 0;
    for (size_t i = 0; i <= t->n; i++) {
        if (lines) {
            while (k < t->nstep_at && t->step_at[k] == i) {
                if (n == 0 || start[n - 1] != launches) start[n++] = launches;
                k++;
            }
        } else if (i < t->n && t->ev[i].kind == TEV_STEP) {
            if (n == 0 || start[n - 1] != launches) start[n++] = launches;
        }
        if (i < t->n && t->ev[i].kind == TEV_LAUNCH) launches++;
    }
    /* A step that begins after the last launch holds none. */
    while (n > 0 && start[n - 1] >= t->launches)
        n--;
    return n;
}

/* The most over launch of [lo, hi) (the first of equals). */
static uint64_t peak_of(const int64_t *over, uint64_t lo, uint64_t hi) {
    uint64_t best = lo;
    for (uint64_t q = lo; q < hi; q++)
        if (over[q] > over[best]) best = q;
    return best;
}

/* The least bytes a set covering `need` must still move when the stretches not forced to move
 * hold `free` of them. */
static double forced(int64_t need, int64_t free) {
    return need > free ? (double)(need - free) : 0.0;
}

/* The interval from peak p to peak p2: the most over q of R(q) / h2d + V(q) / d2h, in ns; `dr`
 * and `dv` are scratch of p2 - p + 2 values. *leave and *back: the least bytes that must leave
 * (their eviction begins after p) and come back (their restore ends before p2) within it, over
 * every choice of the buffers away at p and at p2 (link_bound.h, the remap bound). */
static double interval_link_ns(const struct stretches *g, const int64_t *over, uint64_t p,
                               uint64_t p2, double h2d, double d2h, int64_t *dr, int64_t *dv,
                               double *leave, double *back) {
    uint64_t len = p2 - p;
    for (uint64_t i = 0; i <= len + 1; i++)
        dr[i] = dv[i] = 0;
    int64_t cover = 0, cover2 = 0; /* the bytes of the stretches covering p, and p2 */
    int64_t leaving = 0;           /* of cover2: stretches whose eviction begins after p */
    for (size_t j = 0; j < g->n; j++) {
        const struct stretch *s = &g->s[j];
        if (s->lo <= p && p <= s->hi) {
            cover += (int64_t)s->bytes;
            /* Due back by q for every q >= hi + 1. */
            if (s->restores && s->hi + 1 <= p2) dr[s->hi + 1 - p] += (int64_t)s->bytes;
        }
        if (s->lo <= p2 && p2 <= s->hi) {
            cover2 += (int64_t)s->bytes;
            /* Leaving after q for every q <= lo - 1. */
            if (s->evicts && s->lo >= p + 2) dv[s->lo - 1 - p] += (int64_t)s->bytes;
            if (s->evicts && s->lo > p) leaving += (int64_t)s->bytes;
        }
    }
    *leave = forced(over[p2], cover2 - leaving);
    /* dv as the forced bytes at each q: a suffix sum. */
    for (uint64_t i = len; i-- > 1;)
        dv[i] += dv[i + 1];
    int64_t due = 0;
    double best = 0;
    for (uint64_t i = 1; i <= len; i++) {
        due += dr[i];
        double r = forced(over[p], cover - due), v = forced(over[p2], cover2 - dv[i]);
        double ns = r / h2d + v / d2h;
        if (ns > best) best = ns;
        if (i == len) *back = r; /* every restore due in the interval */
    }
    return best;
}

int link_bound(const struct trace *t, uint64_t budget, uint64_t min_bytes, double h2d_gbps,
               double d2h_gbps, struct link_bound *out) {
    *out = (struct link_bound){0};
    size_t nl = t->launches;
    if (nl == 0 || h2d_gbps <= 0 || d2h_gbps <= 0 || !one_stream(t)) return 0;
    int rc = -1;
    int64_t *over = calloc(nl, sizeof *over), *dr = NULL, *dv = NULL;
    uint64_t *start = calloc(t->n + 2, sizeof *start);
    uint64_t *kernel_ns = calloc(nl + 1, sizeof *kernel_ns); /* prefix sums of device time */
    struct stretches g = {0};
    uint64_t uncovered;
    if (over == NULL || start == NULL || kernel_ns == NULL ||
        !stretches_collect(t, budget, min_bytes, over, &g) ||
        !stretches_cap(over, &g, nl, &uncovered))
        goto done;
    for (size_t i = 0, q = 0; i < t->n; i++)
        if (t->ev[i].kind == TEV_LAUNCH) {
            kernel_ns[q + 1] = kernel_ns[q] + t->ev[i].ns;
            q++;
        }
    size_t nstep = step_starts(t, start);
    rc = 0;
    if (nstep < 2) goto done;
    uint64_t longest = 0; /* the longest interval, for the scratch */
    for (size_t k = 0; k < nstep; k++) {
        uint64_t end = k + 1 < nstep ? start[k + 1] : nl;
        start[k] = peak_of(over, start[k], end); /* each step's start becomes its peak */
        if (k > 0 && start[k] - start[k - 1] > longest) longest = start[k] - start[k - 1];
    }
    dr = malloc((longest + 2) * sizeof *dr);
    dv = malloc((longest + 2) * sizeof *dv);
    if (dr == NULL || dv == NULL) {
        rc = -1;
        goto done;
    }
    double sum = 0, sum_link = 0, sum_leave = 0, sum_back = 0;
    for (size_t k = 0; k + 1 < nstep; k++) {
        uint64_t p = start[k], p2 = start[k + 1];
        double leave = 0, back = 0;
        double link = interval_link_ns(&g, over, p, p2, h2d_gbps, d2h_gbps, dr, dv, &leave, &back);
        double kernels = (double)(kernel_ns[p2] - kernel_ns[p]);
        sum_link += link;
        sum += link > kernels ? link : kernels;
        sum_leave += leave;
        sum_back += back;
    }
    out->intervals = nstep - 1;
    double n = (double)out->intervals;
    out->step_ns = (uint64_t)(sum / n);
    out->link_ns = (uint64_t)(sum_link / n);
    out->leave_bytes = (uint64_t)(sum_leave / n);
    out->back_bytes = (uint64_t)(sum_back / n);
    out->launches = (double)(start[nstep - 1] - start[0]) / n;
done:
    free(over);
    free(dr);
    free(dv);
    free(start);
    free(kernel_ns);
    stretches_free(&g);
    return rc;
}
