/* hostoff report FILE... [-o DIR] [--name STEM] [--kernel-names TRACE] [--link pcie5|c2c|GBPS]
 *
 * Renders reports (HOSTOFF_REPORT) and traces (HOSTOFF_TRACE), either or both, into an HTML page
 * and a Perfetto trace (profile.h; render_html.c, render_perfetto.c). A report and a trace of the
 * same process (rank and pid) are shown together; several processes (ranks) make one page with a
 * row per rank. Prints the paths it wrote. */
#include "cli.h"
#include "outfile.h"
#include "cli_opts.h"
#include "sim_costs.h"
#include "profile.h"
#include "verdict.h"
#include "json_text.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const struct cli_opt report_opts[] = {
    {"o", "DIR", "",
     "write the outputs into DIR (created if missing; default: the first input's directory)", NULL},
    {"name", "STEM", "",
     "name the outputs STEM.html and STEM.perfetto.json (default: the first input's name without "
     "its extension, or hostoff-ranks for several processes)",
     NULL},
    {"kernel-names", "TRACE", "",
     "the trace that was replayed to make these (hostoff replay --record): its kernel names "
     "replace the replayer's generic ones, launch by launch",
     NULL},
    {"link", "pcie5|c2c|GBPS", "",
     "the link's peak for the throughput figure, instead of the rates a simulated run's trace "
     "records (else pcie5): pcie5 (55 GB/s each way), c2c (345 to the device, 300 from it), or "
     "GB/s each way",
     NULL},
    {"costs", "FILE", "",
     "the simulator's cost file (SIMCUDA_COSTS, docs/simcuda.md) for the replays that measure the "
     "step without offload: the one the run was made under; checked first",
     NULL},
    {"json", "", "",
     "print the verdict of each process as one JSON object a line (the same figures as the page "
     "and the terminal)",
     NULL},
    {"no-baseline", "", "",
     "do not replay each trace with no budget to measure the step without offload (the steps "
     "before the first move are used where there are any)",
     NULL},
};
const size_t nreport_opts = sizeof report_opts / sizeof report_opts[0];

static void usage(FILE *f) {
    fprintf(f, "usage: hostoff report FILE... [options]\n\n"
               "Renders hostoff reports (HOSTOFF_REPORT) and traces (HOSTOFF_TRACE), either or "
               "both, as an HTML page\n"
               "(figures, verdict, top buffers) and a Perfetto trace (ui.perfetto.dev). Several "
               "processes (ranks)\n"
               "make one page with a row per rank.\n\noptions (--name VALUE or --name=VALUE):\n");
    cli_opts_help(f, report_opts, nreport_opts);
}

static bool mkdirs(const char *dir) {
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1; *p != '\0'; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) return false;
        *p = '/';
    }
    return mkdir(buf, 0777) == 0 || errno == EEXIST;
}

static void default_stem(const char *input, char *stem, size_t cap) {
    const char *slash = strrchr(input, '/');
    snprintf(stem, cap, "%s", slash != NULL ? slash + 1 : input);
    char *dot = strrchr(stem, '.');
    if (dot != NULL && dot != stem) *dot = '\0';
}

static bool write_one(const char *path,
                      int (*fn)(FILE *, const struct profile *, size_t, char *const *, size_t),
                      const struct profile *ps, size_t n, char *const *inputs, size_t ninputs) {
    struct ho_outfile out;
    FILE *f = cli_create(&out, path, "report");
    if (f == NULL) return false;
    return cli_finish(&out, f, fn(f, ps, n, inputs, ninputs) == 0, "report");
}

static int perfetto_fn(FILE *f, const struct profile *ps, size_t n, char *const *inputs,
                       size_t ninputs) {
    (void)inputs;
    (void)ninputs;
    return prof_write_perfetto(f, ps, n);
}

int prof_write_files(const struct profile *ps, size_t n, char *const *inputs, size_t ninputs,
                     const char *dir, const char *stem, char *html, char *perfetto, size_t cap) {
    char d[PATH_MAX], s[256];
    if (dir != NULL) {
        snprintf(d, sizeof d, "%s", dir);
    } else {
        snprintf(d, sizeof d, "%s", inputs[0]);
        char *slash = strrchr(d, '/');
        if (slash != NULL)
            *slash = '\0';
        else
            snprintf(d, sizeof d, ".");
    }
    if (stem != NULL)
        snprintf(s, sizeof s, "%s", stem);
    else if (n > 1)
        snprintf(s, sizeof s, "hostoff-ranks");
    else
        default_stem(inputs[0], s, sizeof s);
    if (!mkdirs(d)) {
        cli_error("report: cannot create %s: %s", d, strerror(errno));
        return 1;
    }
    snprintf(html, cap, "%s/%s.html", d, s);
    perfetto[0] = '\0';
    if (!write_one(html, prof_write_html, ps, n, inputs, ninputs)) return 1;
    bool any_trace = false;
    for (size_t i = 0; i < n; i++)
        any_trace |= ps[i].has_trace;
    if (any_trace) {
        snprintf(perfetto, cap, "%s/%s.perfetto.json", d, s);
        if (!write_one(perfetto, perfetto_fn, ps, n, inputs, ninputs)) return 1;
    }
    return 0;
}

