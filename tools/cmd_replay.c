/* hostoff replay TRACE [--budget none|BYTES|PCT%] [--policy lookahead|lru|oracle]
 *                      [--link pcie5|c2c|GBPS] [--costs FILE] [--json]
 *
 * Replays a trace through the real libhostoff.so on the simulated driver (sparse mode: no bytes
 * move, so 100+ GB workloads replay in little memory) and summarises what the library did, in
 * the simulator's virtual time. The trace is read and checked completely first: a malformed line
 * is reported by number and nothing runs. Then hostoff-replayer (replayer.c) runs in a child
 * process with the library preloaded, and the child's SIMCUDA_REPORT and HOSTOFF_REPORT give the
 * figures. The same trace and options give the same output, byte for byte.
 *
 *   --budget none   no offload (HOSTOFF_MODE=off): the unconstrained run; with --record,
 *                   HOSTOFF_MODE=track (the library traces nothing while off), which moves
 *                   nothing either
 *   --budget BYTES  HOSTOFF_BUDGET (K, M, G, T: powers of 1024)
 *   --budget PCT%   that share of the trace's unconstrained peak (the most bytes its buffers hold
 *                   at once), computed from the trace
 *   --link          the host link, from the presets' one table (sim_costs.c): pcie5, c2c, or
 *                   GBPS: that rate each way (both at once: PCIe's shares, 35 and 53 of 55).
 *                   Default: the cost file's link rows when it has them, else pcie5.
 *   --costs FILE    the simulator's cost file (SIMCUDA_COSTS, docs/simcuda.md "Cost file"; the
 *                   GPU kit writes costs-h200.txt): checked first (a missing or malformed file is
 *                   one line naming it, exit 2), then handed to the simulator. Without it,
 *                   SIMCUDA_COSTS from the environment is the file, the one SIMCUDA_* variable
 *                   that reaches the replay. The output names the file in force.
 * The simulated device is large enough for the whole trace (twice its peak, at least the traced
 * device's memory), so only the budget constrains.
 *   --min-bytes SIZE  HOSTOFF_MIN_BYTES of the replay (default auto: the library's own default, so
 * the replay moves what a user's job would). Smaller allocations pass through to the driver and
 * stay on the device, outside the engine's budget: the engine is given the budget less the most
 * bytes they hold at once (from the trace), so the device as a whole stays within the budget asked
 * for.
 *   --policy oracle  plans every move from the whole trace first (policy/oracle.h), writes the
 *                    plan beside the reports, and the library follows it (HOSTOFF_ORACLE_PLAN):
 *                    the bound lookahead is measured against.
 *   --mark-steps  a recording without markers whose header names where its steps began
 *                 (step_lines) is replayed as if the framework had marked them: the replayer
 *                 calls hostoff_mark_step() just before each recorded step's first event, where a
 *                 "step" line would be (replayer.c). --json's step_ns are then those marked steps,
 *                 on the same boundaries as recorded_step_ns, and "marked_steps" is true. Refused
 *                 (exit 2, nothing replayed) for a trace with no recorded steps, and for one that
 *                 marks its own steps (they would be marked twice). Without it, nothing changes:
 *                 the library is told of no recorded step. */
#include "cli.h"
#include "options.h"
#include "units.h"
#include "json.h"
#include "json_text.h"
#include "move_cost.h"
#include "link_bound.h"
#include "move_bound.h"
#include "oracle_input.h"
#include "sim_costs.h"
#include "trace_read.h"
#include "verdict.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

/* The library's default HOSTOFF_MIN_BYTES, from its one table of options: auto, the value the
 * library derives at start (src/move_cost.h), or a size. */
static uint64_t library_min_bytes(void) {
    const char *def = ho_option_table[HO_OPT_MIN_BYTES].def;
    uint64_t v = 0;
    if (strcmp(def, "auto") == 0) return ho_min_bytes_auto();
    return cli_parse_uint(def, true, &v) ? v : 1;
}

struct options {
    const char *trace;
    const char *budget_text;
    uint64_t min_bytes;     /* HOSTOFF_MIN_BYTES of the replay */
    bool min_bytes_given;   /* --min-bytes; else the library's default (auto) */
    uint64_t engine_budget; /* HOSTOFF_BUDGET: the budget less what passes through */
    const char *policy;
    const char *link;       /* as given, else the link's name ("pcie5", "costs") */
    bool link_given;        /* --link: wins over the cost file's link rows */
    const char *costs_arg;  /* --costs */
    struct cli_costs costs; /* the cost file in force (costs.path "" when none) */
    const char *report;     /* --report: keep the library's report of the replay here */
    const char *record;     /* --record: HOSTOFF_TRACE of the replay (with the engine's timeline) */
    const char *device_timeline; /* --device-timeline: SIMCUDA_TIMELINE of the replay */
    bool json;
    bool mark_steps;         /* --mark-steps: the recorded steps are marked for the library too */
    double h2d, d2h, duplex; /* GB/s; duplex: both directions' rates while both run */
    double h2d_duplex, d2h_duplex; /* each of those */
    bool budget_none;
    uint64_t budget;            /* bytes */
    double budget_pct;          /* 0: given in bytes */
    uint32_t budget_millionths; /* the same percentage, exactly (src/units.h) */
};

