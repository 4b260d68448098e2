/* The cost file: the format of SIMCUDA_COSTS (docs/simcuda.md, "Cost file"), a contract between
 * the simulated driver, which charges its rows, the GPU kit, which writes one from its
 * measurements (costs-h200.txt), and the hostoff command, which hands one to its replays
 * (--costs) and reads its link rows for the figures it quotes.
 *
 * Its one reader, here: the simulator (tests/simcuda/costs.c) and the hostoff command (tools/)
 * both read a file through it, so a file one accepts the other accepts too, and a refusal says the
 * same thing in both. Pure C, no CUDA; it is not part of the engine (libhostoff.so never reads a
 * cost file: on a GPU the driver's own costs apply). */
#ifndef HOSTOFF_COST_FILE_H
#define HOSTOFF_COST_FILE_H

#include <stdbool.h>
#include <stddef.h>

/* Where the memory a call row applies to lives. */
enum ho_cost_where { HO_COST_BOTH = -1, HO_COST_DEVICE = 0, HO_COST_HOST = 1 };

struct ho_cost_row {
    bool link;                /* link.<field>; else call.<entry> */
    const char *name;         /* the entry or the field: one of the lists below (static storage) */
    int line;                 /* in the file, from 1 */
    enum ho_cost_where where; /* a call row's location */
    double fixed_ns, per_mib_ns; /* a call row's figures */
    double gbps;                 /* a link row's rate, above 0 */
};

/* The names a file may use, in the order of the simulator's table (tests/unit/test_sim_costs.c
 * checks both lists against it). */
extern const char *const ho_cost_entries[];
extern const size_t ho_cost_nentries;
extern const char *const ho_cost_link_fields[];
extern const size_t ho_cost_nlink_fields;

/* Reads the file at `path`, handing each row to `fn` in file order. Stops at the first row that
 * is not in the format and returns false with "PATH line N: what was expected" in err (or "PATH:
 * cannot read the file (why)"); rows before it were handed over. */
bool ho_cost_file_read(const char *path, void (*fn)(void *ctx, const struct ho_cost_row *row),
                       void *ctx, char *err, size_t cap);

#endif
