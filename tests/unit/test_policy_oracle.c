/* The oracle policy on a small synthetic trace: a persistent weight W used by every launch and
 * four activations, A[l] used by forward launch l and backward launch 7 - l, freed after it.
 * Every launch takes 10 ms. The planner must keep A[0] (the longest gap) off the device,
 * restore it in time for its backward use by the link's rate, and leave gaps too short to pay
 * alone; a buffer done with leaves for good; next uses come from the trace; the plan survives
 * its file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "oracle.h"

#define MIB (1ull << 20)
#define W   0 /* buffer numbers: W, then A[0..3] */

struct fixture {
    uint64_t ns[8];
    size_t use_start[9];
    uint64_t use[16];
    uint64_t bytes[5], born[5], dies[5];
    struct ho_oracle_input in;
};

static void build(struct fixture *f, double link_bytes_per_s) {
    size_t k = 0;
    for (int l = 0; l < 8; l++) {
        f->ns[l] = 10000000;
        f->use_start[l] = k;
        f->use[k++] = W;
        f->use[k++] = 1 + (uint64_t)(l < 4 ? l : 7 - l);
    }
    f->use_start[8] = k;
    f->bytes[W] = 64 * MIB;
    f->born[W] = 0;
    f->dies[W] = 8;
    for (int a = 0; a < 4; a++) {
        f->bytes[1 + a] = 32 * MIB;
        f->born[1 + a] = 0;
        f->dies[1 + a] = (uint64_t)(8 - a); /* freed after its backward use at 7 - a */
    }
    f->in = (struct ho_oracle_input){8,       f->ns,   f->use_start, f->use,           5, f->bytes,
                                     f->born, f->dies, 170 * MIB,    link_bytes_per_s, 0};
}

/* The launch after which buffer b is evicted (kind 0) or restored (kind 1), or -1. */
static int action_at(const struct ho_oracle_plan *p, uint64_t b, int kind) {
    for (size_t l = 0; l < p->nlaunch; l++)
        for (size_t k = p->act_start[l]; k < p->act_start[l + 1]; k++)
            if (p->act[k] == (b << 1 | (uint64_t)kind)) return (int)l;
    return -1;
}

static void longest_gap_off_and_back_in_time(void **state) {
    (void)state;
    struct fixture f;
    build(&f, 6.4e9); /* a 32 MiB restore: 5.2 ms, under one launch */
    struct ho_oracle_plan p;
    assert_int_equal(ho_oracle_plan(&f.in, &p), 0);
    assert_int_equal(action_at(&p, 1, 0), 0);  /* A[0] leaves after its forward use */
    assert_int_equal(action_at(&p, 1, 1), 5);  /* back during launch 6, before its use at 7 */
    assert_int_equal(action_at(&p, 4, 0), -1); /* A[3]: used at 3 and 4, no gap to spend */
    assert_int_equal(action_at(&p, W, 0), -1); /* W: used by every launch */
    ho_oracle_free(&p);
}

static void a_slow_link_restores_earlier(void **state) {
    (void)state;
    struct fixture f;
    build(&f, 2.56e9); /* a 32 MiB restore: 13 ms (15 with the planner's eighth), 2 launches */
    struct ho_oracle_plan p;
    assert_int_equal(ho_oracle_plan(&f.in, &p), 0);
    assert_int_equal(action_at(&p, 1, 0), 0);
    assert_int_equal(action_at(&p, 1, 1), 4); /* launches 5 and 6 cover the transfer */
    ho_oracle_free(&p);
    /* Slower still (30 ms each way): out and back would take the whole 60 ms gap, so it stays. */
    build(&f, 1.12e9);
    assert_int_equal(ho_oracle_plan(&f.in, &p), 0);
    assert_int_equal(action_at(&p, 1, 0), -1);
    ho_oracle_free(&p);
}

/* After its last use a buffer that lives on has nothing to come back for: it leaves, for good,
 * where the budget needs its room. W (64 MiB) is used by every launch; X (64 MiB) at launches
 * 0 and 1 only, then kept (never freed, or freed at 7); Y (64 MiB) is allocated for its use at
 * 2 and freed at 6. Launches 3 to 5 hold all three, over a 140 MiB budget, unless one leaves. */
static void a_buffer_done_with_leaves_for_good(void **state) {
    (void)state;
    for (int freed = 0; freed < 2; freed++) {
        uint64_t ns[8], use[16], bytes[3] = {64 * MIB, 64 * MIB, 64 * MIB};
        uint64_t born[3] = {0, 0, 2}, dies[3] = {8, freed ? 7 : 8, 6};
        size_t use_start[9], k = 0;
        for (int l = 0; l < 8; l++) {
            ns[l] = 10000000;
            use_start[l] = k;
            use[k++] = 0;
            if (l < 2) use[k++] = 1;
            if (l == 2) use[k++] = 2;
        }
        use_start[8] = k;
        struct ho_oracle_input in = {8,    ns,   use_start, use,   3, bytes,
                                     born, dies, 140 * MIB, 6.4e9, 0};
        struct ho_oracle_plan p;
        assert_int_equal(ho_oracle_plan(&in, &p), 0);
        assert_int_equal(action_at(&p, 1, 0), 1);  /* X leaves after its last use, */
        assert_int_equal(action_at(&p, 1, 1), -1); /* and nothing brings it back */
        assert_int_equal(action_at(&p, 2, 0), -1); /* one leaving is enough: Y stays */
        assert_int_equal(action_at(&p, 0, 0), -1);
        ho_oracle_free(&p);
    }
}