struct results {
    uint64_t virtual_ns, peak_device, to_host, to_device, stall, evictions, restores;
    uint64_t demand_restores, prefetches, illegal, hazards, remote, launches;
    /* Moves whose copy ran but which did not complete (cancelled by a use or a free, or a
     * remap the driver refused): bytes the link carried beyond to_host and to_device. */
    uint64_t cancelled_evictions, cancelled_restores, cancelled_to_host, cancelled_to_device;
    uint64_t tracked_peak; /* HOSTOFF_REPORT's bytes.peak_device: the library's own count */
    uint64_t replay_ns;
    uint64_t calls[6]; /* driver_calls[]: the simulator's counts, device and host added */
    /* What the simulator charged (its report's cost rows), for the remap bound (link_bound.h):
     * a launch, and per MiB of a host-located range mapped with access, and unmapped. */
    uint64_t launch_ns, leave_per_mib_ns, back_per_mib_ns;
    uint64_t *marks;
    size_t nmarks;
    uint64_t *starts; /* the replayer's step_starts_ns: each recorded step's first event */
    size_t nstarts;
};

static void usage(FILE *f) {
    fprintf(
        f, "usage: hostoff replay TRACE [--budget none|BYTES|PCT%%] "
           "[--policy lookahead|lru|oracle]\n"
           "                      [--link pcie5|c2c|GBPS] [--json]\n"
           "                      [--report PATH] [--record PATH] [--device-timeline PATH]\n"
           "                      [--mark-steps]\n\n"
           "  --budget   device bytes for the offloaded buffers: a percentage of the trace's peak\n"
           "             (the most bytes its buffers hold at once; default 50%%), a size (60G,\n"
           "             1.5GiB: powers of 1024, docs/units.md), or none: no offload\n"
           "  --min-bytes  smaller allocations pass through and never move (default auto: the "
           "library's\n"
           "             HOSTOFF_MIN_BYTES default, derived from the published move costs)\n"
           "  --policy   HOSTOFF_POLICY for the replay (default lookahead, the library's "
           "default);\n"
           "             oracle: every move planned from the whole trace first (the bound)\n"
           "  --link     host link: pcie5 (55 GB/s each way), c2c (345 to the device, 300 from "
           "it), or GB/s\n"
           "             (default: the cost file's link rows, else pcie5)\n"
           "  --costs    the simulator's cost file (SIMCUDA_COSTS; default: that variable)\n"
           "  --json     one JSON object instead of the summary\n"
           "  --report   keep the library's report (HOSTOFF_REPORT) of the replay at PATH\n"
           "  --record   trace the replay (HOSTOFF_TRACE, the engine's moves and stalls too;\n"
           "             with --budget none the library tracks without moving anything)\n"
           "  --device-timeline  what the simulated device and link ran, and when\n"
           "             (SIMCUDA_TIMELINE: a JSON line per kernel, copy and memset)\n"
           "  --mark-steps  tell the library of each step a recording without markers names\n"
           "             (its header's step_lines), as if the framework had marked its steps\n"
           "  (--name VALUE and --name=VALUE alike)\n");
}

static int parse(int argc, char **argv, struct options *o) {
    o->budget_text = "50%";
    o->min_bytes = library_min_bytes();
    o->policy = "lookahead"; /* the library's default */
    o->link = "pcie5";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        }
        if (strcmp(a, "--json") == 0) {
            o->json = true;
            continue;
        }
        if (strcmp(a, "--mark-steps") == 0) {
            o->mark_steps = true;
            continue;
        }
        bool takes = strcmp(a, "--budget") == 0 || strcmp(a, "--policy") == 0 ||
                     strcmp(a, "--link") == 0 || strcmp(a, "--report") == 0 ||
                     strcmp(a, "--record") == 0 || strcmp(a, "--min-bytes") == 0 ||
                     strcmp(a, "--device-timeline") == 0 || strcmp(a, "--costs") == 0;
        if (takes && i + 1 >= argc) {
            cli_error("replay: %s needs a value", a);
            return 2;
        }
        if (strcmp(a, "--budget") == 0)
            o->budget_text = argv[++i];
        else if (strcmp(a, "--policy") == 0)
            o->policy = argv[++i];
        else if (strcmp(a, "--link") == 0) {
            o->link = argv[++i];
            o->link_given = true;
        } else if (strcmp(a, "--costs") == 0)
            o->costs_arg = argv[++i];
        else if (strcmp(a, "--report") == 0)
            o->report = argv[++i];
        else if (strcmp(a, "--record") == 0)
            o->record = argv[++i];
        else if (strcmp(a, "--device-timeline") == 0)
            o->device_timeline = argv[++i];
        else if (strcmp(a, "--min-bytes") == 0) {
            const char *v = argv[++i];
            o->min_bytes_given = strcmp(v, "auto") != 0;
            if (!o->min_bytes_given)
                o->min_bytes = library_min_bytes();
            else if (!cli_parse_uint(v, true, &o->min_bytes) || o->min_bytes == 0) {
                cli_error("replay: --min-bytes %s: expected auto or a size such as 16M", v);
                return 2;
            }
        } else if (a[0] == '-' && a[1] != '\0') {
            cli_error("replay: unknown option %s", a);
            usage(stderr);
            return 2;
        } else if (o->trace == NULL)
            o->trace = a;
        else {
            cli_error("replay: one trace at a time (%s and %s)", o->trace, a);
            return 2;
        }
    }
    if (o->trace == NULL) {
        usage(stderr);
        return 2;
    }
    if (strcmp(o->policy, "lru") != 0 && strcmp(o->policy, "lookahead") != 0 &&
        strcmp(o->policy, "oracle") != 0) {
        cli_error("replay: --policy %s: expected lookahead, lru or oracle", o->policy);
        return 2;
    }
    struct cli_link link;
    if (o->link_given && !cli_link_parse(o->link, &link)) {
        cli_error("replay: --link %s: expected " CLI_LINK_EXPECTED, o->link);
        return 2;
    }
    /* The cost file: --costs, else SIMCUDA_COSTS (the environment's is checked the same way). */
    const char *costs = o->costs_arg != NULL ? o->costs_arg : getenv("SIMCUDA_COSTS");
    if (o->costs_arg != NULL || (costs != NULL && *costs != '\0')) {
        if (!cli_costs_read("replay", costs, &o->costs)) return 2;
    }
    bool file_link =
        o->costs.has_h2d || o->costs.has_d2h || o->costs.has_h2d_duplex || o->costs.has_d2h_duplex;
    cli_link_with_costs(o->link_given ? o->link : NULL, &o->costs, &link);
    if (!o->link_given && file_link) o->link = "costs";
    o->h2d = link.h2d;
    o->d2h = link.d2h;
    o->h2d_duplex = link.h2d_duplex;
    o->d2h_duplex = link.d2h_duplex;
    o->duplex = link.h2d_duplex + link.d2h_duplex;
    /* The library's grammar (src/units.h); a percentage is of the trace's peak. */
    const char *b = o->budget_text, *why = NULL;
    struct ho_amount amount;
    if (!ho_parse_amount_why(b, &amount, &why)) {
        cli_error("replay: --budget %s: %s; expected none, a size such as 60G or 1.5GiB, or a "
                  "percentage of the trace's peak such as 70%%",
                  b, why);
        return 2;
    }
    if (cli_budget_unitless("replay", b, "the trace's peak")) return 2;
    if (amount.kind == HO_AMOUNT_NONE)
        o->budget_none = true;
    else if (amount.kind == HO_AMOUNT_PERCENT) {
        o->budget_pct = amount.percent;
        o->budget_millionths = amount.millionths;
    } else
        o->budget = amount.bytes;
    return 0;
}

