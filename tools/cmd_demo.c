/* hostoff demo [-o DIR] [--budget PCT%|BYTES] [--policy lookahead|lru|oracle] [--link L] [--steps
 * N]
 *
 * The main job on the embedded default, start to finish in seconds: a GPT training job's trace
 * (hostoff gen-trace gpt, sized to replay quickly), replayed through the real libhostoff.so on
 * the simulated H200 without offload (the baseline) and under a budget below its peak, which
 * forces offload (the step times compare these two), then once more under the budget with the
 * library's report and trace recorded; then the HTML report and the Perfetto trace of that run
 * (hostoff report), and a summary. Each step runs this same hostoff
 * binary as a child, so what it does is what the subcommands do. */
#include "cli.h"
#include "options.h"
#include "cli_opts.h"
#include "json.h"
#include "profile.h"
#include "sim_costs.h"
#include "verdict.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The model: long-context training (one 64 Ki-token sequence a step), where activations dominate
 * the memory and attention gives each activation byte enough compute for its trip over PCIe to
 * hide behind; 6 steps let the lookahead policy learn the step. About 2300 events: a replay
 * takes a fraction of a second. */
static const char *const GPT_ARGS[] = {"--layers", "6",     "--hidden", "1536",          "--heads",
                                       "12",       "--seq", "65536",    "--micro-batch", "1",
                                       "--vocab",  "32000", NULL};

const struct cli_opt demo_opts[] = {
    {"o", "DIR", "hostoff-demo", "where the trace, the reports and the HTML page go", NULL},
    {"budget", "PCT%|BYTES", "85%",
     "device memory for the job's buffers: a percentage of the job's peak (the most bytes its "
     "buffers hold at once), or a size (2G, 1.5GiB: powers of 1024, docs/units.md)",
     NULL},
    {"policy", "lookahead|lru|oracle", "lookahead", "HOSTOFF_POLICY of the replay", NULL},
    {"link", "pcie5|c2c|GBPS", "pcie5",
     "the host link: PCIe Gen5 x16 (55 GB/s each way), GH200 NVLink-C2C (345 to the device, 300 "
     "from it), or GB/s; with --costs and no --link, the cost file's link rows",
     NULL},
    {"costs", "FILE", "",
     "the simulator's cost file (SIMCUDA_COSTS, docs/simcuda.md; the GPU kit writes "
     "costs-h200.txt) for every replay; checked first",
     NULL},
    {"steps", "N", "6", "training steps", NULL},
};
const size_t ndemo_opts = sizeof demo_opts / sizeof demo_opts[0];

static void usage(FILE *f) {
    fprintf(f, "usage: hostoff demo [options]\n\n"
               "Generates a GPT training trace, replays it on the simulated H200 without offload "
               "and under a budget that\n"
               "forces offload (the library's report and trace recorded), renders the HTML report "
               "and prints a summary.\n\noptions (--name VALUE or --name=VALUE):\n");
    cli_opts_help(f, demo_opts, ndemo_opts);
}

/* Runs this binary with args; its stdout into *out when out != NULL (else inherited). Returns
 * the exit status, -1 when it could not run. */
static int run_self(char *const *args, char **out) {
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return -1;
    self[len] = '\0';
    return cli_run_child("demo", self, args, NULL, out);
}

static struct json *parse_out(const char *text) {
    char err[128];
    return text != NULL ? json_parse(text, strlen(text), err, sizeof err) : NULL;
}

static double num(const struct json *o, const char *key) {
    const struct json *v = o != NULL ? json_get(o, key) : NULL;
    return v != NULL && (v->type == JSON_INT || v->type == JSON_REAL) ? v->real : 0;
}

static void step(bool tty, int k, const char *what) {
    if (tty) fprintf(stderr, "demo [%d/5] %s\n", k, what);
}

