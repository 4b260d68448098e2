/* The buffer registry (src/registry.c): any address inside a buffer finds it (interior pointers,
 * last bytes, buffers over many 2 MiB chunks and many in one), nothing else does; removal by
 * kind and by range, the records kept for the report, the bounds and generation the launch path
 * relies on, growth to many buffers, and a fork child's reset. Addresses are numbers here: the
 * registry never touches memory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "registry.h"

#include <stdlib.h>

#define MIB       (1ull << 20)
#define ALL_KINDS 0xffu

static int fresh(void **state) {
    (void)state;
    assert_true(ho_registry_init());
    ho_registry_reset();
    return 0;
}

static struct ho_buffer *at(uint64_t addr) {
    ho_registry_read_begin();
    struct ho_buffer *b = ho_registry_lookup_locked(addr);
    ho_registry_read_end();
    return b;
}

static void interior_pointers_find_their_buffer(void **state) {
    (void)state;
    /* 5 MiB + 12 bytes from an address that is not chunk-aligned: four chunks. */
    const uint64_t base = 0x7f0000100000ull + 4096, size = 5 * MIB + 12;
    struct ho_buffer *b = ho_registry_add(base, size, 1, HO_BUF_DEVICE);
    assert_non_null(b);
    assert_int_equal(b->base, base);
    assert_int_equal(b->size, size);
    assert_int_equal(b->device, 1);
    assert_true(b->live);
    for (uint64_t off = 0; off < size; off += 64 * 1024 + 3)
        assert_ptr_equal(at(base + off), b);
    assert_ptr_equal(at(base + size - 1), b);
    assert_null(at(base + size)); /* one past the end */
    assert_null(at(base - 1));
    assert_null(at(0));
    assert_true(ho_registry_maybe(base));
    assert_true(ho_registry_maybe(base + size - 1));
    assert_false(ho_registry_maybe(base + size));
    assert_false(ho_registry_maybe(base - 1));
    assert_int_equal(ho_registry_live_count(), 1);
}

static void neighbours_in_one_chunk(void **state) {
    (void)state;
    /* Eight 4 KiB buffers with 4 KiB gaps, all inside one 2 MiB chunk, added out of order. */
    const uint64_t base = 0x10000000ull;
    struct ho_buffer *b[8];
    static const int order[8] = {5, 2, 7, 0, 3, 6, 1, 4};
    for (int i = 0; i < 8; i++) {
        int k = order[i];
        b[k] = ho_registry_add(base + (uint64_t)k * 8192, 4096, 0, HO_BUF_HOST);
        assert_non_null(b[k]);
    }
    for (int k = 0; k < 8; k++) {
        uint64_t start = base + (uint64_t)k * 8192;
        assert_ptr_equal(at(start), b[k]);
        assert_ptr_equal(at(start + 4095), b[k]);
        assert_null(at(start + 4096)); /* the gap */
        assert_null(at(start + 8191));
    }
    /* Ids follow creation order. */
    assert_true(b[2]->id > b[5]->id);
    assert_true(b[4]->id > b[1]->id);
}

static void remove_by_kind_keeps_the_record(void **state) {
    (void)state;
    const uint64_t base = 64 * MIB;
    struct ho_buffer *b = ho_registry_add(base, 4 * MIB, 0, HO_BUF_MANAGED);
    assert_non_null(b);
    uint64_t lo, hi, gen0, gen1;
    ho_registry_bounds(&lo, &hi, &gen0);
    assert_int_equal(lo, base);
    assert_int_equal(hi, base + 4 * MIB);
    /* Another kind, or an interior address, removes nothing. */
    assert_null(ho_registry_remove(base, 1u << HO_BUF_DEVICE));
    assert_null(ho_registry_remove(base + 4096, ALL_KINDS));
    assert_ptr_equal(at(base + MIB), b);
    ho_registry_bounds(&lo, &hi, &gen1);
    assert_int_equal(gen1, gen0); /* nothing changed */
    assert_ptr_equal(ho_registry_remove(base, 1u << HO_BUF_MANAGED), b);
    ho_registry_bounds(&lo, &hi, &gen1);
    assert_true(gen1 != gen0);
    assert_false(b->live);
    assert_null(at(base + MIB));
    assert_null(ho_registry_remove(base, ALL_KINDS)); /* once only */
    assert_int_equal(ho_registry_live_count(), 0);
}

static void count_records(const struct ho_buffer *b, void *arg) {
    size_t *n = arg;
    n[b->live ? 0 : 1]++;
}

static void records_outlive_frees(void **state) {
    (void)state;
    for (uint64_t i = 0; i < 10; i++)
        assert_non_null(ho_registry_add((i + 1) * 16 * MIB, MIB, 0, HO_BUF_DEVICE));
    for (uint64_t i = 0; i < 10; i += 2)
        assert_non_null(ho_registry_remove((i + 1) * 16 * MIB, 1u << HO_BUF_DEVICE));
    size_t n[2] = {0, 0};
    ho_registry_foreach(count_records, n);
    assert_int_equal(n[0], 5);                                 /* live */
    assert_int_equal(n[1], 5);                                 /* freed, kept for the report */
    assert_null(ho_registry_add(0x1000, 0, 0, HO_BUF_DEVICE)); /* nothing to track */
}

