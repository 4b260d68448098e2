/* Fuzz target: the trace reader (tools/trace_read.c), as `hostoff replay` and `hostoff report`
 * use it: the input is a whole trace file. */
#include "fuzz_input.h"
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
        trace_free(&t);
    } else if (err[0] == '\0') {
        abort();
    }
    return 0;
}
