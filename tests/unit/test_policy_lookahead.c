/* The lookahead policy on a synthetic training loop: step detection without markers, buffer
 * identity across steps (activations reallocated every step), a plan that fits the budget by
 * evicting the longest gaps (act[0]'s, from its forward use to its backward use) and restores
 * ahead of the backward use, and the late-restore feedback. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include <cmocka.h>

#include "lookahead.h"

#define LAYERS 8
#define PERIOD (2 * LAYERS + 1) /* forward, backward, optimizer */

/* One step: allocate activations, forward (layer l uses weights and act[l]), backward in reverse,
 * optimizer (weights), free activations. Records what the policy said for act[0]. */
struct loop {
    struct ho_lookahead *la;
    uint64_t next_id;
    uint64_t act[LAYERS];
    int act0_evicted_at, act0_restored_at; /* positions within the step, -1 if not */
    bool report_late;                      /* tell the policy act[0] arrived late */
    bool extra;                            /* allocate one more buffer, elsewhere, first */
};

static void launch(struct loop *L, uint64_t func, const uint64_t *ids, size_t n, int pos) {
    struct ho_policy_actions a;
    ho_la_launch(L->la, func, ids, n, &a);
    for (size_t i = 0; i < a.nevict; i++)
        if (a.evict[i] == L->act[0]) L->act0_evicted_at = pos;
    for (size_t i = 0; i < a.nrestore; i++)
        if (a.restore[i] == L->act[0] && L->act0_restored_at < 0) L->act0_restored_at = pos;
}

static void step(struct loop *L) {
    const uint64_t weights = 1;
    L->act0_evicted_at = L->act0_restored_at = -1;
    uint64_t extra = 0;
    if (L->extra) { /* another site's buffer, the same size as act[0], before the activations */
        extra = L->next_id++;
        ho_la_alloc(L->la, extra, 1u << 20, 2);
    }
    for (int l = 0; l < LAYERS; l++) {
        L->act[l] = L->next_id++;
        ho_la_alloc(L->la, L->act[l], (uint64_t)(l + 1) << 20, 1);
    }
    int pos = 0;
    for (int l = 0; l < LAYERS; l++, pos++) {
        uint64_t ids[2] = {weights, L->act[l]};
        launch(L, 100 + (uint64_t)l, ids, 2, pos);
    }
    for (int l = LAYERS - 1; l >= 0; l--, pos++) {
        uint64_t ids[2] = {weights, L->act[l]};
        if (l == 0 && L->report_late) ho_la_late(L->la, L->act[0]); /* found not resident */
        launch(L, 200 + (uint64_t)l, ids, 2, pos);
    }
    uint64_t w = weights;
    launch(L, 300, &w, 1, pos);
    for (int l = 0; l < LAYERS; l++)
        ho_la_free(L->la, L->act[l]);
    if (extra != 0) ho_la_free(L->la, extra);
}

static void learns_the_step_and_plans_moves(void **state) {
    (void)state;
    struct loop L = {.la = ho_la_create(2), .next_id = 10};
    ho_la_set_budget(L.la, 80u << 20); /* weights 64 MiB + up to 36 MiB of activations */
    assert_non_null(L.la);
    ho_la_alloc(L.la, 1, 64u << 20, 0);
    step(&L);
    assert_int_equal(ho_la_period(L.la), 0); /* first step: nothing known, lru decides */
    for (int s = 0; s < 6; s++)
        step(&L);
    assert_int_equal(ho_la_period(L.la), PERIOD);
    assert_true(ho_la_steps(L.la) >= 3); /* two alike steps before any prediction is trusted */
    /* act[0] is used at forward position 0 and backward position 2*LAYERS-1: evicted after its
     * forward use, restored `lead` (2) launches before its backward use. The period may be
     * anchored anywhere in the loop, so check the distances, which do not depend on it. */
    step(&L);
    assert_true(L.act0_evicted_at >= 0);
    assert_true(L.act0_restored_at >= 0);
    int backward_use = 2 * LAYERS - 1;
    assert_int_equal(backward_use - L.act0_restored_at, 3); /* lead 2, issued one launch early */
    assert_int_equal(ho_la_lead_of(L.la, L.act[0]), 2);
    ho_la_destroy(L.la);
}

