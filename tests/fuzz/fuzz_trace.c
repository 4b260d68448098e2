/* Fuzz target: the trace reader (tools/trace_read.c), as `hostoff replay` and `hostoff report`
 * use it: the input is a whole trace file; and what `hostoff replay --json` computes from a trace
 * it read, the bounds on the bytes a budget requires evicting (tools/move_bound.c) and on a step's
 * time (tools/link_bound.c). */
#include "fuzz_input.h"
#include "link_bound.h"
#include "move_bound.h"
#include "trace_read.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_as_file(data, size);
    struct trace t;
    char err[512];
    if (trace_read(path, &t, err, sizeof err) == 0) {
        /* What it built is consistent: every use list lies inside the uses array. */
        for (size_t i = 0; i < t.n; i++)
            if (t.ev[i].nuse > 0 && t.ev[i].use_at + t.ev[i].nuse > t.nuses) abort();
        /* Each recorded step begins at an event, or at the end, in order. */
        for (size_t k = 0; k < t.nstep_at; k++)
            if (t.step_at[k] > t.n || (k > 0 && t.step_at[k] < t.step_at[k - 1])) abort();
        /* The lower bound never exceeds the schedule that bounds the same minimum from above (a
         * millionth of slack for the dual's floating point), at half the peak as at a quarter. */
        for (int share = 2; share <= 4; share += 2) {
            struct move_bound mb;
            if (move_bound(&t, t.peak_bytes / (uint64_t)share, 1u << 20, &mb) != 0) continue;
            if (mb.bytes > mb.cover + mb.cover / 1000000 + 1) abort();
            /* A step takes at least its link part; there is an interval only between two steps. */
            struct link_bound lb;
            if (link_bound(&t, t.peak_bytes / (uint64_t)share, 1u << 20, 55, 55, &lb) != 0)
                continue;
            if (lb.link_ns > lb.step_ns || (lb.intervals > 0 && t.launches == 0)) abort();
        }
        trace_free(&t);
    } else if (err[0] == '\0') {
        abort();
    }
    return 0;
}
