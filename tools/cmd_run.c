/* hostoff run [options] [--] COMMAND [ARGS...]
 *
 * Runs COMMAND with libhostoff.so preloaded and the HOSTOFF_* variables its options set (one
 * option per variable of src/options.def), passes its exit status through (a signal n as 128+n),
 * then summarises the reports it left: memory saved, bytes moved, time stalled, and their paths.
 *
 * The environment otherwise reaches COMMAND unchanged. A variable already set to another value
 * than its option's is reported on one line, and the option wins. With neither --report nor
 * HOSTOFF_REPORT, the report goes to hostoff-%p.json in the current directory. The summary reads
 * the report named by the pattern with COMMAND's pid, else every file the pattern matches (%p and
 * %r as wildcards) written since COMMAND started: a launcher's ranks. */
#include "cli.h"
#include "cli_opts.h"
#include "options.h"
#include "profile.h"
#include "sim_costs.h"
#include "verdict.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define DEFAULT_REPORT "hostoff-%p.json"

/* The one option of hostoff run that sets no HOSTOFF_* variable (manpage.c lists it too). */
const struct cli_opt run_costs_opt = {
    "costs", "FILE", "unset",
    "the simulator's cost file (SIMCUDA_COSTS, docs/simcuda.md; the GPU kit writes "
    "costs-h200.txt) when COMMAND runs on the simulated driver, and for the replay that measures "
    "its step without offload; checked first",
    "SIMCUDA_COSTS"};

/* Nor does this one: it only changes what hostoff itself does after COMMAND ends. */
const struct cli_opt run_no_baseline_opt = {
    "no-baseline", "", "",
    "do not replay the recorded traces with no budget to measure the step without offload (the "
    "verdict then uses the steps before the first move, where there are any); for a quick answer "
    "on a long trace",
    NULL};

static void usage(FILE *f) {
    const struct cli_opt *o;
    size_t n = run_opts(&o);
    fprintf(f,
            "usage: hostoff run [options] [--] COMMAND [ARGS...]\n\n"
            "Runs COMMAND with libhostoff.so preloaded (LD_PRELOAD) and prints what the library "
            "did: memory\n"
            "saved, bytes moved, time stalled, and the report's path. Each option sets one "
            "HOSTOFF_* variable;\n"
            "one already set to another value is named on one line, and the option wins. The "
            "report goes to\n"
            "%s unless --report or HOSTOFF_REPORT says otherwise. COMMAND's exit status is\n"
            "hostoff's (killed by signal n: 128+n).\n\n"
            "options (--name VALUE or --name=VALUE):\n",
            DEFAULT_REPORT);
    cli_opts_help(f, o, n);
    cli_opts_help(f, &run_costs_opt, 1);
    cli_opts_help(f, &run_no_baseline_opt, 1);
}

/* ------------------------------------------------------------------------- environment */

struct env {
    char **v;
    size_t n, cap;
};

static bool env_set(struct env *e, const char *name, const char *value) {
    size_t len = strlen(name);
    char *item = malloc(len + strlen(value) + 2);
    if (item == NULL) return false;
    sprintf(item, "%s=%s", name, value);
    for (size_t i = 0; i < e->n; i++) {
        if (strncmp(e->v[i], name, len) == 0 && e->v[i][len] == '=') {
            e->v[i] = item; /* the inherited strings are environ's: not freed */
            return true;
        }
    }
    if (e->n + 2 > e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 64;
        char **p = realloc(e->v, cap * sizeof *p);
        if (p == NULL) {
            free(item);
            return false;
        }
        e->v = p;
        e->cap = cap;
    }
    e->v[e->n++] = item;
    e->v[e->n] = NULL;
    return true;
}

/* Whether a ':' or ' ' separated list holds item. */
static bool list_has(const char *list, const char *item) {
    size_t n = strlen(item);
    for (const char *p = list; *p != '\0';) {
        size_t len = strcspn(p, ": ");
        if (len == n && strncmp(p, item, n) == 0) return true;
        p += len;
        if (*p != '\0') p++;
    }
    return false;
}

/* ---------------------------------------------------------------------------- the child */

static volatile sig_atomic_t child_pid;
static bool exec_failed; /* COMMAND never started: not found, not executable */

static void forward(int sig) {
    if (child_pid > 0) kill((pid_t)child_pid, sig);
}