/* ------------------------------------------------------------------------- the child process */

static char **child_env(char **extra, size_t nextra) {
    size_t n = 0;
    while (environ[n] != NULL)
        n++;
    char **env = calloc(n + nextra + 1, sizeof *env);
    if (env == NULL) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *v = environ[i];
        /* The replay's configuration is all ours: nothing inherited may change it. */
        if (strncmp(v, "HOSTOFF_", 8) == 0 || strncmp(v, "SIMCUDA_", 8) == 0 ||
            strncmp(v, "LD_PRELOAD=", 11) == 0 || strncmp(v, "LD_LIBRARY_PATH=", 16) == 0)
            continue;
        env[k++] = environ[i];
    }
    for (size_t i = 0; i < nextra; i++)
        env[k++] = extra[i];
    env[k] = NULL;
    return env;
}

__attribute__((format(printf, 3, 4))) static void setv(char **slot, size_t *n, const char *fmt,
                                                       ...) {
    char buf[PATH_MAX + 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    slot[(*n)++] = strdup(buf);
}

/* NAME=PATH, a relative PATH made absolute against this process's working directory. */
static void setv_path(char **slot, size_t *n, const char *name, const char *path) {
    char cwd[PATH_MAX];
    if (path[0] != '/' && getcwd(cwd, sizeof cwd) != NULL)
        setv(slot, n, "%s=%s/%s", name, cwd, path);
    else
        setv(slot, n, "%s=%s", name, path);
}

/* Runs the replayer (with --mark-steps when asked); its stdout (one JSON line) into *out. */
static int run_child(const char *replayer, char **env, const char *trace, bool mark_steps,
                     char **out) {
    char *const plain[] = {(char *)replayer, (char *)trace, NULL};
    char *const marked[] = {(char *)replayer, (char *)"--mark-steps", (char *)trace, NULL};
    return cli_run_child("replay", replayer, mark_steps ? marked : plain, env, out);
}

static struct json *read_json_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (f == NULL) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t r;
    while (buf != NULL && (r = fread(buf + len, 1, cap - len, f)) > 0) {
        len += r;
        if (len == cap) {
            char *b2 = realloc(buf, cap *= 2);
            if (b2 == NULL) free(buf);
            buf = b2;
        }
    }
    fclose(f);
    if (buf == NULL) return NULL;
    char err[128];
    struct json *v = json_parse(buf, len, err, sizeof err);
    free(buf);
    return v;
}

static uint64_t member(const struct json *o, const char *group, const char *key) {
    const struct json *g = group != NULL ? json_get(o, group) : o;
    uint64_t v = 0;
    json_get_u64(g, key, &v);
    return v;
}

/* The driver calls a replay's moves pay for (--json "driver_calls"), by kind. */
static const char *const driver_calls[] = {"cuMemCreate", "cuMemRelease", "cuMemHostAlloc",
                                           "cuMemMap",    "cuMemUnmap",   "cuMemSetAccess"};