static void late_restores_double_the_lead(void **state) {
    (void)state;
    struct loop L = {.la = ho_la_create(2), .next_id = 10};
    ho_la_set_budget(L.la, 80u << 20); /* weights 64 MiB + up to 36 MiB of activations */
    ho_la_alloc(L.la, 1, 64u << 20, 0);
    for (int s = 0; s < 6; s++)
        step(&L);
    assert_int_equal(ho_la_period(L.la), PERIOD);
    /* act[0] arrives late at its backward use: its role's lead doubles, and the next steps'
     * schedule restores it earlier. */
    L.report_late = true;
    step(&L);
    L.report_late = false;
    assert_int_equal(ho_la_lead_of(L.la, 1), 2); /* the weights' role keeps the default */
    step(&L); /* this step's schedule was built before the feedback */
    step(&L);
    assert_int_equal(2 * LAYERS - 1 - L.act0_restored_at, 5); /* lead 4, issued one launch early */
    ho_la_destroy(L.la);
}

static void no_budget_no_moves(void **state) {
    (void)state;
    struct loop L = {.la = ho_la_create(2), .next_id = 10};
    ho_la_alloc(L.la, 1, 64u << 20, 0);
    for (int s = 0; s < 8; s++)
        step(&L);
    assert_int_equal(ho_la_period(L.la), PERIOD);
    assert_int_equal(L.act0_evicted_at, -1);
    assert_int_equal(L.act0_restored_at, -1);
    ho_la_destroy(L.la);
}

static void a_changed_sequence_drops_the_period(void **state) {
    (void)state;
    struct loop L = {.la = ho_la_create(2), .next_id = 10};
    ho_la_set_budget(L.la, 80u << 20); /* weights 64 MiB + up to 36 MiB of activations */
    ho_la_alloc(L.la, 1, 64u << 20, 0);
    for (int s = 0; s < 5; s++)
        step(&L);
    assert_int_equal(ho_la_period(L.la), PERIOD);
    struct ho_policy_actions a;
    uint64_t w = 1;
    for (int k = 0; k < 10; k++)
        ho_la_launch(L.la, 999 + (uint64_t)k, &w, 1, &a);
    assert_int_equal(ho_la_period(L.la), 0);
    ho_la_destroy(L.la);
}

static void markers_fix_the_period(void **state) {
    (void)state;
    struct loop L = {.la = ho_la_create(2), .next_id = 10};
    ho_la_set_budget(L.la, 80u << 20); /* weights 64 MiB + up to 36 MiB of activations */
    ho_la_alloc(L.la, 1, 64u << 20, 0);
    ho_la_step(L.la);
    step(&L);
    ho_la_step(L.la);
    assert_int_equal(ho_la_period(L.la), PERIOD);
    for (int s = 0; s < 3; s++) {
        step(&L);
        ho_la_step(L.la);
    }
    step(&L);
    assert_true(L.act0_evicted_at == 0);
    assert_int_equal(L.act0_restored_at, 2 * LAYERS - 1 - 3);
    ho_la_destroy(L.la);
}

/* The step between the first two markers is a whole one: the policy plans from it at once, so
 * the second step already moves act[0] (without the history, the third did). A first step with
 * one launch more (a framework's first step also makes its optimizer's state) still gives the
 * later, shorter steps a plan at once: its record is kept at the new length. */
