/* simcuda: module images, parameter layout, libraries and kernels, and every launch path
 * (kernelParams, `extra`, cuLaunchKernelEx, cooperative), argument copying and durations. */
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>

#include "simtest.h"

#define LAUNCH_NS 2500ull
#define MS        1000000ull

/* ------------------------------------------------------------------ kernels */

/* bN: a by-value struct of N bytes, 8-aligned. As a C type it is this. */
#define BYTES_STRUCT(n)                                                                            \
    struct b##n {                                                                                  \
        alignas(8) unsigned char b[n];                                                             \
    }
BYTES_STRUCT(12);
BYTES_STRUCT(16);
BYTES_STRUCT(24);

/* What a C compiler makes of "u8 ptr u16 b12 u32 f64 i32 b16 u8 f32 i64 b24 u16". */
struct mixed {
    uint8_t a;
    void *p;
    uint16_t b;
    struct b12 s12;
    uint32_t c;
    double d;
    int32_t e;
    struct b16 s16;
    uint8_t f;
    float g;
    int64_t h;
    struct b24 s24;
    uint16_t i;
};

static const char mixed_image[] =
    "simcuda-module 1\n"
    "# a comment, and a blank line\n"
    "\n"
    "kernel simtest_l_mixed u8 ptr u16 b12 u32 f64 i32 b16 u8 f32 i64 b24 u16\n"
    "kernel simtest_l_store ptr u64 ns=2000\n"
    "kernel simtest_l_u32 ptr u32\n"
    "kernel simtest_l_set_ns ptr u64 ns=7777\n"
    "kernel simtest_l_default ptr\n"
    "kernel simtest_l_param_ns u64 ptr u64 ns=param:2\n"
    "kernel simtest_l_nobody_zq9 ptr u32 ns=5000\n"
    "kernel simtest_l_empty\n"
    "kernel simtest_l_lone u32\n";

static struct mixed mixed_want;
static struct mixed mixed_seen;
static int mixed_calls;

static struct mixed mixed_value(void *p) {
    struct mixed m;
    memset(&m, 0, sizeof m);
    m.a = 0xa1;
    m.p = p;
    m.b = 0xb2b2;
    for (int i = 0; i < 12; i++)
        m.s12.b[i] = (unsigned char)(0x10 + i);
    m.c = 0xc3c3c3c3u;
    m.d = 2.5;
    m.e = -12345;
    for (int i = 0; i < 16; i++)
        m.s16.b[i] = (unsigned char)(0x40 + i);
    m.f = 0xf6;
    m.g = -0.75f;
    m.h = -0x123456789abcdefll;
    for (int i = 0; i < 24; i++)
        m.s24.b[i] = (unsigned char)(0x80 + i);
    m.i = 0x9999;
    return m;
}

/* Reads every parameter through params[i], as typed. */
void simtest_l_mixed(void **params) {
    struct mixed m;
    memset(&m, 0, sizeof m);
    m.a = *(uint8_t *)params[0];
    m.p = *(void **)params[1];
    m.b = *(uint16_t *)params[2];
    memcpy(m.s12.b, params[3], 12);
    m.c = *(uint32_t *)params[4];
    m.d = *(double *)params[5];
    m.e = *(int32_t *)params[6];
    memcpy(m.s16.b, params[7], 16);
    m.f = *(uint8_t *)params[8];
    m.g = *(float *)params[9];
    m.h = *(int64_t *)params[10];
    memcpy(m.s24.b, params[11], 24);
    m.i = *(uint16_t *)params[12];
    mixed_seen = m;
    mixed_calls++;
}

void simtest_l_store(void **params) {
    uint64_t *dst = *(uint64_t **)params[0];
    *dst = *(uint64_t *)params[1];
}

void simtest_l_u32(void **params) {
    uint32_t *dst = *(uint32_t **)params[0];
    *dst = *(uint32_t *)params[1];
}

/* Takes the duration it is given, overriding the image's ns=7777. */
void simtest_l_set_ns(void **params) {
    uint64_t *dst = *(uint64_t **)params[0];
    uint64_t ns = *(uint64_t *)params[1];
    *dst = 1;
    if (ns != 0) simcuda_set_duration_ns(ns);
}

