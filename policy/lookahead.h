/* The lookahead policy: learns the training step from the launch stream and moves each buffer out
 * right after its last use before a long gap, and back a learned lead ahead of its next use.
 *
 * Pure C, no CUDA, deterministic; not thread-safe (the engine calls it under its lock).
 *
 * - Step detection: the sequence of launched functions repeats with the step. A candidate period
 *   is taken from the last earlier launch of the same function with the same preceding context;
 *   it is adopted once it has held for a whole period, and dropped when the sequence stops
 *   repeating. Step markers, when the engine sees them, fix the period directly.
 * - Identity across steps: a buffer allocated inside a step is named by its allocation site, its
 *   size and its order among the step's allocations of that site and size, so the activations a
 *   framework allocates afresh each step map to the same roles (and an allocation added or
 *   dropped elsewhere does not rename them); buffers that outlive steps keep their own ids.
 * - Planning: the last complete step gives, for every role, the positions (launch indices within
 *   the step) where it is used, hence the step's device footprint at each position. Where that
 *   exceeds the budget, gaps between uses are chosen, longest first, until it no longer does; a
 *   chosen buffer is evicted right after the use that opens its gap and restored `lead` launches
 *   before the use that closes it. Only what the budget needs moves: the link is the real cost.
 *   A buffer whose prefetch had not landed by its use (a late restore) doubles its role's lead, up
 *   to a quarter of a step: the feedback that corrects the first guesses. A gap is worth taking
 *   when it is longer than the lead (plus a margin): the eviction and the restore use different
 *   copy engines, so only the restore must fit before the next use.
 * Until a period is known the policy decides nothing and the engine falls back to lru. */
#ifndef HOSTOFF_LOOKAHEAD_H
#define HOSTOFF_LOOKAHEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HO_LA_MAX_ACTIONS 64

struct ho_la_actions {
    uint64_t evict[HO_LA_MAX_ACTIONS]; /* buffer ids to move out now */
    size_t nevict;
    uint64_t restore[HO_LA_MAX_ACTIONS]; /* buffer ids to bring back now */
    size_t nrestore;
};

struct ho_lookahead;

/* lead0: the first lead, in launches, before any feedback. */
struct ho_lookahead *ho_la_create(unsigned lead0);
void ho_la_destroy(struct ho_lookahead *la);

/* site: where it was allocated (0: unknown), which with its size and its order among the step's
 * allocations from that site and of that size names its role across steps. */
void ho_la_alloc(struct ho_lookahead *la, uint64_t id, uint64_t bytes, uint64_t site);
void ho_la_free(struct ho_lookahead *la, uint64_t id);
/* An explicit step boundary (a marker): the next launch starts a step. */
void ho_la_step(struct ho_lookahead *la);
/* A launch of function `func` using buffers `ids`: fills `out` with what to move now. */
void ho_la_launch(struct ho_lookahead *la, uint64_t func, const uint64_t *ids, size_t n,
                  struct ho_la_actions *out);
/* The device bytes the buffers may keep (UINT64_MAX, the default: no budget, nothing planned). */
void ho_la_set_budget(struct ho_lookahead *la, uint64_t bytes);
/* The buffer was needed while not on the device: its restore was late (or never issued). */
void ho_la_late(struct ho_lookahead *la, uint64_t id);

/* Kernel durations make the plan reason in device time rather than in launches. The policy asks
 * for one step of them at a time (ho_la_wants_timing), when it has none for its step or they are
 * RETIME_STEPS steps old; the engine times that step's launches and reports each one's device
 * time by its launch index (ho_la_launches() - 1 right after ho_la_launch). */
uint64_t ho_la_launches(const struct ho_lookahead *la);
bool ho_la_wants_timing(const struct ho_lookahead *la);
void ho_la_duration(struct ho_lookahead *la, uint64_t launch, uint64_t ns);
/* The host-to-device link's rate, bytes per second (0: unknown, plan in launches). */
void ho_la_set_link(struct ho_lookahead *la, double bytes_per_s);

/* Whether the policy predicts now (it knows the step and the last two steps agreed). */
bool ho_la_predicts(const struct ho_lookahead *la);
/* Launches until buffer id's next use as predicted from the last step; HO_LA_NEVER when it has
 * none left (it is dead until freed), HO_LA_NEVER - 1 when nothing is known of it. */
#define HO_LA_NEVER UINT64_MAX
uint64_t ho_la_next_use(const struct ho_lookahead *la, uint64_t id);

/* For tests and the report. */
uint64_t ho_la_period(const struct ho_lookahead *la);
uint64_t ho_la_steps(const struct ho_lookahead *la);
unsigned ho_la_lead_of(const struct ho_lookahead *la, uint64_t id);

#endif
