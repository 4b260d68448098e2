/* The lookahead policy: learns the training step from the launch stream and moves each buffer out
 * right after its last use before a long gap, and back in time for its next use.
 *
 * Pure C, no CUDA, deterministic; not thread-safe (the engine calls it under its lock).
 *
 * - Step detection: the sequence of launched functions repeats with the step. A launch's context
 *   (the functions before it) proposes a candidate period; the candidate is checked at every
 *   launch and adopted once it has held for a whole period, and dropped when the sequence stops
 *   repeating. A period that breaks after holding for a while was a loop inside the step (a
 *   model's identical layers): only longer candidates count afterwards. Step markers, when the
 *   engine sees them, fix the period directly. The launches that proved a period are a whole
 *   step: until a period is known the policy keeps the recent allocations, frees and uses, and
 *   at adoption plans from the last whole step at once (lookahead_history.c).
 * - Identity across steps: a buffer allocated inside a step is named by its allocation site, its
 *   size and its order among the step's allocations of that site and size, so the activations a
 *   framework allocates afresh each step map to the same roles (and an allocation added or
 *   dropped elsewhere does not rename them); buffers that outlive steps keep their own ids.
 * - Planning (plan.h): the last complete step gives every role's uses and lifetime (launch
 *   positions within the step), hence the step's device footprint at each position; gaps between
 *   uses are taken, longest first, until it fits the budget. A taken buffer is evicted right
 *   after the use that opens its gap and restored in time for the use that closes it: in device
 *   time once the engine has timed a step's kernels and the link (ho_la_duration,
 *   ho_la_set_link), in launches (`lead0`) before. Only what the budget needs moves: the link is
 *   the real cost. A buffer whose prefetch had not landed by its use (a late restore) doubles
 *   its role's lead in launches, at most MAX_DOUBLINGS times: the feedback that corrects the
 *   first guesses, while the step's durations are unknown. Planned in device time, a late
 *   restore no longer inflates its role's transfer estimate (it did, by the same doublings): a
 *   restore is late there because of what was queued on the link before it, which the planner
 *   models for every restore (plan.c, restores latest deadline first), and one role's inflated
 *   estimate moved the others' prefetches and changed the plan step after step. On the tuning
 *   set (docs/policy-benchmark.md: resnet50 and gpt2-1k, both views and links, at 80%, 70% and
 *   50%) lookahead's steady step got shorter or stayed on 22 of the 24 rows (gpt2-1k.segment
 *   pcie5 70%: 1911 -> 1437 ms, resnet50.tensor c2c 70%: 259 -> 168), and longer on
 *   gpt2-1k.tensor pcie5 70% (722 -> 835) and resnet50.segment c2c 80% (197 -> 200).
 * - Predictions: once two steps agreed, the next use of every buffer it knows (for the engine's
 *   victim choice, furthest first).
 * Until a period is known the policy decides nothing and the engine falls back to lru. */
#ifndef HOSTOFF_LOOKAHEAD_H
#define HOSTOFF_LOOKAHEAD_H

#include "policy.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Moves one launch may ask for, of each kind (the rest fall to the engine's reactive path). */
#define HO_LA_MAX_ACTIONS 64

struct ho_lookahead;

/* The policy behind the policy interface (lookahead_policy.c); false when out of memory. */
bool ho_policy_lookahead(struct ho_policy *out, unsigned lead0);

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
                  struct ho_policy_actions *out);
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

/* The fixed driver time of a round trip, ns (0, the default: none): a gap is planned only for a
 * buffer whose bytes take the link at least that long (plan.h). */
void ho_la_set_move_fixed(struct ho_lookahead *la, uint64_t ns);

/* Whether the policy predicts now (it knows the step and the last two steps agreed). */
bool ho_la_predicts(const struct ho_lookahead *la);
/* Launches until buffer id's next use as predicted from the last step; HO_NEXT_USE_NEVER when it
 * has none left (it is dead until freed), HO_NEXT_USE_UNKNOWN when nothing is known of it. */
uint64_t ho_la_next_use(const struct ho_lookahead *la, uint64_t id);

/* For tests and the report. */
uint64_t ho_la_period(const struct ho_lookahead *la);
uint64_t ho_la_steps(const struct ho_lookahead *la);
unsigned ho_la_lead_of(const struct ho_lookahead *la, uint64_t id);

#endif