void simtest_l_default(void **params) {
    uint64_t *dst = *(uint64_t **)params[0];
    *dst = 42;
}

void simtest_l_param_ns(void **params) {
    uint64_t *dst = *(uint64_t **)params[1];
    *dst = *(uint64_t *)params[0];
}

static uint32_t lone_seen;

void simtest_l_lone(void **params) {
    lone_seen = *(uint32_t *)params[0];
}

/* simtest_l_nobody_zq9 and simtest_l_empty deliberately have no host function. */

static CUmodule mod;
static CUfunction f_mixed, f_store, f_u32, f_set_ns, f_default, f_param_ns, f_nobody, f_empty,
    f_lone;
static CUdeviceptr dbuf; /* a few u64 of device memory the kernels write */

static int group_setup(void **state) {
    (void)state;
    simtest_ctx();
    CU_OK(cuModuleLoadData(&mod, mixed_image));
    CU_OK(cuModuleGetFunction(&f_mixed, mod, "simtest_l_mixed"));
    CU_OK(cuModuleGetFunction(&f_store, mod, "simtest_l_store"));
    CU_OK(cuModuleGetFunction(&f_u32, mod, "simtest_l_u32"));
    CU_OK(cuModuleGetFunction(&f_set_ns, mod, "simtest_l_set_ns"));
    CU_OK(cuModuleGetFunction(&f_default, mod, "simtest_l_default"));
    CU_OK(cuModuleGetFunction(&f_param_ns, mod, "simtest_l_param_ns"));
    CU_OK(cuModuleGetFunction(&f_nobody, mod, "simtest_l_nobody_zq9"));
    CU_OK(cuModuleGetFunction(&f_empty, mod, "simtest_l_empty"));
    CU_OK(cuModuleGetFunction(&f_lone, mod, "simtest_l_lone"));
    CU_OK(cuMemAlloc(&dbuf, 64));
    return 0;
}

static uint64_t read_u64(CUdeviceptr d) {
    uint64_t v = 0;
    CU_OK(cuMemcpyDtoH(&v, d, sizeof v));
    return v;
}

/* ------------------------------------------------------------------ image parsing */

static void expect_bad_image(const char *img) {
    CUmodule m;
    CUlibrary lib;
    CUresult rc = cuModuleLoadData(&m, img);
    if (rc != CUDA_ERROR_INVALID_IMAGE)
        fail_msg("cuModuleLoadData(\"%s\") returned %d, expected CUDA_ERROR_INVALID_IMAGE", img,
                 (int)rc);
    rc = cuLibraryLoadData(&lib, img, NULL, NULL, 0, NULL, NULL, 0);
    if (rc != CUDA_ERROR_INVALID_IMAGE)
        fail_msg("cuLibraryLoadData(\"%s\") returned %d, expected CUDA_ERROR_INVALID_IMAGE", img,
                 (int)rc);
}