static void next_uses_come_from_the_trace(void **state) {
    (void)state;
    struct fixture f;
    build(&f, 6.4e9);
    struct ho_oracle_plan p;
    assert_int_equal(ho_oracle_plan(&f.in, &p), 0);
    assert_int_equal(ho_oracle_next_use(&p, 1, 0), 7); /* A[0] after launch 0: at 7 */
    assert_int_equal(ho_oracle_next_use(&p, W, 0), 1);
    assert_int_equal(ho_oracle_next_use(&p, 1, 7), HO_NEXT_USE_NEVER);  /* none left */
    assert_int_equal(ho_oracle_next_use(&p, 99, 0), HO_NEXT_USE_NEVER); /* no such buffer */
    ho_oracle_free(&p);
}

static void the_plan_survives_its_file(void **state) {
    (void)state;
    struct fixture f;
    build(&f, 6.4e9);
    struct ho_oracle_plan p, q;
    assert_int_equal(ho_oracle_plan(&f.in, &p), 0);
    char path[] = "/tmp/hostoff-oracle-test.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *file = fdopen(fd, "w");
    assert_int_equal(ho_oracle_write(&p, file), 0);
    fclose(file);
    char err[256];
    assert_int_equal(ho_oracle_read(path, &q, err, sizeof err), 0);
    assert_int_equal(q.nlaunch, p.nlaunch);
    assert_int_equal(q.nbuf, p.nbuf);
    assert_memory_equal(q.use_start, p.use_start, (p.nbuf + 1) * sizeof *p.use_start);
    assert_memory_equal(q.uses, p.uses, p.use_start[p.nbuf] * sizeof *p.uses);
    assert_memory_equal(q.act_start, p.act_start, (p.nlaunch + 1) * sizeof *p.act_start);
    /* Within a launch the file lists evictions first: compare as sets per launch. */
    for (size_t l = 0; l < p.nlaunch; l++)
        for (size_t k = p.act_start[l]; k < p.act_start[l + 1]; k++) {
            bool found = false;
            for (size_t j = q.act_start[l]; j < q.act_start[l + 1]; j++)
                found = found || q.act[j] == p.act[k];
            assert_true(found);
        }
    unlink(path);
    ho_oracle_free(&p);
    ho_oracle_free(&q);
}

static void bad_files_name_their_line(void **state) {
    (void)state;
    static const struct {
        const char *text, *where;
    } cases[] = {
        {"hostoff_oracle_plan 2\n", ":1: "},
        {"hostoff_oracle_plan 1\nlaunches 2 buffers 1\nu 0 0 5\n", ":3: "},   /* launch 5 of 2 */
        {"hostoff_oracle_plan 1\nlaunches 2 buffers 1\na 0 e 3 r\n", ":3: "}, /* buffer 3 of 1 */
        {"hostoff_oracle_plan 1\nlaunches 2 buffers 1\nx\n", ":3: "},
        {"hostoff_oracle_plan 1\n", "before its header"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[] = "/tmp/hostoff-oracle-test.XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, cases[i].text, strlen(cases[i].text)),
                         (ssize_t)strlen(cases[i].text));
        close(fd);
        struct ho_oracle_plan p;
        char err[512];
        assert_int_equal(ho_oracle_read(path, &p, err, sizeof err), -1);
        assert_non_null(strstr(err, path));
        assert_non_null(strstr(err, cases[i].where));
        unlink(path);
    }
}

/* Issue 15: a plan of a few dozen bytes whose header asks for 2^32 launches and buffers is
 * refused before anything is allocated (it used to cost 2 x 32 GiB of calloc). */
static void counts_are_checked_against_the_file(void **state) {
    (void)state;
    static const char *const texts[] = {
        "hostoff_oracle_plan 1\nlaunches 4294967296 buffers 1\n",
        "hostoff_oracle_plan 1\nlaunches 1 buffers 4294967296\n",
        "hostoff_oracle_plan 1\nlaunches 40 buffers 0\n",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        char path[] = "/tmp/hostoff-oracle-test.XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, texts[i], strlen(texts[i])), (ssize_t)strlen(texts[i]));
        close(fd);
        struct ho_oracle_plan p;
        char err[512];
        assert_int_equal(ho_oracle_read(path, &p, err, sizeof err), -1);
        if (strstr(err, "than the file holds") == NULL) fail_msg("%s: %s", texts[i], err);
        assert_non_null(strstr(err, ":2: "));
        unlink(path);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(longest_gap_off_and_back_in_time),
        cmocka_unit_test(a_slow_link_restores_earlier),
        cmocka_unit_test(a_buffer_done_with_leaves_for_good),
        cmocka_unit_test(next_uses_come_from_the_trace),
        cmocka_unit_test(the_plan_survives_its_file),
        cmocka_unit_test(bad_files_name_their_line),
        cmocka_unit_test(counts_are_checked_against_the_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
