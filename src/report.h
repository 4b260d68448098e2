/* The report (HOSTOFF_REPORT): one JSON object per process, written at exit, atomically.
 * Keys are a contract (other tests read them); see docs/report-format.md. */
#ifndef HOSTOFF_REPORT_H
#define HOSTOFF_REPORT_H

#include <stddef.h>
#include <stdint.h>

struct ho_report_interpose {
    const char **hooked; /* entry-point names routed to a hook */
    size_t nhooked;
    uint64_t proc_lookups; /* cuGetProcAddress queries seen */
};

/* Expands %p (pid), %r (rank) and %% in a report or trace path. */
int ho_expand_path(const char *pattern, char *out, size_t cap);
/* The rank: RANK, OMPI_COMM_WORLD_RANK or SLURM_PROCID, else 0. */
long ho_rank(void);
/* Writes the report to the expanded path (temporary file, then rename). 0 on success. */
int ho_report_write(const char *pattern, const char *mode, const struct ho_report_interpose *ip);

#endif
