/* Victim choice on synthetic inputs: lru (recency order) and furthest (predicted next use, the
 * unpredicted counted furthest), enough bytes, deterministic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "policy.h"

static void least_recent_first_until_enough(void **state) {
    (void)state;
    struct ho_policy_candidate c[] = {
        {.id = 1, .bytes = 100, .last_use = 50},
        {.id = 2, .bytes = 100, .last_use = 10},
        {.id = 3, .bytes = 100, .last_use = 30},
        {.id = 4, .bytes = 100, .last_use = 20},
    };
    uint64_t out[4];
    size_t n = ho_policy_victims(HO_POLICY_LRU, 150, c, 4, out, 4);
    assert_int_equal(n, 2);
    assert_int_equal(out[0], 2);
    assert_int_equal(out[1], 4);
}

static void everything_when_not_enough(void **state) {
    (void)state;
    struct ho_policy_candidate c[] = {
        {.id = 7, .bytes = 10, .last_use = 3},
        {.id = 8, .bytes = 10, .last_use = 1},
    };
    uint64_t out[2];
    assert_int_equal(ho_policy_victims(HO_POLICY_LRU, 1000, c, 2, out, 2), 2);
    assert_int_equal(out[0], 8);
    assert_int_equal(out[1], 7);
}

static void ties_broken_by_age_and_cap_respected(void **state) {
    (void)state;
    struct ho_policy_candidate c[] = {
        {.id = 9, .bytes = 1, .last_use = 5},
        {.id = 3, .bytes = 1, .last_use = 5},
        {.id = 6, .bytes = 1, .last_use = 5},
    };
    uint64_t out[2];
    assert_int_equal(ho_policy_victims(HO_POLICY_LRU, 3, c, 3, out, 2), 2);
    assert_int_equal(out[0], 3);
    assert_int_equal(out[1], 6);
}

static void nothing_needed_or_nothing_movable(void **state) {
    (void)state;
    struct ho_policy_candidate c[] = {{.id = 1, .bytes = 5, .last_use = 1}};
    uint64_t out[1];
    assert_int_equal(ho_policy_victims(HO_POLICY_LRU, 0, c, 1, out, 1), 0);
    assert_int_equal(ho_policy_victims(HO_POLICY_LRU, 5, c, 0, out, 1), 0);
}

static void furthest_next_use_first(void **state) {
    (void)state;
    struct ho_policy_candidate c[] = {
        {.id = 1, .bytes = 100, .last_use = 1, .next_use = 5},
        {.id = 2, .bytes = 100, .last_use = 2, .next_use = 90},
        {.id = 3, .bytes = 100, .last_use = 3, .next_use = HO_NEXT_USE_UNKNOWN},
        {.id = 4, .bytes = 100, .last_use = 4, .next_use = 40},
    };
    uint64_t out[4];
    /* The unpredicted one first (nothing says it is needed), then 90 launches away, then 40; the
     * least recently used (id 1) stays: it is needed soonest. */
    size_t n = ho_policy_victims(HO_POLICY_FURTHEST, 250, c, 4, out, 4);
    assert_int_equal(n, 3);
    assert_int_equal(out[0], 3);
    assert_int_equal(out[1], 2);
    assert_int_equal(out[2], 4);
}

static void furthest_ties_fall_back_to_recency(void **state) {
    (void)state;
    struct ho_policy_candidate c[] = {
        {.id = 5, .bytes = 1, .last_use = 9, .next_use = 7},
        {.id = 6, .bytes = 1, .last_use = 2, .next_use = 7},
    };
    uint64_t out[1];
    assert_int_equal(ho_policy_victims(HO_POLICY_FURTHEST, 1, c, 2, out, 1), 1);
    assert_int_equal(out[0], 6);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(least_recent_first_until_enough),
        cmocka_unit_test(everything_when_not_enough),
        cmocka_unit_test(ties_broken_by_age_and_cap_respected),
        cmocka_unit_test(nothing_needed_or_nothing_movable),
        cmocka_unit_test(furthest_next_use_first),
        cmocka_unit_test(furthest_ties_fall_back_to_recency),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
