/* hostoff advise TRACE [--link L] [--policy P] [--budgets PCT,...] [-o DIR] [--json]
 *
 * What a team needs to pick a budget (or a micro-batch) before the job runs: from one recorded
 * or generated trace, the step time against the budget. The trace is replayed (hostoff replay,
 * this same binary as a child) with no budget, which gives the unconstrained step T, then at a
 * sweep of budgets, each a share of the trace's peak. Beside each replay: the physical limit of
 * a step under that budget, max(T, E/d2h, E/h2d, 2E/duplex) with E = peak - budget (DESIGN.md,
 * "Measuring": the bytes away at the peak must leave and come back within the step), and the
 * estimate for rematerialisation (advise_remat.c). Then the smallest budget whose step is within
 * 5% and within 20% of T. Printed as a table, and drawn as a figure in an HTML page
 * (advise_html.c). */
#include "advise.h"
#include "cli.h"
#include "cli_opts.h"
#include "json.h"
#include "sim_costs.h"
#include "trace_read.h"
#include "units.h"
#include "verdict.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const DEFAULT_BUDGETS = "95,90,80,70,60,50,40,30,20";

const struct cli_opt advise_opts[] = {
    {"link", "pcie5|c2c|GBPS", "pcie5",
     "the host link of the replays: PCIe Gen5 x16 (55 GB/s each way), GH200 NVLink-C2C (345 to "
     "the device, 300 from it), or GB/s each way; with --costs and no --link, the cost file's "
     "link rows",
     NULL},
    {"costs", "FILE", "",
     "the simulator's cost file (SIMCUDA_COSTS, docs/simcuda.md; the GPU kit writes "
     "costs-h200.txt) for every replay; checked first",
     NULL},
    {"policy", "lookahead|lru|oracle", "lookahead", "HOSTOFF_POLICY of the replays", NULL},
    {"min-bytes", "SIZE|auto", "auto",
     "HOSTOFF_MIN_BYTES of the replays: smaller allocations pass through and never move", NULL},
    {"budgets", "PCT,...", "95,90,80,70,60,50,40,30,20",
     "the budgets to replay at, each a percentage of the trace's peak (the most bytes its "
     "buffers hold at once)",
     NULL},
    {"o", "DIR", "", "where the HTML page goes (default: the trace's directory)", NULL},
    {"json", "", "", "print one JSON object instead of the table", NULL},
};
const size_t nadvise_opts = sizeof advise_opts / sizeof advise_opts[0];

static void usage(FILE *f) {
    fprintf(f, "usage: hostoff advise TRACE [options]\n\n"
               "Replays TRACE on the simulator with no budget and at a sweep of budgets (a "
               "percentage of the trace's\n"
               "peak), and prints the step time at each beside the physical limit of the link "
               "and rematerialisation's\n"
               "estimate; then the smallest budget within 5%% and within 20%% of the "
               "unconstrained step. Writes the\n"
               "curve as a figure in TRACE-STEM.advice.html.\n\noptions (--name VALUE or "
               "--name=VALUE):\n");
    cli_opts_help(f, advise_opts, nadvise_opts);
}

static const char *min_bytes = "auto"; /* --min-bytes, for every replay */

