/* Option tables of the hostoff subcommands that have them (run, report, demo): each table makes
 * the subcommand's --help and its part of the manual page (manpage.c, docs/hostoff.1), so the two
 * cannot disagree. hostoff run's options are made from src/options.def, the table of the
 * library's HOSTOFF_* variables: one option per variable. */
#ifndef HOSTOFF_TOOLS_CLI_OPTS_H
#define HOSTOFF_TOOLS_CLI_OPTS_H

#include <stddef.h>
#include <stdio.h>

struct cli_opt {
    const char *name; /* without dashes: "budget", or "o" for a one-letter option */
    const char *arg;  /* the value's form, "" for a flag */
    const char *def;  /* the default, "" when none is worth saying */
    const char *help; /* one sentence or a few */
    const char *env;  /* the HOSTOFF_* variable it sets, or NULL */
};

extern const struct cli_opt report_opts[];
extern const size_t nreport_opts;
extern const struct cli_opt demo_opts[];
extern const size_t ndemo_opts;
extern const struct cli_opt advise_opts[];
extern const size_t nadvise_opts;

/* The subcommands (hostoff.c), for the usage and the manual page. */
struct cli_subcommand {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is the subcommand's name */
    const char *synopsis;              /* its arguments, after "hostoff NAME" */
    const char *summary;               /* one line */
};
extern const struct cli_subcommand cli_subcommands[];
extern const size_t cli_nsubcommands;

/* hostoff run's options, one per row of src/options.def, in its order; then --costs, which
 * sets SIMCUDA_COSTS (cmd_run.c). */
size_t run_opts(const struct cli_opt **out);
extern const struct cli_opt run_costs_opt;
extern const struct cli_opt run_no_baseline_opt;

/* "--name ARG" then the help, wrapped, indented; the default and the variable after it. */
void cli_opts_help(FILE *f, const struct cli_opt *o, size_t n);

/* The manual page (roff), docs/hostoff.1: `hostoff --man`. */
void man_write(FILE *f);

#endif