int cmd_demo(int argc, char **argv) {
    argv = cli_split_equals(&argc, argv); /* --name=VALUE as --name VALUE */
    if (argv == NULL) return 1;
    const char *dir = "hostoff-demo", *budget = "85%", *policy = "lookahead", *link = NULL;
    const char *steps = "6", *costs = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        }
        const char **slot = strcmp(a, "-o") == 0         ? &dir
                            : strcmp(a, "--budget") == 0 ? &budget
                            : strcmp(a, "--policy") == 0 ? &policy
                            : strcmp(a, "--link") == 0   ? &link
                            : strcmp(a, "--steps") == 0  ? &steps
                            : strcmp(a, "--costs") == 0  ? &costs
                                                         : NULL;
        if (slot == NULL) {
            cli_error("demo: unknown argument %s", a);
            usage(stderr);
            return 2;
        }
        if (i + 1 >= argc) {
            cli_error("demo: %s needs a value", a);
            return 2;
        }
        *slot = argv[++i];
    }
    struct cli_link checked;
    if (link != NULL && !cli_link_parse(link, &checked)) {
        cli_error("demo: --link %s: expected " CLI_LINK_EXPECTED, link);
        return 2;
    }
    /* The replays below inherit it (hostoff replay passes SIMCUDA_COSTS to its simulator). */
    if (costs != NULL && !cli_costs_use("demo", costs)) return 2;
    /* The link's argument to every replay: as given, else theirs (the cost file's, or pcie5). */
    const char *link_opt = link != NULL ? "--link" : NULL;
    if (strcmp(budget, "none") == 0) {
        cli_error("demo: --budget none would move nothing; give a share of the peak or a size");
        return 2;
    }
    /* The one grammar (src/units.h), checked here so that the refusal names this command. */
    struct ho_amount amount;
    const char *why = NULL;
    if (!ho_parse_amount_why(budget, &amount, &why)) {
        cli_error("demo: --budget %s: %s; expected a percentage of the job's peak such as 85%% or "
                  "a size such as 2G or 1.5GiB",
                  budget, why);
        return 2;
    }
    if (cli_budget_unitless("demo", budget, "the job's peak")) return 2;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        cli_error("demo: cannot create %s: %s", dir, strerror(errno));
        return 1;
    }
    bool tty = isatty(STDERR_FILENO) == 1;
    char trace[PATH_MAX], rep[PATH_MAX], rec[PATH_MAX];
    snprintf(trace, sizeof trace, "%s/gpt.jsonl", dir);
    snprintf(rep, sizeof rep, "%s/replay-report.json", dir);
    snprintf(rec, sizeof rec, "%s/replay-trace.jsonl", dir);

    /* 1. The training job's trace. */
    step(tty, 1, "generating a GPT training trace");
    char *gen[32] = {"hostoff", "gen-trace", "gpt"};
    int ng = 3;
    for (int k = 0; GPT_ARGS[k] != NULL; k++)
        gen[ng++] = (char *)GPT_ARGS[k];
    gen[ng++] = "--steps";
    gen[ng++] = (char *)steps;
    gen[ng++] = "-o";
    gen[ng++] = trace;
    gen[ng] = NULL;
    char *gen_out = NULL;
    if (run_self(gen, &gen_out) != 0) {
        cli_error("demo: hostoff gen-trace failed");
        free(gen_out);
        return 1;
    }
    free(gen_out);

    /* 2. The baseline: no offload. */
    step(tty, 2, "replaying it without offload (the baseline)");
    char *base_args[] = {"hostoff", "replay",         trace,        "--budget", "none",
                         "--json",  (char *)link_opt, (char *)link, NULL};
    char *base_out = NULL;
    int rc = run_self(base_args, &base_out);
    struct json *base = rc == 0 ? parse_out(base_out) : NULL;
    free(base_out);
    if (base == NULL) {
        cli_error("demo: the baseline replay failed");
        return 1;
    }

    /* 3. Under the budget, as the baseline ran: no trace, whose own driver calls would cost the
     * simulated host time (the step times compare these two). */
    step(tty, 3, "replaying it under the budget");
    char *plain_args[] = {"hostoff",  "replay",       trace,    "--budget",       (char *)budget,
                          "--policy", (char *)policy, "--json", (char *)link_opt, (char *)link,
                          NULL};
    char *plain_out = NULL;
    rc = run_self(plain_args, &plain_out);
    struct json *plain = rc == 0 ? parse_out(plain_out) : NULL;
    free(plain_out);
    if (plain == NULL) {
        cli_error("demo: the replay under the budget failed");
        json_free(base);
        return 1;
    }

    /* 4. Again, recording the library's report and trace for the report. */
    step(tty, 4, "replaying it under the budget again, recording the report and the trace");
    char *off_args[] = {
        "hostoff",        "replay",     trace,      "--budget", (char *)budget, "--policy",
        (char *)policy,   "--json",     "--report", rep,        "--record",     rec,
        (char *)link_opt, (char *)link, NULL};
    char *off_out = NULL;
    rc = run_self(off_args, &off_out);
    struct json *off = rc == 0 ? parse_out(off_out) : NULL;
    free(off_out);
    if (off == NULL) {
        cli_error("demo: the recorded replay under the budget failed");
        json_free(base);
        json_free(plain);
        return 1;
    }

    /* 5. The report: the verdict's step without offload from a replay of the recorded trace
     * with no budget, as hostoff report measures it (so the two say the same). */
    step(tty, 5, "rendering the report");
    char *inputs[] = {rep, rec};
    struct profile *ps = NULL;
    size_t n = 0;
    char html[PATH_MAX + 300], perfetto[PATH_MAX + 300];
    if (prof_load(inputs, 2, NULL, trace, &ps, &n) != 0 || n == 0) {
        prof_free(ps, n);
        json_free(base);
        json_free(plain);
        json_free(off);
        return 1;
    }
    struct profile *p = &ps[0];
    prof_measure_baseline(ps, n);
    if (prof_write_files(ps, n, inputs, 2, dir, "hostoff-demo", html, perfetto, sizeof html) != 0) {
        prof_free(ps, n);
        json_free(base);
        json_free(plain);
        json_free(off);
        return 1;
    }
    char a[32], b[32];
    printf("hostoff demo: a long-context GPT training job (6 layers, width 1536, one 65536-token "
           "sequence a step, bf16, Adam) on the simulated H200\n\n");
    prof_bytes((uint64_t)num(off, "trace_peak_bytes"), a, sizeof a);
    printf("  job         %s steps, %.0f kernel launches, %s of buffers at peak\n", steps,
           num(off, "launches"), a);
    prof_bytes((uint64_t)num(off, "budget_bytes"), b, sizeof b);
    /* As given, then in the figures' unit ("2G" is 2.15 GB). */
    if (strchr(budget, '%') != NULL)
        printf("  budget      %s (%s of the peak)", b, budget);
    else
        printf("  budget      %s = %s", budget, b);
    const struct json *lname = json_get(off, "link");
    printf(", policy %s, link %s (%g GB/s to the device, %g from it)\n", policy,
           lname != NULL && lname->type == JSON_STRING ? lname->str : "pcie5", num(off, "h2d_gbps"),
           num(off, "d2h_gbps"));
    const struct json *cf = json_get(off, "costs");
    if (cf != NULL && cf->type == JSON_STRING) printf("  costs       %s\n", cf->str);
    prof_bytes(p->moved_to_host, a, sizeof a);
    prof_bytes(p->moved_to_device, b, sizeof b);
    printf("  moved       %s to host, %s back (%llu evictions, %llu restores on demand, %llu "
           "prefetches)\n",
           a, b, (unsigned long long)p->evictions, (unsigned long long)p->demand,
           (unsigned long long)p->prefetches);
    if (p->cancelled_moves > 0) {
        /* Copies the link carried for moves that did not complete (profile_verdict.c names them
         * in the verdict and counts them in the link's load). */
        prof_bytes(p->cancelled_to_host + p->cancelled_to_device, a, sizeof a);
        printf("  cancelled   %s more crossed the link for %llu moves a use or a free cancelled\n",
               a, (unsigned long long)p->cancelled_moves);
    }
    /* The verdict: the same function as the page's. */
    struct verdict v;
    verdict_make(p, &v);
    char lines[4][512];
    size_t nl = verdict_lines(&v, lines, 4);
    for (size_t k = 0; k < nl; k++)
        printf("  %s\n", lines[k]);
    for (size_t k = 0; k < v.nadvice; k++)
        printf("  next        %s\n", v.advice[k]);
    double bad = num(off, "illegal_accesses") + num(off, "hazards") +
                 num(plain, "illegal_accesses") + num(plain, "hazards");
    if (bad > 0) printf("  WARNING     the simulator saw %.0f illegal accesses or hazards\n", bad);
    printf("\n  report      %s\n", html);
    if (perfetto[0] != '\0')
        printf("  perfetto    %s   (open it in https://ui.perfetto.dev)\n", perfetto);
    printf("  inputs      %s (the job), %s and %s (the replay's report and trace)\n", trace, rep,
           rec);
    prof_free(ps, n);
    json_free(base);
    json_free(plain);
    json_free(off);
    return 0;
}
