/* Profiles for `hostoff report`, the wording: figures as text, the verdict and what to tune
 * next (see profile.h). */
#include "profile.h"

#include "cli.h"
#include "options.h"
#include "verdict.h"

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

/* How busy the link was: bytes copied (cancelled moves included) against what the link could
 * have moved in the run. */
static double link_busy(const struct profile *p) {
    if (!p->has_trace || p->t_end == 0) return 0;
    double cap_out = p->d2h_gbps * (double)p->t_end, cap_in = p->h2d_gbps * (double)p->t_end;
    double out = (double)p->moved_to_host + (double)p->cancelled_to_host;
    double in = (double)p->moved_to_device + (double)p->cancelled_to_device;
    double a = cap_out > 0 ? out / cap_out : 0;
    double b = cap_in > 0 ? in / cap_in : 0;
    return 100.0 * (a > b ? a : b);
}

void prof_verdict(const struct profile *p, char *buf, size_t cap) {
    struct sb s = {buf, cap, 0};
    buf[0] = '\0';
    struct verdict v;
    verdict_make(p, &v);
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
    if (v.has_step) {
        prof_time(v.step_with_ns, a, sizeof a);
        prof_time(v.step_without_ns, b, sizeof b);
        sb_add(&s, "With offload a step took %s, %.2fx the %s without (%s). ", a, v.slowdown, b,
               v.how);
    }
    if (v.has_memory) {
        prof_bytes(v.need, a, sizeof a);
        prof_bytes(v.held, b, sizeof b);
        prof_bytes(v.saved, c, sizeof c);
        sb_add(&s,
               "Without offload its buffers would have needed %s of device memory at peak; the "
               "device held at most %s: %s (%.0f%%) saved. ",
               a, b, c, pct(v.saved, v.need));
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
    if (p->cancelled_moves > 0) {
        prof_bytes(p->cancelled_to_host + p->cancelled_to_device, a, sizeof a);
        sb_add(&s, ", and copied %s more for %llu moves a use or a free cancelled", a,
               (unsigned long long)p->cancelled_moves);
    }
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
        sb_add(&s, "%s for evictions to make room", d);
        if (v.has_step && v.slowdown < VERDICT_FINE)
            sb_add(&s, "; the device still had queued work meanwhile, so the step lost under 5%%.");
        else if (v.cause != VC_NONE)
            sb_add(&s, ". What dominated the loss: %s.", verdict_cause_name(v.cause));
        else
            sb_add(&s, ".");
    } else {
        sb_add(&s, "The application waited %s for moves.", a);
    }
}

size_t prof_suggest(const struct profile *p, char out[][512], size_t cap) {
    struct verdict v;
    verdict_make(p, &v);
    size_t n = 0;
    for (; n < cap && n < v.nadvice; n++)
        snprintf(out[n], 512, "%s", v.advice[n]);
    return n;
}
