/* hostoff advise's figures and outputs (advise.h): rematerialisation's estimate, the budgets
 * within 5% and 20% of the unconstrained step, the table, the JSON object and the HTML page. */
#include "advise.h"

#include "cli.h"
#include "json_text.h"
#include "profile.h"
#include "u64map.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------ rematerialisation */

struct cand {
    uint64_t bytes, ns;
};

static int cmp_cost(const void *a, const void *b) {
    const struct cand *x = a, *y = b;
    /* Cheapest recompute per byte first: x.ns/x.bytes < y.ns/y.bytes. */
    double l = (double)x->ns * (double)y->bytes, r = (double)y->ns * (double)x->bytes;
    return l < r ? -1 : l > r ? 1 : 0;
}

struct life {
    uint64_t bytes, alloc_t, free_t, producer_ns, step;
    bool freed, produced;
};

static uint64_t step_at(const uint64_t *marks, size_t n, uint64_t t) {
    size_t k = 0;
    while (k < n && marks[k] <= t)
        k++;
    return k; /* 0: before the first mark */
}

uint64_t advise_remat_ns(const struct trace *t, uint64_t t_ns, uint64_t away, bool *ok) {
    *ok = away == 0;
    if (away == 0) return t_ns;
    uint64_t *marks = calloc(t->steps + 1, sizeof *marks);
    struct life *lv = calloc(t->n + 1, sizeof *lv);
    struct u64map ix = {0};
    size_t nm = 0, nl = 0;
    uint64_t live = 0, best = 0, t_peak = 0, extra = 0, got = 0;
    struct cand *c = NULL;
    if (marks == NULL || lv == NULL) goto out;
    for (size_t i = 0; i < t->n; i++)
        if (t->ev[i].kind == TEV_STEP && nm < t->steps) marks[nm++] = t->ev[i].t;
    for (size_t i = 0; i < t->n; i++) {
        const struct tev *e = &t->ev[i];
        uint64_t k;
        if (e->kind == TEV_ALLOC) {
            if (!u64map_put(&ix, e->id, nl)) goto out;
            lv[nl++] =
                (struct life){.bytes = e->bytes, .alloc_t = e->t, .step = step_at(marks, nm, e->t)};
            live += e->bytes;
            if (live > best) {
                best = live;
                t_peak = e->t;
            }
        } else if (e->kind == TEV_FREE && u64map_get(&ix, e->id, &k)) {
            lv[k].freed = true;
            lv[k].free_t = e->t;
            live -= lv[k].bytes < live ? lv[k].bytes : live;
            u64map_del(&ix, e->id);
        } else if (e->kind == TEV_LAUNCH) {
            for (uint32_t u = 0; u < e->nuse; u++) {
                if (u64map_get(&ix, t->uses[e->use_at + u], &k) && !lv[k].produced) {
                    lv[k].produced = true;
                    lv[k].producer_ns = e->ns;
                }
            }
        }
    }
    /* Activations live at the peak: allocated at or before it, freed after it, in one step. */
    c = calloc(nl + 1, sizeof *c);
    size_t nc = 0;
    for (size_t k = 0; c != NULL && k < nl; k++) {
        const struct life *l = &lv[k];
        if (!l->freed || !l->produced || l->alloc_t > t_peak || l->free_t <= t_peak) continue;
        if (nm > 0 && step_at(marks, nm, l->free_t) != l->step) continue;
        c[nc++] = (struct cand){l->bytes, l->producer_ns};
    }
    if (c != NULL) {
        qsort(c, nc, sizeof *c, cmp_cost);
        for (size_t k = 0; k < nc && got < away; k++) {
            got += c[k].bytes;
            extra += c[k].ns;
        }
    }
    *ok = got >= away;
out:
    free(c);
    u64map_free(&ix);
    free(marks);
    free(lv);
    return t_ns + extra;
}

/* ------------------------------------------------------------------------------ the pick */

void advise_pick(struct advice *a) {
    a->within5 = a->within20 = -1;
    for (size_t i = 0; i < a->n; i++) {
        double r = a->t_ns > 0 ? (double)a->row[i].step_ns / (double)a->t_ns : 0;
        /* Rows go from the largest budget down: the last one that fits is the smallest. */
        if (r <= 1.05) a->within5 = (int)i;
        if (r <= 1.20) a->within20 = (int)i;
    }
}

