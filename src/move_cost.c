/* The fixed cost of a move (move_cost.h): published figures until the engine has timed its own
 * remaps. Measurements and reads come from move completions under eng.lock, so plain variables
 * serve; the report reads the published copies in ho_stats. */
#include "move_cost.h"

#include "stats.h"

/* Each kind of remap [evict?] is timed at two sizes: the fastest remap of the smallest buffer
 * seen and of the largest (0 until one is). A remap costs a fixed time plus a time per MiB (the
 * host-located cuMemSetAccess maps every page: docs/simcuda.md "Costs"), and only the fixed part
 * is what a move costs beyond its bytes: the per-MiB part grows with the bytes as the link's
 * time does. The two sizes give it as the line's intercept. */
struct remap_timing {
    uint64_t small_span, small_ns, large_span, large_ns;
};
static struct remap_timing timing[2];

/* The fixed part of one kind of remap, ns; 0 when none was timed. With one size only (or two too
 * close to tell the parts apart: less than twice apart), the smallest buffer's whole time, an
 * upper bound of it. A slope the timings make negative (noise on a real clock) gives that bound
 * too; the intercept is never above it. */
static uint64_t fixed_part(const struct remap_timing *t) {
    if (t->small_span == 0) return 0;
    if (t->large_span < 2 * t->small_span || t->large_ns <= t->small_ns) return t->small_ns;
    double per_byte = (double)(t->large_ns - t->small_ns) / (double)(t->large_span - t->small_span);
    double fixed = (double)t->small_ns - per_byte * (double)t->small_span;
    return fixed > 0 ? (uint64_t)(fixed + 0.5) : 0;
}

void ho_move_cost_note(bool evict, uint64_t span, uint64_t ns, double link_bytes_per_ns) {
    if (ns == 0 || span == 0) return;
    struct remap_timing *t = &timing[evict ? 1 : 0];
    if (t->small_span == 0 || span < t->small_span || (span == t->small_span && ns < t->small_ns)) {
        t->small_span = span;
        t->small_ns = ns;
    }
    if (span > t->large_span || (span == t->large_span && ns < t->large_ns)) {
        t->large_span = span;
        t->large_ns = ns;
    }
    atomic_store_explicit(&ho_stats.time_ns_move_fixed, ho_move_fixed_ns(), memory_order_relaxed);
    atomic_store_explicit(&ho_stats.bytes_move_worth, ho_move_worth_bytes(link_bytes_per_ns),
                          memory_order_relaxed);
}

uint64_t ho_move_fixed_ns(void) {
    if (timing[0].small_span != 0 && timing[1].small_span != 0)
        return fixed_part(&timing[0]) + fixed_part(&timing[1]);
    return (uint64_t)HO_PUBLISHED_EVICT_REMAP_NS + HO_PUBLISHED_RESTORE_REMAP_NS;
}

uint64_t ho_move_worth_bytes(double link_bytes_per_ns) {
    double rate = link_bytes_per_ns > 0 ? link_bytes_per_ns : HO_PUBLISHED_LINK_BYTES_PER_NS;
    return (uint64_t)((double)ho_move_fixed_ns() * rate);
}