static void markers_plan_from_the_first_step(void **state) {
    (void)state;
    for (int longer_first = 0; longer_first <= 1; longer_first++) {
        struct loop L = {.la = ho_la_create(2), .next_id = 10};
        assert_non_null(L.la);
        ho_la_set_budget(L.la, 80u << 20);
        ho_la_alloc(L.la, 1, 64u << 20, 0);
        ho_la_step(L.la);
        if (longer_first) {
            uint64_t w = 1;
            struct ho_policy_actions a;
            ho_la_launch(L.la, 400, &w, 1, &a);
        }
        step(&L);
        ho_la_step(L.la);
        step(&L);
        ho_la_step(L.la);
        assert_int_equal(ho_la_period(L.la), PERIOD);
        if (!longer_first) {
            assert_int_equal(L.act0_evicted_at, 0); /* the second step moved it already */
            assert_int_equal(L.act0_restored_at, 2 * LAYERS - 1 - 3);
        }
        step(&L);
        assert_int_equal(L.act0_evicted_at, 0);
        assert_int_equal(L.act0_restored_at, 2 * LAYERS - 1 - 3);
        ho_la_destroy(L.la);
    }
}

/* A loop with a 64 MiB weight buffer (allocated at `site`) under an 80 MiB budget, after
 * `steps` steps each closed by a step marker (the first marker opens the first step). */
static struct loop marked_loop(int steps, uint64_t site) {
    struct loop L = {.la = ho_la_create(2), .next_id = 10};
    assert_non_null(L.la);
    ho_la_set_budget(L.la, 80u << 20);
    ho_la_alloc(L.la, 1, 64u << 20, site);
    ho_la_step(L.la);
    for (int s = 0; s < steps; s++) {
        step(&L);
        ho_la_step(L.la);
    }
    return L;
}

/* Roles are per site and size: one more allocation elsewhere, even of act[0]'s size, does not
 * rename the activations, so the plan for act[0] still applies in that step. */
static void an_extra_allocation_renames_nothing(void **state) {
    (void)state;
    struct loop L = marked_loop(5, 3);
    int evicted = L.act0_evicted_at, restored = L.act0_restored_at;
    assert_true(evicted >= 0 && restored >= 0);
    L.extra = true;
    step(&L);
    assert_int_equal(L.act0_evicted_at, evicted);
    assert_int_equal(L.act0_restored_at, restored);
    ho_la_destroy(L.la);
}

/* Identical layers: every layer launches the same eight kernels, so the sequence also repeats
 * with the layer's period, for as long as the layer loop lasts. The step is the whole loop. */
#define DEEP_LAYERS 6
#define DEEP_OPS    8
#define DEEP_PERIOD (2 * DEEP_LAYERS * DEEP_OPS + 1)

static void deep_step(struct ho_lookahead *la) {
    struct ho_policy_actions a;
    uint64_t w = 1;
    for (int l = 0; l < DEEP_LAYERS; l++)
        for (uint64_t k = 0; k < DEEP_OPS; k++)
            ho_la_launch(la, 10 + k, &w, 1, &a);
    for (int l = 0; l < DEEP_LAYERS; l++)
        for (uint64_t k = 0; k < DEEP_OPS; k++)
            ho_la_launch(la, 20 + k, &w, 1, &a);
    ho_la_launch(la, 30, &w, 1, &a);
}

static void identical_layers_are_not_the_step(void **state) {
    (void)state;
    struct ho_lookahead *la = ho_la_create(2);
    assert_non_null(la);
    ho_la_alloc(la, 1, 1u << 20, 0);
    for (int s = 0; s < 6; s++)
        deep_step(la);
    assert_int_equal(ho_la_period(la), DEEP_PERIOD);
    for (int s = 0; s < 20; s++)
        deep_step(la);
    assert_int_equal(ho_la_period(la), DEEP_PERIOD); /* and it keeps it */
    ho_la_destroy(la);
}