static double ratio(const struct advice *a, uint64_t ns) {
    return a->t_ns > 0 ? (double)ns / (double)a->t_ns : 0;
}

static void pick_line(FILE *f, const struct advice *a, int row, const char *within) {
    char b[32], s[32];
    if (row < 0) {
        fprintf(f, "within %-4s none of the budgets replayed (%g%% down to %g%% of the peak)\n",
                within, a->n > 0 ? a->pct[0] : 0.0, a->n > 0 ? a->pct[a->n - 1] : 0.0);
        return;
    }
    prof_bytes(a->row[row].budget, b, sizeof b);
    prof_time(a->row[row].step_ns, s, sizeof s);
    fprintf(f, "within %-4s %s (%g%% of the peak): a step of %s, %.2fx\n", within, b, a->pct[row],
            s, ratio(a, a->row[row].step_ns));
}

void advise_print_table(FILE *f, const struct advice *a) {
    char p[32], t[32];
    prof_bytes(a->peak, p, sizeof p);
    prof_time(a->t_ns, t, sizeof t);
    fprintf(f, "trace     %s: peak %s, %zu steps\n", a->trace, p, a->steps);
    fprintf(f, "replays   policy %s, link %s (%g GB/s to the device, %g from it, %g both ways)\n",
            a->policy, a->link, a->rates[0], a->rates[1], a->rates[2]);
    fprintf(f, "step      %s with no budget (T)\n\n", t);
    fprintf(f, "%8s %11s %11s %7s %11s %7s %11s %7s\n", "budget", "bytes", "step", "x T", "limit",
            "x T", "remat", "x T");
    for (size_t i = 0; i < a->n; i++) {
        const struct advice_row *r = &a->row[i];
        char b[32], s[32], l[32], m[32];
        prof_bytes(r->budget, b, sizeof b);
        prof_time(r->step_ns, s, sizeof s);
        prof_time(r->limit_ns, l, sizeof l);
        if (r->remat_ok)
            prof_time(r->remat_ns, m, sizeof m);
        else
            snprintf(m, sizeof m, "-");
        char rm[16];
        if (r->remat_ok)
            snprintf(rm, sizeof rm, "%.2f", ratio(a, r->remat_ns));
        else
            snprintf(rm, sizeof rm, "-");
        fprintf(f, "%7g%% %11s %11s %7.2f %11s %7.2f %11s %7s\n", a->pct[i], b, s,
                ratio(a, r->step_ns), l, ratio(a, r->limit_ns), m, rm);
    }
    fprintf(f, "\nlimit: max(T, E/d2h, E/h2d, 2E/duplex), E = peak - budget: no policy does "
               "better. remat: T plus\nrecomputing the cheapest activations live at the peak "
               "that free E (-: they cannot).\n\n");
    pick_line(f, a, a->within5, "5%:");
    pick_line(f, a, a->within20, "20%:");
}

void advise_print_json(FILE *f, const struct advice *a) {
    fprintf(f, "{\"trace\":\"");
    ho_json_write_text(f, a->trace);
    fprintf(f, "\",\"policy\":\"%s\",\"link\":\"", a->policy);
    ho_json_write_text(f, a->link);
    fprintf(f, "\",\"peak_bytes\":%llu,\"unconstrained_step_ns\":%llu,\"rows\":[",
            (unsigned long long)a->peak, (unsigned long long)a->t_ns);
    for (size_t i = 0; i < a->n; i++) {
        const struct advice_row *r = &a->row[i];
        fprintf(f,
                "%s{\"pct\":%g,\"budget_bytes\":%llu,\"step_ns\":%llu,\"limit_ns\":%llu,"
                "\"remat_ns\":",
                i ? "," : "", a->pct[i], (unsigned long long)r->budget,
                (unsigned long long)r->step_ns, (unsigned long long)r->limit_ns);
        if (r->remat_ok)
            fprintf(f, "%llu}", (unsigned long long)r->remat_ns);
        else
            fprintf(f, "null}");
    }
    fprintf(f, "],\"within_5pct_budget_bytes\":");
    if (a->within5 >= 0)
        fprintf(f, "%llu", (unsigned long long)a->row[a->within5].budget);
    else
        fprintf(f, "null");
    fprintf(f, ",\"within_20pct_budget_bytes\":");
    if (a->within20 >= 0)
        fprintf(f, "%llu", (unsigned long long)a->row[a->within20].budget);
    else
        fprintf(f, "null");
    fprintf(f, "}\n");
}
