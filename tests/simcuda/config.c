/* SIMCUDA_* environment variables: one table, parsed once at cuInit.
 *
 * A malformed value is reported on one line naming the variable and what was expected; cuInit then
 * fails with CUDA_ERROR_INVALID_VALUE, as the contract says, so a test never runs on a silently
 * different machine model. */
#include "sim.h"
#include "sizes.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool sim_parse_size(const char *text, uint64_t *out) {
    return ho_parse_size_text(text, true, out);
}

static bool parse_u64(const char *text, uint64_t *out) {
    /* As for sizes: no blanks or sign before the digits, so " -1" is not read as 2^64-1. */
    if (text == NULL || !isdigit((unsigned char)text[0])) return false;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0') return false;
    *out = v;
    return true;
}

static bool parse_rate(const char *text, double *out) {
    if (text == NULL || *text == '\0') return false;
    errno = 0;
    char *end = NULL;
    double v = strtod(text, &end);
    if (errno != 0 || *end != '\0' || !isfinite(v) || v <= 0) return false;
    *out = v;
    return true;
}

enum opt_kind { OPT_SIZE, OPT_COUNT, OPT_RATE, OPT_DATA, OPT_PATH };

struct opt {
    const char *name;
    enum opt_kind kind;
    const char *def;
    const char *expected;
    size_t offset;
};

#define OFF(field) offsetof(struct sim_config, field)
/* The table: name, kind, default, what a valid value looks like, destination. */
static const struct opt options[] = {
    {"SIMCUDA_DEVICE_MEM", OPT_SIZE, "141G", "a size such as 80G or 141G", OFF(device_mem)},
    {"SIMCUDA_DEVICES", OPT_COUNT, "1", "a device count from 1 to 16", OFF(devices)},
    {"SIMCUDA_LAUNCH_NS", OPT_COUNT, "2500", "a whole number of nanoseconds", OFF(launch_ns)},
    {"SIMCUDA_LAUNCH_QUEUE", OPT_COUNT, "1024", "a kernel count from 0 (unbounded) to 1048576",
     OFF(launch_queue)},
    {"SIMCUDA_H2D_GBPS", OPT_RATE, "55", "a positive rate in GB/s", OFF(h2d_gbps)},
    {"SIMCUDA_D2H_GBPS", OPT_RATE, "55", "a positive rate in GB/s", OFF(d2h_gbps)},
    {"SIMCUDA_DUPLEX_GBPS", OPT_RATE, "88", "a positive rate in GB/s", OFF(duplex_gbps)},
    {"SIMCUDA_HBM_GBPS", OPT_RATE, "4300", "a positive rate in GB/s", OFF(hbm_gbps)},
    {"SIMCUDA_DATA", OPT_DATA, "full", "full or sparse", OFF(data)},
    {"SIMCUDA_REPORT", OPT_PATH, NULL, "a file path", OFF(report)},
    {"SIMCUDA_FAIL", OPT_PATH, NULL, "function:nth[,function:nth...]", OFF(fail)},
    {"SIMCUDA_TIMELINE", OPT_PATH, NULL, "a file path", OFF(timeline)},
};
#undef OFF

static bool apply(const struct opt *o, const char *text, struct sim_config *cfg) {
    char *dst = (char *)cfg + o->offset;
    uint64_t u = 0;
    switch (o->kind) {
    case OPT_SIZE:
        if (!sim_parse_size(text, &u) || u == 0) return false;
        *(uint64_t *)(void *)dst = u;
        return true;
    case OPT_COUNT:
        if (!parse_u64(text, &u)) return false;
        if (strcmp(o->name, "SIMCUDA_DEVICES") == 0) {
            if (u < 1 || u > SIM_MAX_DEVICES) return false;
            *(int *)(void *)dst = (int)u;
        } else if (strcmp(o->name, "SIMCUDA_LAUNCH_QUEUE") == 0 && u > (1u << 20)) {
            return false;
        } else {
            *(uint64_t *)(void *)dst = u;
        }
        return true;
    case OPT_RATE:
        return parse_rate(text, (double *)(void *)dst);
    case OPT_DATA:
        if (strcmp(text, "full") == 0)
            *(enum sim_data_mode *)(void *)dst = SIM_DATA_FULL;
        else if (strcmp(text, "sparse") == 0)
            *(enum sim_data_mode *)(void *)dst = SIM_DATA_SPARSE;
        else
            return false;
        return true;
    case OPT_PATH:
        if (text != NULL && *text == '\0') text = NULL;
        *(const char **)(void *)dst = text;
        return true;
    }
    return false;
}

bool sim_config_load(struct sim_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    bool ok = true;
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++) {
        const struct opt *o = &options[i];
        if (o->def != NULL) apply(o, o->def, cfg);
        const char *env = getenv(o->name);
        if (env == NULL) continue;
        if (!apply(o, env, cfg)) {
            fprintf(stderr, "simcuda: %s=\"%s\" is not valid: expected %s\n", o->name, env,
                    o->expected);
            ok = false;
        }
    }
    return ok;
}