static void predicts_the_next_use(void **state) {
    (void)state;
    struct loop L = marked_loop(4, 0);
    assert_true(ho_la_predicts(L.la));
    /* Allocate this step's activations and run the first forward launch (position 0): act[0]
     * is next used at its backward position 2*LAYERS-1; act[LAYERS-1] at forward position
     * LAYERS-1; the weights next at position 1. */
    for (int l = 0; l < LAYERS; l++) {
        L.act[l] = L.next_id++;
        ho_la_alloc(L.la, L.act[l], (uint64_t)(l + 1) << 20, 1);
    }
    struct ho_policy_actions a;
    uint64_t ids[2] = {1, L.act[0]};
    ho_la_launch(L.la, 100, ids, 2, &a);
    assert_int_equal(ho_la_next_use(L.la, L.act[0]), 2 * LAYERS - 1);
    assert_int_equal(ho_la_next_use(L.la, L.act[LAYERS - 1]), LAYERS - 1);
    assert_int_equal(ho_la_next_use(L.la, 1), 1);
    assert_int_equal(ho_la_next_use(L.la, 12345), HO_NEXT_USE_UNKNOWN); /* never seen */
    ho_la_destroy(L.la);
}

/* The engine names buffers, functions and sites by addresses, which change from run to run. A
 * stream whose names are renamed (a bijection that also reorders them) must get the same moves,
 * by position and by buffer: here each layer has two weights of one size used together, so their
 * gaps tie everywhere the plan breaks ties, and the budget moves an odd number of them. */
#define RN_LAYERS 6
#define RN_STEPS  8
struct renamed_moves {
    uint32_t n;
    uint32_t at[4096]; /* launch << 12 | kind << 11 | logical buffer */
};

/* Names in ascending order (salt 0) or in descending order from `salt`: every tie broken by a
 * name goes the other way. */
static uint64_t rename_as(uint64_t x, uint64_t salt) {
    return salt == 0 ? 0x100000 + x * 65537 : salt - x * 65537;
}

static void renamed_loop(uint64_t salt, struct renamed_moves *out) {
    struct ho_lookahead *la = ho_la_create(2);
    assert_non_null(la);
    uint64_t names[1024];
    uint32_t nnames = 0, launch_no = 0;
    out->n = 0;
    /* Logical buffers 0..2*RN_LAYERS-1: weights (persistent, 8 MiB each, two per layer);
     * activations after. */
    for (int l = 0; l < 2 * RN_LAYERS; l++) {
        names[nnames] = rename_as(nnames + 1, salt);
        ho_la_alloc(la, names[nnames], 8u << 20, 0);
        nnames++;
    }
    ho_la_set_budget(la, 60u << 20); /* 96 MiB of weights and 6 of activations: moves needed */
    for (int s = 0; s < RN_STEPS; s++) {
        uint32_t act0 = nnames;
        for (int l = 0; l < RN_LAYERS; l++) {
            names[nnames] = rename_as(nnames + 1, salt);
            ho_la_alloc(la, names[nnames], 1u << 20, rename_as(77, salt));
            nnames++;
        }
        for (int phase = 0; phase < 2; phase++) {
            for (int k = 0; k < RN_LAYERS; k++) {
                int l = phase == 0 ? k : RN_LAYERS - 1 - k;
                uint64_t ids[3] = {names[2 * l], names[2 * l + 1], names[act0 + (uint32_t)l]};
                struct ho_policy_actions a;
                ho_la_launch(la, rename_as(1000 + (uint64_t)(phase * 16 + l), salt), ids, 3, &a);
                for (size_t i = 0; i < a.nevict + a.nrestore; i++) {
                    uint64_t id = i < a.nevict ? a.evict[i] : a.restore[i - a.nevict];
                    uint32_t logical = 0;
                    while (logical < nnames && names[logical] != id)
                        logical++;
                    assert_true(logical < nnames && out->n < 4096);
                    out->at[out->n++] =
                        launch_no << 12 | (uint32_t)(i >= a.nevict) << 11 | (logical & 0x7ff);
                }
                launch_no++;
            }
        }
        for (int l = 0; l < RN_LAYERS; l++)
            ho_la_free(la, names[act0 + (uint32_t)l]);
    }
    assert_true(ho_la_period(la) == 2 * RN_LAYERS);
    ho_la_destroy(la);
}

