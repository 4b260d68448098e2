/* The lookahead policy's state, shared by its files: lookahead.c (step detection, roles,
 * patterns and plans) and lookahead_history.c (what happened before a period was adopted, and the
 * first pattern made from it). Private to policy/. */
#ifndef HOSTOFF_LOOKAHEAD_INTERNAL_H
#define HOSTOFF_LOOKAHEAD_INTERNAL_H

#include "lookahead.h"
#include "u64map.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HIST_BITS      17 /* launches remembered: periods up to 128 Ki launches */
#define HIST           (1u << HIST_BITS)
#define CTX            8 /* launches of context that identify a point in the step */
#define CTX_BITS       18
#define MARGIN         2            /* launches of slack on top of a round trip */
#define ROLE_BIT       (1ull << 63) /* keys of buffers named by their role within the step */
#define MISMATCH_LIMIT 4            /* launches off the pattern before the period is dropped */
#define MIN_PERIOD     8            /* shorter repeats are loops inside a step, not steps */
#define TRUST          0.9          /* share of uses two steps must share to be trusted */
#define INNER_LIMIT    128 /* a period that held this many times was the step, not a loop in it */
#define MAX_DOUBLINGS  4   /* late restores double a role's lead this often */
#define RETIME_STEPS   32  /* kernel durations are measured again after this many steps */
/* The plan keeps 1/RESERVE_SHARE of the budget back for moves in flight. A sweep of 6 (the
 * earlier value), 10, 12, 16 and 32 on the tuning set (resnet50 and gpt2-1k, both views, 70%,
 * both links; docs/policy-benchmark.md) chose 10: with 6 the plan moved 1.4x the excess a step
 * on resnet50.tensor, with 32 the moves in flight overran the budget into demand restores. */
#define RESERVE_SHARE 10

/* A 64-bit finaliser: role keys, plan keys and contexts from several words. */
static inline uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* One use in a step: at position pos, the buffer with key. */
struct use {
    uint32_t pos;
    uint64_t key;
    uint64_t bytes;
};

/* What the last complete step looked like. */
struct pattern {
    struct use *uses; /* sorted by key, then position */
    size_t n;
    struct u64map first;   /* key -> index of its first use in `uses` */
    uint32_t *sched_start; /* prefetch schedule: keys to restore at each position (CSR) */
    uint64_t *sched;
    struct u64map evict_at; /* (key, position) -> 1: evict after this use (planned gaps) */
    struct u64map life;     /* role key -> born << 32 | dies: positions it was allocated before and
                             * freed before (dies = the period: lived past the step's end) */
    bool valid;
    bool trusted; /* the step before looked the same: predictions are worth acting on */
};

struct ho_lookahead {
    unsigned lead0;
    uint64_t launches;              /* launches seen */
    uint64_t hist[HIST];            /* function of each recent launch */
    uint64_t *ctx_last;             /* context hash -> launch index + 1 */
    uint64_t candidate, confirmed;  /* period detection */
    uint64_t period, anchor, steps; /* anchor: launch index where a step began */
    uint64_t mismatches;
    uint64_t inner; /* the longest run a shorter period held before breaking: a loop in a step */
    uint64_t held;  /* launches the current period has matched */
    uint64_t pos;   /* the position of the last launch within the step */
    bool marker_mode;
    uint64_t last_marker;    /* launch index of the last marker + 1 */
    uint64_t step_allocs;    /* allocations in the step `alloc_step` so far */
    uint64_t alloc_step;     /* the step (window) those allocations belong to */
    uint64_t first_alloc;    /* launches into this step before its first allocation */
    bool aligned;            /* steps begin where the loop allocates (or at markers) */
    struct u64map key_of;    /* buffer id -> key */
    struct u64map serial_of; /* buffer id -> its allocation serial: its key once a role proves
                              * wrong (rekey_roles) */
    struct u64map id_of;     /* key -> live buffer id */
    struct u64map late;      /* key -> how many times its restores were late (doublings) */
    uint64_t *dur;          /* measured device time of each position of the step, ns (0: not yet) */
    uint64_t dur_period;    /* the period `dur` is for */
    double link;            /* host-to-device bytes per ns (0: unknown) */
    uint64_t move_fixed;    /* fixed driver time of a round trip, ns (0: none) */
    bool timing;            /* this step's launches should be timed */
    uint64_t timed_at;      /* the step when timing last began */
    struct u64map bytes_of; /* buffer id -> bytes */
    struct u64map site_count; /* (site, size) -> allocations this step (generation << 32 | count) */
    struct u64map born, dies; /* role key -> launches seen when it was allocated / freed, + 1 */
    uint64_t alloc_gen;       /* bumped when a step's allocations start afresh */
    uint64_t budget;          /* device bytes buffers may keep (UINT64_MAX: none) */
    /* What the engine names by address (a buffer's id, a launch's function, an allocation
     * site's return addresses) differs from run to run (address-space randomisation, heap
     * reuse under threads). Keys, hashes and every order the plan breaks ties by are made from
     * these ordinals instead, numbered by first appearance: the same event stream gives the
     * same decisions every time, whatever the addresses (tests/unit/test_lookahead.c). */
    struct u64map sig_ord;  /* launch signature -> ordinal + 1 */
    struct u64map site_ord; /* allocation site -> ordinal + 1 */
    uint64_t nsig, nsite;
    uint64_t serial; /* allocations seen: a buffer that outlives steps is keyed by it */
    struct use *rec; /* this step's uses, as they happen */
    size_t nrec, caprec;
    struct pattern pat;
    struct la_history *history; /* kept while no period is known (NULL: none) */
};

/* A role key: a buffer allocated within a step is the n-th allocation of its kind (its site's
 * ordinal and its size) in the step. */
static inline uint64_t la_kind(uint64_t site, uint64_t bytes) {
    return mix(site * 0x9E3779B97F4A7C15ull ^ bytes) | 1;
}

static inline uint64_t la_role_key(uint64_t kind, uint64_t n) {
    uint64_t key = ROLE_BIT | (mix(kind ^ n * 0xC2B2AE3D27D4EB4Full) >> 1);
    return key == ROLE_BIT ? key | 1 : key;
}

/* lookahead.c */
void la_record(struct ho_lookahead *la, uint32_t pos, uint64_t key, uint64_t bytes);
void la_close_step(struct ho_lookahead *la, uint64_t end);

/* lookahead_history.c */
struct la_history *la_history_create(void);
void la_history_destroy(struct la_history *h);
/* Forgets everything: the history starts again at the current launch. */
void la_history_reset(struct ho_lookahead *la);
/* Before a period is adopted: an allocation (site: its ordinal), a free, a launch's uses. */
void la_history_alloc(struct ho_lookahead *la, uint64_t id, uint64_t serial, uint64_t site,
                      uint64_t bytes);
void la_history_free(struct ho_lookahead *la, uint64_t serial);
void la_history_use(struct ho_lookahead *la, uint64_t serial, uint64_t bytes);
/* The period was just adopted at launch i: plans from the step that proved it, and names the
 * step under way, when the history holds them (true); false leaves the adoption as it was. */
bool la_prime(struct ho_lookahead *la, uint64_t i);
/* The same when a second step marker gives the period: the step the two markers bound is the
 * last whole one, and the next launch starts the next. */
bool la_prime_marked(struct ho_lookahead *la);

#endif