static void test_image_parsing(void **state) {
    (void)state;
    static const char *const bad[] = {
        "",
        "simcuda-module",
        "simcuda-module 2\nkernel k\n",
        "simcuda-module 10\nkernel k\n",
        "simcuda-module 1 \nkernel k\n",
        "SIMCUDA-MODULE 1\nkernel k\n",
        "\nsimcuda-module 1\nkernel k\n",
        "simcuda-module 1\nkernel\n",
        "simcuda-module 1\nkernel \n",
        "simcuda-module 1\nkernels k\n",
        "simcuda-module 1\nfunction k ptr\n",
        "simcuda-module 1\nkernel k ptr q32\n",
        "simcuda-module 1\nkernel k PTR\n",
        "simcuda-module 1\nkernel k u128\n",
        "simcuda-module 1\nkernel k b\n",
        "simcuda-module 1\nkernel k b0\n",
        "simcuda-module 1\nkernel k b08\n",
        "simcuda-module 1\nkernel k bx\n",
        "simcuda-module 1\nkernel k b8x\n",
        "simcuda-module 1\nkernel k b4097\n",
        "simcuda-module 1\nkernel k ptr ns=\n",
        "simcuda-module 1\nkernel k ptr ns=abc\n",
        "simcuda-module 1\nkernel k ptr ns=-5\n",
        "simcuda-module 1\nkernel k ptr ns=12us\n",
        "simcuda-module 1\nkernel k ptr ns=1e6\n",
        "simcuda-module 1\nkernel k ptr ns=1.5\n",
        "simcuda-module 1\nkernel k ptr ns=99999999999999999999999\n",
        "simcuda-module 1\nkernel k u64 ns=param:\n",
        "simcuda-module 1\nkernel k ptr ns=param:0\n",  /* not a u64 */
        "simcuda-module 1\nkernel k u64 ns=param:1\n",  /* no such parameter */
        "simcuda-module 1\nkernel k u64 ns=param:-1\n", /* no such parameter */
        "simcuda-module 1\nkernel good ptr\nkernel bad q\n",
        "simcuda-module 1\nkernel "
        "a234567890123456789012345678901234567890123456789012345678901234567890123456789012345678"
        "901234567890123456789012345678901234567890\n",
        /* What a real toolchain produces is not a simulator image. */
        "\x7f"
        "ELF\x02\x01\x01\x33",
        ".version 8.0\n.target sm_90\n.address_size 64\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_bad_image(bad[i]);
    /* A fatbinary header (magic 0xBA55ED50) and a cubin with its NUL bytes. */
    static const unsigned char fatbin[] = {0x50, 0xed, 0x55, 0xba, 0x01, 0x00, 0x10, 0x00,
                                           0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
    static const unsigned char cubin[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0x33, 7, 0, 0, 0};
    CUmodule m;
    CU_EXPECT(CUDA_ERROR_INVALID_IMAGE, cuModuleLoadData(&m, fatbin));
    CU_EXPECT(CUDA_ERROR_INVALID_IMAGE, cuModuleLoadData(&m, cubin));
    CU_EXPECT(CUDA_ERROR_INVALID_IMAGE, cuModuleLoadFatBinary(&m, fatbin));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuModuleLoadData(&m, NULL));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuModuleLoadData(NULL, mixed_image));

    /* Accepted variants: no kernels, no trailing newline, CRLF, tabs, ns= before the types. */
    static const char *const good[] = {
        "simcuda-module 1",
        "simcuda-module 1\n",
        "simcuda-module 1\nkernel k",
        "simcuda-module 1\r\nkernel k\tptr  u32\r\n",
        "simcuda-module 1\n  kernel k ns=10 ptr\n",
        "simcuda-module 1\nkernel k b1 b8 b4096 ns=0\n",
        "simcuda-module 1\nkernel k u64 ns=param:0\n",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        CUresult rc = cuModuleLoadData(&m, good[i]);
        if (rc != CUDA_SUCCESS) fail_msg("cuModuleLoadData(\"%s\") returned %d", good[i], (int)rc);
        CU_OK(cuModuleUnload(m));
    }
    unsigned count = 99;
    CUfunction f;
    CU_OK(cuModuleLoadData(&m, "simcuda-module 1\n"));
    CU_OK(cuModuleGetFunctionCount(&count, m));
    assert_int_equal(count, 0);
    CU_EXPECT(CUDA_ERROR_NOT_FOUND, cuModuleGetFunction(&f, m, "k"));
    CU_OK(cuModuleUnload(m));
    CU_OK(cuModuleGetFunctionCount(&count, mod));
    assert_int_equal(count, 9);
    CU_EXPECT(CUDA_ERROR_NOT_FOUND, cuModuleGetFunction(&f, mod, "simtest_l_missing"));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuModuleGetFunction(&f, mod, NULL));
}

/* ------------------------------------------------------------------ parameter layout */

#define MEMBER(field)                                                                              \
    { offsetof(struct mixed, field), sizeof(((struct mixed *)0)->field) }

static const struct {
    size_t offset, size;
} mixed_layout[] = {
    MEMBER(a), MEMBER(p), MEMBER(b), {offsetof(struct mixed, s12), 12},
    MEMBER(c), MEMBER(d), MEMBER(e), MEMBER(s16),
    MEMBER(f), MEMBER(g), MEMBER(h), MEMBER(s24),
    MEMBER(i),
};

/* Walks cuFuncGetParamInfo (or cuKernelGetParamInfo) until CUDA_ERROR_INVALID_VALUE, as a
 * caller that does not know the signature does. */
