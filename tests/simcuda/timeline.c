/* SIMCUDA_TIMELINE: the device's side of virtual time, one JSON line per operation that ran on a
 * device (kernels, copies, memsets, managed prefetches), written as each one completes, in the
 * executor's order:
 *
 *   {"op":"copy","dev":0,"s":3,"enq":1000,"start":2500,"end":4100,"bytes":88000,"dir":"h2d"}
 *
 * enq: when the call enqueued it (host clock); start and end: when it ran (virtual ns); s: its
 * stream's id (0 for a graph's nodes); bytes and dir for copies (the bytes copied) and prefetches
 * (the range asked for) only. Records, waits, host functions and stream-ordered frees take no
 * device time and are left out. What the host does (each call's cost) is the library's trace
 * (HOSTOFF_TRACE); this is what the device and the link did meanwhile: which is busy when, and how
 * far the two directions overlap. The file is written through stdio as operations complete: it
 * holds everything the device ran when the process exits normally after its work is done (work
 * still queued at exit runs first when SIMCUDA_REPORT is set, report.c). A file that cannot be
 * opened is one line on stderr naming it, and no timeline. */
#include "sim.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static FILE *out;
static bool tried;

static const char *dir_name(enum sim_copy_dir d) {
    switch (d) {
    case SIM_H2D:
        return "h2d";
    case SIM_D2H:
        return "d2h";
    case SIM_D2D:
        return "d2d";
    case SIM_H2H:
        return "h2h";
    }
    return "?";
}

void sim_timeline_op(const struct sim_op *op) {
    const char *kind;
    uint64_t bytes = 0;
    const char *dir = NULL;
    switch (op->kind) {
    case SIM_OP_KERNEL:
        kind = "kernel";
        break;
    case SIM_OP_COPY:
        kind = "copy";
        bytes = (uint64_t)op->u.copy.bytes * (op->u.copy.height < 1 ? 1 : op->u.copy.height);
        dir = dir_name(op->u.copy.dir);
        break;
    case SIM_OP_MEMSET:
        kind = "memset";
        break;
    case SIM_OP_PREFETCH:
        kind = "prefetch";
        bytes = op->u.prefetch.bytes;
        dir = op->u.prefetch.to_device ? "h2d" : "d2h";
        break;
    default:
        return;
    }
    if (op->failed) return; /* it did not run */
    if (!tried) {
        tried = true;
        out = fopen(sim.cfg.timeline, "w");
        if (out == NULL)
            fprintf(stderr, "simcuda: SIMCUDA_TIMELINE=%s: cannot open it for writing: %s\n",
                    sim.cfg.timeline, strerror(errno));
    }
    if (out == NULL) return;
    fprintf(out, "{\"op\":\"%s\",\"dev\":%d,\"s\":%llu,\"enq\":%llu,\"start\":%llu,\"end\":%llu",
            kind, op->dev->ordinal, op->stream != NULL ? (unsigned long long)op->stream->id : 0ull,
            (unsigned long long)op->enq_ns, (unsigned long long)op->start_ns,
            (unsigned long long)op->end_ns);
    if (dir != NULL) fprintf(out, ",\"bytes\":%llu,\"dir\":\"%s\"", (unsigned long long)bytes, dir);
    fputs("}\n", out);
}
