/* The gap planner (policy/plan.c) on synthetic runs: in launches without times; in device time
 * with a link, where copies queue; and on a link too slow for the step's device time, where the
 * planner plans the step as it will run, longer, instead of dropping the gaps. Every launch takes
 * 10 ms. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "plan.h"

#define MIB  (1ull << 20)
#define NPOS 32
#define NBUF 8
#define MS   1000000ull

/* NBUF buffers of 32 MiB, buffer b used at positions b and NPOS - 1 - b; `over` says every
 * position from NBUF to NPOS - NBUF - 1 exceeds the budget by `excess`. */
static size_t build(struct ho_gap *gaps, int64_t *over, uint64_t *t, int64_t excess) {
    for (int q = 0; q < NPOS; q++) {
        over[q] = q >= NBUF && q < NPOS - NBUF ? excess : -1;
        t[q] = (uint64_t)q * 10 * MS;
    }
    t[NPOS] = NPOS * 10 * MS;
    for (int b = 0; b < NBUF; b++)
        gaps[b] = (struct ho_gap){.key = (uint64_t)b + 1,
                                  .bytes = 32 * MIB,
                                  .from = (uint64_t)b,
                                  .to = (uint64_t)(NPOS - 1 - b),
                                  .lead = 2};
    return NBUF;
}

static size_t count_taken(const struct ho_gap *g, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += g[i].taken;
    return k;
}

static void in_launches_longest_first(void **state) {
    (void)state;
    struct ho_gap g[NBUF];
    int64_t over[NPOS];
    uint64_t t[NPOS + 1];
    size_t n = build(g, over, t, (int64_t)(48 * MIB)); /* two buffers' worth must go */
    struct ho_plan_run r = {NPOS, false, NULL, 0, over, 0, 0};
    assert_int_equal(ho_plan_gaps(&r, g, n), 2);
    for (size_t i = 0; i < n; i++) {
        if (!g[i].taken) continue;
        assert_true(g[i].key == 1 || g[i].key == 2); /* the two longest gaps */
        assert_int_equal(g[i].lead, 2);              /* the launch lead, as given */
    }
    for (int q = 0; q < NPOS; q++)
        assert_true(over[q] <= 0);
}

static void in_device_time_leads_cover_the_transfer(void **state) {
    (void)state;
    struct ho_gap g[NBUF];
    int64_t over[NPOS];
    uint64_t t[NPOS + 1];
    size_t n = build(g, over, t, (int64_t)(16 * MIB));
    /* 32 MiB at 1.34 GB/s: 25 ms, 28 with the planner's eighth: three 10 ms launches. */
    struct ho_plan_run r = {NPOS, false, t, 1.342e9 / 1e9, over, 0, 0};
    assert_int_equal(ho_plan_gaps(&r, g, n), 1);
    for (size_t i = 0; i < n; i++) {
        if (!g[i].taken) continue;
        assert_int_equal(g[i].key, 1);
        assert_int_equal(g[i].lead, 3);
        assert_int_equal(g[i].away, 4); /* its own eviction: 28 ms after position 1 starts */
    }
}

static void a_slow_link_stretches_the_step(void **state) {
    (void)state;
    struct ho_gap g[NBUF];
    int64_t over[NPOS];
    uint64_t t[NPOS + 1];
    /* Every buffer must go, and all are needed again by the last launch: at 0.67 GB/s (56 ms a
     * copy) the 256 MiB cannot leave and come back within the step's 320 ms of device time.
     * Planned on the device's times alone, the link could carry only some of them and the step
     * would stay over; planned on the step as it will run (longer, waiting on the link), every
     * one goes, each away for a while before its restore starts. */
    size_t n = build(g, over, t, (int64_t)(8 * 32 * MIB));
    for (size_t i = 0; i < n; i++)
        g[i].to = NPOS - 1;
    struct ho_plan_run r = {NPOS, false, t, 0.671e9 / 1e9, over, 0, 0};
    size_t taken = ho_plan_gaps(&r, g, n);
    assert_int_equal(taken, count_taken(g, n));
    assert_int_equal(taken, NBUF);
    for (size_t i = 0; i < n; i++) {
        assert_false(g[i].rejected);
        assert_true(g[i].away < g[i].to - g[i].lead); /* each is away a while */
    }
}

/* A move's fixed cost: the two longest gaps belong to 1 MiB buffers, whose bytes cross the link
 * (1 byte/ns here) in about 1 ms, less than a 2 ms round trip's fixed driver time: they are never
 * planned, and the 32 MiB buffers with the next longest gaps go instead. Without the fixed cost
 * the small ones go first, as the longest. */
