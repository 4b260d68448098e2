/* The one verdict (verdict.h): computed from a profile's measured figures only. */
#include "verdict.h"

#include "cli.h"
#include "json.h"
#include "json_text.h"
#include "options.h"
#include "u64map.h"

#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *verdict_cause_name(enum verdict_cause c) {
    switch (c) {
    case VC_DEMAND:
        return "restores on demand";
    case VC_LATE:
        return "prefetches that landed late";
    case VC_ROOM:
        return "evictions to make room";
    case VC_LINK:
        return "the link";
    case VC_NONE:
        break;
    }
    return "none";
}

uint64_t verdict_limit_ns(uint64_t t_ns, uint64_t away, double h2d, double d2h, double duplex) {
    /* GB/s is bytes per ns. */
    double lim = (double)t_ns, e = (double)away;
    if (d2h > 0 && e / d2h > lim) lim = e / d2h;
    if (h2d > 0 && e / h2d > lim) lim = e / h2d;
    if (duplex > 0 && 2 * e / duplex > lim) lim = 2 * e / duplex;
    return lim >= 18446744073709549568.0 ? UINT64_MAX : (uint64_t)lim; /* hostile rates */
}

/* The trace's step marks (TEV_STEP), in order; NULL when there are none. */
static uint64_t *step_marks(const struct trace *t, size_t *n) {
    *n = 0;
    uint64_t *m = t->steps > 0 ? calloc(t->steps, sizeof *m) : NULL;
    for (size_t i = 0; m != NULL && i < t->n && *n < t->steps; i++)
        if (t->ev[i].kind == TEV_STEP) m[(*n)++] = t->ev[i].t;
    return m;
}

/* Mean length of steps [from, to) (step k runs from mark k to mark k+1, the last to end). */
static uint64_t mean_steps(const uint64_t *m, size_t n, uint64_t end, size_t from, size_t to) {
    uint64_t sum = 0;
    size_t k = 0;
    for (size_t i = from; i < to && i < n; i++, k++) {
        uint64_t e = i + 1 < n ? m[i + 1] : end;
        sum += e > m[i] ? e - m[i] : 0;
    }
    return k > 0 ? sum / k : 0;
}

/* The most bytes one launch used at once (the buffers it names). */
static uint64_t max_launch_bytes(const struct trace *t) {
    struct u64map sizes = {0};
    uint64_t best = 0;
    for (size_t i = 0; i < t->n; i++) {
        const struct tev *e = &t->ev[i];
        if (e->kind == TEV_ALLOC) {
            if (!u64map_put(&sizes, e->id, e->bytes)) break;
        } else if (e->kind == TEV_LAUNCH) {
            uint64_t sum = 0, b;
            for (uint32_t k = 0; k < e->nuse; k++)
                if (u64map_get(&sizes, t->uses[e->use_at + k], &b)) sum += b;
            if (sum > best) best = sum;
        }
    }
    u64map_free(&sizes);
    return best;
}

__attribute__((format(printf, 2, 3))) static void advise(struct verdict *v, const char *fmt, ...) {
    if (v->nadvice >= VERDICT_ADVICE_MAX) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->advice[v->nadvice++], sizeof v->advice[0], fmt, ap);
    va_end(ap);
}