static int run_child(char **argv, char **envp) {
    /* A pipe closed by a successful exec: a byte on it means COMMAND never started. */
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) fds[0] = fds[1] = -1;
    pid_t pid = fork();
    if (pid < 0) {
        cli_error("run: cannot start %s: %s", argv[0], strerror(errno));
        return -1;
    }
    if (pid == 0) {
        execvpe(argv[0], argv, envp);
        int err = errno;
        if (fds[1] >= 0) {
            ssize_t w = write(fds[1], "x", 1);
            (void)w;
        }
        fprintf(stderr, "hostoff: run: cannot run %s: %s\n", argv[0], strerror(err));
        _exit(err == ENOENT ? 127 : 126);
    }
    child_pid = pid;
    if (fds[1] >= 0) close(fds[1]);
    if (fds[0] >= 0) {
        char b;
        ssize_t r;
        while ((r = read(fds[0], &b, 1)) < 0 && errno == EINTR) {
        }
        exec_failed = r == 1;
        close(fds[0]);
    }
    /* Like system(): an interrupt from the terminal reaches the command (same process group)
     * and hostoff stays to summarise; termination requests are passed on. */
    struct sigaction ign = {.sa_handler = SIG_IGN}, fwd = {.sa_handler = forward}, old[4];
    sigemptyset(&ign.sa_mask);
    sigemptyset(&fwd.sa_mask);
    sigaction(SIGINT, &ign, &old[0]);
    sigaction(SIGQUIT, &ign, &old[1]);
    sigaction(SIGTERM, &fwd, &old[2]);
    sigaction(SIGHUP, &fwd, &old[3]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    sigaction(SIGINT, &old[0], NULL);
    sigaction(SIGQUIT, &old[1], NULL);
    sigaction(SIGTERM, &old[2], NULL);
    sigaction(SIGHUP, &old[3], NULL);
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return 1;
}

/* --------------------------------------------------------------------------- the summary */

/* The pattern with %p = pid and %r = rank (exact), or with both as '*' (wildcards). */
static void expand(const char *pattern, long pid, long rank, bool wild, char *out, size_t cap) {
    size_t n = 0;
    for (const char *p = pattern; *p != '\0' && n + 24 < cap; p++) {
        if (p[0] == '%' && (p[1] == 'p' || p[1] == 'r')) {
            n += wild ? (size_t)snprintf(out + n, cap - n, "*")
                      : (size_t)snprintf(out + n, cap - n, "%ld", p[1] == 'p' ? pid : rank);
            p++;
        } else if (p[0] == '%' && p[1] == '%') {
            out[n++] = '%';
            p++;
        } else {
            out[n++] = *p;
        }
    }
    out[n] = '\0';
}

static long env_rank(void) {
    static const char *const vars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < 3; i++) {
        const char *v = getenv(vars[i]);
        char *end = NULL;
        long r = v != NULL && *v != '\0' ? strtol(v, &end, 10) : -1;
        if (end != NULL && *end == '\0' && r >= 0) return r;
    }
    return 0;
}

static bool fresh(const char *path, const struct timespec *since) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return false;
    return st.st_mtim.tv_sec > since->tv_sec ||
           (st.st_mtim.tv_sec == since->tv_sec && st.st_mtim.tv_nsec >= since->tv_nsec);
}

/* Whether the file says it belongs to this run (its "run_id", HOSTOFF_RUN_ID, near the top of
 * a report and in a trace's first line). */
static bool of_run(const char *path, const char *run_id) {
    FILE *f = fopen(path, "r");
    if (f == NULL) return false;
    char head[4096];
    size_t got = fread(head, 1, sizeof head - 1, f);
    fclose(f);
    head[got] = '\0';
    char a[320], b[320];
    snprintf(a, sizeof a, "\"run_id\": \"%s\"", run_id);
    snprintf(b, sizeof b, "\"run_id\":\"%s\"", run_id);
    return strstr(head, a) != NULL || strstr(head, b) != NULL;
}

/* Files the pattern names for this run: COMMAND's own, else every match written since, and of
 * those only the ones of this run (an earlier run's files match the pattern too). */
static size_t find_outputs(const char *pattern, long pid, const struct timespec *since,
                           const char *run_id, char **out, size_t cap) {
    char path[PATH_MAX];
    expand(pattern, pid, env_rank(), false, path, sizeof path);
    size_t n = 0;
    if (fresh(path, since) && of_run(path, run_id)) {
        out[n++] = strdup(path);
        if (strstr(pattern, "%p") == NULL && strstr(pattern, "%r") == NULL) return n;
    }
    char wild[PATH_MAX];
    expand(pattern, pid, 0, true, wild, sizeof wild);
    glob_t g;
    if (strcmp(wild, path) != 0 && glob(wild, 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc && n < cap; i++) {
            const char *m = g.gl_pathv[i];
            if (strstr(m, ".tmp.") != NULL || !fresh(m, since) || !of_run(m, run_id)) continue;
            bool dup = false;
            for (size_t k = 0; k < n; k++)
                dup |= strcmp(out[k], m) == 0;
            if (!dup) out[n++] = strdup(m);
        }
        globfree(&g);
    }
    return n;
}

