/* Reading a hostoff trace (JSON Lines, schema version 1, docs/trace-format.md) into memory,
 * checked line by line: the first error names its line and the whole trace is refused, so a
 * malformed trace is never half replayed. */
#ifndef HOSTOFF_TOOLS_TRACE_READ_H
#define HOSTOFF_TOOLS_TRACE_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum tev_kind { TEV_ALLOC, TEV_FREE, TEV_LAUNCH, TEV_COPY, TEV_SYNC, TEV_WAIT, TEV_STEP };
enum tev_dir { TEV_H2D, TEV_D2H, TEV_D2D };

struct tev {
    uint8_t kind, dir;
    bool has_s; /* "s" given (optional for alloc, free and sync) */
    bool sync, memset, managed;
    uint32_t s, on; /* stream numbers */
    uint64_t t, d;  /* host time; time spent in the call ("d", 0 when absent) */
    uint64_t id, bytes, ns;
    uint32_t nuse;
    uint32_t str;  /* a launch's kernel name, an alloc's "site": index in trace.strs (0: none) */
    size_t use_at; /* first id in trace.uses */
    long line;
};

/* The engine's timeline (lines the library writes in offload mode; not replayed). Buffer ids
 * here are not checked against lifetimes: a move completes after the buffer's free is noted. */
enum tmove_kind { TMOVE_EVICT, TMOVE_RESTORE, TMOVE_PREFETCH };
struct tmove {
    uint8_t kind; /* enum tmove_kind; restore: on demand */
    bool cancelled;
    uint64_t t, ns; /* submitted; until the completion was seen */
    uint64_t id, bytes;
    long line;
};

enum tstall_why { TSTALL_DEMAND, TSTALL_LATE, TSTALL_ROOM };
struct tstall {
    uint8_t why; /* enum tstall_why */
    uint64_t t, ns, id;
    long line;
};

struct trace {
    char device_name[256];
    uint64_t mem_bytes;
    /* Optional keys of the first line (docs/trace-format.md). */
    bool has_rank, has_pid, has_budget, generated;
    long rank, pid;
    uint64_t budget_bytes;
    double link_h2d, link_d2h, link_duplex; /* GB/s; 0: not given */
    char clock[16], mode[16], policy[16];   /* "" when not given */
    struct tev *ev; /* known events, in file order (unknown "e" values are skipped) */
    size_t n;
    uint64_t *uses;
    size_t nuses;
    struct tmove *moves; /* in file order (each written when its copy completed) */
    size_t nmoves;
    struct tstall *stalls;
    size_t nstalls;
    char **strs; /* kernel names and allocation sites, each once; strs[0] is "" */
    size_t nstrs;
    /* Computed while reading. */
    uint64_t peak_bytes;    /* the most bytes live at once, allocation sizes as written */
    uint64_t max_copy_host; /* the largest host side of a copy */
    uint32_t nstreams;      /* the largest stream number + 1 */
    uint32_t max_uses;      /* the longest use list */
    size_t launches, steps;
    /* The steps a recording without markers began (the first line's "recorder": {"step_lines":
     * [...]}, docs/trace-format.md): the index in ev of each step's first event (n when no event
     * follows its line). Never markers: a replay notes the time there and tells the library
     * nothing. None (NULL, 0) when the header has no valid list. */
    size_t *step_at;
    size_t nstep_at;
    long lines;
    long cut_at; /* the line cut short at the end (not read), 0: the file ends with a newline */
};

/* Reads path; 0 on success, else -1 with "PATH:LINE: what" in err (nothing kept). */
int trace_read(const char *path, struct trace *out, char *err, size_t errcap);
void trace_free(struct trace *t);

#endif
