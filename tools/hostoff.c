/* The hostoff command: one subcommand per file (cmd_*.c), dispatched from the table below, which
 * also makes the usage and the manual page's command list (`hostoff --man`, docs/hostoff.1). */
#include "cli.h"
#include "cli_opts.h"

#include <stdio.h>
#include <string.h>

const struct cli_subcommand cli_subcommands[] = {
    {"run", cmd_run, "[options] [--] COMMAND [ARGS...]",
     "run a command with libhostoff.so preloaded; summarise what it moved"},
    {"report", cmd_report, "FILE... [-o DIR] [--name STEM] [--kernel-names TRACE] [--link L]",
     "render reports and traces as an HTML page and a Perfetto trace"},
    {"demo", cmd_demo,
     "[-o DIR] [--budget PCT%|BYTES] [--policy lookahead|lru|oracle] [--link L] [--steps N]",
     "the main job: a GPT training job on the simulated H200 under a budget, with its report"},
    {"gen-trace", cmd_gentrace, "PRESET [options] -o FILE",
     "write the trace of a synthetic training job (gpt, deepseek)"},
    {"replay", cmd_replay,
     "TRACE [--budget none|BYTES|PCT%] [--policy lookahead|lru|oracle] [--link L] [--json] "
     "[--report PATH] [--record PATH] [--mark-steps]",
     "replay a trace through libhostoff.so on the simulated driver"},
    {"advise", cmd_advise, "TRACE [--link L] [--policy P] [--budgets PCT,...] [-o DIR] [--json]",
     "step time against budget from one trace: replays, the physical limit, rematerialisation"},
};
const size_t cli_nsubcommands = sizeof cli_subcommands / sizeof cli_subcommands[0];

static void usage(FILE *f) {
    fprintf(f, "usage: hostoff COMMAND [ARGS]   (hostoff COMMAND --help for its options)\n\n"
               "commands:\n");
    for (size_t i = 0; i < cli_nsubcommands; i++)
        fprintf(f, "  %-12s %s\n", cli_subcommands[i].name, cli_subcommands[i].summary);
    fprintf(f, "\n  hostoff --man prints the manual page (docs/hostoff.1).\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--man") == 0) {
        man_write(stdout);
        return ferror(stdout) ? 1 : 0;
    }
    for (size_t i = 0; i < cli_nsubcommands; i++)
        if (strcmp(argv[1], cli_subcommands[i].name) == 0)
            return cli_subcommands[i].run(argc - 1, argv + 1);
    cli_error("unknown command '%s'", argv[1]);
    usage(stderr);
    return 2;
}