static void summarise(const char *cmd, int status, const char *report_pattern,
                      const char *trace_pattern, long pid, const struct timespec *since,
                      const char *run_id, bool baseline) {
    if (status >= 128)
        cli_error("%s ended by signal %d (exit status %d)", cmd, status - 128, status);
    else
        cli_error("%s exited with status %d", cmd, status);
    enum { MAXF = 256 };
    char *files[2 * MAXF];
    size_t nrep = report_pattern[0] != '\0'
                      ? find_outputs(report_pattern, pid, since, run_id, files, MAXF)
                      : 0;
    size_t ntr = trace_pattern != NULL && trace_pattern[0] != '\0'
                     ? find_outputs(trace_pattern, pid, since, run_id, files + nrep, MAXF)
                     : 0;
    if (exec_failed) return; /* said already: "cannot run COMMAND" */
    if (nrep == 0) {
        if (report_pattern[0] == '\0')
            cli_error("no report asked for (HOSTOFF_REPORT is empty)");
        else
            cli_error("no report written to %s: the command made no CUDA call through "
                      "libhostoff.so, or did not exit normally",
                      report_pattern);
    }
    struct profile *ps = NULL;
    size_t n = 0;
    if (nrep + ntr > 0 && prof_load(files, nrep + ntr, NULL, NULL, &ps, &n) == 0) {
        uint64_t to_host = 0, to_dev = 0, stall = 0, ev = 0, dem = 0, pre = 0, dpeak = 0;
        uint64_t host = 0;
        bool all_traced = true;
        for (size_t i = 0; i < n; i++) {
            const struct profile *p = &ps[i];
            to_host += p->moved_to_host;
            to_dev += p->moved_to_device;
            stall += p->stall_ns;
            ev += p->evictions;
            dem += p->demand;
            pre += p->prefetches;
            if (p->device_peak > dpeak) dpeak = p->device_peak;
            all_traced &= p->has_trace;
            host += p->r_peak_host;
        }
        char a[32], b[32], c[32], d[32];
        prof_bytes(to_host, a, sizeof a);
        prof_bytes(to_dev, b, sizeof b);
        prof_time(stall, c, sizeof c);
        prof_bytes(dpeak, d, sizeof d);
        cli_error("moved %s to host and %s back (%llu evictions, %llu restores on demand, %llu "
                  "prefetches); waited %s for moves; device peak %s%s",
                  a, b, (unsigned long long)ev, (unsigned long long)dem, (unsigned long long)pre, c,
                  d, n > 1 ? " (the highest rank)" : "");
        if (!all_traced) {
            prof_bytes(host, a, sizeof a);
            cli_error("memory saved: up to %s held in host memory at once (--trace measures the "
                      "slowdown and the exact saving)",
                      a);
        }
        /* The verdict, per process, as the page and hostoff report --json give it. */
        if (baseline) prof_measure_baseline(ps, n);
        for (size_t i = 0; i < n; i++) {
            struct verdict v;
            verdict_make(&ps[i], &v);
            char lines[4][512];
            size_t nl = verdict_lines(&v, lines, 4);
            for (size_t k = 0; k < nl; k++)
                if (ps[i].has_trace)
                    cli_error("%s%s%s", n > 1 ? ps[i].name : "", n > 1 ? ": " : "", lines[k]);
            for (size_t k = 0; k < v.nadvice; k++)
                cli_error("%s%snext: %s", n > 1 ? ps[i].name : "", n > 1 ? ": " : "", v.advice[k]);
        }
    }
    for (size_t i = 0; i < nrep + ntr; i++)
        cli_error("%s %s", i < nrep ? "report" : "trace ", files[i]);
    if (nrep + ntr > 0) {
        fprintf(stderr, "hostoff: render with: hostoff report");
        for (size_t i = 0; i < nrep + ntr && i < 8; i++)
            fprintf(stderr, " %s", files[i]);
        fprintf(stderr, "%s\n", nrep + ntr > 8 ? " ..." : "");
    }
    prof_free(ps, n);
    for (size_t i = 0; i < nrep + ntr; i++)
        free(files[i]);
}

/* ------------------------------------------------------------------------------ command */