static void step_times(const struct profile *p, struct verdict *v) {
    snprintf(v->how, sizeof v->how, "no trace of the run: hostoff run --trace PATH measures it");
    if (!p->has_trace) return;
    snprintf(v->how, sizeof v->how,
             "the run moved buffers before it completed a step, and its trace was not replayed "
             "with no budget");
    size_t n = 0;
    uint64_t *m = step_marks(&p->tr, &n);
    uint64_t first_move = UINT64_MAX;
    for (size_t i = 0; i < p->tr.nmoves; i++)
        if (p->tr.moves[i].t < first_move) first_move = p->tr.moves[i].t;
    /* With offload: as hostoff replay's steady step (every step after the first), or the run. */
    v->step_with_ns = n == 0   ? p->t_end
                      : n == 1 ? mean_steps(m, n, p->t_end, 0, 1)
                               : mean_steps(m, n, p->t_end, 1, n);
    if (p->has_base) {
        v->step_without_ns = p->base_step_ns;
        snprintf(v->how, sizeof v->how, "%s", p->base_how);
    } else if (n > 0 && first_move != UINT64_MAX) {
        /* The steps the run completed before its first move. */
        size_t done = 0;
        while (done < n && done + 1 < n && m[done + 1] <= first_move)
            done++;
        if (done > 0) {
            v->step_without_ns = mean_steps(m, n, p->t_end, done > 1 ? 1 : 0, done);
            snprintf(v->how, sizeof v->how,
                     "the %zu step%s the run completed before its first move", done,
                     done > 1 ? "s" : "");
            /* With offload: the steps from the first move on. */
            uint64_t after = mean_steps(m, n, p->t_end, done, n);
            if (after > 0) v->step_with_ns = after;
        }
    }
    free(m);
    if (v->step_with_ns > 0 && v->step_without_ns > 0) {
        v->has_step = true;
        v->slowdown = (double)v->step_with_ns / (double)v->step_without_ns;
    }
}

static void memory(const struct profile *p, struct verdict *v) {
    if (!p->has_trace || p->live_peak == 0) return;
    v->has_memory = true;
    v->need = p->live_peak;
    v->held = p->device_peak;
    v->saved = v->need > v->held ? v->need - v->held : 0;
}

static void cause(const struct profile *p, struct verdict *v) {
    uint64_t t = v->has_step ? v->step_without_ns : 0;
    if (p->has_budget && p->has_trace && p->tr.steps > 0 && t > 0 && v->need > p->budget) {
        v->has_limit = true;
        v->limit_ns =
            verdict_limit_ns(t, v->need - p->budget, p->h2d_gbps, p->d2h_gbps, p->duplex_gbps);
    }
    if (v->has_step && v->slowdown < VERDICT_FINE) return;
    if (v->has_limit && v->has_step && (double)v->limit_ns >= 0.8 * (double)v->step_with_ns &&
        (double)v->limit_ns > (double)t * VERDICT_FINE) {
        v->cause = VC_LINK;
        return;
    }
    static const enum verdict_cause of[3] = {
        [TSTALL_DEMAND] = VC_DEMAND, [TSTALL_LATE] = VC_LATE, [TSTALL_ROOM] = VC_ROOM};
    for (int k = 0; k < 3; k++) {
        if (p->stall_why[k] > v->cause_ns) {
            v->cause_ns = p->stall_why[k];
            v->cause = of[k];
        }
    }
}