static void check_param_info(CUresult (*info)(void *, size_t, size_t *, size_t *), void *h) {
    size_t n = sizeof mixed_layout / sizeof mixed_layout[0];
    size_t i = 0;
    for (;; i++) {
        size_t off = 999, size = 999;
        CUresult rc = info(h, i, &off, &size);
        if (rc == CUDA_ERROR_INVALID_VALUE) break;
        CU_OK(rc);
        assert_true(i < n);
        if (off != mixed_layout[i].offset || size != mixed_layout[i].size)
            fail_msg("parameter %zu: offset %zu size %zu, a C compiler says offset %zu size %zu", i,
                     off, size, mixed_layout[i].offset, mixed_layout[i].size);
    }
    assert_int_equal(i, n);
}

static CUresult func_info(void *h, size_t i, size_t *off, size_t *size) {
    return cuFuncGetParamInfo((CUfunction)h, i, off, size);
}

static CUresult kernel_info(void *h, size_t i, size_t *off, size_t *size) {
    return cuKernelGetParamInfo((CUkernel)h, i, off, size);
}

static void test_param_info(void **state) {
    (void)state;
    check_param_info(func_info, f_mixed);
    size_t off = 0, size = 0;
    /* The size is optional. */
    CU_OK(cuFuncGetParamInfo(f_mixed, 1, &off, NULL));
    assert_int_equal(off, offsetof(struct mixed, p));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuFuncGetParamInfo(f_mixed, 0, NULL, &size));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuFuncGetParamInfo(f_empty, 0, &off, &size));
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuFuncGetParamInfo(NULL, 0, &off, &size));
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuFuncGetParamInfo((CUfunction)&off, 0, &off, &size));
    /* The same through a library's CUkernel. */
    CUlibrary lib;
    CUkernel k;
    CU_OK(cuLibraryLoadData(&lib, mixed_image, NULL, NULL, 0, NULL, NULL, 0));
    CU_OK(cuLibraryGetKernel(&k, lib, "simtest_l_mixed"));
    check_param_info(kernel_info, k);
    CU_OK(cuLibraryUnload(lib));
}

/* ------------------------------------------------------------------ names, libraries */

static void test_names_and_libraries(void **state) {
    (void)state;
    const char *name = NULL;
    CU_OK(cuFuncGetName(&name, f_mixed));
    assert_string_equal(name, "simtest_l_mixed");
    CU_OK(cuFuncGetName(&name, f_empty));
    assert_string_equal(name, "simtest_l_empty");
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuFuncGetName(NULL, f_mixed));
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuFuncGetName(&name, NULL));
    CUmodule owner;
    CU_OK(cuFuncGetModule(&owner, f_store));
    assert_ptr_equal(owner, mod);

    CUlibrary lib;
    CUkernel k, k2;
    CUfunction f;
    unsigned count = 0;
    CU_OK(cuLibraryLoadData(&lib, mixed_image, NULL, NULL, 0, NULL, NULL, 0));
    CU_OK(cuLibraryGetKernelCount(&count, lib));
    assert_int_equal(count, 9);
    CU_OK(cuLibraryGetKernel(&k, lib, "simtest_l_store"));
    CU_OK(cuLibraryGetKernel(&k2, lib, "simtest_l_store"));
    assert_ptr_equal(k, k2);
    CU_EXPECT(CUDA_ERROR_NOT_FOUND, cuLibraryGetKernel(&k2, lib, "nope"));
    CU_OK(cuKernelGetName(&name, k));
    assert_string_equal(name, "simtest_l_store");
    CU_OK(cuKernelGetFunction(&f, k));
    CU_OK(cuFuncGetName(&name, f));
    assert_string_equal(name, "simtest_l_store");
    /* A module is not a library, nor the other way round. */
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE,
              cuLibraryGetKernel(&k2, (CUlibrary)mod, "simtest_l_store"));
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuModuleGetFunction(&f, (CUmodule)lib, "simtest_l_store"));

    /* Launch through the CUfunction and through the CUkernel cast to a CUfunction. */
    uint64_t v = 0x1234;
    void *args[] = {&dbuf, &v};
    CU_OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    assert_int_equal(read_u64(dbuf), 0x1234);
    v = 0x5678;
    CU_OK(cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    assert_int_equal(read_u64(dbuf), 0x5678);
    CU_OK(cuLibraryUnload(lib));
}

