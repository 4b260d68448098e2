/* The fixed cost of a move (move_cost.h): published figures until the engine has timed its own
 * remaps. Measurements and reads come from move completions under eng.lock, so plain variables
 * serve; the report reads the published copies in ho_stats. */
#include "move_cost.h"

#include "stats.h"

/* [evict?]: the fastest remap of the smallest buffer seen (0 until one is): the smaller the
 * buffer, the less its per-MiB part hides the fixed one. */
static uint64_t least_ns[2], least_span[2];

void ho_move_cost_note(bool evict, uint64_t span, uint64_t ns, double link_bytes_per_ns) {
    if (ns == 0 || span == 0) return;
    int k = evict ? 1 : 0;
    if (least_span[k] == 0 || span < least_span[k] || (span == least_span[k] && ns < least_ns[k])) {
        least_span[k] = span;
        least_ns[k] = ns;
    }
    atomic_store_explicit(&ho_stats.time_ns_move_fixed, ho_move_fixed_ns(), memory_order_relaxed);
    atomic_store_explicit(&ho_stats.bytes_move_worth, ho_move_worth_bytes(link_bytes_per_ns),
                          memory_order_relaxed);
}

uint64_t ho_move_fixed_ns(void) {
    if (least_ns[0] != 0 && least_ns[1] != 0) return least_ns[0] + least_ns[1];
    return (uint64_t)HO_PUBLISHED_EVICT_REMAP_NS + HO_PUBLISHED_RESTORE_REMAP_NS;
}

uint64_t ho_move_worth_bytes(double link_bytes_per_ns) {
    double rate = link_bytes_per_ns > 0 ? link_bytes_per_ns : HO_PUBLISHED_LINK_BYTES_PER_NS;
    return (uint64_t)((double)ho_move_fixed_ns() * rate);
}
