/* The oracle policy inside the library: it follows a plan made in advance by `hostoff replay`
 * (policy/oracle.h) instead of deciding. The plan names launches and buffers by number; here
 * they are counted as the engine sees them (launches it shows its policy, managed allocations in
 * order) and mapped back to buffers. All under eng.lock. */
#include "real.h"
#include "engine_internal.h"
#include "log.h"
#include "oracle.h"

#include <stdlib.h>

static struct {
    bool on;
    struct ho_oracle_plan plan;
    struct ho_managed **buf; /* buffer number -> live buffer (NULL: not yet, or freed) */
    uint64_t allocs;         /* managed allocations numbered so far */
    uint64_t launches;       /* launches seen so far */
} oracle;

bool ho_oracle_load(const char *path) {
    char err[512];
    if (path == NULL) {
        ho_log(HO_LOG_ERROR, "HOSTOFF_POLICY=oracle needs HOSTOFF_ORACLE_PLAN (hostoff replay "
                             "--policy oracle writes it): using lookahead");
        return false;
    }
    if (ho_oracle_read(path, &oracle.plan, err, sizeof err) != 0) {
        ho_log(HO_LOG_ERROR, "HOSTOFF_ORACLE_PLAN=%s", err);
        return false;
    }
    oracle.buf = calloc(oracle.plan.nbuf + 1, sizeof *oracle.buf);
    if (oracle.buf == NULL) {
        ho_log(HO_LOG_ERROR, "HOSTOFF_ORACLE_PLAN=%s: out of memory: using lookahead", path);
        ho_oracle_free(&oracle.plan);
        return false;
    }
    oracle.on = true;
    return true;
}

bool ho_oracle_on(void) {
    return oracle.on;
}

void ho_oracle_alloc(struct ho_managed *m) {
    m->ordinal = oracle.allocs++;
    if (m->ordinal < oracle.plan.nbuf) oracle.buf[m->ordinal] = m;
}

void ho_oracle_forget(struct ho_managed *m) {
    if (m->ordinal < oracle.plan.nbuf && oracle.buf[m->ordinal] == m) oracle.buf[m->ordinal] = NULL;
}

size_t ho_oracle_launch(struct ho_managed **evict, size_t *nevict, struct ho_managed **restore,
                        size_t *nrestore, size_t cap) {
    uint64_t l = oracle.launches++;
    *nevict = *nrestore = 0;
    if (l >= oracle.plan.nlaunch) return 0;
    for (size_t k = oracle.plan.act_start[l]; k < oracle.plan.act_start[l + 1]; k++) {
        uint64_t b = oracle.plan.act[k] >> 1;
        struct ho_managed *m = b < oracle.plan.nbuf ? oracle.buf[b] : NULL;
        if (m == NULL) continue;
        if (oracle.plan.act[k] & 1) {
            if (*nrestore < cap) restore[(*nrestore)++] = m;
        } else if (*nevict < cap) {
            evict[(*nevict)++] = m;
        }
    }
    return *nevict + *nrestore;
}

uint64_t ho_oracle_next(const struct ho_managed *m) {
    if (m->ordinal >= oracle.plan.nbuf || oracle.launches == 0) return UINT64_MAX - 1;
    return ho_oracle_next_use(&oracle.plan, m->ordinal, oracle.launches - 1);
}