/* One replay of the trace: its steady step and device peak, from hostoff replay --json. */
static bool replay(const char *self, const char *trace, const char *budget, const char *policy,
                   const char *link, uint64_t *step, uint64_t *peak, uint64_t *budget_bytes,
                   double rates[3], char *link_name, size_t link_cap) {
    /* No --link: the replay's own (the cost file's link rows, else pcie5). */
    char *args[] = {"hostoff",
                    "replay",
                    (char *)trace,
                    "--budget",
                    (char *)budget,
                    "--policy",
                    (char *)policy,
                    "--min-bytes",
                    (char *)min_bytes,
                    "--json",
                    link != NULL ? "--link" : NULL,
                    (char *)link,
                    NULL};
    char *out = NULL;
    int rc = cli_run_child("advise", self, args, NULL, &out);
    char err[128];
    struct json *j = rc == 0 && out != NULL ? json_parse(out, strlen(out), err, sizeof err) : NULL;
    free(out);
    /* A recording's own steps (its step_lines) when it has them: its steady step is the mean of
     * its last three, after the one-time pinning and the steps the policy spends learning;
     * otherwise the markers' steady step, or the whole replay. */
    bool ok = j != NULL &&
              (json_get_u64(j, "steady_recorded_step_ns", step) ||
               json_get_u64(j, "steady_step_ns", step)) &&
              json_get_u64(j, "peak_device_bytes", peak);
    if (ok && budget_bytes != NULL) json_get_u64(j, "budget_bytes", budget_bytes);
    static const char *const keys[3] = {"h2d_gbps", "d2h_gbps", "duplex_gbps"};
    for (int k = 0; ok && rates != NULL && k < 3; k++) {
        const struct json *v = json_get(j, keys[k]);
        rates[k] = v != NULL && (v->type == JSON_INT || v->type == JSON_REAL) ? v->real : 0;
    }
    const struct json *name = ok && link_name != NULL ? json_get(j, "link") : NULL;
    if (name != NULL && name->type == JSON_STRING) snprintf(link_name, link_cap, "%s", name->str);
    json_free(j);
    return ok;
}

/* Percentages of the peak, comma-separated, each with or without its '%' (the one grammar,
 * src/units.h). False with *why, and *bad the item, when one is not. */
static bool parse_budgets(const char *text, double *pct, size_t *n, size_t cap, const char **why,
                          char *bad, size_t badcap) {
    *n = 0;
    *why = "no budget given";
    snprintf(bad, badcap, "%s", text);
    for (const char *p = text; *p != '\0';) {
        size_t len = strcspn(p, ",");
        char item[64];
        snprintf(item, sizeof item, "%.*s%s", (int)(len < 40 ? len : 40), p,
                 len > 0 && p[len - 1] == '%' ? "" : "%");
        uint32_t millionths = 0;
        snprintf(bad, badcap, "%.*s", (int)len, p);
        if (len == 0 || len > 40 || !ho_units_percent(item, &millionths, why)) {
            if (len == 0) *why = "an empty item";
            return false;
        }
        if (*n == cap) {
            *why = "too many budgets";
            return false;
        }
        pct[(*n)++] = (double)millionths / HO_PERCENT_ONE;
        p += len;
        if (*p == ',') p++;
    }
    return *n > 0;
}

static int cmp_desc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

