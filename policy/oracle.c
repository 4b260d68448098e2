/* The oracle policy (see oracle.h for what it is and is not). */
/* getline: POSIX 2008, declared under _GNU_SOURCE (set by the build). */
#include "oracle.h"
#include "plan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void ho_oracle_free(struct ho_oracle_plan *p) {
    free(p->act_start);
    free(p->act);
    free(p->use_start);
    free(p->uses);
    memset(p, 0, sizeof *p);
}

/* One pass over the launches' uses, once per (buffer, launch): counts them per buffer into
 * p->use_start (fill == NULL), or writes them in launch order after those counts (fill). */
static void use_pass(const struct ho_oracle_input *in, struct ho_oracle_plan *p, uint64_t *last,
                     size_t *fill) {
    for (size_t b = 0; b < in->nbuf; b++)
        last[b] = UINT64_MAX;
    for (size_t l = 0; l < in->nlaunch; l++)
        for (size_t k = in->use_start[l]; k < in->use_start[l + 1]; k++) {
            uint64_t b = in->use[k];
            if (b >= in->nbuf || last[b] == l) continue;
            last[b] = l;
            if (fill == NULL)
                p->use_start[b + 1]++;
            else
                p->uses[p->use_start[b] + fill[b]++] = l;
        }
}

/* Each buffer's uses, in launch order, once per launch. */
static int index_uses(const struct ho_oracle_input *in, struct ho_oracle_plan *p) {
    p->use_start = calloc(in->nbuf + 1, sizeof *p->use_start);
    size_t total = in->use_start[in->nlaunch];
    p->uses = malloc((total + 1) * sizeof *p->uses);
    size_t *fill = calloc(in->nbuf + 1, sizeof *fill);
    uint64_t *last = malloc((in->nbuf + 1) * sizeof *last);
    if (p->use_start == NULL || p->uses == NULL || fill == NULL || last == NULL) {
        free(fill);
        free(last);
        return -1;
    }
    use_pass(in, p, last, NULL);
    for (size_t b = 0; b < in->nbuf; b++)
        p->use_start[b + 1] += p->use_start[b];
    use_pass(in, p, last, fill);
    free(fill);
    free(last);
    return 0;
}

int ho_oracle_plan(const struct ho_oracle_input *in, struct ho_oracle_plan *out) {
    memset(out, 0, sizeof *out);
    out->nlaunch = in->nlaunch;
    out->nbuf = in->nbuf;
    int rc = -1;
    uint64_t *t = malloc((in->nlaunch + 1) * sizeof *t);
    int64_t *over = calloc(in->nlaunch + 1, sizeof *over);
    struct ho_gap *gaps = NULL;
    size_t ngaps = 0;
    if (t == NULL || over == NULL || index_uses(in, out) != 0) goto done;
    gaps = malloc((out->use_start[in->nbuf] + in->nbuf + 1) * sizeof *gaps);
    out->act_start = calloc(in->nlaunch + 1, sizeof *out->act_start);
    if (gaps == NULL || out->act_start == NULL) goto done;
    t[0] = 0;
    for (size_t l = 0; l < in->nlaunch; l++)
        t[l + 1] = t[l] + in->ns[l];
    /* The footprint at each launch: every buffer from its allocation to its free, nothing moved;
     * 1/32 of the budget kept back for moves in flight (lookahead keeps a tenth). */
    for (size_t b = 0; b < in->nbuf; b++) {
        uint64_t lo = in->born[b] < in->nlaunch ? in->born[b] : in->nlaunch;
        uint64_t hi = in->dies[b] < in->nlaunch ? in->dies[b] : in->nlaunch;
        if (lo >= hi) continue;
        over[lo] += (int64_t)in->bytes[b];
        over[hi] -= (int64_t)in->bytes[b];
        for (size_t k = out->use_start[b]; k + 1 < out->use_start[b + 1]; k++)
            gaps[ngaps++] = (struct ho_gap){.key = b,
                                            .bytes = in->bytes[b],
                                            .from = out->uses[k],
                                            .to = out->uses[k + 1],
                                            .lead = 1};
        /* After its last use a buffer that lives on (a segment PyTorch's caching allocator
         * keeps to the end, a tensor freed later) need not stay: a final gap, to its free or
         * the trace's end, with no restore. Every such buffer, not only those never freed:
         * on the tuning rows the oracle's steady step was a geomean 0.917 of the old plan's
         * against 0.925 (docs/policy-benchmark.md, the eleventh round). */
        size_t nu = out->use_start[b + 1] - out->use_start[b];
        if (nu > 0 && out->uses[out->use_start[b + 1] - 1] + 1 < hi)
            gaps[ngaps++] = (struct ho_gap){.key = b,
                                            .bytes = in->bytes[b],
                                            .from = out->uses[out->use_start[b + 1] - 1],
                                            .to = hi,
                                            .final = true};
    }
    int64_t limit = (int64_t)(in->budget - in->budget / 32), run = 0;
    for (size_t l = 0; l < in->nlaunch; l++) {
        run += over[l];
        over[l] = run - limit;
    }
    /* No margin to the budget: the oracle never plans a buffer not worth its move's fixed cost.
     * Planning them where the larger ones leave the budget exceeded, as lookahead does, made the
     * oracle's steady step longer on the policy benchmark's tuning rows (geomean 1.048, 6 of 24
     * longer; docs/policy-benchmark.md, the tenth round), and its held-out rows agreed. */
    struct ho_plan_run r = {.npos = in->nlaunch,
                            .t = t,
                            .link_bytes_per_ns = in->link_bytes_per_s / 1e9,
                            .over = over,
                            .move_fixed_ns = in->move_fixed_ns,
                            .margin = INT64_MAX};
    ho_plan_gaps(&r, gaps, ngaps);
    /* The actions: an eviction right after the use that opens a gap, a restore issued after the
     * launch `lead` + 1 before the use that closes it. */
    size_t nact = 0;
    for (size_t g = 0; g < ngaps; g++) {
        if (!gaps[g].taken) continue;
        out->act_start[gaps[g].from + 1]++;
        nact++;
        if (gaps[g].final) continue;
        out->act_start[gaps[g].to - gaps[g].lead - 1 + 1]++;
        nact++;
    }
    for (size_t l = 0; l < in->nlaunch; l++)
        out->act_start[l + 1] += out->act_start[l];
    out->act = malloc((nact + 1) * sizeof *out->act);
    size_t *fill = calloc(in->nlaunch + 1, sizeof *fill);
    if (out->act == NULL || fill == NULL) {
        free(fill);
        goto done;
    }
    /* Deterministic order within a launch: the gaps' order (by buffer within equal lengths). */
    for (size_t g = 0; g < ngaps; g++) {
        if (!gaps[g].taken) continue;
        uint64_t e = gaps[g].from, r2 = gaps[g].to - gaps[g].lead - 1;
        out->act[out->act_start[e] + fill[e]++] = gaps[g].key << 1;
        if (!gaps[g].final) out->act[out->act_start[r2] + fill[r2]++] = gaps[g].key << 1 | 1;
    }
    free(fill);
    rc = 0;
done:
    free(t);
    free(over);
    free(gaps);
    if (rc != 0) ho_oracle_free(out);
    return rc;
}

