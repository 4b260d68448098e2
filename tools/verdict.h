/* The one verdict on a run: its step time with offload against without, the memory it saved,
 * what dominated the loss, and advice derived from those measured facts (or none). The terminal
 * summaries (hostoff run, report, demo), the HTML page and `hostoff report --json` all print it
 * from verdict_make(), so they cannot disagree. */
#ifndef HOSTOFF_TOOLS_VERDICT_H
#define HOSTOFF_TOOLS_VERDICT_H

#include "profile.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* What dominated the time lost to offload (the host's waits by cause, or the link). */
enum verdict_cause {
    VC_NONE,   /* nothing lost (within 5%), or nothing measured */
    VC_DEMAND, /* restores on demand: a buffer was needed before anyone fetched it */
    VC_LATE,   /* prefetches that landed after the kernel wanted them */
    VC_ROOM,   /* evictions to make room for an allocation or a restore */
    VC_LINK,   /* the bytes to move: the link cannot carry them within the step */
};

/* A slowdown under this is "within noise" and gets no advice to fix it. */
#define VERDICT_FINE 1.05

#define VERDICT_ADVICE_MAX 4

struct verdict {
    /* Step time (has_step: both measured). A "step" is the training step when the trace marks
     * steps (the mean of every step after the first, as hostoff replay's steady step), else
     * the whole run. */
    bool has_step;
    uint64_t step_with_ns, step_without_ns;
    double slowdown; /* with / without */
    char how[200];   /* how "without" was measured */

    /* Memory (has_memory: the trace gives the footprint without offload). */
    bool has_memory;
    uint64_t need;  /* bytes the buffers held at once, at peak: the device use without offload */
    uint64_t held;  /* the most the device held with offload */
    uint64_t saved; /* need - held */

    /* The physical limit of a step under this budget (has_limit): max(T, E/d2h, E/h2d,
     * 2E/duplex), E = need - budget (DESIGN.md, "Measuring"). */
    bool has_limit;
    uint64_t limit_ns;

    enum verdict_cause cause;
    uint64_t cause_ns; /* the host's waits of that cause, whole run */

    char advice[VERDICT_ADVICE_MAX][512];
    size_t nadvice;
};

/* The verdict on one profile. The step without offload comes from p->base_* (set by
 * prof_measure_baseline or by the caller that measured it), else from the steps the trace
 * completed before its first move. */
void verdict_make(const struct profile *p, struct verdict *v);

/* The headline as lines of plain text, each one sentence or two: "slowdown ...", "memory ...",
 * "loss ...". Returns how many (up to cap). */
size_t verdict_lines(const struct verdict *v, char out[][512], size_t cap);

/* The verdict as one JSON object (no newline). */
void verdict_json(FILE *f, const struct verdict *v);

/* The cause's name, "restores on demand" and so on. */
const char *verdict_cause_name(enum verdict_cause c);

/* Replays each traced profile's own trace with no budget (this hostoff binary, hostoff replay
 * --budget none) and sets its base_* fields: the step without offload. Profiles without a trace,
 * or whose replay fails, keep what they had (a line on stderr says why). */
void prof_measure_baseline(struct profile *ps, size_t n);

/* The physical limit: max(T, E/d2h, E/h2d, 2E/duplex), GB/s rates, ns. */
uint64_t verdict_limit_ns(uint64_t t_ns, uint64_t away_bytes, double h2d, double d2h,
                          double duplex);

#endif