int cmd_advise(int argc, char **argv) {
    const char *trace = NULL, *link = NULL, *policy = "lookahead", *budgets = DEFAULT_BUDGETS;
    const char *dir = NULL, *costs = NULL;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(a, "--json") == 0) {
            json = true;
            continue;
        }
        /* --opt VALUE or --opt=VALUE */
        const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        size_t len = eq != NULL ? (size_t)(eq - a) : strlen(a);
        const char **slot = len == 6 && strncmp(a, "--link", len) == 0         ? &link
                            : len == 8 && strncmp(a, "--policy", len) == 0     ? &policy
                            : len == 9 && strncmp(a, "--budgets", len) == 0    ? &budgets
                            : len == 2 && strncmp(a, "-o", len) == 0           ? &dir
                            : len == 7 && strncmp(a, "--costs", len) == 0      ? &costs
                            : len == 11 && strncmp(a, "--min-bytes", len) == 0 ? &min_bytes
                                                                               : NULL;
        if (slot != NULL) {
            if (eq != NULL) {
                *slot = eq + 1;
            } else if (i + 1 < argc) {
                *slot = argv[++i];
            } else {
                cli_error("advise: %s needs a value", a);
                return 2;
            }
        } else if (a[0] == '-' && a[1] != '\0') {
            cli_error("advise: unknown option %s (hostoff advise --help lists them)", a);
            return 2;
        } else if (trace == NULL) {
            trace = a;
        } else {
            cli_error("advise: one trace at a time (%s and %s)", trace, a);
            return 2;
        }
    }
    if (trace == NULL) {
        cli_error("advise: no trace given");
        usage(stderr);
        return 2;
    }
    struct advice adv = {0};
    const char *why = NULL;
    char bad[64];
    if (!parse_budgets(budgets, adv.pct, &adv.n, ADVICE_MAX, &why, bad, sizeof bad)) {
        cli_error("advise: --budgets %s: %s: %s; expected percentages of the trace's peak above 0 "
                  "and at most 100, separated by commas (e.g. 90,70,50)",
                  budgets, bad, why);
        return 2;
    }
    qsort(adv.pct, adv.n, sizeof adv.pct[0], cmp_desc);
    struct prof_link pl;
    if (link != NULL && !prof_parse_link(link, &pl)) {
        cli_error("advise: --link %s: expected " CLI_LINK_EXPECTED, link);
        return 2;
    }
    uint64_t mb = 0;
    if (strcmp(min_bytes, "auto") != 0 && (!cli_parse_uint(min_bytes, true, &mb) || mb == 0)) {
        cli_error("advise: --min-bytes %s: expected auto or a size such as 16M", min_bytes);
        return 2;
    }
    /* The replays inherit it (hostoff replay passes SIMCUDA_COSTS to its simulator). */
    if (costs != NULL && !cli_costs_use("advise", costs)) return 2;
    if (strcmp(policy, "lookahead") != 0 && strcmp(policy, "lru") != 0 &&
        strcmp(policy, "oracle") != 0) {
        cli_error("advise: --policy %s: expected lookahead, lru or oracle", policy);
        return 2;
    }
    char err[1024];
    struct trace t;
    if (trace_read(trace, &t, err, sizeof err) != 0) {
        cli_error("advise: %s", err);
        return 2;
    }
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) {
        trace_free(&t);
        return 1;
    }
    self[len] = '\0';
    adv.trace = trace;
    adv.policy = policy;
    static char link_name[64] = "pcie5";
    if (link != NULL) snprintf(link_name, sizeof link_name, "%s", link);
    adv.link = link_name;
    adv.peak = t.peak_bytes;
    adv.steps = t.steps;
    uint64_t peak_dev = 0;
    if (!replay(self, trace, "none", policy, link, &adv.t_ns, &peak_dev, NULL, adv.rates, link_name,
                sizeof link_name)) {
        cli_error("advise: the replay with no budget failed");
        trace_free(&t);
        return 1;
    }
    for (size_t i = 0; i < adv.n; i++) {
        char b[32];
        snprintf(b, sizeof b, "%g%%", adv.pct[i]);
        struct advice_row *r = &adv.row[i];
        if (!replay(self, trace, b, policy, link, &r->step_ns, &r->peak_dev, &r->budget, NULL, NULL,
                    0)) {
            cli_error("advise: the replay at --budget %s failed", b);
            trace_free(&t);
            return 1;
        }
        uint64_t away = adv.peak > r->budget ? adv.peak - r->budget : 0;
        r->limit_ns = verdict_limit_ns(adv.t_ns, away, adv.rates[0], adv.rates[1], adv.rates[2]);
        r->remat_ns = advise_remat_ns(&t, adv.t_ns, away, &r->remat_ok);
    }
    advise_pick(&adv);
    if (json)
        advise_print_json(stdout, &adv);
    else
        advise_print_table(stdout, &adv);
    /* The page. */
    char d[PATH_MAX], stem[256], html[PATH_MAX + 300];
    snprintf(d, sizeof d, "%s", dir != NULL ? dir : trace);
    if (dir == NULL) {
        char *slash = strrchr(d, '/');
        if (slash != NULL)
            *slash = '\0';
        else
            snprintf(d, sizeof d, ".");
    }
    const char *base = strrchr(trace, '/');
    snprintf(stem, sizeof stem, "%s", base != NULL ? base + 1 : trace);
    char *dot = strrchr(stem, '.');
    if (dot != NULL && dot != stem) *dot = '\0';
    if (dir != NULL && mkdir(d, 0777) != 0 && errno != EEXIST) {
        cli_error("advise: cannot create %s: %s", d, strerror(errno));
        trace_free(&t);
        return 1;
    }
    snprintf(html, sizeof html, "%s/%s.advice.html", d, stem);
    int rc = advise_write_html(html, &adv) ? 0 : 1;
    if (rc == 0 && !json) printf("\nhtml      %s\n", html);
    trace_free(&t);
    return rc;
}