uint64_t ho_oracle_next_use(const struct ho_oracle_plan *p, uint64_t b, uint64_t launch) {
    if (b >= p->nbuf) return HO_NEXT_USE_NEVER;
    size_t lo = p->use_start[b], hi = p->use_start[b + 1];
    while (lo < hi) { /* the first use after `launch` */
        size_t mid = lo + (hi - lo) / 2;
        if (p->uses[mid] <= launch)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < p->use_start[b + 1] ? p->uses[lo] - launch : HO_NEXT_USE_NEVER;
}

int ho_oracle_write(const struct ho_oracle_plan *p, FILE *f) {
    fprintf(f, "hostoff_oracle_plan 1\nlaunches %zu buffers %zu\n", p->nlaunch, p->nbuf);
    /* Every buffer has its "u" line, even without uses: that is what lets the reader check the
     * header's counts against the file's size before it allocates anything. */
    for (size_t b = 0; b < p->nbuf; b++) {
        fprintf(f, "u %zu", b);
        for (size_t k = p->use_start[b]; k < p->use_start[b + 1]; k++)
            fprintf(f, " %llu", (unsigned long long)p->uses[k]);
        fputc('\n', f);
    }
    for (size_t l = 0; l < p->nlaunch; l++) {
        if (p->act_start[l] == p->act_start[l + 1]) continue;
        fprintf(f, "a %zu e", l);
        for (size_t k = p->act_start[l]; k < p->act_start[l + 1]; k++)
            if ((p->act[k] & 1) == 0) fprintf(f, " %llu", (unsigned long long)(p->act[k] >> 1));
        fputs(" r", f);
        for (size_t k = p->act_start[l]; k < p->act_start[l + 1]; k++)
            if (p->act[k] & 1) fprintf(f, " %llu", (unsigned long long)(p->act[k] >> 1));
        fputc('\n', f);
    }
    return ferror(f) ? -1 : 0;
}

/* Reading: a small recursive-descent over whitespace-separated numbers. */
struct reader {
    char *at;
};

static bool number(struct reader *r, uint64_t *v) {
    while (*r->at == ' ')
        r->at++;
    if (*r->at < '0' || *r->at > '9') return false;
    errno = 0;
    char *end;
    unsigned long long x = strtoull(r->at, &end, 10);
    if (errno != 0) return false;
    r->at = end;
    *v = x;
    return true;
}

static bool word(struct reader *r, const char *w) {
    while (*r->at == ' ')
        r->at++;
    size_t n = strlen(w);
    if (strncmp(r->at, w, n) != 0 || (r->at[n] != ' ' && r->at[n] != '\0')) return false;
    r->at += n;
    return true;
}

static bool at_end(struct reader *r) {
    while (*r->at == ' ')
        r->at++;
    return *r->at == '\0';
}

/* Grows a CSR's data array. */
static bool push(uint64_t **a, size_t *n, size_t *cap, uint64_t v) {
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 4096;
        uint64_t *x = realloc(*a, c * sizeof *x);
        if (x == NULL) return false;
        *a = x;
        *cap = c;
    }
    (*a)[(*n)++] = v;
    return true;
}

