/* Process-wide counters the report prints. Relaxed atomics: each is an independent tally. */
#ifndef HOSTOFF_STATS_H
#define HOSTOFF_STATS_H

#include <stdatomic.h>
#include <stdint.h>

/* HO_COUNTER(group, key): the report's integer keys, one table (report.c prints them in order). */
#define HO_COUNTERS(X)                                                                             \
    X(counts, allocs)                                                                              \
    X(counts, frees)                                                                               \
    X(counts, reused_on_stream)                                                                    \
    X(counts, launches)                                                                            \
    X(counts, copies)                                                                              \
    X(counts, memsets)                                                                             \
    X(counts, syncs)                                                                               \
    X(counts, graph_launches)                                                                      \
    X(counts, captures)                                                                            \
    X(counts, evictions)                                                                           \
    X(counts, restores)                                                                            \
    X(counts, demand_restores)                                                                     \
    X(counts, prefetches)                                                                          \
    X(counts, cancelled_evictions)                                                                 \
    X(counts, cancelled_restores)                                                                  \
    X(counts, unknown_layout_launches)                                                             \
    X(counts, unattributed_uses)                                                                   \
    X(counts, escaped_handles)                                                                     \
    X(counts, host_pins)                                                                           \
    X(counts, host_unpins)                                                                         \
    X(bytes, to_host)                                                                              \
    X(bytes, to_device)                                                                            \
    X(bytes, cancelled_to_host)                                                                    \
    X(bytes, cancelled_to_device)                                                                  \
    X(bytes, peak_device)                                                                          \
    X(bytes, peak_host)                                                                            \
    X(bytes, peak_host_held)                                                                       \
    X(bytes, device_now)                                                                           \
    X(bytes, allocated)                                                                            \
    X(bytes, move_worth)                                                                           \
    X(time_ns, stall)                                                                              \
    X(time_ns, move_fixed)

struct ho_stats {
#define HO_FIELD(group, key) _Atomic uint64_t group##_##key;
    HO_COUNTERS(HO_FIELD)
#undef HO_FIELD
    _Atomic uint64_t proc_lookups;
};

extern struct ho_stats ho_stats;

static inline void ho_count(_Atomic uint64_t *c, uint64_t n) {
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* Raises a peak to at least v. */
static inline void ho_peak(_Atomic uint64_t *peak, uint64_t v) {
    uint64_t cur = atomic_load_explicit(peak, memory_order_relaxed);
    while (cur < v && !atomic_compare_exchange_weak_explicit(peak, &cur, v, memory_order_relaxed,
                                                             memory_order_relaxed)) {
    }
}

void ho_stats_reset(void);

#endif
