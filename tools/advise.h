/* hostoff advise (cmd_advise.c): the curve of step time against budget, its figures and its
 * outputs (advise.c). */
#ifndef HOSTOFF_TOOLS_ADVISE_H
#define HOSTOFF_TOOLS_ADVISE_H

#include "trace_read.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define ADVICE_MAX 32

struct advice_row {
    uint64_t budget;   /* bytes */
    uint64_t step_ns;  /* the replay's steady step */
    uint64_t peak_dev; /* the simulator's device peak in that replay */
    uint64_t limit_ns; /* max(T, E/d2h, E/h2d, 2E/duplex) */
    uint64_t remat_ns; /* rematerialisation's estimate (remat_ok) */
    bool remat_ok;
};

struct advice {
    const char *trace, *policy, *link;
    uint64_t peak;   /* the trace's peak: the most bytes live at once */
    uint64_t t_ns;   /* the unconstrained step */
    size_t steps;    /* step marks in the trace */
    double rates[3]; /* h2d, d2h, duplex, GB/s */
    double pct[ADVICE_MAX];
    struct advice_row row[ADVICE_MAX];
    size_t n;
    /* The smallest budget within 5% and within 20% of T: row index, or -1. */
    int within5, within20;
};

/* Rematerialisation's step under a budget that keeps `away` bytes off the device: T plus the
 * time to recompute, once a step, the cheapest activations (buffers allocated and freed within
 * one step, produced by a kernel) live at the peak that add up to `away`: each costs its
 * producer kernel's duration again. *ok false when such buffers cannot free that much. */
uint64_t advise_remat_ns(const struct trace *t, uint64_t t_ns, uint64_t away, bool *ok);

/* Sets within5 and within20. */
void advise_pick(struct advice *a);

void advise_print_table(FILE *f, const struct advice *a);
void advise_print_json(FILE *f, const struct advice *a);
/* The page with the curve (through a temporary file and a rename); false with a message. */
bool advise_write_html(const char *path, const struct advice *a);

#endif
