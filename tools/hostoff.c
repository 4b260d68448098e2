/* The hostoff command: one subcommand per file (cmd_*.c), dispatched from the table below. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

struct subcommand {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is the subcommand's name */
    const char *summary;
};

static const struct subcommand subcommands[] = {
    {"gen-trace", cmd_gentrace, "write the trace of a synthetic training job (gpt, deepseek)"},
    {"replay", cmd_replay, "replay a trace through libhostoff.so on the simulated driver"},
};

#define NSUB (sizeof subcommands / sizeof subcommands[0])

static void usage(FILE *f) {
    fprintf(f, "usage: hostoff COMMAND [ARGS]   (hostoff COMMAND --help for its options)\n\n"
               "commands:\n");
    for (size_t i = 0; i < NSUB; i++)
        fprintf(f, "  %-12s %s\n", subcommands[i].name, subcommands[i].summary);
}

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < NSUB; i++)
        if (strcmp(argv[1], subcommands[i].name) == 0)
            return subcommands[i].run(argc - 1, argv + 1);
    cli_error("unknown command '%s'", argv[1]);
    usage(stderr);
    return 2;
}
