/* The launch path's parameter word scan (src/track.c, with src/paramcache.c's layouts): which
 * words of a launch's parameters count as uses of which buffers. The layouts come from a fake
 * cuFuncGetParamInfo put into the real-driver table; buffers are registry entries at made-up
 * addresses (nothing is dereferenced but the parameters themselves). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "paramcache.h"
#include "real.h"
#include "registry.h"
#include "stats.h"
#include "track.h"

#include <stdlib.h>
#include <string.h>

#define MIB (1ull << 20)

/* The kernels: their handles are only keys. */
#define F_MIXED   ((void *)(uintptr_t)0x1000) /* ptr, int, 24-byte struct, ptr */
#define F_UNKNOWN ((void *)(uintptr_t)0x2000) /* no layout query answers */
#define F_ARRAY   ((void *)(uintptr_t)0x3000) /* one by-value struct of 100 pointers */

static const size_t mixed_off[] = {0, 8, 16, 40}, mixed_size[] = {8, 4, 24, 8};

static CUresult fake_param_info(CUfunction f, size_t i, size_t *off, size_t *size) {
    if ((void *)f == F_MIXED) {
        if (i >= 4) return CUDA_ERROR_INVALID_VALUE;
        *off = mixed_off[i];
        *size = mixed_size[i];
        return CUDA_SUCCESS;
    }
    if ((void *)f == F_ARRAY) {
        if (i >= 1) return CUDA_ERROR_INVALID_VALUE;
        *off = 0;
        *size = 800;
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* Buffers of 4 MiB, 8 MiB apart (a gap after each). */
static uint64_t buf_base(int i) {
    return (1ull << 36) + (uint64_t)i * 8 * MIB;
}

static struct ho_buffer *bufs[200];

static int setup(void **state) {
    (void)state;
    ho_real.cuFuncGetParamInfo = fake_param_info;
    ho_real.cuKernelGetParamInfo = NULL;
    assert_true(ho_registry_init());
    ho_registry_reset();
    for (int i = 0; i < 200; i++) {
        bufs[i] = ho_registry_add(buf_base(i), 4 * MIB, 0, HO_BUF_DEVICE);
        assert_non_null(bufs[i]);
    }
    return 0;
}

static uint64_t uses(int i) {
    return ho_track_uses(bufs[i]);
}

static void launch_params(void *f, void **params) {
    ho_track_launch(f, params, NULL);
}

/* A packed argument buffer, as cuLaunchKernel's `extra` passes it. */
static void launch_packed(void *f, void *buf, size_t size) {
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                     CU_LAUNCH_PARAM_END};
    ho_track_launch(f, NULL, extra);
}

static void pointers_by_layout(void **state) {
    (void)state;
    uint64_t p0 = buf_base(0) + 100; /* interior */
    int32_t n = 7;                   /* a scalar */
    uint64_t s[3] = {buf_base(1), 42,
                     buf_base(0) + 8};       /* a struct: a base, a number, buffer 0 again */
    uint64_t p3 = buf_base(2) + 4 * MIB - 1; /* the last byte */
    void *params[] = {&p0, &n, s, &p3};
    launch_params(F_MIXED, params);
    assert_int_equal(uses(0), 1); /* twice in one launch: one use */
    assert_int_equal(uses(1), 1);
    assert_int_equal(uses(2), 1);
    assert_int_equal(uses(3), 0);
    /* One past a buffer's end, and an address in the gap between buffers: no use. */
    p0 = buf_base(3) + 4 * MIB;
    s[0] = s[2] = buf_base(4) + 5 * MIB;
    p3 = 12345;
    launch_params(F_MIXED, params);
    assert_int_equal(uses(3), 0);
    assert_int_equal(uses(4), 0);
    assert_int_equal(uses(0), 1);
}

static void packed_with_and_without_a_layout(void **state) {
    (void)state;
    /* F_MIXED's packing: the 4-byte scalar at 8 leaves padding up to 16; a pointer left in
     * bytes 8..15 is not a parameter. Without a layout every aligned word is a candidate. */
    unsigned char buf[48] = {0};
    uint64_t w0 = buf_base(5), w1 = buf_base(6), w2 = buf_base(7), w5 = buf_base(8);
    memcpy(buf + 0, &w0, 8);
    memcpy(buf + 8, &w1, 8); /* the scalar and its padding */
    memcpy(buf + 16, &w2, 8);
    memcpy(buf + 40, &w5, 8);
    uint64_t before = atomic_load(&ho_stats.counts_unknown_layout_launches);
    launch_packed(F_MIXED, buf, sizeof buf);
    assert_int_equal(uses(5), 1);
    assert_int_equal(uses(6), 0);
    assert_int_equal(uses(7), 1);
    assert_int_equal(uses(8), 1);
    launch_packed(F_UNKNOWN, buf, sizeof buf);
    assert_int_equal(uses(5), 2);
    assert_int_equal(uses(6), 1);
    assert_int_equal(uses(7), 2);
    assert_int_equal(uses(8), 2);
    /* A pointer at an odd offset is no aligned word: not seen. */
    unsigned char odd[24] = {0};
    uint64_t w = buf_base(9);
    memcpy(odd + 4, &w, 8);
    launch_packed(F_UNKNOWN, odd, sizeof odd);
    assert_int_equal(uses(9), 0);
    /* A packed buffer shorter than the layout: a parameter past its end is not read. */
    launch_packed(F_MIXED, buf, 40);
    assert_int_equal(uses(5), 3);
    assert_int_equal(uses(7), 3);
    assert_int_equal(uses(8), 2);
    assert_int_equal(atomic_load(&ho_stats.counts_unknown_layout_launches), before);
}

static void no_layout_and_no_packed_buffer_is_counted_unknown(void **state) {
    (void)state;
    uint64_t p = buf_base(10);
    void *params[] = {&p};
    uint64_t before = atomic_load(&ho_stats.counts_unknown_layout_launches);
    launch_params(F_UNKNOWN, params);
    assert_int_equal(uses(10), 0); /* how many parameters there are is unknown: none is read */
    assert_int_equal(atomic_load(&ho_stats.counts_unknown_layout_launches), before + 1);
}

/* A multi-tensor-apply launch: 100 pointers in one by-value struct. Every one is attributed:
 * there is no cap on buffers per launch (past 64 the list lives on the heap). */
static void many_buffers_in_one_struct(void **state) {
    (void)state;
    uint64_t s[100];
    for (int i = 0; i < 100; i++)
        s[i] = buf_base(100 + i) + (uint64_t)i;
    void *params[] = {s};
    launch_params(F_ARRAY, params);
    for (int i = 0; i < 100; i++)
        assert_int_equal(uses(100 + i), 1);
}

/* The per-thread lookup cache holds one buffer per chunk slot: buffers 64 chunks apart share a
 * slot and evict each other. Counts stay exact through evictions and through registry changes
 * (which empty the cache). */
static void counts_exact_through_cache_evictions(void **state) {
    (void)state;
    /* Buffers 0 and 16 are 128 MiB apart: 64 chunks of 2 MiB, the same cache slot. */
    for (int k = 0; k < 50; k++) {
        uint64_t a = buf_base(0), b = buf_base(16), z = 0;
        int32_t n = k;
        uint64_t s[3] = {b, 0, 0};
        void *params[] = {&a, &n, s, &z};
        launch_params(F_MIXED, params);
        if (k == 25) { /* a free and an allocation elsewhere: a new registry generation */
            assert_non_null(ho_registry_remove(buf_base(199), 1u << HO_BUF_DEVICE));
            assert_non_null(ho_registry_add(buf_base(199), MIB, 0, HO_BUF_DEVICE));
        }
    }
    assert_int_equal(uses(0), 50);
    assert_int_equal(uses(16), 50);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(pointers_by_layout, setup),
        cmocka_unit_test_setup(packed_with_and_without_a_layout, setup),
        cmocka_unit_test_setup(no_layout_and_no_packed_buffer_is_counted_unknown, setup),
        cmocka_unit_test_setup(many_buffers_in_one_struct, setup),
        cmocka_unit_test_setup(counts_exact_through_cache_evictions, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