static void collect(struct ho_buffer *b, void *arg) {
    uint64_t *sum = arg;
    *sum += b->base;
}

static void remove_range_takes_those_starting_inside(void **state) {
    (void)state;
    /* An application's VMM range [256M, 256M + 16M) holding three mapped pieces, and one
     * buffer starting just before it that reaches into it. */
    const uint64_t r = 256 * MIB;
    struct ho_buffer *before = ho_registry_add(r - MIB, 2 * MIB, 0, HO_BUF_VMM_APP);
    struct ho_buffer *p0 = ho_registry_add(r, 4 * MIB, 0, HO_BUF_VMM_APP);
    struct ho_buffer *p1 = ho_registry_add(r + 6 * MIB, 4 * MIB, 0, HO_BUF_VMM_APP);
    struct ho_buffer *other = ho_registry_add(r + 10 * MIB, 4 * MIB, 0, HO_BUF_DEVICE);
    assert_non_null(before);
    assert_non_null(p0);
    assert_non_null(p1);
    assert_non_null(other);
    uint64_t sum = 0;
    assert_int_equal(ho_registry_remove_range(r, 16 * MIB, 1u << HO_BUF_VMM_APP, collect, &sum), 2);
    assert_int_equal(sum, p0->base + p1->base);
    assert_false(p0->live);
    assert_false(p1->live);
    assert_true(before->live); /* starts outside */
    assert_true(other->live);  /* another kind */
    assert_ptr_equal(at(r), before);
    assert_null(at(r + 7 * MIB));
    assert_ptr_equal(at(r + 11 * MIB), other);
    assert_int_equal(ho_registry_remove_range(r, 0, ALL_KINDS, NULL, NULL), 0);
}

static void remove_managed_only_engine_buffers(void **state) {
    (void)state;
    struct ho_buffer *b = ho_registry_add(512 * MIB, 8 * MIB, 0, HO_BUF_DEVICE);
    assert_non_null(b);
    assert_null(ho_registry_remove_managed(512 * MIB)); /* the engine does not manage it */
    b->engine = (struct ho_managed *)(uintptr_t)0x1;    /* marked as the engine's (never read) */
    assert_ptr_equal(ho_registry_remove_managed(512 * MIB), b);
    b->engine = NULL;
    assert_null(at(512 * MIB));
}

static void many_buffers_grow_the_table(void **state) {
    (void)state;
    /* More chunks than the initial 4096 buckets: 6000 buffers of 3 MiB, back to back. */
    enum { N = 6000 };
    const uint64_t base = 1ull << 40, size = 3 * MIB;
    struct ho_buffer **b = calloc(N, sizeof *b);
    assert_non_null(b);
    for (uint64_t i = 0; i < N; i++) {
        b[i] = ho_registry_add(base + i * size, size, 0, HO_BUF_DEVICE);
        assert_non_null(b[i]);
    }
    for (uint64_t i = 0; i < N; i++) {
        assert_ptr_equal(at(base + i * size), b[i]);
        assert_ptr_equal(at(base + i * size + size / 2), b[i]);
        assert_ptr_equal(at(base + (i + 1) * size - 1), b[i]);
    }
    assert_null(at(base + N * size));
    assert_int_equal(ho_registry_live_count(), N);
    for (uint64_t i = 0; i < N; i += 3)
        assert_ptr_equal(ho_registry_remove(base + i * size, ALL_KINDS), b[i]);
    for (uint64_t i = 0; i < N; i++)
        if (i % 3 == 0)
            assert_null(at(base + i * size + 1));
        else
            assert_ptr_equal(at(base + i * size + 1), b[i]);
    free(b);
}

static void reset_forgets_everything(void **state) {
    (void)state;
    assert_non_null(ho_registry_add(32 * MIB, MIB, 0, HO_BUF_DEVICE));
    ho_registry_reset();
    assert_null(at(32 * MIB));
    assert_false(ho_registry_maybe(32 * MIB));
    assert_int_equal(ho_registry_live_count(), 0);
    size_t n[2] = {0, 0};
    ho_registry_foreach(count_records, n);
    assert_int_equal(n[0] + n[1], 0);
    assert_non_null(ho_registry_add(32 * MIB, MIB, 0, HO_BUF_DEVICE)); /* usable again */
    assert_non_null(at(32 * MIB));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(interior_pointers_find_their_buffer, fresh),
        cmocka_unit_test_setup(neighbours_in_one_chunk, fresh),
        cmocka_unit_test_setup(remove_by_kind_keeps_the_record, fresh),
        cmocka_unit_test_setup(records_outlive_frees, fresh),
        cmocka_unit_test_setup(remove_range_takes_those_starting_inside, fresh),
        cmocka_unit_test_setup(remove_managed_only_engine_buffers, fresh),
        cmocka_unit_test_setup(many_buffers_grow_the_table, fresh),
        cmocka_unit_test_setup(reset_forgets_everything, fresh),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