static bool collect(const char *dir, const char *child_out, struct results *r) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/simcuda.json", dir);
    struct json *sim = read_json_file(path);
    snprintf(path, sizeof path, "%s/hostoff.json", dir);
    struct json *ho = read_json_file(path);
    char err[128];
    struct json *rep =
        child_out != NULL ? json_parse(child_out, strlen(child_out), err, sizeof err) : NULL;
    bool ok = sim != NULL && ho != NULL && rep != NULL;
    if (ok) {
        r->virtual_ns = member(sim, NULL, "virtual_ns");
        r->peak_device = member(sim, NULL, "peak_device_bytes");
        r->illegal = member(sim, NULL, "illegal_accesses");
        r->hazards = member(sim, NULL, "hazards");
        r->remote = member(sim, NULL, "remote_accesses");
        for (size_t k = 0; k < sizeof driver_calls / sizeof driver_calls[0]; k++) {
            char key[64];
            snprintf(key, sizeof key, "%s.device", driver_calls[k]);
            r->calls[k] = member(sim, "calls", key);
            snprintf(key, sizeof key, "%s.host", driver_calls[k]);
            r->calls[k] += member(sim, "calls", key);
        }
        r->launch_ns = member(sim, "cost_fixed_ns", "cuLaunchKernel.device");
        r->leave_per_mib_ns = member(sim, "cost_per_mib_ns", "cuMemMap.host") +
                              member(sim, "cost_per_mib_ns", "cuMemSetAccess.host");
        r->back_per_mib_ns = member(sim, "cost_per_mib_ns", "cuMemUnmap.host");
        r->to_host = member(ho, "bytes", "to_host");
        r->to_device = member(ho, "bytes", "to_device");
        r->stall = member(ho, "time_ns", "stall");
        r->evictions = member(ho, "counts", "evictions");
        r->restores = member(ho, "counts", "restores");
        r->demand_restores = member(ho, "counts", "demand_restores");
        r->prefetches = member(ho, "counts", "prefetches");
        r->cancelled_evictions = member(ho, "counts", "cancelled_evictions");
        r->cancelled_restores = member(ho, "counts", "cancelled_restores");
        r->cancelled_to_host = member(ho, "bytes", "cancelled_to_host");
        r->cancelled_to_device = member(ho, "bytes", "cancelled_to_device");
        r->tracked_peak = member(ho, "bytes", "peak_device");
        r->launches = member(rep, NULL, "launches");
        r->replay_ns = member(rep, NULL, "end_ns");
        const struct json *m = json_get(rep, "step_marks_ns");
        if (m != NULL && m->type == JSON_ARRAY && m->n > 0) {
            r->marks = calloc(m->n, sizeof *r->marks);
            for (size_t i = 0; r->marks != NULL && i < m->n; i++)
                r->marks[r->nmarks++] = m->items[i].mag;
        }
        const struct json *st = json_get(rep, "step_starts_ns");
        if (st != NULL && st->type == JSON_ARRAY && st->n > 0) {
            r->starts = calloc(st->n, sizeof *r->starts);
            for (size_t i = 0; r->starts != NULL && i < st->n; i++)
                r->starts[r->nstarts++] = st->items[i].mag;
        }
    }
    json_free(sim);
    json_free(ho);
    json_free(rep);
    return ok;
}

/* ------------------------------------------------------------------------------- output */

/* Step k lasts from its marker to the next one (the last, to the end of the replay). */
static uint64_t step_ns(const struct results *r, size_t k) {
    uint64_t end = k + 1 < r->nmarks ? r->marks[k + 1] : r->replay_ns;
    return end > r->marks[k] ? end - r->marks[k] : 0;
}

/* The steady-state step: the mean of every step after the first (which also warms up). */
static uint64_t steady_step_ns(const struct results *r) {
    if (r->nmarks == 0) return r->replay_ns;
    if (r->nmarks == 1) return step_ns(r, 0);
    uint64_t sum = 0;
    for (size_t k = 1; k < r->nmarks; k++)
        sum += step_ns(r, k);
    return sum / (r->nmarks - 1);
}

/* Recorded step k of a recording without markers (its header's step_lines, the replayer's
 * step_starts_ns): from its first event to the next step's, the last to the end of the replay.
 * The library was not told of these steps. */
static uint64_t recorded_step_ns(const struct results *r, size_t k) {
    uint64_t end = k + 1 < r->nstarts ? r->starts[k + 1] : r->replay_ns;
    return end > r->starts[k] ? end - r->starts[k] : 0;
}

/* The steady recorded step: the mean of the last three recorded steps (rounded down to the ns),
 * past what a job pays once and spreads over thousands of steps: pinning the host pool and the
 * steps the policy spends learning. With fewer than four steps, the mean of every step after
 * the first; with one, that step. Only when nstarts > 0 (the JSON says null otherwise). */
static uint64_t steady_recorded_step_ns(const struct results *r) {
    size_t first = r->nstarts >= 4 ? r->nstarts - 3 : r->nstarts > 1 ? 1 : 0;
    uint64_t sum = 0;
    for (size_t k = first; k < r->nstarts; k++)
        sum += recorded_step_ns(r, k);
    return sum / (r->nstarts - first);
}