static void addresses_do_not_change_decisions(void **state) {
    (void)state;
    static struct renamed_moves a, b, c;
    renamed_loop(0, &a);
    renamed_loop(1ull << 60, &b);
    renamed_loop(0x7ffffffffffull, &c);
    assert_true(a.n > 0); /* the budget makes it move */
    assert_int_equal(a.n, b.n);
    assert_int_equal(a.n, c.n);
    assert_memory_equal(a.at, b.at, a.n * sizeof a.at[0]);
    assert_memory_equal(a.at, c.at, a.n * sizeof a.at[0]);
}

/* A pattern whose step the launch sequence already showed repeating is acted on at once (the
 * caching allocator's view: every buffer outlives the steps, so the first step known names them
 * as the next ones will): the plan moves in the step right after the first one it knows, instead
 * of waiting for a second alike step. */
static void acts_on_the_first_step_it_knows(void **state) {
    (void)state;
    struct ho_lookahead *la = ho_la_create(2);
    assert_non_null(la);
    ho_la_alloc(la, 1, 64u << 20, 0); /* a segment used at the start and the end of a step */
    ho_la_alloc(la, 2, 32u << 20, 0); /* one used throughout */
    ho_la_set_budget(la, 80u << 20);
    uint64_t first_known = 0, first_move = 0;
    for (uint64_t s = 1; s <= 8 && first_move == 0; s++) {
        for (int k = 0; k < 16; k++) {
            uint64_t ids[2] = {2, 1};
            struct ho_policy_actions a;
            ho_la_launch(la, 500 + (uint64_t)k, ids, k == 0 || k == 15 ? 2 : 1, &a);
            if (a.nevict > 0 && first_move == 0) first_move = s;
        }
        if (first_known == 0 && ho_la_steps(la) > 0) first_known = s;
    }
    assert_true(first_known > 0);
    assert_int_equal(first_move, first_known + 1);
    ho_la_destroy(la);
}

/* A caching allocator makes its segments early, while a layer loop may hold the period: each
 * segment is then the first of its site and size in its "step" of a few launches, and all would
 * share one role. Once that period is dropped they are named apart again: in the real step,
 * segment i is used at position 10 i, and so it is predicted. */
#define SEGS      6
#define REAL_STEP 80
static void roles_of_a_dropped_period_are_renamed(void **state) {
    (void)state;
    struct ho_lookahead *la = ho_la_create(2);
    assert_non_null(la);
    struct ho_policy_actions a;
    uint64_t w = 1000, seg[SEGS];
    ho_la_alloc(la, w, 1u << 20, 0);
    for (int r = 0; r < 4 + SEGS; r++) { /* a layer loop of 8 launches */
        if (r >= 4) {
            assert_int_equal(ho_la_period(la), 8);
            seg[r - 4] = 2000 + (uint64_t)r;
            ho_la_alloc(la, seg[r - 4], 1u << 20, 7);
        }
        for (uint64_t k = 0; k < 8; k++)
            ho_la_launch(la, 50 + k, &w, 1, &a);
    }
    for (int s = 0; s < 6; s++)
        for (uint64_t q = 0; q < REAL_STEP; q++) {
            bool uses_seg = q % 10 == 0 && q / 10 < SEGS;
            uint64_t ids[2] = {w, uses_seg ? seg[q / 10] : 0};
            ho_la_launch(la, 100 + q, ids, uses_seg ? 2 : 1, &a);
        }
    assert_int_equal(ho_la_period(la), REAL_STEP);
    assert_true(ho_la_predicts(la));
    uint64_t ids[2] = {w, seg[0]};
    ho_la_launch(la, 100, ids, 2, &a); /* position 0 of the next step */
    for (int i = 1; i < SEGS; i++)
        assert_int_equal(ho_la_next_use(la, seg[i]), 10 * (uint64_t)i);
    ho_la_destroy(la);
}

/* The launches that proved the period are a whole step: the policy plans from them at once
 * (lookahead_history.c) and names the step under way by role, so the step after the one the
 * period was adopted in already moves act[0] out after its forward use and back before its
 * backward use (without the history, the first move came four steps after the adoption). */
