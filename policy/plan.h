/* Choosing what to keep off the device, and when to bring it back: the planner both lookahead
 * (on the last step, learned) and oracle (on the whole trace, known) use. Pure C, deterministic.
 *
 * The input is a run of launch positions 0..npos-1 and, at each, how far the device footprint
 * would exceed the budget if nothing moved ("over", bytes, positive where over). A gap is a
 * stretch between two uses of one buffer, at positions `from` < `to`, during which it could be off
 * the device: it leaves right after the use at `from` and must be back before the use at `to`.
 * With `wrap` the run is one step of a loop, and a gap may end in the next step (to >= npos).
 *
 * Greedy, longest gaps first (the easiest to hide): a gap is taken when it covers a position
 * still over, and it then lowers "over" wherever the buffer is away; then the taken gaps the
 * budget no longer needs (every position they cover would stay within it without them) are
 * dropped, shortest first. Only what the budget needs moves: the link is the real cost. Lengths
 * and leads are in device time when the positions' durations and the link's rate are known, else
 * in launches:
 * - with times, a restore needs bytes / rate, plus an eighth; it is issued the fewest launches
 *   ahead of the use that cover that time. Restores share one link: taken gaps are then placed
 * latest deadline first, each finishing no later than the next one starts, and their leads grow to
 * match.
 * - without, the lead is the gap's `lead` in launches.
 * A final gap (the buffer is not used again: it runs to its free, or to the end of a run that does
 * not wrap) has no restore and no lead.
 * A gap too short for its lead (the buffer would be back before it left) is not taken. A buffer not
 * worth its move's fixed cost (move_fixed_ns) is taken only after the others, and only where a
 * position still exceeds the budget itself, beyond the margin kept back for moves in flight: an
 * excess the plan leaves uncovered is met by the engine anyway, with evictions made for room
 * when it is short and restores on demand. */
#ifndef HOSTOFF_PLAN_H
#define HOSTOFF_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ho_gap {
    uint64_t key, bytes;
    uint64_t from, to; /* positions of the two uses; to < npos unless the run wraps */
    unsigned lead;     /* in: lead in launches, used without times; out: the chosen lead */
    bool taken;        /* out */
    bool rejected;     /* out: taken once, then dropped because the link could not carry it */
    uint64_t away;     /* out: the first position it no longer occupies the device */
    /* in: the buffer is not used again after `from` (to: its free, or the run's end): it
     * leaves and never comes back, so the gap has no restore and no lead. */
    bool final;
};

struct ho_plan_run {
    uint64_t npos;
    bool wrap;
    /* Device time at the start of each position, ns (npos + 1 values: the last is the run's
     * length); NULL when unknown. */
    const uint64_t *t;
    double link_bytes_per_ns; /* host-to-device rate; 0 when unknown */
    int64_t *over;            /* npos values, lowered as gaps are taken */
    /* The fixed driver time of a round trip, ns (0: none). A buffer whose bytes cross the link
     * (at link_bytes_per_ns, or 55 bytes/ns, PCIe Gen5, while unknown) in less time than that is
     * planned only where the buffers worth it leave a position over the budget: its remaps cost
     * more than moving more bytes of a larger buffer, and less than a restore on demand. */
    uint64_t move_fixed_ns;
    /* The part of `over`, bytes, that is a margin kept back for moves in flight rather than the
     * budget itself: a buffer not worth its move's fixed cost is planned only where a position
     * exceeds the budget (over > margin), never to keep the margin. */
    int64_t margin;
};

/* Marks the gaps to take and sets their leads. `gaps` is reordered. Returns how many were taken. */
size_t ho_plan_gaps(const struct ho_plan_run *run, struct ho_gap *gaps, size_t n);

#endif
