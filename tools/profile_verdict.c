/* Profiles for `hostoff report`, the wording: figures as text, the verdict and what to tune
 * next (see profile.h). */
#include "profile.h"

#include "cli.h"
#include "options.h"

#include <stdarg.h>
#include <string.h>

void prof_bytes(uint64_t bytes, char *buf, size_t cap) {
    cli_format_bytes(bytes, buf, cap);
}

void prof_time(uint64_t ns, char *buf, size_t cap) {
    double v = (double)ns;
    if (v >= 1e9)
        snprintf(buf, cap, "%.3f s", v / 1e9);
    else if (v >= 1e6)
        snprintf(buf, cap, "%.1f ms", v / 1e6);
    else if (v >= 1e3)
        snprintf(buf, cap, "%.0f us", v / 1e3);
    else
        snprintf(buf, cap, "%.0f ns", v);
}

/* ------------------------------------------------------------------------------- verdict */

struct sb {
    char *buf;
    size_t cap, n;
};

__attribute__((format(printf, 2, 3))) static void sb_add(struct sb *s, const char *fmt, ...) {
    if (s->n >= s->cap) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(s->buf + s->n, s->cap - s->n, fmt, ap);
    va_end(ap);
    if (k > 0) s->n += (size_t)k < s->cap - s->n ? (size_t)k : s->cap - s->n - 1;
}

static double pct(uint64_t part, uint64_t whole) {
    return whole > 0 ? 100.0 * (double)part / (double)whole : 0;
}

/* How busy the link was: bytes moved against what the link could have moved in the run. */
static double link_busy(const struct profile *p) {
    if (!p->has_trace || p->t_end == 0) return 0;
    double cap_out = p->d2h_gbps * (double)p->t_end, cap_in = p->h2d_gbps * (double)p->t_end;
    double a = cap_out > 0 ? (double)p->moved_to_host / cap_out : 0;
    double b = cap_in > 0 ? (double)p->moved_to_device / cap_in : 0;
    return 100.0 * (a > b ? a : b);
}

void prof_verdict(const struct profile *p, char *buf, size_t cap) {
    struct sb s = {buf, cap, 0};
    buf[0] = '\0';
    char a[32], b[32], c[32], d[32];
    /* "Rank 0 ran", from the name "rank 0". */
    if (p->has_rank && strncmp(p->name, "rank ", 5) == 0)
        sb_add(&s, "Rank %s ran", p->name + 5);
    else
        sb_add(&s, "The job ran");
    if (p->has_trace) {
        prof_time(p->t_end, a, sizeof a);
        sb_add(&s, " %s%s on %s", a,
               strcmp(p->tr.clock, "simcuda") == 0 ? " of simulated time" : "", p->device);
    }
    if (p->has_budget) {
        prof_bytes(p->budget, b, sizeof b);
        sb_add(&s, " under a budget of %s", b);
    } else if (p->has_trace && strcmp(p->mode, ho_mode_name(HO_MODE_OFFLOAD)) == 0) {
        sb_add(&s, " with no budget");
    } else if (p->mode[0] != '\0') {
        sb_add(&s, " in %s mode", p->mode);
    }
    if (p->policy[0] != '\0') sb_add(&s, " (policy %s)", p->policy);
    sb_add(&s, ". ");
    if (p->has_trace && p->live_peak > 0) {
        prof_bytes(p->live_peak, a, sizeof a);
        prof_bytes(p->device_peak, b, sizeof b);
        uint64_t saved = p->live_peak > p->device_peak ? p->live_peak - p->device_peak : 0;
        prof_bytes(saved, c, sizeof c);
        sb_add(&s,
               "Without offload its buffers would have needed %s of device memory at peak; the "
               "device held at most %s: %s (%.0f%%) saved. ",
               a, b, c, pct(saved, p->live_peak));
    } else if (p->has_report) {
        prof_bytes(p->r_peak_device, a, sizeof a);
        prof_bytes(p->r_peak_host, b, sizeof b);
        sb_add(&s, "The device held at most %s; up to %s of buffers were in host memory at once. ",
               a, b);
    }
    if (p->moved_to_host + p->moved_to_device == 0) {
        sb_add(&s, "Nothing moved between the device and host memory.");
        return;
    }
    prof_bytes(p->moved_to_host, a, sizeof a);
    prof_bytes(p->moved_to_device, b, sizeof b);
    sb_add(&s,
           "The engine moved %s to host memory and %s back (%llu evictions; %llu restores on "
           "demand, %llu prefetches)",
           a, b, (unsigned long long)p->evictions, (unsigned long long)p->demand,
           (unsigned long long)p->prefetches);
    if (p->has_trace) sb_add(&s, ", using the link %.0f%% of the time", link_busy(p));
    sb_add(&s, ". ");
    prof_time(p->stall_ns, a, sizeof a);
    if (p->has_trace && p->t_end > 0) {
        sb_add(&s, "The application waited %s for moves, %.0f%% of the run", a,
               pct(p->stall_ns, p->t_end));
        prof_time(p->stall_why[TSTALL_DEMAND], b, sizeof b);
        prof_time(p->stall_why[TSTALL_LATE], c, sizeof c);
        prof_time(p->stall_why[TSTALL_ROOM], d, sizeof d);
        sb_add(&s, ": %s for restores on demand, ", b);
        if (p->prefetches > 0)
            sb_add(&s, "%s for %llu prefetches (of %llu) that landed late, ", c,
                   (unsigned long long)p->late, (unsigned long long)p->prefetches);
        sb_add(&s, "%s for evictions to make room.", d);
    } else {
        sb_add(&s, "The application waited %s for moves.", a);
    }
}