/* ------------------------------------------------------------------ launch paths */

static void test_launch_kernel_params(void **state) {
    (void)state;
    mixed_want = mixed_value((void *)(uintptr_t)dbuf);
    struct mixed m = mixed_want;
    void *args[] = {&m.a,   &m.p, &m.b, &m.s12, &m.c,   &m.d, &m.e,
                    &m.s16, &m.f, &m.g, &m.h,   &m.s24, &m.i};
    mixed_calls = 0;
    CU_OK(cuLaunchKernel(f_mixed, 2, 3, 1, 64, 2, 1, 128, NULL, args, NULL));
    CU_OK(cuCtxSynchronize());
    assert_int_equal(mixed_calls, 1);
    assert_memory_equal(&mixed_seen, &mixed_want, sizeof mixed_want);
    /* A kernel with no parameters needs no kernelParams. */
    CU_OK(cuLaunchKernel(f_empty, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    /* Both kernelParams and extra, or neither for a kernel with parameters: invalid. */
    void *extra_end[] = {CU_LAUNCH_PARAM_END};
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE,
              cuLaunchKernel(f_mixed, 1, 1, 1, 1, 1, 1, 0, NULL, args, extra_end));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE,
              cuLaunchKernel(f_mixed, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    /* Launch dimensions an H200 rejects. */
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE,
              cuLaunchKernel(f_empty, 0, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE,
              cuLaunchKernel(f_empty, 1, 1, 1, 1025, 1, 1, 0, NULL, NULL, NULL));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE,
              cuLaunchKernel(f_empty, 1, 1, 1, 32, 32, 2, 0, NULL, NULL, NULL));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE,
              cuLaunchKernel(f_empty, 1, 65536, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE,
              cuLaunchKernel(f_empty, 1, 1, 1, 1, 1, 1, 1u << 20, NULL, NULL, NULL));
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE,
              cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE,
              cuLaunchKernel((CUfunction)mod, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    CU_OK(cuCtxSynchronize());
    assert_int_equal(mixed_calls, 1);
}

static void test_launch_extra(void **state) {
    (void)state;
    /* The packed buffer is laid out as the C struct of the same members. */
    mixed_want = mixed_value((void *)(uintptr_t)dbuf);
    struct mixed packed = mixed_want;
    size_t size = sizeof packed;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                     CU_LAUNCH_PARAM_END};
    mixed_calls = 0;
    memset(&mixed_seen, 0, sizeof mixed_seen);
    CU_OK(cuLaunchKernel(f_mixed, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra));
    CU_OK(cuCtxSynchronize());
    assert_int_equal(mixed_calls, 1);
    assert_memory_equal(&mixed_seen, &mixed_want, sizeof mixed_want);
    /* The size and pointer may come in either order. */
    void *swapped[] = {CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_BUFFER_POINTER, &packed,
                       CU_LAUNCH_PARAM_END};
    CU_OK(cuLaunchKernel(f_mixed, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, swapped));
    CU_OK(cuCtxSynchronize());
    assert_int_equal(mixed_calls, 2);

    /* The buffer is as large as the C struct: 16 bytes for (ptr, u32), 4 for a lone u32. */
    uint32_t lone = 0x600d;
    size_t lone_size = sizeof lone;
    void *extra_lone[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &lone, CU_LAUNCH_PARAM_BUFFER_SIZE,
                          &lone_size, CU_LAUNCH_PARAM_END};
    CU_OK(cuLaunchKernel(f_lone, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra_lone));
    CU_OK(cuCtxSynchronize());
    assert_int_equal(lone_seen, 0x600d);
    struct {
        void *dst;
        uint32_t v;
    } small = {(void *)(uintptr_t)dbuf, 0xabcd};
    size_t small_size = sizeof small;
    void *extra_small[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &small, CU_LAUNCH_PARAM_BUFFER_SIZE,
                           &small_size, CU_LAUNCH_PARAM_END};
    CU_OK(cuMemsetD8(dbuf, 0, 8));
    CU_OK(cuLaunchKernel(f_u32, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra_small));
    assert_int_equal(read_u64(dbuf), 0xabcd);

    /* A buffer shorter than the layout is accepted, as NVIDIA's driver accepts it (NCCL passes
     * the bytes its argument struct uses): the parameters past the given size read as zero. The
     * last member of struct mixed is a 24-byte struct: cut 8 bytes off it. */
    size_t short_size = sizeof packed - 8;
    void *too_small[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE,
                         &short_size, CU_LAUNCH_PARAM_END};
    CU_OK(cuLaunchKernel(f_mixed, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, too_small));
    CU_OK(cuCtxSynchronize());
    assert_int_equal(mixed_calls, 3);
    struct mixed cut = packed;
    memset((unsigned char *)&cut + short_size, 0, sizeof cut - short_size);
    assert_memory_equal(&mixed_seen, &cut, sizeof cut);

    /* Malformed extra arrays. */
    void *no_size[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_END};
    void *no_buffer[] = {CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
    void *unknown[] = {(void *)0x77,
                       &size,
                       CU_LAUNCH_PARAM_BUFFER_POINTER,
                       &packed,
                       CU_LAUNCH_PARAM_BUFFER_SIZE,
                       &size,
                       CU_LAUNCH_PARAM_END};
    void **bad[] = {no_size, no_buffer, unknown};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CU_EXPECT(CUDA_ERROR_INVALID_VALUE,
                  cuLaunchKernel(f_mixed, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, bad[i]));
    CU_OK(cuCtxSynchronize());
    assert_int_equal(mixed_calls, 3);
}

static void test_launch_ex_and_cooperative(void **state) {
    (void)state;
    CUstream s;
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    uint64_t v = 77;
    void *args[] = {&dbuf, &v};
    CUlaunchAttribute attrs[2];
    memset(attrs, 0, sizeof attrs);
    attrs[0].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attrs[0].value.cooperative = 1;
    attrs[1].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
    attrs[1].value.priority = -2;
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = 4;
    cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = 128;
    cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = s;
    cfg.attrs = attrs;
    cfg.numAttrs = 2;
    CU_OK(cuLaunchKernelEx(&cfg, f_store, args, NULL));
    CU_OK(cuStreamSynchronize(s));
    assert_int_equal(read_u64(dbuf), 77);
    /* With `extra` too. */
    struct {
        void *dst;
        uint64_t v;
    } packed = {(void *)(uintptr_t)dbuf, 88};
    size_t size = sizeof packed;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                     CU_LAUNCH_PARAM_END};
    CU_OK(cuLaunchKernelEx(&cfg, f_store, NULL, extra));
    CU_OK(cuStreamSynchronize(s));
    assert_int_equal(read_u64(dbuf), 88);
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuLaunchKernelEx(NULL, f_store, args, NULL));
    cfg.attrs = NULL;
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuLaunchKernelEx(&cfg, f_store, args, NULL));
    cfg.numAttrs = 0;
    cfg.blockDimX = 2048;
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuLaunchKernelEx(&cfg, f_store, args, NULL));
    /* Cooperative launch. */
    v = 99;
    CU_OK(cuLaunchCooperativeKernel(f_store, 2, 1, 1, 32, 1, 1, 0, s, args));
    CU_OK(cuStreamSynchronize(s));
    assert_int_equal(read_u64(dbuf), 99);
    CU_OK(cuStreamDestroy(s));
}

