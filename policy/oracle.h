/* The oracle policy: the bound lookahead is measured against. It exists for `hostoff replay`
 * only: the replay knows the whole trace, so it plans every move in advance with what lookahead
 * has to learn or estimate given exactly - every buffer's real lifetime (not its first and last
 * use), every kernel's duration, the link's rate, every buffer's next use (for victims) - and
 * with the same gap planner (plan.h), from the first step on. What it does better than lookahead
 * is the cost of learning; it is not a proof of optimality (the planner is greedy).
 *
 * Launches are numbered as the library numbers the launches it shows its policy (those using at
 * least one managed buffer), buffers by the order of their managed allocations. The plan travels
 * from the replay to the library as a file (HOSTOFF_ORACLE_PLAN), written and read here:
 *
 *     hostoff_oracle_plan 1
 *     launches N buffers M
 *     u B L1 L2 ...            buffer B's uses, in launch order
 *     a L e B... r B...        after launch L: evict these, start restoring these
 *
 * Pure C, deterministic. */
#ifndef HOSTOFF_ORACLE_H
#define HOSTOFF_ORACLE_H

#include "policy.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct ho_oracle_input {
    size_t nlaunch;
    const uint64_t *ns;      /* each launch's device time */
    const size_t *use_start; /* CSR, nlaunch + 1 entries, into `use` */
    const uint64_t *use;     /* buffer numbers */
    size_t nbuf;
    const uint64_t *bytes;   /* each buffer's size */
    const uint64_t *born;    /* launches before it was allocated */
    const uint64_t *dies;    /* launches before it was freed (nlaunch: never) */
    uint64_t budget;         /* device bytes the buffers may keep */
    double link_bytes_per_s; /* host-to-device */
    uint64_t move_fixed_ns;  /* a round trip's fixed driver time (plan.h; 0: none) */
};

struct ho_oracle_plan {
    size_t nlaunch, nbuf;
    size_t *act_start; /* CSR by launch, nlaunch + 1 entries */
    uint64_t *act;     /* buffer << 1 | 1 for a restore, | 0 for an eviction */
    size_t *use_start; /* CSR by buffer, nbuf + 1 entries */
    uint64_t *uses;    /* launch numbers, ascending per buffer */
};

/* Plans every move; 0 on success, -1 when out of memory. */
int ho_oracle_plan(const struct ho_oracle_input *in, struct ho_oracle_plan *out);
void ho_oracle_free(struct ho_oracle_plan *p);

/* Launches after `launch` until buffer b's next use; HO_NEXT_USE_NEVER when it has none. */
uint64_t ho_oracle_next_use(const struct ho_oracle_plan *p, uint64_t b, uint64_t launch);

/* The policy that follows plan (oracle_policy.c): it takes the plan over, and frees it when it
 * cannot (out of memory: false). */
bool ho_policy_oracle(struct ho_policy *out, struct ho_oracle_plan *plan);

int ho_oracle_write(const struct ho_oracle_plan *p, FILE *f);
/* Reads a plan file; 0 on success, else -1 with "PATH:LINE: what" in err. */
int ho_oracle_read(const char *path, struct ho_oracle_plan *out, char *err, size_t errcap);

#endif
