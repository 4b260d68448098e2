/* The policy interface: decisions only. Pure C, no CUDA, deterministic. The engine tells a policy
 * what the process does (allocations, frees, launches, step markers, late restores, measured
 * times) through one table of operations, asks it what to move and which buffers will be needed
 * when, and carries the decisions out. It never asks which policy it talks to: lru (reactive: it
 * plans nothing, victims are the least recently used), lookahead (learns the step, lookahead.h)
 * and oracle (follows a plan made in advance by `hostoff replay`, oracle.h) each fill the table.
 *
 * Buffers are named by the engine's ids; sizes are bytes; "last_use" is the engine's use
 * sequence number (larger = more recent). Unit-tested on synthetic inputs (tests/unit). */
#ifndef HOSTOFF_POLICY_H
#define HOSTOFF_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Launches until a buffer's next use: a count, or one of these two. */
#define HO_NEXT_USE_NEVER   UINT64_MAX       /* it has no use left (dead until freed) */
#define HO_NEXT_USE_UNKNOWN (UINT64_MAX - 1) /* no prediction: nothing says it will be needed */

/* HO_POLICY_LRU: least recently used first (the reactive baseline).
 * HO_POLICY_FURTHEST: the candidate whose predicted next use is furthest away first (Belady's
 * choice, as good as the prediction): those with no use left first, then those without a
 * prediction (nothing says they will be needed), least recently used first among equals. */
enum ho_policy_kind { HO_POLICY_LRU, HO_POLICY_FURTHEST };

/* A buffer the engine could evict now: resident, movable, not needed by the current call. */
struct ho_policy_candidate {
    uint64_t id;
    uint64_t bytes;
    uint64_t last_use;
    uint64_t next_use; /* launches until its predicted next use (HO_NEXT_USE_*) */
};

/* Chooses victims whose bytes add up to at least `need` (or all candidates, when they do not
 * reach it): writes their ids to out (at most cap), in the order they should go, and returns how
 * many. `candidates` may be reordered. */
size_t ho_policy_victims(enum ho_policy_kind kind, uint64_t need,
                         struct ho_policy_candidate *candidates, size_t n, uint64_t *out,
                         size_t cap);

/* What to move right after a launch, by buffer id: at most HO_POLICY_MAX_ACTIONS of each kind
 * (a policy may keep to fewer); the engine falls back to its reactive path for the rest. */
#define HO_POLICY_MAX_ACTIONS 256
struct ho_policy_actions {
    uint64_t evict[HO_POLICY_MAX_ACTIONS]; /* move out now */
    size_t nevict;
    uint64_t restore[HO_POLICY_MAX_ACTIONS]; /* start bringing back now */
    size_t nrestore;
};

/* A buffer as a policy knows it: the engine's id (opaque), and one word the policy owns, which
 * the engine keeps with the buffer (0 until the policy sets it in `alloc`) and hands back on every
 * later call about it: the oracle numbers buffers by it, so it needs no map from ids. */
struct ho_policy_buffer {
    uint64_t id;
    uint64_t note;
};

/* The operations every policy fills (none may be NULL). `self` is the policy's own state. Not
 * thread-safe: the engine calls them under its lock. */
struct ho_policy_ops {
    const char *name;
    /* It plans moves ahead of need: the engine tells it of every allocation, launch and step
     * marker (else it does not, and only asks for victims when room is short). */
    bool plans;
    /* It reasons in device time: the engine samples restores for the link's rate (set_link) and
     * times the launches of the steps it asks for (wants_timing, duration). */
    bool timed;
    /* Its plan places every eviction the budget needs, made in advance from the whole trace (the
     * oracle): the engine keeps no low watermark of its own for it, whose reactive evictions
     * would only disturb that plan (engine_plan.c, keep_headroom). */
    bool complete_plan;
    void (*alloc)(void *self, struct ho_policy_buffer *b, uint64_t bytes, uint64_t site);
    void (*free)(void *self, const struct ho_policy_buffer *b);
    /* An explicit step boundary (a marker): the next launch starts a step. */
    void (*step)(void *self);
    /* The device bytes the buffers may keep (told once, before the first launch). */
    void (*set_budget)(void *self, uint64_t bytes);
    /* A launch of the point `sig` (function and operand sizes) using buffers `ids`: fills `out`
     * with what to move now and returns the launch's index (for duration). */
    uint64_t (*launch)(void *self, uint64_t sig, const uint64_t *ids, size_t n,
                       struct ho_policy_actions *out);
    /* Whether it predicts next uses now, and its prediction for b (HO_NEXT_USE_*). */
    bool (*predicts)(const void *self);
    uint64_t (*next_use)(const void *self, const struct ho_policy_buffer *b);
    /* b was needed while not on the device although a restore was planned: it came late. */
    void (*late)(void *self, const struct ho_policy_buffer *b);
    bool (*wants_timing)(const void *self);
    void (*duration)(void *self, uint64_t launch, uint64_t ns);
    void (*set_link)(void *self, double bytes_per_s);
    /* The fixed driver time of one round trip (eviction and restore remaps), ns, beyond the
     * bytes' time on the link (the engine's measurement, else published figures): a buffer
     * whose bytes cross the link faster than that costs more in remapping than it frees. */
    void (*set_move_fixed)(void *self, uint64_t ns);
    void (*destroy)(void *self);
};

struct ho_policy {
    const struct ho_policy_ops *ops;
    void *self;
};

/* The reactive baseline (lru.c): plans nothing, predicts nothing, keeps no state. */
extern const struct ho_policy_ops ho_policy_lru_ops;

#endif