static void print_json(const struct options *o, const struct trace *t, const struct results *r) {
    printf("{\"virtual_ns\":%llu,\"peak_device_bytes\":%llu,\"bytes_to_host\":%llu,"
           "\"bytes_to_device\":%llu,\"stall_ns\":%llu,\"evictions\":%llu,\"restores\":%llu,"
           "\"demand_restores\":%llu,\"prefetches\":%llu,",
           (unsigned long long)r->virtual_ns, (unsigned long long)r->peak_device,
           (unsigned long long)r->to_host, (unsigned long long)r->to_device,
           (unsigned long long)r->stall, (unsigned long long)r->evictions,
           (unsigned long long)r->restores, (unsigned long long)r->demand_restores,
           (unsigned long long)r->prefetches);
    printf("\"cancelled_bytes_to_host\":%llu,\"cancelled_bytes_to_device\":%llu,"
           "\"cancelled_evictions\":%llu,\"cancelled_restores\":%llu,",
           (unsigned long long)r->cancelled_to_host, (unsigned long long)r->cancelled_to_device,
           (unsigned long long)r->cancelled_evictions, (unsigned long long)r->cancelled_restores);
    printf("\"replay_ns\":%llu,\"steady_step_ns\":%llu,\"step_ns\":[",
           (unsigned long long)r->replay_ns, (unsigned long long)steady_step_ns(r));
    for (size_t k = 0; k < r->nmarks; k++)
        printf("%s%llu", k ? "," : "", (unsigned long long)step_ns(r, k));
    printf("],\"recorded_step_ns\":[");
    for (size_t k = 0; k < r->nstarts; k++)
        printf("%s%llu", k ? "," : "", (unsigned long long)recorded_step_ns(r, k));
    if (r->nstarts > 0)
        printf("],\"steady_recorded_step_ns\":%llu,",
               (unsigned long long)steady_recorded_step_ns(r));
    else
        printf("],\"steady_recorded_step_ns\":null,");
    printf("\"marked_steps\":%s,", o->mark_steps ? "true" : "false");
    printf("\"driver_calls\":{");
    for (size_t k = 0; k < sizeof driver_calls / sizeof driver_calls[0]; k++)
        printf("%s\"%s\":%llu", k ? "," : "", driver_calls[k], (unsigned long long)r->calls[k]);
    printf("},\"trace_peak_bytes\":%llu,", (unsigned long long)t->peak_bytes);
    static const char no_bound[] =
        "\"evict_bound_bytes\":null,\"evict_bound_uncovered_bytes\":null,"
        "\"evict_cover_bytes\":null,";
    if (o->budget_none) {
        printf("\"budget_bytes\":null,%s\"order_bound_step_ns\":null,\"order_bound_link_ns\":null,"
               "\"remap_bound_host_ns\":null,\"remap_bound_step_ns\":null,",
               no_bound);
    } else {
        printf("\"budget_bytes\":%llu,\"engine_budget_bytes\":%llu,", (unsigned long long)o->budget,
               (unsigned long long)o->engine_budget);
        /* The fewest bytes any schedule within the budget evicts (tools/move_bound.h). */
        struct move_bound mb;
        if (move_bound(t, o->budget, o->min_bytes, &mb) == 0)
            printf("\"evict_bound_bytes\":%llu,\"evict_bound_uncovered_bytes\":%llu,"
                   "\"evict_cover_bytes\":%llu,",
                   (unsigned long long)mb.bytes, (unsigned long long)mb.uncovered,
                   (unsigned long long)mb.cover);
        else
            printf("%s", no_bound);
        /* The least time a step takes with its bytes crossing the link in the order the uses
         * allow (tools/link_bound.h). */
        struct link_bound lb;
        if (link_bound(t, o->budget, o->min_bytes, o->h2d, o->d2h, &lb) == 0 && lb.intervals > 0) {
            printf("\"order_bound_step_ns\":%llu,\"order_bound_link_ns\":%llu,",
                   (unsigned long long)lb.step_ns, (unsigned long long)lb.link_ns);
            /* The host's part: the remaps of the bytes that must move, and the launches, at the
             * figures the simulator charged (link_bound.h, the remap bound). */
            const double mib = (double)(1u << 20);
            double host = lb.launches * (double)r->launch_ns +
                          (double)lb.leave_bytes / mib * (double)r->leave_per_mib_ns +
                          (double)lb.back_bytes / mib * (double)r->back_per_mib_ns;
            uint64_t host_ns = (uint64_t)host;
            printf("\"remap_bound_host_ns\":%llu,\"remap_bound_step_ns\":%llu,",
                   (unsigned long long)host_ns,
                   (unsigned long long)(host_ns > lb.step_ns ? host_ns : lb.step_ns));
        } else {
            printf("\"order_bound_step_ns\":null,\"order_bound_link_ns\":null,"
                   "\"remap_bound_host_ns\":null,\"remap_bound_step_ns\":null,");
        }
    }
    printf("\"min_bytes\":%llu,\"min_bytes_from\":\"%s\",", (unsigned long long)o->min_bytes,
           o->min_bytes_given ? "--min-bytes" : "auto");
    printf("\"costs\":");
    if (o->costs.path[0] != '\0') {
        putchar('"');
        ho_json_write_text(stdout, o->costs.path);
        printf("\",");
    } else {
        printf("null,");
    }
    printf("\"h2d_duplex_gbps\":%g,\"d2h_duplex_gbps\":%g,", o->h2d_duplex, o->d2h_duplex);
    printf("\"policy\":\"%s\",\"link\":\"%s\",\"h2d_gbps\":%g,\"d2h_gbps\":%g,"
           "\"duplex_gbps\":%g,\"events\":%zu,\"launches\":%llu,\"steps\":%zu,"
           "\"illegal_accesses\":%llu,\"hazards\":%llu,\"remote_accesses\":%llu}\n",
           o->budget_none ? "none" : o->policy, o->link, o->h2d, o->d2h, o->duplex, t->n,
           (unsigned long long)r->launches, t->steps, (unsigned long long)r->illegal,
           (unsigned long long)r->hazards, (unsigned long long)r->remote);
}

/* The unconstrained steady step (this binary, --budget none --json), for the ratio; 0 when
 * the replay fails. `recorded`: its steady recorded step (a recording without markers). */
static uint64_t unconstrained_step(const struct options *o, bool recorded) {
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return 0;
    self[len] = '\0';
    char *args[12] = {"hostoff", "replay", (char *)o->trace, "--budget", "none", "--json"};
    int n = 6;
    if (o->link_given) {
        args[n++] = "--link";
        args[n++] = (char *)o->link;
    }
    if (o->costs.path[0] != '\0') {
        args[n++] = "--costs";
        args[n++] = (char *)o->costs.path;
    }
    args[n] = NULL;
    char *out = NULL;
    int rc = cli_run_child("replay", self, args, NULL, &out);
    char err[128];
    struct json *j = rc == 0 && out != NULL ? json_parse(out, strlen(out), err, sizeof err) : NULL;
    uint64_t step = 0;
    if (j != NULL) json_get_u64(j, recorded ? "steady_recorded_step_ns" : "steady_step_ns", &step);
    json_free(j);
    free(out);
    return step;
}

