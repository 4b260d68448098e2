/* Fuzz target: the report path (`hostoff report FILE`): reading a trace or a report into a
 * profile (tools/profile_*.c) and rendering the HTML page, the Perfetto trace and the verdict.
 * Output goes to /dev/null. Large times, sizes and rates must neither crash nor loop. */
#include "fuzz_input.h"
#include "profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static FILE *sink;
    if (sink == NULL && (sink = fopen("/dev/null", "w")) == NULL) abort();
    char *inputs[] = {(char *)fuzz_as_file(data, size)};
    struct profile *ps = NULL;
    size_t n = 0;
    struct prof_link link = {0};
    if (prof_load(inputs, 1, &link, NULL, &ps, &n) != 0) return 0;
    (void)prof_write_html(sink, ps, n, inputs, 1);
    (void)prof_write_perfetto(sink, ps, n);
    char verdict[2048], tips[4][512];
    for (size_t i = 0; i < n; i++) {
        prof_verdict(&ps[i], verdict, sizeof verdict);
        (void)prof_suggest(&ps[i], tips, 4);
    }
    prof_free(ps, n);
    return 0;
}