static void advice(const struct profile *p, struct verdict *v) {
    char a[32], b[32], c[32];
    uint64_t moved = p->moved_to_host + p->moved_to_device;
    bool offload = strcmp(p->mode, ho_mode_name(HO_MODE_OFFLOAD)) == 0 || p->mode[0] == '\0';
    if (!offload) {
        advise(v,
               "HOSTOFF_MODE=%s moves nothing: run with --mode offload (the default) and a "
               "budget to offload.",
               p->mode);
        return;
    }
    if (moved == 0) {
        prof_bytes(p->live_peak > 0 ? p->live_peak : p->device_peak, a, sizeof a);
        if (p->has_budget) {
            prof_bytes(p->budget, b, sizeof b);
            advise(v,
                   "Nothing moved: the buffers (%s at peak) fit the budget (%s). A budget "
                   "below the peak offloads.",
                   a, b);
        } else if (p->has_trace) {
            advise(v,
                   "Nothing moved: there was no budget. Set one below the %s peak "
                   "(hostoff run --budget SIZE, HOSTOFF_BUDGET) to offload.",
                   a);
        } else {
            advise(v,
                   "Nothing moved: the buffers (%s at peak) fit the device's memory or the "
                   "budget. A budget below the peak offloads.",
                   a);
        }
    }
    if (!p->has_trace) {
        advise(v, "Record a trace too (hostoff run --trace PATH, HOSTOFF_TRACE) to measure the "
                  "slowdown and see which kernels waited.");
        return;
    }
    if (moved == 0) return;
    if (v->has_step && v->slowdown < VERDICT_FINE) {
        prof_bytes(v->saved, a, sizeof a);
        advise(v,
               "Offload cost %.1f%% a step for %s saved. To see how much lower the budget can "
               "go: hostoff advise %s",
               100.0 * (v->slowdown - 1), a, p->trace_path != NULL ? p->trace_path : "TRACE");
        return;
    }
    switch (v->cause) {
    case VC_LINK: {
        prof_time(v->limit_ns, a, sizeof a);
        prof_time(v->step_without_ns, b, sizeof b);
        double rate = p->d2h_gbps < p->h2d_gbps ? p->d2h_gbps : p->h2d_gbps;
        if (p->duplex_gbps > 0 && p->duplex_gbps / 2 < rate) rate = p->duplex_gbps / 2;
        double fit = (double)v->step_without_ns * rate; /* bytes away a step can carry */
        uint64_t need_budget = (double)v->need > fit ? v->need - (uint64_t)fit : 0;
        prof_bytes(need_budget, c, sizeof c);
        advise(v,
               "The link is the limit: moving what the budget keeps away there and back takes "
               "at least %s a step, against %s without offload, whatever the policy. A budget "
               "of about %s or more, or a faster link, brings that bound to the step.",
               a, b, c);
        break;
    }
    case VC_DEMAND:
        if (strcmp(p->policy, ho_policy_name(HO_CHOOSE_LOOKAHEAD)) != 0)
            advise(v, "Most waiting is for restores on demand: --policy lookahead (the default) "
                      "learns the step and prefetches ahead of use.");
        else if (p->tr.steps == 0)
            advise(v, "Most waiting is for restores on demand and the trace marks no steps: the "
                      "lookahead policy must learn the step from the launches alone. Mark steps "
                      "with hostoff_mark_step() (hostoff.h).");
        else if (p->tr.steps < 4)
            advise(v,
                   "Most waiting is for restores on demand in a run of %zu steps: the "
                   "lookahead policy runs as lru until two steps alike and one timed step have "
                   "shown it the step. A longer run measures its steady state.",
                   p->tr.steps);
        else
            advise(v,
                   "Most waiting is for restores on demand: the budget leaves the lookahead "
                   "policy too little room to fetch ahead. hostoff advise %s shows the step "
                   "time at each budget.",
                   p->trace_path != NULL ? p->trace_path : "TRACE");
        break;
    case VC_LATE:
        advise(v,
               "%llu of %llu prefetches landed late: their lead was shorter than the link "
               "needed. More budget leaves the policy room to fetch earlier.",
               (unsigned long long)p->late, (unsigned long long)p->prefetches);
        break;
    case VC_ROOM: {
        uint64_t one = max_launch_bytes(&p->tr);
        prof_time(v->cause_ns, a, sizeof a);
        if (p->has_budget && one > p->budget) {
            prof_bytes(one, b, sizeof b);
            prof_bytes(p->budget, c, sizeof c);
            advise(v,
                   "One kernel uses %s at once, more than the budget (%s): every such launch "
                   "waits for evictions. Raise the budget above it.",
                   b, c);
        } else {
            advise(v,
                   "Allocations and restores waited %s for evictions to make room. A larger "
                   "budget leaves more slack between them.",
                   a);
        }
        break;
    }
    case VC_NONE:
        break;
    }
}

void verdict_make(const struct profile *p, struct verdict *v) {
    memset(v, 0, sizeof *v);
    step_times(p, v);
    memory(p, v);
    cause(p, v);
    advice(p, v);
}