static void plans_from_the_step_that_proved_the_period(void **state) {
    (void)state;
    struct loop L = {.la = ho_la_create(2), .next_id = 10};
    assert_non_null(L.la);
    ho_la_set_budget(L.la, 80u << 20);
    ho_la_alloc(L.la, 1, 64u << 20, 0);
    int adopted = -1;
    for (int s = 0; s < 8 && adopted < 0; s++) {
        step(&L);
        if (ho_la_period(L.la) == PERIOD) adopted = s;
    }
    assert_true(adopted >= 0);
    assert_true(ho_la_predicts(L.la));
    step(&L);
    assert_int_equal(L.act0_evicted_at, 0);
    assert_int_equal(2 * LAYERS - 1 - L.act0_restored_at, 3); /* lead 2, issued a launch early */
    ho_la_destroy(L.la);
}

/* A step with more uses than the history holds (a step of 4 x 40,000 uses, against 128 Ki kept)
 * is not planned from a part of it: the policy records a step of its own first, and then plans
 * (each launch uses three weights, and one of 64 activations allocated at the step's start or a
 * fourth weight). */
#define LONG_STEP 40000
#define LONG_ACTS 64
static int long_step(struct ho_lookahead *la, uint64_t *next_id) {
    uint64_t act[LONG_ACTS];
    int evictions = 0;
    for (int k = 0; k < LONG_ACTS; k++) {
        act[k] = (*next_id)++;
        ho_la_alloc(la, act[k], 1u << 20, 1);
    }
    for (int pos = 0; pos < LONG_STEP; pos++) {
        /* Activation k is used in the first and the last 64 launches alone: long gaps. */
        int k = pos < LONG_ACTS ? pos : (pos >= LONG_STEP - LONG_ACTS ? LONG_STEP - 1 - pos : -1);
        uint64_t ids[4] = {1, 2, 3, k >= 0 ? act[k] : 4};
        struct ho_policy_actions a;
        ho_la_launch(la, 1000 + (uint64_t)pos, ids, 4, &a);
        evictions += (int)a.nevict;
    }
    for (int k = 0; k < LONG_ACTS; k++)
        ho_la_free(la, act[k]);
    return evictions;
}

static void a_step_longer_than_the_history_is_learnt_as_before(void **state) {
    (void)state;
    struct ho_lookahead *la = ho_la_create(2);
    assert_non_null(la);
    ho_la_set_budget(la, 16u << 20); /* the 64 activations (64 MiB) must not all stay */
    for (uint64_t w = 1; w <= 4; w++)
        ho_la_alloc(la, w, 1u << 20, 0);
    uint64_t next_id = 10;
    int adopted = -1, first_move = -1;
    for (int s = 0; s < 8 && first_move < 0; s++) {
        int evictions = long_step(la, &next_id);
        if (adopted < 0 && ho_la_period(la) == LONG_STEP) adopted = s;
        if (evictions > 0 && ho_la_predicts(la)) first_move = s;
    }
    assert_true(adopted >= 0);
    assert_true(first_move > adopted); /* no plan from the history it could not hold */
    assert_true(ho_la_steps(la) >= 1);
    ho_la_destroy(la);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(learns_the_step_and_plans_moves),
        cmocka_unit_test(late_restores_double_the_lead),
        cmocka_unit_test(no_budget_no_moves),
        cmocka_unit_test(a_changed_sequence_drops_the_period),
        cmocka_unit_test(markers_fix_the_period),
        cmocka_unit_test(markers_plan_from_the_first_step),
        cmocka_unit_test(identical_layers_are_not_the_step),
        cmocka_unit_test(predicts_the_next_use),
        cmocka_unit_test(an_extra_allocation_renames_nothing),
        cmocka_unit_test(addresses_do_not_change_decisions),
        cmocka_unit_test(acts_on_the_first_step_it_knows),
        cmocka_unit_test(roles_of_a_dropped_period_are_renamed),
        cmocka_unit_test(plans_from_the_step_that_proved_the_period),
        cmocka_unit_test(a_step_longer_than_the_history_is_learnt_as_before),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