static void print_summary(const struct options *o, const struct trace *t, const struct results *r) {
    char a[32], b[32], c[32];
    cli_format_bytes(t->peak_bytes, a, sizeof a);
    printf("trace     %s: %zu events, %zu launches, %zu steps, peak %s\n", o->trace, t->n,
           t->launches, t->steps, a);
    if (o->budget_none) {
        printf("replay    no offload (--budget none)\n");
    } else {
        cli_format_bytes(o->budget, b, sizeof b);
        /* As given, then in the figures' unit: "1G" is 1.07 GB (powers of 1000), not 1 GB. */
        if (o->budget_pct > 0)
            printf("replay    budget %s (%s of the peak)", b, o->budget_text);
        else
            printf("replay    budget %s = %s", o->budget_text, b);
        printf(", policy %s, link %s (%g GB/s to the device, %g from it; %g + %g at once)\n",
               o->policy, o->link, o->h2d, o->d2h, o->h2d_duplex, o->d2h_duplex);
    }
    if (!o->budget_none) {
        cli_format_bytes(o->min_bytes, b, sizeof b);
        printf("min bytes %s: %s\n", b,
               o->min_bytes_given ? "--min-bytes"
                                  : "auto, the smallest buffer worth a move's published fixed "
                                    "driver time on PCIe Gen5 (HOSTOFF_MIN_BYTES' default)");
    }
    if (o->costs.path[0] != '\0')
        printf("costs     %s (the simulator's cost file: its rows replace the built-in ones)\n",
               o->costs.path);
    if (t->steps > 0)
        printf("time      %.6f s virtual, replay %.6f s, steady step %.6f s\n",
               (double)r->virtual_ns / 1e9, (double)r->replay_ns / 1e9,
               (double)steady_step_ns(r) / 1e9);
    else if (o->mark_steps)
        printf("time      %.6f s virtual, replay %.6f s (the trace marks no steps: --mark-steps "
               "marked the recording's own, below)\n",
               (double)r->virtual_ns / 1e9, (double)r->replay_ns / 1e9);
    else
        printf("time      %.6f s virtual, replay %.6f s (no steps marked: %s)\n",
               (double)r->virtual_ns / 1e9, (double)r->replay_ns / 1e9,
               r->nstarts > 0 ? "the recording's own steps below"
                              : "the whole replay is the figure");
    if (r->nstarts > 0) {
        /* The recording's own steps (step_lines), which the library was told of only with
         * --mark-steps. */
        printf("recorded  %zu steps (the recording's step_lines, %s):", r->nstarts,
               o->mark_steps ? "marked by --mark-steps" : "not marked");
        for (size_t k = 0; k < r->nstarts; k++)
            printf(" %.3f", (double)recorded_step_ns(r, k) / 1e9);
        printf(" s; steady %.6f s (%s)\n", (double)steady_recorded_step_ns(r) / 1e9,
               r->nstarts >= 4  ? "the last three"
               : r->nstarts > 1 ? "every step after the first"
                                : "the one step");
    }
    if (!o->budget_none) {
        /* The figure people quote: against the step without offload, and the physical limit.
         * Without markers, a recording's own steps (step_lines) give the step: the steady
         * recorded step here and without offload, so that both sides are one step. */
        bool recorded = t->steps == 0 && r->nstarts > 0;
        uint64_t base = unconstrained_step(o, recorded);
        uint64_t step = t->steps > 0 ? steady_step_ns(r)
                        : recorded   ? steady_recorded_step_ns(r)
                                     : r->replay_ns;
        if (base > 0) {
            uint64_t away = t->peak_bytes > o->budget ? t->peak_bytes - o->budget : 0;
            uint64_t lim = verdict_limit_ns(base, away, o->h2d, o->d2h, o->duplex);
            printf("step      %.6f s%s, %.2fx the step without offload (%.6f s); the physical "
                   "limit at this budget is %.6f s (%.2fx)\n",
                   (double)step / 1e9, recorded ? " (steady, recorded)" : "",
                   (double)step / (double)base, (double)base / 1e9, (double)lim / 1e9,
                   (double)lim / (double)base);
        }
    }
    cli_format_bytes(r->peak_device, a, sizeof a);
    if (o->budget_none && r->peak_device > t->peak_bytes) {
        /* The simulator reuses a stream-ordered free at once only on its own stream or after an
         * event dependency, as the driver does; others wait for the device to reach the free,
         * while the host allocates ahead: its count is not the trace's footprint. */
        cli_format_bytes(t->peak_bytes, b, sizeof b);
        printf("device    peak %s, the trace's buffers at once (the simulator counted %s: it "
               "reuses memory freed in stream order on another stream only once the device reaches "
               "the "
               "free)\n",
               b, a);
    } else if (!o->budget_none && r->peak_device > o->budget) {
        /* Over the whole-device budget: said, with the library's own count beside it. The engine
         * keeps the managed buffers within HOSTOFF_BUDGET (the budget less the pass-through peak
         * in the trace's order); when the library counted no more than the budget, the rest is
         * memory the driver held for freed pass-through allocations the device had not reached
         * (docs/policy-benchmark.md, seventh round). */
        cli_format_bytes(r->peak_device - o->budget, b, sizeof b);
        cli_format_bytes(r->tracked_peak, c, sizeof c);
        printf("device    peak %s, %s over the budget; the library counted at most %s", a, b, c);
        if (r->tracked_peak <= o->budget)
            printf(": the rest is memory freed in stream order by allocations below "
                   "HOSTOFF_MIN_BYTES, which pass through, that the device had not reached yet "
                   "(a smaller --min-bytes leaves less to them)");
        printf("\n");
    } else {
        printf("device    peak %s\n", a);
    }
    cli_format_bytes(r->to_host, b, sizeof b);
    cli_format_bytes(r->to_device, c, sizeof c);
    printf("moved     %s to host, %s to device; %llu evictions, %llu restores (%llu on demand, "
           "%llu prefetches)\n",
           b, c, (unsigned long long)r->evictions, (unsigned long long)r->restores,
           (unsigned long long)r->demand_restores, (unsigned long long)r->prefetches);
    if (r->cancelled_evictions + r->cancelled_restores > 0) {
        cli_format_bytes(r->cancelled_to_host, b, sizeof b);
        cli_format_bytes(r->cancelled_to_device, c, sizeof c);
        printf("cancelled %s to host, %s to device crossed the link for moves that did not "
               "complete (%llu evictions, %llu restores: a use or a free came first, or a remap "
               "failed)\n",
               b, c, (unsigned long long)r->cancelled_evictions,
               (unsigned long long)r->cancelled_restores);
    }
    /* What any schedule must evict under this budget, for planning one (tools/move_bound.h). */
    struct move_bound mb;
    if (!o->budget_none && move_bound(t, o->budget, o->min_bytes, &mb) == 0) {
        cli_format_bytes(mb.bytes, b, sizeof b);
        cli_format_bytes(mb.cover, c, sizeof c);
        printf("required  at least %s to host (a schedule that ignores the link's timing: %s)", b,
               c);
        if (mb.uncovered > 0) {
            cli_format_bytes(mb.uncovered, a, sizeof a);
            printf("; a launch's own buffers exceed the budget by %s: read over the link", a);
        }
        putchar('\n');
    }
    printf("stall     %.6f s\n", (double)r->stall / 1e9);
    if (r->illegal != 0 || r->hazards != 0)
        printf("WARNING   %llu illegal accesses, %llu hazards in the simulator\n",
               (unsigned long long)r->illegal, (unsigned long long)r->hazards);
}