/* ------------------------------------------------------------------ arguments are copied */

static atomic_int gate;

/* Holds the device's executor until the test opens the gate: whatever was launched behind it
 * cannot have run yet. */
static void hold_executor(void *user) {
    (void)user;
    while (!atomic_load(&gate))
        sched_yield();
}

static void test_arguments_copied_at_launch(void **state) {
    (void)state;
    CUstream s;
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU_OK(cuMemsetD8(dbuf, 0, 16));
    atomic_store(&gate, 0);
    CU_OK(cuLaunchHostFunc(s, hold_executor, NULL));
    /* kernelParams: the value and the array itself are reused at once. */
    uint64_t v = 111;
    CUdeviceptr dst = dbuf;
    void *args[] = {&dst, &v};
    CU_OK(cuLaunchKernel(f_store, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    v = 222;
    dst = dbuf + 8;
    uint64_t other = 333;
    args[1] = &other;
    /* extra: the packed buffer is reused too. */
    struct {
        uint64_t dst;
        uint64_t v;
    } packed = {dbuf + 8, 444};
    size_t size = sizeof packed;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                     CU_LAUNCH_PARAM_END};
    CU_OK(cuLaunchKernel(f_store, 1, 1, 1, 1, 1, 1, 0, s, NULL, extra));
    packed.dst = dbuf;
    packed.v = 555;
    atomic_store(&gate, 1);
    CU_OK(cuStreamSynchronize(s));
    assert_int_equal(read_u64(dbuf), 111);
    assert_int_equal(read_u64(dbuf + 8), 444);
    CU_OK(cuStreamDestroy(s));
}

/* ------------------------------------------------------------------ durations */

/* Virtual duration of one launch: the stream is kept busy by a 1 ms kernel first, so the kernel
 * starts exactly at the first event and ends exactly at the second. */
static uint64_t duration_of(CUfunction f, void **args, CUstream s) {
    CUevent a, b;
    CUfunction busy;
    CU_OK(cuModuleGetFunction(&busy, mod, "simtest_l_set_ns"));
    uint64_t ms = MS;
    CUdeviceptr scratch = dbuf + 56; /* away from what the kernels under test write */
    void *busy_args[] = {&scratch, &ms};
    CU_OK(cuEventCreate(&a, 0));
    CU_OK(cuEventCreate(&b, 0));
    CU_OK(cuLaunchKernel(busy, 1, 1, 1, 1, 1, 1, 0, s, busy_args, NULL));
    CU_OK(cuEventRecord(a, s));
    CU_OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    CU_OK(cuEventRecord(b, s));
    CU_OK(cuEventSynchronize(b));
    float got = -1;
    CU_OK(cuEventElapsedTime(&got, a, b));
    CU_OK(cuEventDestroy(a));
    CU_OK(cuEventDestroy(b));
    return (uint64_t)((double)got * 1e6 + 0.5);
}

static void test_durations(void **state) {
    (void)state;
    CUstream s;
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    uint64_t v = 5, zero = 0, ns = 123456;
    uint32_t u = 1;
    void *store_args[] = {&dbuf, &v};
    void *ptr_args[] = {&dbuf};
    void *keep_args[] = {&dbuf, &zero};
    void *set_args[] = {&dbuf, &ns};
    uint64_t param_ns = 654321;
    void *param_args[] = {&v, &dbuf, &param_ns};
    void *nobody_args[] = {&dbuf, &u};
    assert_int_equal(duration_of(f_store, store_args, s), 2000);      /* ns=2000 */
    assert_int_equal(duration_of(f_default, ptr_args, s), 1000);      /* no ns=: 1000 */
    assert_int_equal(duration_of(f_set_ns, keep_args, s), 7777);      /* body did not set it */
    assert_int_equal(duration_of(f_set_ns, set_args, s), 123456);     /* the body's own */
    assert_int_equal(duration_of(f_param_ns, param_args, s), 654321); /* ns=param:2 */
    assert_int_equal(read_u64(dbuf), 5);
    /* A kernel with no host function runs for its duration and touches nothing. */
    CU_OK(cuMemsetD8(dbuf, 0x5a, 8));
    assert_int_equal(duration_of(f_nobody, nobody_args, s), 5000);
    assert_int_equal(read_u64(dbuf), 0x5a5a5a5a5a5a5a5aull);
    assert_int_equal(duration_of(f_empty, NULL, s), 1000);
    /* And the host clock after a synchronisation: a 50 ms body-set duration. */
    ns = 50 * MS;
    uint64_t t0 = simcuda_now_ns();
    CU_OK(cuLaunchKernel(f_set_ns, 1, 1, 1, 1, 1, 1, 0, s, set_args, NULL));
    CU_OK(cuStreamSynchronize(s));
    assert_int_equal(simcuda_now_ns() - t0, LAUNCH_NS + 50 * MS);
    CU_OK(cuStreamDestroy(s));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_image_parsing),
        cmocka_unit_test(test_param_info),
        cmocka_unit_test(test_names_and_libraries),
        cmocka_unit_test(test_launch_kernel_params),
        cmocka_unit_test(test_launch_extra),
        cmocka_unit_test(test_launch_ex_and_cooperative),
        cmocka_unit_test(test_arguments_copied_at_launch),
        cmocka_unit_test(test_durations),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
