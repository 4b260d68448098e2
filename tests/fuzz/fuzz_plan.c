/* Fuzz target: the oracle plan reader (policy/oracle.c, HOSTOFF_ORACLE_PLAN). What it accepts is
 * a consistent plan; what it allocates is bounded by the file's size. */
#include "fuzz_input.h"
#include "oracle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_as_file(data, size);
    struct ho_oracle_plan p;
    char err[512];
    if (ho_oracle_read(path, &p, err, sizeof err) != 0) {
        if (err[0] == '\0') abort();
        return 0;
    }
    if (p.nlaunch > size || p.nbuf > size) abort(); /* counts the file cannot hold */
    for (size_t b = 0; b < p.nbuf; b++) {
        if (p.use_start[b] > p.use_start[b + 1]) abort();
        for (size_t k = p.use_start[b]; k < p.use_start[b + 1]; k++)
            if (p.uses[k] >= p.nlaunch) abort();
        (void)ho_oracle_next_use(&p, b, 0);
    }
    for (size_t l = 0; l < p.nlaunch; l++) {
        if (p.act_start[l] > p.act_start[l + 1]) abort();
        for (size_t k = p.act_start[l]; k < p.act_start[l + 1]; k++)
            if ((p.act[k] >> 1) >= p.nbuf) abort();
    }
    ho_oracle_free(&p);
    return 0;
}