static void small_buffers_are_not_worth_their_moves(void **state) {
    (void)state;
    for (int fixed = 0; fixed < 2; fixed++) {
        struct ho_gap g[NBUF];
        int64_t over[NPOS];
        uint64_t t[NPOS + 1];
        size_t n = build(g, over, t, (int64_t)(1 * MIB));
        g[0].bytes = g[1].bytes = 1 * MIB;
        struct ho_plan_run r = {NPOS, false, NULL, 1.0, over, fixed ? 2 * MS : 0, 0};
        size_t taken = ho_plan_gaps(&r, g, n);
        assert_int_equal(taken, 1);
        for (size_t i = 0; i < n; i++)
            if (g[i].taken) assert_int_equal(g[i].key, fixed ? 3 : 1);
    }
}

/* When only buffers not worth their move's fixed cost can cover an excess, they still go where a
 * position exceeds the budget itself: left to the engine, the excess would be met with evictions
 * made for room when it is needed and restores on demand. They do not go for the margin kept back
 * for moves in flight (`margin`). Two 1 MiB buffers, each crossing the link (1 byte/ns) in about
 * 1 ms, under a 2 ms round trip, and positions 10 to 20 over by 1.5 MiB: with no margin both go;
 * with 1 MiB of it margin only the longest gap goes (0.5 MiB over the budget itself); with 2 MiB
 * none does, and the excess stays to the margin. */
static void small_buffers_go_for_the_budget_not_the_margin(void **state) {
    (void)state;
    const int64_t margins[] = {0, (int64_t)MIB, (int64_t)(2 * MIB)};
    const size_t want[] = {2, 1, 0};
    for (int m = 0; m < 3; m++) {
        struct ho_gap g[2] = {
            {.key = 1, .bytes = MIB, .from = 4, .to = 26, .lead = 1},
            {.key = 2, .bytes = MIB, .from = 5, .to = 25, .lead = 1},
        };
        int64_t over[NPOS];
        for (int q = 0; q < NPOS; q++)
            over[q] = q >= 10 && q <= 20 ? (int64_t)(3 * MIB / 2) : -1;
        struct ho_plan_run r = {.npos = NPOS,
                                .link_bytes_per_ns = 1.0,
                                .over = over,
                                .move_fixed_ns = 2 * MS,
                                .margin = margins[m]};
        assert_int_equal(ho_plan_gaps(&r, g, 2), want[m]);
        for (size_t i = 0; i < 2; i++)
            assert_int_equal(g[i].taken, g[i].key <= want[m]);
        assert_int_equal(over[15], (int64_t)(3 * MIB / 2) - (int64_t)(want[m] * MIB));
    }
}

/* The greedy cover, longest gaps first, can overshoot: a 32 MiB buffer away from position 5 to 25
 * is taken first, then a 64 MiB one away from 8 to 22, the only one that covers the 64 MiB excess
 * of positions 10 to 20 with the first. Once both are taken the first is no longer needed: every
 * position it is away stays within the budget without it, and it is dropped. Only the 64 MiB
 * move is left, and the excess is still covered. */
static void a_gap_the_budget_no_longer_needs_is_dropped(void **state) {
    (void)state;
    struct ho_gap g[2] = {
        {.key = 1, .bytes = 32 * MIB, .from = 4, .to = 26, .lead = 1},
        {.key = 2, .bytes = 64 * MIB, .from = 7, .to = 23, .lead = 1},
    };
    int64_t over[NPOS];
    for (int q = 0; q < NPOS; q++)
        over[q] = q >= 10 && q <= 20 ? (int64_t)(64 * MIB) : -1;
    struct ho_plan_run r = {NPOS, false, NULL, 0, over, 0, 0};
    assert_int_equal(ho_plan_gaps(&r, g, 2), 1);
    for (size_t i = 0; i < 2; i++)
        assert_int_equal(g[i].taken, g[i].key == 2);
    for (int q = 0; q < NPOS; q++)
        assert_true(over[q] <= 0);
    /* What the dropped gap lowered is given back: positions 5 to 7 and 23 to 25, where only it
     * was away, are as before. */
    assert_int_equal(over[5], -1);
    assert_int_equal(over[24], -1);
    assert_int_equal(over[15], 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(in_launches_longest_first),
        cmocka_unit_test(in_device_time_leads_cover_the_transfer),
        cmocka_unit_test(a_slow_link_stretches_the_step),
        cmocka_unit_test(small_buffers_are_not_worth_their_moves),
        cmocka_unit_test(small_buffers_go_for_the_budget_not_the_margin),
        cmocka_unit_test(a_gap_the_budget_no_longer_needs_is_dropped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
