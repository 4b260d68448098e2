/* What the hostoff command tells the simulated driver about costs: the host link of a replay (one
 * table of presets, --link) and a cost file (--costs FILE or SIMCUDA_COSTS, docs/simcuda.md
 * "Cost file"), for every subcommand that runs the simulator (replay, demo, advise, report, run).
 *
 * A cost file given to a subcommand is checked here with the simulator's own reader
 * (src/cost_file.h) before anything runs, then set as SIMCUDA_COSTS (an absolute path) in this
 * process: the replays it starts (hostoff replay passes SIMCUDA_COSTS on to its simulator, and to
 * nothing else) and hostoff run's COMMAND inherit it. */
#ifndef HOSTOFF_TOOLS_SIM_COSTS_H
#define HOSTOFF_TOOLS_SIM_COSTS_H

#include <stdbool.h>

/* A host link, GB/s (1e9 bytes/s): each direction alone and each while the other also runs. */
struct cli_link {
    const char *name; /* "pcie5", "c2c", or the rate as given */
    double h2d, d2h;
    double h2d_duplex, d2h_duplex;
};

/* "pcie5", "c2c" (the presets, cited in docs/simcuda.md "Costs"), or a whole rate in GB/s each
 * way (both at once: PCIe Gen5's 35 and 53 of 55, scaled). False for anything else. */
bool cli_link_parse(const char *text, struct cli_link *out);
/* The text of the --link values for messages and --help: "pcie5, c2c or a rate in GB/s". */
#define CLI_LINK_EXPECTED "pcie5, c2c or a rate in GB/s"

/* The link rows of a cost file and where it is. */
struct cli_costs {
    char path[4096]; /* absolute; "" when no file is in force */
    bool has_h2d, has_d2h, has_h2d_duplex, has_d2h_duplex;
    double h2d, d2h, h2d_duplex, d2h_duplex;
};

/* Reads and checks the cost file at `path` into *c. False after one line "hostoff: WHO: --costs
 * PATH ..." naming the file (and the line) and what was wrong. */
bool cli_costs_read(const char *who, const char *path, struct cli_costs *c);

/* --costs FILE: cli_costs_read, then SIMCUDA_COSTS=<absolute path> in this process's
 * environment. False (after the one line) when the file is missing or malformed. */
bool cli_costs_use(const char *who, const char *path);

/* The link of a replay: *link from --link when given (link_text != NULL); else the cost file's
 * link rows over the pcie5 preset (the simulator's own default link). */
void cli_link_with_costs(const char *link_text, const struct cli_costs *c, struct cli_link *link);

#endif
