/* The policy interface (policy.h) as the engine uses it, on each policy: lru plans and predicts
 * nothing; the oracle follows a hand-made plan, naming buffers by the ids it was given (the note
 * carries its own numbering), skipping freed ones, and answers next uses from the plan with the
 * right sentinel for "none left" and "not known"; lookahead numbers launches for timing and says
 * "not known" for a buffer it never saw. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lookahead.h"
#include "oracle.h"
#include "policy.h"

static void sentinels_differ(void **state) {
    (void)state;
    assert_true(HO_NEXT_USE_NEVER != HO_NEXT_USE_UNKNOWN);
    /* Victim order (furthest first): no use left, then unknown, then any prediction. */
    struct ho_policy_candidate c[3] = {
        {1, 10, 5, 3}, {2, 10, 5, HO_NEXT_USE_UNKNOWN}, {3, 10, 5, HO_NEXT_USE_NEVER}};
    uint64_t out[3];
    assert_int_equal(ho_policy_victims(HO_POLICY_FURTHEST, 30, c, 3, out, 3), 3);
    assert_int_equal(out[0], 3);
    assert_int_equal(out[1], 2);
    assert_int_equal(out[2], 1);
}

static void lru_plans_nothing(void **state) {
    (void)state;
    struct ho_policy p = {&ho_policy_lru_ops, NULL};
    assert_string_equal(p.ops->name, "lru");
    assert_false(p.ops->plans);
    assert_false(p.ops->timed);
    struct ho_policy_buffer b = {0x1000, 0};
    p.ops->alloc(p.self, &b, 1 << 20, 7);
    struct ho_policy_actions a;
    uint64_t ids[1] = {b.id};
    p.ops->launch(p.self, 42, ids, 1, &a);
    assert_int_equal(a.nevict, 0);
    assert_int_equal(a.nrestore, 0);
    assert_false(p.ops->predicts(p.self));
    assert_int_equal(p.ops->next_use(p.self, &b), HO_NEXT_USE_UNKNOWN);
    assert_false(p.ops->wants_timing(p.self));
    p.ops->free(p.self, &b);
    p.ops->destroy(p.self);
}

/* Four launches, three buffers. Uses: buffer 0 at 0 and 2, buffer 1 at 1 and 3, buffer 2 at 3.
 * After launch 0: evict 0. After 1: restore 0, evict 1. After 2: restore 1 and 2. */
static struct ho_oracle_plan small_plan(void) {
    static const size_t act_start[] = {0, 1, 3, 5, 5};
    static const uint64_t act[] = {0 << 1, 0 << 1 | 1, 1 << 1, 1 << 1 | 1, 2 << 1 | 1};
    static const size_t use_start[] = {0, 2, 4, 5};
    static const uint64_t uses[] = {0, 2, 1, 3, 3};
    struct ho_oracle_plan p = {.nlaunch = 4, .nbuf = 3};
    p.act_start = malloc(sizeof act_start);
    p.act = malloc(sizeof act);
    p.use_start = malloc(sizeof use_start);
    p.uses = malloc(sizeof uses);
    assert_non_null(p.act_start);
    assert_non_null(p.act);
    assert_non_null(p.use_start);
    assert_non_null(p.uses);
    memcpy(p.act_start, act_start, sizeof act_start);
    memcpy(p.act, act, sizeof act);
    memcpy(p.use_start, use_start, sizeof use_start);
    memcpy(p.uses, uses, sizeof uses);
    return p;
}

static void oracle_follows_its_plan(void **state) {
    (void)state;
    struct ho_oracle_plan plan = small_plan();
    struct ho_policy p;
    assert_true(ho_policy_oracle(&p, &plan));
    assert_string_equal(p.ops->name, "oracle");
    assert_true(p.ops->plans);
    assert_false(p.ops->timed);
    assert_true(p.ops->predicts(p.self));
    /* Ids are the engine's own (pointers in the library): nothing like the plan's numbers. */
    struct ho_policy_buffer b[4] = {{0xa000, 0}, {0xb000, 0}, {0xc000, 0}, {0xd000, 0}};
    for (int i = 0; i < 3; i++)
        p.ops->alloc(p.self, &b[i], 1 << 20, 0);
    assert_int_equal(p.ops->next_use(p.self, &b[0]), HO_NEXT_USE_UNKNOWN); /* no launch yet */

    struct ho_policy_actions a;
    uint64_t ids[1] = {b[0].id};
    assert_int_equal(p.ops->launch(p.self, 1, ids, 1, &a), 0);
    assert_int_equal(a.nevict, 1);
    assert_int_equal(a.evict[0], 0xa000);
    assert_int_equal(a.nrestore, 0);
    assert_int_equal(p.ops->next_use(p.self, &b[0]), 2);
    assert_int_equal(p.ops->next_use(p.self, &b[1]), 1);
    assert_int_equal(p.ops->next_use(p.self, &b[2]), 3);

    p.ops->free(p.self, &b[1]); /* its planned eviction after launch 1 is dropped */
    ids[0] = b[1].id;
    assert_int_equal(p.ops->launch(p.self, 2, ids, 1, &a), 1);
    assert_int_equal(a.nevict, 0);
    assert_int_equal(a.nrestore, 1);
    assert_int_equal(a.restore[0], 0xa000);

    ids[0] = b[0].id;
    assert_int_equal(p.ops->launch(p.self, 3, ids, 1, &a), 2);
    assert_int_equal(a.nrestore, 1); /* buffer 1 is gone: only buffer 2 comes back */
    assert_int_equal(a.restore[0], 0xc000);
    assert_int_equal(p.ops->next_use(p.self, &b[0]), HO_NEXT_USE_NEVER); /* none left */
    assert_int_equal(p.ops->next_use(p.self, &b[2]), 1);

    p.ops->alloc(p.self, &b[3], 1 << 20, 0); /* beyond the plan's buffers */
    assert_int_equal(p.ops->next_use(p.self, &b[3]), HO_NEXT_USE_UNKNOWN);
    assert_int_equal(p.ops->launch(p.self, 4, ids, 1, &a), 3);
    assert_int_equal(p.ops->launch(p.self, 5, ids, 1, &a), 4); /* past the plan: nothing */
    assert_int_equal(a.nevict + a.nrestore, 0);
    assert_false(p.ops->wants_timing(p.self));
    p.ops->destroy(p.self);
}

static void lookahead_numbers_launches(void **state) {
    (void)state;
    struct ho_policy p;
    assert_true(ho_policy_lookahead(&p, 8));
    assert_string_equal(p.ops->name, "lookahead");
    assert_true(p.ops->plans);
    assert_true(p.ops->timed);
    struct ho_policy_buffer b = {0x1000, 0}, stranger = {0x2000, 0};
    p.ops->alloc(p.self, &b, 1 << 20, 1);
    p.ops->set_budget(p.self, 1 << 30);
    struct ho_policy_actions a;
    for (uint64_t i = 0; i < 5; i++)
        assert_int_equal(p.ops->launch(p.self, 100 + i, &b.id, 1, &a), i);
    assert_false(p.ops->predicts(p.self)); /* no step learned yet */
    assert_int_equal(p.ops->next_use(p.self, &stranger), HO_NEXT_USE_UNKNOWN);
    p.ops->free(p.self, &b);
    p.ops->destroy(p.self);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sentinels_differ),
        cmocka_unit_test(lru_plans_nothing),
        cmocka_unit_test(oracle_follows_its_plan),
        cmocka_unit_test(lookahead_numbers_launches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
