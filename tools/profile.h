/* What `hostoff report` shows, computed from a process's report (HOSTOFF_REPORT) and trace
 * (HOSTOFF_TRACE, with the engine's timeline), either or both: the memory timeline, the link's
 * transfers, the stalls and who waited, the buffers that moved most, and the verdict's figures.
 * One profile per process (rank); render_html.c and render_perfetto.c draw them. */
#ifndef HOSTOFF_TOOLS_PROFILE_H
#define HOSTOFF_TOOLS_PROFILE_H

#include "json.h"
#include "trace_read.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Bytes in each place from time t on (until the next point). */
struct prof_point {
    uint64_t t;
    uint64_t resident; /* on the device and not moving */
    uint64_t inflight; /* being copied either way (holding device memory meanwhile) */
    uint64_t host;     /* in pinned host memory */
};

/* One copy over the link: submitted; placed at [start, end) (as early as its submission and the
 * previous copy of its direction allow, at the link's peak rate); its completion seen (an upper
 * bound of when it finished). */
struct prof_xfer {
    uint64_t submit, start, end, seen, bytes, id;
    uint8_t kind; /* enum tmove_kind */
    bool cancelled;
};

/* A wait of the application for a move, and the call that waited. */
struct prof_stall {
    uint64_t t, ns, id;
    uint8_t why;      /* enum tstall_why */
    uint32_t who;     /* the waiting kernel's name (trace string index); 0: see `what` */
    uint32_t s;       /* the stream it was issued on */
    const char *what; /* "kernel", "allocation", "copy", or "unknown" */
};

/* A buffer, with what moving it cost. */
struct prof_buf {
    uint64_t id, bytes;
    uint64_t to_host, to_device; /* bytes copied over the link (cancelled moves included) */
    uint64_t stall_ns;
    uint32_t evictions, restores, prefetches, late;
    uint32_t site;      /* allocation site (trace string index), 0: unknown */
    uint32_t waiter[3]; /* kernels that waited for it, most frequent first (string indices) */
    uint32_t nwaits[3];
    uint64_t uses;    /* from the report */
    const char *kind; /* from the report ("device", ...), or NULL */
};

/* An allocation site as the report names it: its hash (as traces write it) and its frames. */
struct prof_site {
    char key[24];
    char frames[1024]; /* the frames, innermost first, separated by " < " */
};

struct profile {
    char name[96]; /* "rank 0", or the file's name */
    bool has_rank, has_pid;
    long rank, pid;
    const char *report_path, *trace_path;

    /* From the report (has_report). */
    bool has_report;
    char mode[16], backend[16];
    uint64_t r_allocs, r_launches, r_evictions, r_restores, r_demand, r_prefetches;
    uint64_t r_cancelled_moves, r_cancelled_to_host, r_cancelled_to_device;
    uint64_t r_to_host, r_to_device, r_peak_device, r_peak_host, r_allocated, r_stall_ns;
    struct prof_site *sites; /* the report's "sites": what each allocation site's frames are */
    size_t nsites;

    /* From the trace (has_trace). */
    bool has_trace;
    struct trace tr;
    struct prof_point *pts;
    size_t npts;
    struct prof_xfer *xf; /* by end, each direction in completion order */
    size_t nxf;
    struct prof_stall *st; /* by time */
    size_t nst;
    uint64_t t_end;
    uint64_t live_peak;   /* the most bytes live at once: the footprint without offload */
    uint64_t device_peak; /* the most on the device (resident + in flight) */
    uint64_t host_peak;
    uint64_t kernel_ns; /* the sum of the kernels' durations */

    /* Either. */
    bool has_budget;
    uint64_t budget;
    double h2d_gbps, d2h_gbps, duplex_gbps; /* the link's peak */
    char device[256], policy[16];
    struct prof_buf *bufs; /* by bytes moved, most first */
    size_t nbufs;

    /* The verdict's figures (report values when there is a report, else the trace's). */
    uint64_t moved_to_host, moved_to_device, stall_ns, demand, late, prefetches, evictions;
    /* Moves whose copy ran but which did not complete (a use or the free came first): the link
     * carried their bytes beside moved_to_*. */
    uint64_t cancelled_moves, cancelled_to_host, cancelled_to_device;
    uint64_t stall_why[3]; /* ns by enum tstall_why (trace only) */

    /* The step without offload, when measured (verdict.h): by replaying this trace with no
     * budget, or by whoever ran the job without offload (hostoff demo). */
    bool has_base;
    uint64_t base_step_ns;
    char base_how[160];
};

/* The link's peak when the inputs do not say: pcie5, c2c, or a rate in GB/s each way. */
struct prof_link {
    double h2d, d2h, duplex;
    bool given; /* --link: overrides what the trace says */
};
bool prof_parse_link(const char *text, struct prof_link *out);

/* Reads every input (reports and traces, told apart by their first line) into profiles, one
 * per process: a report and a trace of the same rank and pid are one profile. Ranks first,
 * in order. `names_from` (or NULL): the trace that was replayed to make the inputs' traces
 * (hostoff replay --record): its kernel names replace the replayer's, launch by launch. 0, or
 * -1 with a message (cli_error) naming the file. */
int prof_load(char *const *paths, size_t npaths, const struct prof_link *link,
              const char *names_from, struct profile **out, size_t *nout);
void prof_free(struct profile *p, size_t n);
/* Fills what a loaded profile shows from its report and trace (profile_derive.c; prof_load calls
 * it once the profile is named). The link's figures: `link` when given, else the trace's, else
 * PCIe Gen5's. False when out of memory. */
bool prof_derive(struct profile *p, const struct prof_link *link);
/* Names the report's sites' frames by function and file:line where their modules have debug
 * information (profile_sites.c: binutils' addr2line, when installed). `sites`: the report's. */
void prof_resolve_sites(struct profile *p, const struct json *sites);
/* The site's frames from the report (p->sites), or NULL. */
const struct prof_site *prof_site_of(const struct profile *p, const char *key);

/* A trace string (kernel name, site); "" for 0. */
const char *prof_str(const struct profile *p, uint32_t idx);

/* The verdict, one paragraph of plain text (no markup), and up to `cap` suggestions of what to
 * tune next, each one sentence. */
void prof_verdict(const struct profile *p, char *buf, size_t cap);
size_t prof_suggest(const struct profile *p, char out[][512], size_t cap);

/* "12.3 GB" and friends (powers of 1000), "1.234 s" / "12.3 ms" / "45 us". */
void prof_bytes(uint64_t bytes, char *buf, size_t cap);
void prof_time(uint64_t ns, char *buf, size_t cap);

/* Writers (render_html.c, render_perfetto.c). 0, or -1 when the output could not be written. */
int prof_write_html(FILE *f, const struct profile *p, size_t n, char *const *inputs,
                    size_t ninputs);
int prof_write_perfetto(FILE *f, const struct profile *p, size_t n);

/* Writes DIR/STEM.html and, when a trace was given, DIR/STEM.perfetto.json (cmd_report.c). DIR
 * NULL: the first input's directory; STEM NULL: its name without extension (hostoff-ranks for
 * several processes). The paths written go to html and perfetto ("" when none). 0, or 1. */
int prof_write_files(const struct profile *ps, size_t n, char *const *inputs, size_t ninputs,
                     const char *dir, const char *stem, char *html, char *perfetto, size_t cap);

#endif