/* ------------------------------------------------------------------------------- command */

static void remove_dir(const char *dir) {
    static const char *const files[] = {"simcuda.json", "hostoff.json", "oracle.plan"};
    char path[PATH_MAX];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

int cmd_replay(int argc, char **argv) {
    argv = cli_split_equals(&argc, argv); /* --name=VALUE as --name VALUE */
    if (argv == NULL) return 1;
    struct options o = {0};
    int rc = parse(argc, argv, &o);
    if (rc != 0) return rc;

    static const char *const sims[] = {"../tests/simcuda/libcuda.so.1",
                                       HOSTOFF_LIBEXECDIR "/simcuda/libcuda.so.1", NULL};
    static const char *const players[] = {"hostoff-replayer",
                                          HOSTOFF_LIBEXECDIR "/hostoff-replayer", NULL};
    char lib[PATH_MAX], sim[PATH_MAX], player[PATH_MAX];
    if (!cli_locate("libhostoff.so", "HOSTOFF_LIB", cli_lib_candidates, lib, sizeof lib) ||
        !cli_locate("the simulated driver (libcuda.so.1)", "HOSTOFF_SIMCUDA_DIR", sims, sim,
                    sizeof sim) ||
        !cli_locate("hostoff-replayer", "HOSTOFF_REPLAYER", players, player, sizeof player))
        return 1;
    /* The simulated driver's directory (HOSTOFF_SIMCUDA_DIR names it; the search, the file). */
    struct stat st;
    if (stat(sim, &st) == 0 && !S_ISDIR(st.st_mode)) {
        char *slash = strrchr(sim, '/');
        if (slash != NULL) *slash = '\0';
    }

    char err[1024];
    struct trace t;
    if (trace_read(o.trace, &t, err, sizeof err) != 0) {
        cli_error("replay: %s; nothing replayed", err);
        return 2;
    }
    if (o.mark_steps && (t.nstep_at == 0 || t.steps > 0)) {
        /* Nothing to mark, or markers already there: a replay would not be what was asked. */
        if (t.steps > 0)
            cli_error("replay: --mark-steps: %s marks its own steps (%zu step lines); nothing "
                      "replayed",
                      o.trace, t.steps);
        else
            cli_error("replay: --mark-steps: %s names no recorded steps (its first line has no "
                      "\"recorder\": {\"step_lines\": [...]}, docs/trace-format.md); nothing "
                      "replayed",
                      o.trace);
        trace_free(&t);
        return 2;
    }
    if (o.budget_pct > 0) {
        o.budget = ho_units_share(t.peak_bytes, o.budget_millionths);
        if (o.budget == 0) {
            cli_error("replay: --budget %s of the trace's peak (%llu bytes) is 0 bytes; give a "
                      "larger share or a size",
                      o.budget_text, (unsigned long long)t.peak_bytes);
            return 2;
        }
    }
    if (!o.budget_none) {
        uint64_t through = oracle_unmanaged_peak(&t, o.min_bytes);
        if (through >= o.budget) {
            /* The engine would get nothing: its first allocation could not be placed. */
            char a[32], b[32], c[32];
            cli_format_bytes(o.budget, a, sizeof a);
            cli_format_bytes(through, b, sizeof b);
            cli_format_bytes(o.min_bytes, c, sizeof c);
            cli_error("replay: --budget %s (%s) leaves the engine nothing: the allocations below "
                      "HOSTOFF_MIN_BYTES (%s, %s) pass through and hold up to %s at once; give a "
                      "larger budget or a smaller --min-bytes; nothing replayed",
                      o.budget_text, a, c, o.min_bytes_given ? "--min-bytes" : "auto", b);
            trace_free(&t);
            return 2;
        }
        o.engine_budget = o.budget - through;
        uint64_t largest = oracle_largest_taken(&t, o.min_bytes);
        if (largest > o.engine_budget) {
            /* The library would refuse that allocation (larger than its whole budget). */
            char a[32], b[32], c[32], d[32];
            cli_format_bytes(o.budget, a, sizeof a);
            cli_format_bytes(through, b, sizeof b);
            cli_format_bytes(o.min_bytes, c, sizeof c);
            cli_format_bytes(largest, d, sizeof d);
            cli_error("replay: --budget %s (%s) is too small: the allocations below "
                      "HOSTOFF_MIN_BYTES (%s, %s) hold up to %s at once, and what is left is less "
                      "than the largest allocation the engine takes (%s); give a larger budget or "
                      "a smaller --min-bytes; nothing replayed",
                      o.budget_text, a, c, o.min_bytes_given ? "--min-bytes" : "auto", b, d);
            trace_free(&t);
            return 2;
        }
    }

    char trace_abs[PATH_MAX];
    if (realpath(o.trace, trace_abs) == NULL) snprintf(trace_abs, sizeof trace_abs, "%s", o.trace);
    char dir[] = "/tmp/hostoff-replay.XXXXXX";
    if (mkdtemp(dir) == NULL) {
        cli_error("replay: cannot create a temporary directory: %s", strerror(errno));
        trace_free(&t);
        return 1;
    }
    uint64_t gib = 1ull << 30;
    uint64_t mem = t.mem_bytes > 2 * t.peak_bytes ? t.mem_bytes : 2 * t.peak_bytes;
    mem = (mem + gib - 1) / gib;
    if (mem == 0) mem = 1;
    const char *old_path = getenv("LD_LIBRARY_PATH");
    char *extra[32]; /* every setv below, with room to spare */
    size_t n = 0;
    char sanitizer[PATH_MAX];
    cli_sanitizer_preload(sanitizer);
    setv(extra, &n, "LD_PRELOAD=%s%s", sanitizer, lib);
    setv(extra, &n, "LD_LIBRARY_PATH=%s%s%s", sim, old_path != NULL ? ":" : "",
         old_path != NULL ? old_path : "");
    setv(extra, &n, "SIMCUDA_DATA=sparse");
    setv(extra, &n, "SIMCUDA_DEVICE_MEM=%lluG", (unsigned long long)mem);
    setv(extra, &n, "SIMCUDA_H2D_GBPS=%g", o.h2d);
    setv(extra, &n, "SIMCUDA_D2H_GBPS=%g", o.d2h);
    setv(extra, &n, "SIMCUDA_H2D_DUPLEX_GBPS=%g", o.h2d_duplex);
    setv(extra, &n, "SIMCUDA_D2H_DUPLEX_GBPS=%g", o.d2h_duplex);
    if (o.costs.path[0] != '\0') setv(extra, &n, "SIMCUDA_COSTS=%s", o.costs.path);
    setv(extra, &n, "SIMCUDA_REPORT=%s/simcuda.json", dir);
    setv(extra, &n, "HOSTOFF_REPORT=%s/hostoff.json", dir);
    if (o.record != NULL) setv_path(extra, &n, "HOSTOFF_TRACE", o.record);
    if (o.device_timeline != NULL) setv_path(extra, &n, "SIMCUDA_TIMELINE", o.device_timeline);
    if (o.budget_none) {
        /* Off, the library writes no trace: a recording asks for tracking, which moves nothing
         * and costs the simulated host no driver call of its own beyond the trace's. */
        setv(extra, &n, o.record != NULL ? "HOSTOFF_MODE=track" : "HOSTOFF_MODE=off");
    } else {
        setv(extra, &n, "HOSTOFF_MODE=offload");
        setv(extra, &n, "HOSTOFF_BUDGET=%llu", (unsigned long long)o.engine_budget);
        /* auto: the library derives the same value (src/move_cost.h), and its report says so. */
        if (o.min_bytes_given)
            setv(extra, &n, "HOSTOFF_MIN_BYTES=%llu", (unsigned long long)o.min_bytes);
        else
            setv(extra, &n, "HOSTOFF_MIN_BYTES=auto");
        setv(extra, &n, "HOSTOFF_POLICY=%s", o.policy);
        if (strcmp(o.policy, "oracle") == 0) {
            char plan[PATH_MAX];
            snprintf(plan, sizeof plan, "%s/oracle.plan", dir);
            if (oracle_write_plan(&t, o.engine_budget, o.min_bytes, o.h2d, plan, err, sizeof err) !=
                0) {
                cli_error("replay: --policy oracle: %s; nothing replayed", err);
                remove_dir(dir);
                trace_free(&t);
                return 1;
            }
            setv(extra, &n, "HOSTOFF_ORACLE_PLAN=%s", plan);
        }
    }
    if (isatty(STDERR_FILENO)) setv(extra, &n, "HOSTOFF_REPLAYER_PROGRESS=1");
    char **env = child_env(extra, n);
    char *child_out = NULL;
    rc = env != NULL ? run_child(player, env, trace_abs, o.mark_steps, &child_out) : -1;
    struct results r = {0};
    int result = 0;
    if (rc != 0) {
        cli_error("replay: the replayer failed (exit status %d)", rc);
        result = 1;
    } else if (!collect(dir, child_out, &r)) {
        cli_error("replay: the replay left no complete reports in %s", dir);
        result = 1;
    } else {
        if (o.json)
            print_json(&o, &t, &r);
        else
            print_summary(&o, &t, &r);
        if (o.report != NULL && !cli_copy_file(dir, "hostoff.json", o.report)) result = 1;
    }
    remove_dir(dir);
    free(child_out);
    free(r.marks);
    free(r.starts);
    free(env);
    for (size_t i = 0; i < n; i++)
        free(extra[i]);
    trace_free(&t);
    return result;
}