int ho_oracle_read(const char *path, struct ho_oracle_plan *out, char *err, size_t errcap) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(err, errcap, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t linecap = 0, nuses = 0, capuses = 0, nact = 0, capact = 0;
    long lineno = 0;
    const char *what = NULL;
    uint64_t last_b = 0, last_l = 0;
    bool any_b = false, any_l = false;
    ssize_t len;
    while ((len = getline(&line, &linecap, f)) >= 0) {
        lineno++;
        if (len > 0 && line[len - 1] == '\n') line[len - 1] = '\0';
        struct reader r = {line};
        if (lineno == 1) {
            uint64_t v;
            if (!word(&r, "hostoff_oracle_plan") || !number(&r, &v) || v != 1 || !at_end(&r)) {
                what = "expected \"hostoff_oracle_plan 1\"";
                break;
            }
            continue;
        }
        if (lineno == 2) {
            uint64_t nl, nb;
            if (!word(&r, "launches") || !number(&r, &nl) || !word(&r, "buffers") ||
                !number(&r, &nb) || !at_end(&r) || nl > (1ull << 32) || nb > (1ull << 32)) {
                what = "expected \"launches N buffers M\"";
                break;
            }
            /* Counts the file cannot hold are refused before anything is allocated: every launch
             * is some buffer's use (" L", 2 bytes at least) and every buffer has a "u B" line (4
             * bytes at least), so a 40-byte plan cannot ask for gigabytes. */
            struct stat st;
            uint64_t size = fstat(fileno(f), &st) == 0 && st.st_size > 0 ? (uint64_t)st.st_size : 0;
            if (nl > size / 2 || nb > size / 4) {
                what = "the header counts more launches or buffers than the file holds";
                break;
            }
            out->nlaunch = nl;
            out->nbuf = nb;
            out->use_start = calloc(nb + 1, sizeof *out->use_start);
            out->act_start = calloc(nl + 1, sizeof *out->act_start);
            if (out->use_start == NULL || out->act_start == NULL) {
                what = "out of memory";
                break;
            }
            continue;
        }
        if (lineno > 2 && out->use_start == NULL) break;
        uint64_t b, l, v, prev = 0;
        bool first = true;
        if (word(&r, "u")) {
            if (!number(&r, &b) || b >= out->nbuf || (any_b && b <= last_b) || any_l) {
                what = "expected \"u BUFFER LAUNCH...\" with buffers in increasing order, before "
                       "any \"a\" line";
                break;
            }
            for (uint64_t k = last_b + (any_b ? 1 : 0); k <= b; k++)
                out->use_start[k] = nuses;
            any_b = true;
            last_b = b;
            while (!at_end(&r)) {
                if (!number(&r, &v) || v >= out->nlaunch || (!first && v <= prev)) {
                    what = "a use must be a launch number, in increasing order";
                    break;
                }
                if (!push(&out->uses, &nuses, &capuses, v)) what = "out of memory";
                prev = v;
                first = false;
            }
            if (what != NULL) break;
        } else if (word(&r, "a")) {
            if (!number(&r, &l) || l >= out->nlaunch || (any_l && l <= last_l) || !word(&r, "e")) {
                what = "expected \"a LAUNCH e BUFFER... r BUFFER...\" in launch order";
                break;
            }
            for (uint64_t k = last_l + (any_l ? 1 : 0); k <= l; k++)
                out->act_start[k] = nact;
            any_l = true;
            last_l = l;
            bool restores = false;
            while (!at_end(&r)) {
                if (!restores && word(&r, "r")) {
                    restores = true;
                    continue;
                }
                if (!number(&r, &v) || v >= out->nbuf) {
                    what = "expected buffer numbers after \"e\" and \"r\"";
                    break;
                }
                if (!push(&out->act, &nact, &capact, v << 1 | (restores ? 1 : 0)))
                    what = "out of memory";
            }
            if (what != NULL) break;
        } else {
            what = "expected a \"u\" or an \"a\" line";
            break;
        }
    }
    free(line);
    fclose(f);
    if (what == NULL && out->use_start == NULL) what = "the file ends before its header";
    if (what != NULL) {
        snprintf(err, errcap, "%s:%ld: %s", path, lineno, what);
        ho_oracle_free(out);
        return -1;
    }
    for (uint64_t k = last_b + (any_b ? 1 : 0); k <= out->nbuf; k++)
        out->use_start[k] = nuses;
    for (uint64_t k = last_l + (any_l ? 1 : 0); k <= out->nlaunch; k++)
        out->act_start[k] = nact;
    if (out->uses == NULL) out->uses = malloc(sizeof *out->uses);
    if (out->act == NULL) out->act = malloc(sizeof *out->act);
    return 0;
}