int cmd_report(int argc, char **argv) {
    argv = cli_split_equals(&argc, argv); /* --name=VALUE as --name VALUE */
    if (argv == NULL) return 1;
    const char *dir = NULL, *stem = NULL, *names = NULL;
    bool json = false, baseline = true;
    struct prof_link link = {0};
    char **inputs = calloc((size_t)argc + 1, sizeof *inputs);
    size_t ninputs = 0;
    if (inputs == NULL) return 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            free(inputs);
            return 0;
        }
        if (strcmp(a, "--json") == 0 || strcmp(a, "--no-baseline") == 0) {
            if (a[2] == 'j')
                json = true;
            else
                baseline = false;
            continue;
        }
        bool takes = strcmp(a, "-o") == 0 || strcmp(a, "--name") == 0 || strcmp(a, "--link") == 0 ||
                     strcmp(a, "--kernel-names") == 0 || strcmp(a, "--costs") == 0;
        if (takes && i + 1 >= argc) {
            cli_error("report: %s needs a value", a);
            free(inputs);
            return 2;
        }
        if (strcmp(a, "-o") == 0) {
            dir = argv[++i];
        } else if (strcmp(a, "--name") == 0) {
            stem = argv[++i];
            if (strchr(stem, '/') != NULL || stem[0] == '\0') {
                cli_error("report: --name %s: a file name without '/'", stem);
                free(inputs);
                return 2;
            }
        } else if (strcmp(a, "--kernel-names") == 0) {
            names = argv[++i];
        } else if (strcmp(a, "--costs") == 0) {
            /* The baseline replays inherit it (hostoff replay passes SIMCUDA_COSTS on). */
            if (!cli_costs_use("report", argv[++i])) {
                free(inputs);
                return 2;
            }
        } else if (strcmp(a, "--link") == 0) {
            if (!prof_parse_link(argv[++i], &link)) {
                cli_error("report: --link %s: expected " CLI_LINK_EXPECTED, argv[i]);
                free(inputs);
                return 2;
            }
        } else if (a[0] == '-' && a[1] != '\0') {
            cli_error("report: unknown option %s", a);
            usage(stderr);
            free(inputs);
            return 2;
        } else {
            inputs[ninputs++] = argv[i];
        }
    }
    if (ninputs == 0) {
        usage(stderr);
        free(inputs);
        return 2;
    }
    struct profile *ps = NULL;
    size_t n = 0;
    if (prof_load(inputs, ninputs, &link, names, &ps, &n) != 0) {
        free(inputs);
        return 2;
    }
    if (baseline) prof_measure_baseline(ps, n);
    char html[PATH_MAX + 300], perfetto[PATH_MAX + 300];
    int rc = prof_write_files(ps, n, inputs, ninputs, dir, stem, html, perfetto, sizeof html);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        struct verdict v;
        verdict_make(&ps[i], &v);
        if (json) {
            printf("{\"name\":\"");
            ho_json_write_text(stdout, ps[i].name);
            printf("\",\"verdict\":");
            verdict_json(stdout, &v);
            printf("}\n");
            continue;
        }
        char lines[4][512];
        size_t nl = verdict_lines(&v, lines, 4);
        if (n > 1) printf("%s\n", ps[i].name);
        for (size_t k = 0; k < nl; k++)
            printf("%s\n", lines[k]);
        for (size_t k = 0; k < v.nadvice; k++)
            printf("next        %s\n", v.advice[k]);
    }
    if (rc == 0 && !json) {
        printf("html      %s\n", html);
        if (perfetto[0] != '\0')
            printf("perfetto  %s   (open it in https://ui.perfetto.dev)\n", perfetto);
        else
            printf("perfetto  none: no trace given, no timeline to show\n");
    }
    prof_free(ps, n);
    free(inputs);
    return rc;
}
