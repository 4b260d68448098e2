/* SIMCUDA_FAIL=<function>:<nth call>[:<error code>][,...]: the nth call (1-based) of that entry
 * point returns an error instead of running (CUDA_ERROR_OUT_OF_MEMORY unless a code is given).
 * Function names are the entry points' own groups (fault_points below; each group covers the
 * _v2/_ptsz/_ptds variants): every driver call the library's engine makes is one, so its handling
 * of each failure can be tested. A name that is not a fault point is refused on one line, and
 * cuInit then returns CUDA_ERROR_INVALID_VALUE, as for any malformed SIMCUDA_* value: a
 * misspelt rule that silently never fires would make a fault test pass without testing. */
#include "sim.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL_RULES 32

struct fail_rule {
    char fn[64];
    unsigned long long nth;
    CUresult code;
    unsigned long long seen;
};

/* The fault points, by the name sim_fail_check is called with. */
static const char *const fault_points[] = {
    "cuMemAlloc_v2",
    "cuMemAllocAsync",
    "cuMemAllocManaged",
    "cuMemFree",
    "cuMemHostAlloc",
    "cuMemCreate",
    "cuMemRelease",
    "cuMemMap",
    "cuMemMapPrefix", /* cuMemMap calls that map less than the whole handle */
    "cuMemUnmap",
    "cuMemSetAccess",
    "cuMemAddressReserve",
    "cuMemAddressFree",
    "cuMemGetAllocationGranularity",
    "cuMemPrefetchAsync",
    "cuMemcpy",
    "cuMemcpyAsync",
    "cuLaunchKernel",
    "cuEventCreate",
    "cuEventRecord",
    "cuEventQuery",
    "cuEventSynchronize",
    "cuEventDestroy",
    "cuStreamCreate",
    "cuStreamSynchronize",
    "cuStreamWaitEvent",
    "cuCtxSynchronize",
};

static bool is_fault_point(const char *fn) {
    for (size_t i = 0; i < sizeof fault_points / sizeof fault_points[0]; i++)
        if (strcmp(fault_points[i], fn) == 0) return true;
    return false;
}

static struct fail_rule rules[FAIL_RULES];
static int nrules = -1;
static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;

static bool parse_rules(void) {
    nrules = 0;
    const char *spec = sim.cfg.fail;
    if (spec == NULL) return true;
    char buf[1024];
    if (snprintf(buf, sizeof buf, "%s", spec) >= (int)sizeof buf) {
        fprintf(stderr, "simcuda: SIMCUDA_FAIL is longer than %zu characters\n", sizeof buf - 1);
        return false;
    }
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        if (nrules == FAIL_RULES) {
            fprintf(stderr, "simcuda: SIMCUDA_FAIL has more than %d rules\n", FAIL_RULES);
            return false;
        }
        struct fail_rule r = {.code = CUDA_ERROR_OUT_OF_MEMORY};
        char *c1 = strchr(tok, ':');
        if (c1 == NULL || c1 == tok || (size_t)(c1 - tok) >= sizeof r.fn) goto bad;
        memcpy(r.fn, tok, (size_t)(c1 - tok));
        if (!is_fault_point(r.fn)) {
            fprintf(stderr,
                    "simcuda: SIMCUDA_FAIL=\"%s\": \"%s\" is not a fault point (docs/simcuda.md "
                    "lists them)\n",
                    spec, r.fn);
            return false;
        }
        /* Digits only: strtoull would read "-1" as 2^64-1, a rule that silently never fires. */
        if (!isdigit((unsigned char)c1[1])) goto bad;
        char *end = NULL;
        r.nth = strtoull(c1 + 1, &end, 10);
        if (end == c1 + 1 || r.nth == 0) goto bad;
        if (*end == ':' && !isdigit((unsigned char)end[1])) goto bad;
        if (*end == ':') {
            char *e2 = NULL;
            long code = strtol(end + 1, &e2, 10);
            if (e2 == end + 1 || *e2 != '\0' || code <= 0) goto bad;
            r.code = (CUresult)code;
        } else if (*end != '\0') {
            goto bad;
        }
        rules[nrules++] = r;
        continue;
    bad:
        fprintf(stderr,
                "simcuda: SIMCUDA_FAIL=\"%s\" is not valid: expected function:nth[:code][,...]\n",
                spec);
        return false;
    }
    return true;
}

bool sim_fail_validate(void) {
    pthread_mutex_lock(&fail_lock);
    bool ok = parse_rules();
    pthread_mutex_unlock(&fail_lock);
    return ok;
}

CUresult sim_fail_check(const char *fn) {
    if (sim.cfg.fail == NULL) return CUDA_SUCCESS;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&fail_lock);
    for (int i = 0; i < nrules; i++) {
        if (strcmp(rules[i].fn, fn) != 0) continue;
        if (++rules[i].seen == rules[i].nth) rc = rules[i].code;
    }
    pthread_mutex_unlock(&fail_lock);
    return rc;
}