size_t prof_suggest(const struct profile *p, char out[][512], size_t cap) {
    size_t n = 0;
#define SUGGEST(...)                                                                               \
    do {                                                                                           \
        if (n < cap) snprintf(out[n++], 512, __VA_ARGS__);                                         \
    } while (0)
    char a[32], b[32];
    uint64_t moved = p->moved_to_host + p->moved_to_device;
    if (strcmp(p->mode, ho_mode_name(HO_MODE_TRACK)) == 0 ||
        strcmp(p->mode, ho_mode_name(HO_MODE_OFF)) == 0) {
        SUGGEST("HOSTOFF_MODE=%s moves nothing: run with --mode offload (the default) and a "
                "budget to offload.",
                p->mode);
    } else if (moved == 0) {
        prof_bytes(p->live_peak > 0 ? p->live_peak : p->device_peak, a, sizeof a);
        SUGGEST("Nothing moved: set a budget below the peak (%s), e.g. hostoff run --budget 80%% "
                "(HOSTOFF_BUDGET), to keep the device's use under it.",
                a);
    }
    if (!p->has_trace) {
        SUGGEST("Record a trace too (hostoff run --trace PATH, HOSTOFF_TRACE) to see the "
                "timeline, the stalls and which kernels waited.");
        return n;
    }
    if (moved == 0) return n;
    double stall_share = pct(p->stall_ns, p->t_end), busy = link_busy(p);
    uint64_t st = p->stall_ns > 0 ? p->stall_ns : 1;
    if (stall_share > 20 && busy > 50) {
        SUGGEST(
            "The link is busy %.0f%% of the run: the bytes to move, not when they move, limit "
            "the job. A larger budget (nearer the %s peak) moves less; a faster link (NVLink-C2C) "
            "moves it sooner.",
            busy, (prof_bytes(p->live_peak, a, sizeof a), a));
    }
    if (pct(p->stall_why[TSTALL_DEMAND], st) > 40) {
        if (strcmp(p->policy, ho_policy_name(HO_CHOOSE_LOOKAHEAD)) == 0 && p->tr.steps == 0)
            SUGGEST("Most waiting is for restores on demand: the lookahead policy learns the step "
                    "from the launches alone here. Mark steps with hostoff_mark_step() "
                    "(hostoff.h) so it knows the step at once.");
        else if (strcmp(p->policy, ho_policy_name(HO_CHOOSE_LOOKAHEAD)) == 0)
            SUGGEST(
                "Most waiting is for restores on demand: the lookahead policy runs as lru until "
                "two steps alike and one timed step have shown it the step, so a short run is "
                "mostly those; past them, more budget leaves it room to fetch earlier.");
        else
            SUGGEST("Most waiting is for restores on demand: HOSTOFF_POLICY=lookahead (--policy "
                    "lookahead) learns the step and prefetches ahead of use.");
    }
    if (p->prefetches > 0 && pct(p->late, p->prefetches) > 25) {
        SUGGEST("%llu of %llu prefetches landed late: their lead was shorter than the link needed. "
                "More budget leaves the policy room to fetch earlier.",
                (unsigned long long)p->late, (unsigned long long)p->prefetches);
    }
    if (pct(p->stall_why[TSTALL_ROOM], st) > 30) {
        prof_time(p->stall_why[TSTALL_ROOM], a, sizeof a);
        SUGGEST("Allocations and restores waited %s for evictions to make room: the budget is "
                "tight for what one kernel needs at once. Raise it, or lower the micro-batch.",
                a);
    }
    if (stall_share < 5) {
        prof_bytes(p->device_peak, b, sizeof b);
        SUGGEST("Waiting costs %.1f%% of the run: a lower budget than the %s the device held "
                "would save more memory.",
                stall_share, b);
    }
#undef SUGGEST
    return n;
}