int cmd_run(int argc, char **argv) {
    const struct cli_opt *opts;
    size_t nopts = run_opts(&opts);
    const char *given[HO_OPT_COUNT] = {0};
    const char *costs = NULL;
    bool baseline = true;
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (strncmp(a, "--", 2) != 0) break; /* COMMAND */
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq != NULL ? (size_t)(eq - name) : strlen(name);
        if (strcmp(name, "no-baseline") == 0) {
            baseline = false;
            continue;
        }
        if (len == 5 && strncmp(name, "costs", 5) == 0) {
            if (eq == NULL && i + 1 >= argc) {
                cli_error("run: --costs needs a value (FILE)");
                return 2;
            }
            costs = eq != NULL ? eq + 1 : argv[++i];
            continue;
        }
        size_t k = 0;
        while (k < nopts && (strlen(opts[k].name) != len || strncmp(opts[k].name, name, len) != 0))
            k++;
        if (k == nopts) {
            cli_error("run: unknown option %s (hostoff run --help lists them)", a);
            return 2;
        }
        const char *v = eq != NULL ? eq + 1 : NULL;
        if (v == NULL) {
            if (i + 1 >= argc) {
                cli_error("run: --%s needs a value (%s)", opts[k].name, opts[k].arg);
                return 2;
            }
            v = argv[++i];
        }
        const char *why = NULL, *expected = NULL;
        if (!ho_option_check(&ho_option_table[k], v, &why, &expected)) {
            cli_error("run: --%s %s: %s; expected %s", opts[k].name, v, why, expected);
            return 2;
        }
        if (k == HO_OPT_BUDGET && cli_budget_unitless("run", v, "the device's memory")) return 2;
        given[k] = v;
    }
    if (i >= argc) {
        cli_error("run: no command given: hostoff run [options] [--] COMMAND [ARGS...] (hostoff "
                  "run --help lists the options)");
        return 2;
    }
    char **cmd = argv + i;
    /* In this process's environment before COMMAND's is copied from it: COMMAND (on the
     * simulator) and the replay that measures its step without offload both get it. */
    if (costs != NULL && !cli_costs_use("run", costs)) return 2;

    char lib[PATH_MAX];
    if (!cli_locate("libhostoff.so", "HOSTOFF_LIB", cli_lib_candidates, lib, sizeof lib)) return 1;

    struct env env = {0};
    for (char **e = environ; *e != NULL; e++) {
        if (env.n + 2 > env.cap) {
            size_t cap = env.cap ? env.cap * 2 : 64;
            char **p = realloc(env.v, cap * sizeof *p);
            if (p == NULL) return 1;
            env.v = p;
            env.cap = cap;
        }
        env.v[env.n++] = *e;
        env.v[env.n] = NULL;
    }
    bool ok = true;
    for (size_t k = 0; k < nopts; k++) {
        if (given[k] == NULL) continue;
        const char *var = ho_option_table[k].env, *old = getenv(var);
        if (old != NULL && strcmp(old, given[k]) != 0)
            cli_error("%s=%s is set in the environment; --%s %s wins", var, old, opts[k].name,
                      given[k]);
        ok &= env_set(&env, var, given[k]);
    }
    const char *report =
        given[HO_OPT_REPORT] != NULL ? given[HO_OPT_REPORT] : getenv("HOSTOFF_REPORT");
    if (report == NULL) {
        report = DEFAULT_REPORT;
        ok &= env_set(&env, "HOSTOFF_REPORT", report);
    }
    const char *trace = given[HO_OPT_TRACE] != NULL ? given[HO_OPT_TRACE] : getenv("HOSTOFF_TRACE");
    /* This run's name, in every file its process tree writes: the summary reads only those. */
    char run_id[128];
    if (given[HO_OPT_RUN_ID] != NULL) {
        snprintf(run_id, sizeof run_id, "%s", given[HO_OPT_RUN_ID]);
    } else {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        snprintf(run_id, sizeof run_id, "%ld-%lld.%09ld", (long)getpid(), (long long)now.tv_sec,
                 now.tv_nsec);
        ok &= env_set(&env, "HOSTOFF_RUN_ID", run_id);
    }

    /* LD_PRELOAD: the library first (behind a sanitizer runtime this build runs with), then
     * whatever was preloaded already. */
    char san[PATH_MAX];
    cli_sanitizer_preload(san);
    const char *pre = getenv("LD_PRELOAD");
    if (pre == NULL || !list_has(pre, lib)) {
        size_t len = strlen(san) + strlen(lib) + (pre != NULL ? strlen(pre) + 1 : 0) + 1;
        char *v = malloc(len);
        if (v == NULL) return 1;
        snprintf(v, len, "%s%s%s%s", san, lib, pre != NULL && *pre != '\0' ? ":" : "",
                 pre != NULL ? pre : "");
        ok &= env_set(&env, "LD_PRELOAD", v);
        free(v);
    }
    if (!ok) {
        cli_error("run: out of memory");
        return 1;
    }

    struct timespec since;
    clock_gettime(CLOCK_REALTIME, &since);
    since.tv_nsec = 0; /* file times may be coarser than the clock */
    fflush(NULL);
    int status = run_child(cmd, env.v);
    if (status < 0) return 1;
    summarise(cmd[0], status, report, trace, (long)child_pid, &since, run_id, baseline);
    return status;
}
