/* The policy interface: decisions only. Pure C, no CUDA, deterministic. The engine describes the
 * buffers it could move and asks which to evict; it carries the decisions out.
 *
 * Buffers are named by the engine's ids; sizes are bytes; "last_use" is the engine's use
 * sequence number (larger = more recent). Unit-tested on synthetic inputs (tests/unit). */
#ifndef HOSTOFF_POLICY_H
#define HOSTOFF_POLICY_H

#include <stddef.h>
#include <stdint.h>

/* HO_POLICY_LRU: least recently used first (the reactive baseline).
 * HO_POLICY_FURTHEST: the candidate whose predicted next use is furthest away first (Belady's
 * choice, as good as the prediction); candidates without a prediction count as furthest (nothing
 * says they will be needed), least recently used first among themselves. */
enum ho_policy_kind { HO_POLICY_LRU, HO_POLICY_FURTHEST };

/* No prediction of a buffer's next use. */
#define HO_NEXT_USE_UNKNOWN UINT64_MAX

/* A buffer the engine could evict now: resident, movable, not needed by the current call. */
struct ho_policy_candidate {
    uint64_t id;
    uint64_t bytes;
    uint64_t last_use;
    uint64_t next_use; /* launches until its predicted next use, or HO_NEXT_USE_UNKNOWN */
};

/* Chooses victims whose bytes add up to at least `need` (or all candidates, when they do not
 * reach it): writes their ids to out (at most cap), in the order they should go, and returns how
 * many. `candidates` may be reordered. */
size_t ho_policy_victims(enum ho_policy_kind kind, uint64_t need,
                         struct ho_policy_candidate *candidates, size_t n, uint64_t *out,
                         size_t cap);

#endif
