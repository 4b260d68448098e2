/* The one u64 map (policy/u64map.h) that the policies, the trace's handle numbering and the
 * tools share: lookups, overwrites, key 0, growth, deletion inside probe runs (checked against
 * a plain array model under a long random sequence), clearing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "u64map.h"

static void empty_map_finds_nothing(void **state) {
    (void)state;
    struct u64map m = {0};
    uint64_t v = 42;
    assert_false(u64map_get(&m, 1, &v));
    assert_false(u64map_get(&m, 0, &v));
    assert_int_equal(v, 42); /* untouched when absent */
    assert_false(u64map_del(&m, 1));
    assert_false(u64map_del(&m, 0));
    assert_int_equal(m.n, 0);
    u64map_free(&m);
    u64map_free(&m); /* twice is harmless */
}

static void put_get_overwrite(void **state) {
    (void)state;
    struct u64map m = {0};
    assert_true(u64map_put(&m, 7, 70));
    assert_true(u64map_put(&m, UINT64_MAX, 1));
    assert_true(u64map_put(&m, 0, 99)); /* key 0 is an ordinary key */
    assert_int_equal(m.n, 3);
    uint64_t v = 0;
    assert_true(u64map_get(&m, 7, &v));
    assert_int_equal(v, 70);
    assert_true(u64map_get(&m, UINT64_MAX, &v));
    assert_int_equal(v, 1);
    assert_true(u64map_get(&m, 0, &v));
    assert_int_equal(v, 99);
    assert_true(u64map_put(&m, 7, 71)); /* overwrite: same count */
    assert_true(u64map_put(&m, 0, 98));
    assert_int_equal(m.n, 3);
    assert_true(u64map_get(&m, 7, &v));
    assert_int_equal(v, 71);
    assert_true(u64map_get(&m, 0, &v));
    assert_int_equal(v, 98);
    assert_true(u64map_del(&m, 0));
    assert_false(u64map_get(&m, 0, &v));
    assert_int_equal(m.n, 2);
    u64map_free(&m);
    assert_int_equal(m.n, 0);
    assert_false(u64map_get(&m, 7, &v));
}

/* Device addresses are 2 MiB aligned and ids sequential: both must spread and grow. */
static void grows_with_aligned_and_sequential_keys(void **state) {
    (void)state;
    struct u64map m = {0};
    const uint64_t n = 50000;
    for (uint64_t i = 1; i <= n; i++) {
        assert_true(u64map_put(&m, i << 21, i));
        assert_true(u64map_put(&m, i, ~i));
    }
    assert_int_equal(m.n, 2 * n);
    assert_true(m.cap >= 4 * n); /* at most half full */
    assert_int_equal(m.cap & (m.cap - 1), 0);
    for (uint64_t i = 1; i <= n; i++) {
        uint64_t v = 0;
        assert_true(u64map_get(&m, i << 21, &v));
        assert_int_equal(v, i);
        assert_true(u64map_get(&m, i, &v));
        assert_int_equal(v, ~i);
    }
    uint64_t v;
    assert_false(u64map_get(&m, (n + 1) << 21, &v));
    assert_false(u64map_get(&m, 3ull << 20, &v)); /* between two aligned keys */
    u64map_free(&m);
}

/* A long random sequence of puts, gets and deletes over few keys in a small table (probe runs
 * wrap around its end), checked step by step against a plain array. */
static void matches_a_model_under_random_operations(void **state) {
    (void)state;
    enum { KEYS = 48 };
    struct u64map m = {0};
    bool present[KEYS] = {false};
    uint64_t value[KEYS] = {0};
    size_t count = 0;
    uint64_t x = 0x2545f4914f6cdd1dull;
    for (int step = 0; step < 200000; step++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        unsigned k = (unsigned)(x % KEYS), op = (unsigned)((x >> 8) % 3);
        uint64_t key = k * 64; /* key 0 among them; multiples of 64 share low bits */
        uint64_t v = 0;
        if (op == 0) {
            assert_true(u64map_put(&m, key, x));
            if (!present[k]) count++;
            present[k] = true;
            value[k] = x;
        } else if (op == 1) {
            assert_int_equal(u64map_del(&m, key), present[k]);
            if (present[k]) count--;
            present[k] = false;
        }
        assert_int_equal(u64map_get(&m, key, &v), present[k]);
        if (present[k]) assert_int_equal(v, value[k]);
        assert_int_equal(m.n, count);
        if (step % 997 == 0) /* every key, now and then */
            for (unsigned j = 0; j < KEYS; j++) {
                assert_int_equal(u64map_get(&m, j * 64, &v), present[j]);
                if (present[j]) assert_int_equal(v, value[j]);
            }
    }
    u64map_free(&m);
}

static void clear_keeps_capacity(void **state) {
    (void)state;
    struct u64map m = {0};
    for (uint64_t i = 0; i < 1000; i++)
        assert_true(u64map_put(&m, i, i));
    size_t cap = m.cap;
    struct u64map_slot *slots = m.s;
    u64map_clear(&m);
    assert_int_equal(m.n, 0);
    assert_int_equal(m.cap, cap);
    assert_ptr_equal(m.s, slots);
    uint64_t v;
    for (uint64_t i = 0; i < 1000; i++)
        assert_false(u64map_get(&m, i, &v));
    assert_true(u64map_put(&m, 5, 50));
    assert_true(u64map_get(&m, 5, &v));
    assert_int_equal(v, 50);
    assert_int_equal(m.n, 1);
    u64map_clear(&m);
    u64map_free(&m);
    struct u64map never = {0};
    u64map_clear(&never); /* never allocated: nothing to clear */
    assert_int_equal(never.n, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(empty_map_finds_nothing),
        cmocka_unit_test(put_get_overwrite),
        cmocka_unit_test(grows_with_aligned_and_sequential_keys),
        cmocka_unit_test(matches_a_model_under_random_operations),
        cmocka_unit_test(clear_keeps_capacity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