size_t verdict_lines(const struct verdict *v, char out[][512], size_t cap) {
    size_t n = 0;
    char a[32], b[32], c[32];
    if (n < cap) {
        if (v->has_step) {
            prof_time(v->step_with_ns, a, sizeof a);
            prof_time(v->step_without_ns, b, sizeof b);
            snprintf(out[n++], 512,
                     "slowdown    %.2fx: a step took %s with offload, %s without (%s)", v->slowdown,
                     a, b, v->how);
        } else {
            snprintf(out[n++], 512, "slowdown    not measured: %s", v->how);
        }
    }
    if (n < cap && v->has_memory) {
        prof_bytes(v->held, a, sizeof a);
        prof_bytes(v->need, b, sizeof b);
        prof_bytes(v->saved, c, sizeof c);
        snprintf(out[n++], 512,
                 "memory      the device held at most %s instead of %s: %s saved (%.0f%%)", a, b, c,
                 v->need > 0 ? 100.0 * (double)v->saved / (double)v->need : 0.0);
    }
    if (n < cap && v->has_step) {
        if (v->slowdown < VERDICT_FINE)
            snprintf(out[n++], 512, "loss        under 5%%: the moves hid behind the kernels");
        else if (v->cause == VC_LINK) {
            prof_time(v->limit_ns, a, sizeof a);
            snprintf(out[n++], 512,
                     "loss        mostly the link: at least %s a step to move the bytes kept away "
                     "there and back",
                     a);
        } else if (v->cause != VC_NONE) {
            prof_time(v->cause_ns, a, sizeof a);
            snprintf(out[n++], 512, "loss        mostly %s (the host waited %s for them in all)",
                     verdict_cause_name(v->cause), a);
        }
    }
    if (n < cap && v->has_limit) {
        prof_time(v->limit_ns, a, sizeof a);
        if (v->limit_ns > v->step_without_ns)
            snprintf(out[n++], 512,
                     "limit       %s a step: no policy does better at this budget over this link",
                     a);
        else
            snprintf(out[n++], 512,
                     "limit       %s a step, the step without offload: the link could hide every "
                     "move at this budget",
                     a);
    }
    return n;
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    ho_json_write_text(f, s);
    fputc('"', f);
}

void verdict_json(FILE *f, const struct verdict *v) {
    fputc('{', f);
    if (v->has_step)
        fprintf(f,
                "\"slowdown\":%.4f,\"step_with_ns\":%llu,\"step_without_ns\":%llu,"
                "\"without_measured_by\":",
                v->slowdown, (unsigned long long)v->step_with_ns,
                (unsigned long long)v->step_without_ns);
    else
        fprintf(f, "\"slowdown\":null,\"without_measured_by\":");
    json_str(f, v->has_step ? v->how : "");
    if (v->has_memory)
        fprintf(f, ",\"need_bytes\":%llu,\"held_bytes\":%llu,\"saved_bytes\":%llu",
                (unsigned long long)v->need, (unsigned long long)v->held,
                (unsigned long long)v->saved);
    if (v->has_limit) fprintf(f, ",\"limit_ns\":%llu", (unsigned long long)v->limit_ns);
    fprintf(f, ",\"cause\":");
    json_str(f, verdict_cause_name(v->cause));
    fprintf(f, ",\"cause_ns\":%llu,\"advice\":[", (unsigned long long)v->cause_ns);
    for (size_t i = 0; i < v->nadvice; i++) {
        if (i) fputc(',', f);
        json_str(f, v->advice[i]);
    }
    fprintf(f, "]}");
}

/* -------------------------------------------------------------------- the baseline replay */

void prof_measure_baseline(struct profile *ps, size_t n) {
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return;
    self[len] = '\0';
    for (size_t i = 0; i < n; i++) {
        struct profile *p = &ps[i];
        if (!p->has_trace || p->trace_path == NULL || p->tr.launches == 0) continue;
        char *args[] = {"hostoff", "replay", (char *)p->trace_path, "--budget", "none",
                        "--json",  NULL};
        char *out = NULL;
        int rc = cli_run_child("report", self, args, NULL, &out);
        char err[128];
        struct json *j =
            rc == 0 && out != NULL ? json_parse(out, strlen(out), err, sizeof err) : NULL;
        uint64_t steady = 0;
        if (j != NULL && json_get_u64(j, "steady_step_ns", &steady) && steady > 0) {
            p->has_base = true;
            p->base_step_ns = steady;
            snprintf(p->base_how, sizeof p->base_how,
                     "a replay of the run's own trace with no budget, on the simulator");
        } else {
            cli_error("%s: the replay with no budget failed; the slowdown is not measured",
                      p->trace_path);
        }
        json_free(j);
        free(out);
    }
}
