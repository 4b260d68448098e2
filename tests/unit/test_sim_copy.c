/* The simulator's copy and memset families against the contract (issue 2, docs/simcuda.md) and
 * the real driver: synchronous and asynchronous copies in every direction, unified cuMemcpy, 2D
 * copies with pitches, memsets of 8, 16 and 32 bits and 2D, the per-thread default stream against
 * the legacy one, the copy-engine timing model (rates, duplex sharing, HBM), the host running
 * ahead, pageable-memory staging, and direction checks.
 *
 * Every test runs in a forked child that has not initialised the simulator: SIMCUDA_* is read once
 * per process, an illegal access is sticky for the process, and each child writes its own
 * SIMCUDA_REPORT, which the parent then reads. Inside a child, cmocka's assertions would jump back
 * into the copy of the test runner the child inherited, so children check with CHK*, which print
 * the failing line and end the child with status 1. */
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/mman.h>

#include "simtest.h"

#include "simchild.h"

/* The per-thread-default-stream variants: cuda.h maps the plain names to them only when
 * CUDA_API_PER_THREAD_DEFAULT_STREAM is defined, so they are declared here. */
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n);
CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n);
CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n);
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n, CUstream s);
CUresult cuMemsetD32_v2_ptds(CUdeviceptr dst, unsigned int v, size_t n);
CUresult cuMemsetD8Async_ptsz(CUdeviceptr dst, unsigned char v, size_t n, CUstream s);
CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *p);
CUresult cuStreamSynchronize_ptsz(CUstream s);

/* ------------------------------------------------------------------ contents, every direction */

static void *xmalloc(size_t n) {
    void *p = malloc(n);
    CHK(p != NULL);
    return p;
}

static int c_sync_roundtrip(void) {
    ctx_up();
    const size_t sizes[] = {1, 7, 4096, MiB + 3};
    for (size_t k = 0; k < 4; k++) {
        const size_t n = sizes[k], total = n + 64;
        unsigned char *src = xmalloc(n), *back = xmalloc(total), *model = xmalloc(total);
        pattern(src, n, (uint32_t)k + 1);
        CUdeviceptr a, b;
        CHK_OK(cuMemAlloc(&a, total));
        CHK_OK(cuMemAlloc(&b, total));
        CHK_OK(cuMemsetD8(a, 0xaa, total));
        CHK_OK(cuMemsetD8(b, 0x55, total));
        /* Into the middle of a, then a to the middle of b: the bytes around stay as set. */
        CHK_OK(cuMemcpyHtoD(a + 32, src, n));
        CHK_OK(cuMemcpyDtoD(b + 17, a + 32, n));
        CHK_OK(cuMemcpyDtoH(back, b, total));
        memset(model, 0x55, total);
        memcpy(model + 17, src, n);
        CHK(memcmp(back, model, total) == 0);
        CHK_OK(cuMemcpyDtoH(back, a, total));
        memset(model, 0xaa, total);
        memcpy(model + 32, src, n);
        CHK(memcmp(back, model, total) == 0);
        CHK_OK(cuMemFree(a));
        CHK_OK(cuMemFree(b));
        free(src);
        free(back);
        free(model);
    }
    /* Zero bytes is a no-op that succeeds; a NULL device pointer is not. */
    unsigned char one = 1;
    CHK_OK(cuMemcpyHtoD(0, &one, 0));
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(0, &one, 1));
    return 0;
}

static void test_sync_roundtrip(void **state) {
    (void)state;
    run_child("sync_roundtrip", c_sync_roundtrip, NULL);
    assert_int_equal(report("sync_roundtrip", "illegal_accesses"), 0);
}

static int c_async_pinned(void) {
    ctx_up();
    const size_t n = 3 * MiB + 5;
    CUstream s;
    CHK_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    void *h, *back;
    CHK_OK(cuMemHostAlloc(&h, n, 0));
    CHK_OK(cuMemAllocHost(&back, n));
    pattern(h, n, 21);
    CUdeviceptr a, b;
    CHK_OK(cuMemAlloc(&a, n));
    CHK_OK(cuMemAlloc(&b, n));
    CHK_OK(cuMemcpyHtoDAsync(a, h, n, s));
    CHK_OK(cuMemcpyDtoDAsync(b, a, n, s));
    CHK_OK(cuMemcpyDtoHAsync(back, b, n, s));
    CHK_OK(cuStreamSynchronize(s));
    CHK(memcmp(back, h, n) == 0);
    /* Unified cuMemcpyAsync infers every direction from the pointers. */
    memset(back, 0, n);
    CHK_OK(cuMemcpyAsync(b, (uintptr_t)h, n, s));
    CHK_OK(cuMemcpyAsync((uintptr_t)back, b, n, s));
    CHK_OK(cuStreamSynchronize(s));
    CHK(memcmp(back, h, n) == 0);
    CHK_OK(cuMemFreeHost(h));
    CHK_OK(cuMemFreeHost(back));
    CHK_OK(cuStreamDestroy(s));
    return 0;
}

static void test_async_pinned(void **state) {
    (void)state;
    run_child("async_pinned", c_async_pinned, NULL);
    assert_int_equal(report("async_pinned", "bytes_h2d"), 2 * (3 * MiB + 5));
    assert_int_equal(report("async_pinned", "bytes_d2h"), 2 * (3 * MiB + 5));
    assert_int_equal(report("async_pinned", "bytes_d2d"), 3 * MiB + 5);
}

static int c_unified(void) {
    ctx_up();
    const size_t n = 100000;
    unsigned char *src = xmalloc(n), *dst = xmalloc(n), *hh = xmalloc(n);
    pattern(src, n, 31);
    CUdeviceptr a, b;
    CHK_OK(cuMemAlloc(&a, n));
    CHK_OK(cuMemAlloc(&b, n));
    CHK_OK(cuMemcpy(a, (uintptr_t)src, n));             /* H2D */
    CHK_OK(cuMemcpy(b, a, n));                          /* D2D */
    CHK_OK(cuMemcpy((uintptr_t)dst, b, n));             /* D2H */
    CHK_OK(cuMemcpy((uintptr_t)hh, (uintptr_t)dst, n)); /* H2H */
    CHK(memcmp(dst, src, n) == 0);
    CHK(memcmp(hh, src, n) == 0);
    free(src);
    free(dst);
    free(hh);
    return 0;
}

static void test_unified(void **state) {
    (void)state;
    run_child("unified", c_unified, NULL);
    assert_int_equal(report("unified", "copies"), 4);
    assert_int_equal(report("unified", "bytes_h2d"), 100000 * 2); /* host-to-host counts here */
    assert_int_equal(report("unified", "bytes_d2h"), 100000);
    assert_int_equal(report("unified", "bytes_d2d"), 100000);
}

/* ------------------------------------------------------------------ 2D copies */

static int c_copy_2d(void) {
    ctx_up();
    const size_t hp = 1000, rows = 8, w = 700, h = 5;
    unsigned char *hs = xmalloc(hp * rows);
    pattern(hs, hp * rows, 41);
    CUdeviceptr d;
    size_t dp;
    CHK_OK(cuMemAllocPitch(&d, &dp, 800, 6, 4));
    CHK_EQ(dp, 1024);
    CHK_OK(cuMemsetD8(d, 0x11, dp * 6));

    /* Host (x 30, y 2, pitch 1000) to device (x 16, y 1, pitch 1024): 700 x 5. */
    CUDA_MEMCPY2D p;
    memset(&p, 0, sizeof p);
    p.srcMemoryType = CU_MEMORYTYPE_HOST;
    p.srcHost = hs;
    p.srcPitch = hp;
    p.srcXInBytes = 30;
    p.srcY = 2;
    p.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    p.dstDevice = d;
    p.dstPitch = dp;
    p.dstXInBytes = 16;
    p.dstY = 1;
    p.WidthInBytes = w;
    p.Height = h;
    CHK_OK(cuMemcpy2D(&p));
    unsigned char *hd = xmalloc(dp * 6);
    CHK_OK(cuMemcpyDtoH(hd, d, dp * 6));
    for (size_t r = 0; r < 6; r++) {
        for (size_t c = 0; c < dp; c++) {
            bool in = r >= 1 && r < 1 + h && c >= 16 && c < 16 + w;
            unsigned char want = in ? hs[(r - 1 + 2) * hp + 30 + (c - 16)] : 0x11;
            if (hd[r * dp + c] != want) {
                fprintf(stderr, "row %zu col %zu: %u, expected %u\n", r, c, hd[r * dp + c], want);
                CHK(false);
            }
        }
    }

    /* Device to a host buffer with an odd pitch, asynchronously, then device to device with the
     * unified memory type. */
    const size_t op = 777;
    unsigned char *out = xmalloc(op * h);
    memset(out, 0xee, op * h);
    CUDA_MEMCPY2D q;
    memset(&q, 0, sizeof q);
    q.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    q.srcDevice = d;
    q.srcPitch = dp;
    q.srcXInBytes = 16;
    q.srcY = 1;
    q.dstMemoryType = CU_MEMORYTYPE_HOST;
    q.dstHost = out;
    q.dstPitch = op;
    q.WidthInBytes = w;
    q.Height = h;
    CUstream s;
    CHK_OK(cuStreamCreate(&s, 0));
    CHK_OK(cuMemcpy2DAsync(&q, s)); /* pageable destination: complete on return */
    for (size_t r = 0; r < h; r++) {
        CHK(memcmp(out + r * op, hs + (r + 2) * hp + 30, w) == 0);
        for (size_t c = w; c < op; c++)
            CHK_EQ(out[r * op + c], 0xee);
    }
    CUdeviceptr e;
    size_t ep;
    CHK_OK(cuMemAllocPitch(&e, &ep, 800, 6, 4));
    CHK_OK(cuMemsetD8(e, 0, ep * 6));
    CUDA_MEMCPY2D u;
    memset(&u, 0, sizeof u);
    u.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
    u.srcDevice = d + dp; /* row 1 */
    u.srcPitch = dp;
    u.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
    u.dstDevice = e;
    u.dstPitch = ep;
    u.WidthInBytes = 800;
    u.Height = 2;
    CHK_OK(cuMemcpy2D_v2_ptds(&u));
    CHK_OK(cuCtxSynchronize());
    CHK(memcmp((void *)(uintptr_t)e, hd + dp, 800) == 0);
    CHK(memcmp((void *)(uintptr_t)(e + ep), hd + 2 * dp, 800) == 0);
    CHK_EQ(((unsigned char *)(uintptr_t)e)[2 * ep], 0);

    /* A pitch narrower than the width is invalid. */
    q.dstPitch = w - 1;
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemcpy2D(&q));
    CHK_OK(cuStreamDestroy(s));
    free(hs);
    free(hd);
    free(out);
    return 0;
}

static void test_copy_2d(void **state) {
    (void)state;
    run_child("copy_2d", c_copy_2d, NULL);
}

/* ------------------------------------------------------------------ memsets */

static void model_set(unsigned char *m, size_t off, unsigned v, unsigned elem, size_t count) {
    for (size_t i = 0; i < count; i++)
        memcpy(m + off + i * elem, &v, elem);
}

static int c_memsets(void) {
    ctx_up();
    const size_t n = 4096;
    unsigned char *model = xmalloc(n), *back = xmalloc(n);
    memset(model, 0, n);
    CUdeviceptr d;
    CHK_OK(cuMemAlloc(&d, n));
    CHK_OK(cuMemsetD32(d, 0, n / 4));
    CHK_OK(cuMemsetD8(d + 3, 0xab, 10));
    model_set(model, 3, 0xab, 1, 10);
    CHK_OK(cuMemsetD16(d + 100, 0xbeef, 7));
    model_set(model, 100, 0xbeef, 2, 7);
    CHK_OK(cuMemsetD32(d + 200, 0xdeadbeefu, 5));
    model_set(model, 200, 0xdeadbeefu, 4, 5);
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemsetD16(d + 1, 1, 1));
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemsetD32(d + 2, 1, 1));
    /* 2D: width elements in each of height rows, pitch bytes apart; the gaps stay. */
    CHK_OK(cuMemsetD2D8(d + 1024, 64, 0x5a, 10, 4));
    for (size_t r = 0; r < 4; r++)
        model_set(model, 1024 + r * 64, 0x5a, 1, 10);
    CHK_OK(cuMemsetD2D16(d + 2048, 128, 0x1234, 9, 3));
    for (size_t r = 0; r < 3; r++)
        model_set(model, 2048 + r * 128, 0x1234, 2, 9);
    CHK_OK(cuMemsetD2D32(d + 3072, 256, 0xcafef00du, 5, 3));
    for (size_t r = 0; r < 3; r++)
        model_set(model, 3072 + r * 256, 0xcafef00du, 4, 5);
    /* Asynchronous variants on a stream. */
    CUstream s;
    CHK_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHK_OK(cuMemsetD8Async(d + 500, 0x77, 3, s));
    model_set(model, 500, 0x77, 1, 3);
    CHK_OK(cuMemsetD16Async(d + 600, 0x8899, 4, s));
    model_set(model, 600, 0x8899, 2, 4);
    CHK_OK(cuMemsetD32Async(d + 700, 0x01020304u, 2, s));
    model_set(model, 700, 0x01020304u, 4, 2);
    CHK_OK(cuMemsetD2D8Async(d + 800, 16, 0x42, 3, 2, s));
    for (size_t r = 0; r < 2; r++)
        model_set(model, 800 + r * 16, 0x42, 1, 3);
    CHK_OK(cuMemsetD2D16Async(d + 900, 16, 0x4344, 2, 2, s));
    for (size_t r = 0; r < 2; r++)
        model_set(model, 900 + r * 16, 0x4344, 2, 2);
    CHK_OK(cuMemsetD2D32Async(d + 960, 16, 0x45464748u, 2, 2, s));
    for (size_t r = 0; r < 2; r++)
        model_set(model, 960 + r * 16, 0x45464748u, 4, 2);
    CHK_OK(cuStreamSynchronize(s));
    CHK_OK(cuMemcpyDtoH(back, d, n));
    for (size_t i = 0; i < n; i++) {
        if (back[i] != model[i]) {
            fprintf(stderr, "byte %zu: 0x%02x, expected 0x%02x\n", i, back[i], model[i]);
            CHK(false);
        }
    }
    /* Pinned host memory can be set too, complete when the synchronous call returns. */
    void *h;
    CHK_OK(cuMemHostAlloc(&h, 64, 0));
    CHK_OK(cuMemsetD32((uintptr_t)h, 0x0badf00du, 16));
    CHK_EQ(((uint32_t *)h)[15], 0x0badf00du);
    /* Memory the driver does not know is not a memset target. */
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemsetD8((uintptr_t)back, 0, 16));
    CHK_OK(cuStreamDestroy(s));
    free(model);
    free(back);
    return 0;
}

static void test_memsets(void **state) {
    (void)state;
    run_child("memsets", c_memsets, NULL);
    assert_int_equal(report("memsets", "illegal_accesses"), 0);
}

/* ------------------------------------------------------------------ per-thread vs legacy */

static int c_per_thread_vs_legacy(void) {
    ctx_up();
    const size_t n = 55000; /* 1000 ns at 55 GB/s */
    unsigned char *src = xmalloc(n), *back = xmalloc(n);
    pattern(src, n, 51);
    CUdeviceptr d;
    CHK_OK(cuMemAlloc(&d, n));
    CUstream blocking;
    CHK_OK(cuStreamCreate(&blocking, 0));
    wait_for(1000000, blocking); /* 1 ms of work on a blocking stream */
    const uint64_t busy_until = simcuda_now_ns() + 1000000;

    /* The per-thread default stream does not wait for other streams: the copy takes its own
     * 1 us and returns well before the blocking stream's work ends. */
    uint64_t t0 = simcuda_now_ns();
    CHK_OK(cuMemcpyHtoD_v2_ptds(d, src, n));
    CHK(simcuda_now_ns() - t0 < 20000);
    CHK(simcuda_now_ns() < busy_until);
    CHK_OK(cuMemcpyDtoH_v2_ptds(back, d, n));
    CHK(memcmp(back, src, n) == 0);
    CHK(simcuda_now_ns() < busy_until);
    CHK_OK(cuMemsetD32_v2_ptds(d, 0x01010101u, n / 4));
    CHK_OK(cuMemsetD8Async_ptsz(d, 0x02, 1, NULL));
    CHK_OK(cuStreamSynchronize_ptsz(NULL));
    CHK(simcuda_now_ns() < busy_until);
    CHK_OK(cuMemcpyDtoH_v2_ptds(back, d, 8));
    CHK_EQ(back[0], 2);
    CHK_EQ(back[1], 1);

    /* The legacy default stream waits for the blocking stream's work first. */
    CHK_OK(cuMemcpyHtoD(d, src, n));
    CHK(simcuda_now_ns() >= busy_until + 1000);
    CHK_OK(cuMemcpyDtoH(back, d, n));
    CHK(memcmp(back, src, n) == 0);

    /* A non-blocking stream's work does not hold the legacy stream. */
    CUstream nb;
    CHK_OK(cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING));
    wait_for(1000000, nb);
    const uint64_t nb_until = simcuda_now_ns() + 1000000;
    CHK_OK(cuMemcpyHtoD(d, src, n));
    CHK(simcuda_now_ns() < nb_until);
    /* An async copy on the per-thread stream, addressed as NULL through the _ptsz entry. */
    void *pinned;
    CHK_OK(cuMemHostAlloc(&pinned, n, 0));
    memcpy(pinned, src, n);
    CHK_OK(cuMemsetD8(d, 0, n));
    CHK_OK(cuMemcpyHtoDAsync_v2_ptsz(d, pinned, n, NULL));
    CHK_OK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
    CHK(memcmp((void *)(uintptr_t)d, src, n) == 0);
    CHK_OK(cuCtxSynchronize());
    CHK_OK(cuStreamDestroy(blocking));
    CHK_OK(cuStreamDestroy(nb));
    free(src);
    free(back);
    return 0;
}

static void test_per_thread_vs_legacy(void **state) {
    (void)state;
    run_child("per_thread", c_per_thread_vs_legacy, NULL);
}

/* ------------------------------------------------------------------ timing model */

static uint64_t event_ns(CUevent a, CUevent b) {
    CHK_OK(cuEventSynchronize(b));
    float ms = 0;
    CHK_OK(cuEventElapsedTime(&ms, a, b));
    return (uint64_t)((double)ms * 1e6 + 0.5);
}

enum op_kind { OP_H2D, OP_D2H, OP_D2D, OP_MEMSET };

struct timing_bufs {
    CUdeviceptr d1, d2;
    void *pinned;
};

static void enqueue(enum op_kind k, size_t n, struct timing_bufs *b, CUstream s) {
    switch (k) {
    case OP_H2D:
        CHK_OK(cuMemcpyHtoDAsync(b->d1, b->pinned, n, s));
        break;
    case OP_D2H:
        CHK_OK(cuMemcpyDtoHAsync(b->pinned, b->d2, n, s));
        break;
    case OP_D2D:
        CHK_OK(cuMemcpyDtoDAsync(b->d2, b->d1, n, s));
        break;
    case OP_MEMSET:
        CHK_OK(cuMemsetD8Async(b->d1, 0x3c, n, s));
        break;
    }
}

/* Virtual ns of one operation between events, behind a 10 us wait so that neither event's time
 * depends on the host clock; also checks the host ran ahead of it. */
static uint64_t timed(enum op_kind k, size_t n, struct timing_bufs *b) {
    CUstream s;
    CUevent e0, e1;
    CHK_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHK_OK(cuEventCreate(&e0, 0));
    CHK_OK(cuEventCreate(&e1, 0));
    wait_for(10000, s);
    CHK_OK(cuEventRecord(e0, s));
    uint64_t t0 = simcuda_now_ns();
    enqueue(k, n, b, s);
    CHK(simcuda_now_ns() - t0 < 10000); /* asynchronous: the host does not wait */
    CHK_OK(cuEventRecord(e1, s));
    CHK_CU(CUDA_ERROR_NOT_READY, cuStreamQuery(s));
    uint64_t ns = event_ns(e0, e1);
    CHK_OK(cuStreamSynchronize(s));
    CHK_OK(cuStreamQuery(s));
    CHK_OK(cuStreamDestroy(s));
    CHK_OK(cuEventDestroy(e0));
    CHK_OK(cuEventDestroy(e1));
    return ns;
}

#define COPY_BYTES 55000000ull /* 1 ms at 55 GB/s */
#define HBM_BYTES  43000000ull /* 10 us at 4300 GB/s */

static struct timing_bufs timing_setup(void) {
    struct timing_bufs b;
    CHK_OK(cuMemAlloc(&b.d1, COPY_BYTES));
    CHK_OK(cuMemAlloc(&b.d2, COPY_BYTES));
    CHK_OK(cuMemHostAlloc(&b.pinned, COPY_BYTES, 0));
    return b;
}

static int c_timing_default(void) {
    ctx_up();
    struct timing_bufs b = timing_setup();
    CHK_EQ(timed(OP_H2D, COPY_BYTES, &b), 1000000);
    CHK_EQ(timed(OP_D2H, COPY_BYTES, &b), 1000000);
    CHK_EQ(timed(OP_D2D, HBM_BYTES, &b), 10000);
    CHK_EQ(timed(OP_MEMSET, HBM_BYTES, &b), 10000);

    /* A synchronous copy returns when it is done: the host clock moved by its duration. */
    uint64_t t0 = simcuda_now_ns();
    CHK_OK(cuMemcpyHtoD(b.d1, b.pinned, COPY_BYTES));
    uint64_t took = simcuda_now_ns() - t0;
    CHK(took >= 1000000 && took < 1000000 + 20000);
    return 0;
}

static int c_timing_rates(void) {
    ctx_up();
    struct timing_bufs b = timing_setup();
    CHK_EQ(timed(OP_H2D, COPY_BYTES, &b), 5000000); /* SIMCUDA_H2D_GBPS=11 */
    CHK_EQ(timed(OP_D2H, COPY_BYTES, &b), 500000);  /* SIMCUDA_D2H_GBPS=110 */
    CHK_EQ(timed(OP_D2D, HBM_BYTES, &b), 43000);    /* SIMCUDA_HBM_GBPS=1000 */
    return 0;
}

/* H2D on one stream and D2H on another, both released at the same virtual instant by one
 * event, the D2H copy enqueued first when d2h_first; returns their durations and `next`, the
 * duration from the first copy's start to the end of a second copy in the first one's direction
 * queued right behind it on its stream (it starts when that direction's engine is free). */
static void duplex_order(struct timing_bufs *b, bool d2h_first, uint64_t *h2d, uint64_t *d2h,
                         uint64_t *next) {
    CUstream gate, s1, s2;
    CUevent g, a1, e1, a2, e2, n1;
    CHK_OK(cuStreamCreate(&gate, CU_STREAM_NON_BLOCKING));
    CHK_OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CHK_OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CUevent *evs[] = {&g, &a1, &e1, &a2, &e2, &n1};
    for (int i = 0; i < 6; i++)
        CHK_OK(cuEventCreate(evs[i], 0));
    wait_for(100000, gate);
    CHK_OK(cuEventRecord(g, gate));
    CHK_OK(cuStreamWaitEvent(s1, g, 0));
    CHK_OK(cuStreamWaitEvent(s2, g, 0));
    CHK_OK(cuEventRecord(a1, s1));
    CHK_OK(cuEventRecord(a2, s2));
    CUstream first = d2h_first ? s2 : s1;
    enqueue(d2h_first ? OP_D2H : OP_H2D, COPY_BYTES, b, first);
    CHK_OK(cuEventRecord(d2h_first ? e2 : e1, first));
    enqueue(d2h_first ? OP_H2D : OP_D2H, COPY_BYTES, b, d2h_first ? s1 : s2);
    CHK_OK(cuEventRecord(d2h_first ? e1 : e2, d2h_first ? s1 : s2));
    enqueue(d2h_first ? OP_D2H : OP_H2D, COPY_BYTES, b, first);
    CHK_OK(cuEventRecord(n1, first));
    *h2d = event_ns(a1, e1);
    *d2h = event_ns(a2, e2);
    *next = event_ns(d2h_first ? a2 : a1, n1);
    CHK_EQ(event_ns(g, a2), 0); /* both started with the gate */
    for (int i = 0; i < 6; i++)
        CHK_OK(cuEventDestroy(*evs[i]));
    CHK_OK(cuStreamDestroy(gate));
    CHK_OK(cuStreamDestroy(s1));
    CHK_OK(cuStreamDestroy(s2));
}

static uint64_t ns_at(double bytes, double gbps) {
    return (uint64_t)ceil(bytes / gbps);
}

/* The link model (docs/simcuda.md), for two copies of B bytes starting together in opposite
 * directions, alone at rate `solo` each, while both run at h (host-to-device) and d
 * (device-to-host): each moves at its direction's duplex rate until one is done, then the other
 * at its rate alone. The first copy enqueued was timed alone; the second gets the duplex figure;
 * the first direction's engine is free only when its own bytes have moved at the duplex rate. */
struct duplex_model {
    uint64_t first, second, first_engine;
};

static struct duplex_model duplex_expect(double bytes, double solo, double first_dup,
                                         double second_dup) {
    struct duplex_model m;
    m.first = ns_at(bytes, solo);
    double t_first = bytes / first_dup, t_second = bytes / second_dup;
    if (t_second <= t_first) {
        m.second = ns_at(bytes, second_dup);
        m.first_engine = (uint64_t)ceil(t_second + (bytes - t_second * first_dup) / solo);
    } else {
        m.second = (uint64_t)ceil(t_first + (bytes - t_first * second_dup) / solo);
        m.first_engine = (uint64_t)ceil(t_first);
    }
    return m;
}

static int c_duplex_default(void) {
    ctx_up();
    struct timing_bufs b = timing_setup();
    uint64_t h2d, d2h, next;
    /* PCIe Gen5 defaults: 55 GB/s each way alone; 35 (H2D) + 53 (D2H) while both run. */
    duplex_order(&b, false, &h2d, &d2h, &next);
    struct duplex_model m = duplex_expect(COPY_BYTES, 55, 35, 53);
    CHK_EQ(h2d, m.first);  /* timed alone when it was enqueued: 1 ms */
    CHK_EQ(d2h, m.second); /* 53 GB/s throughout: about 1.038 ms */
    /* The H2D engine paid its slowdown: its bytes moved at 35 GB/s while the D2H copy ran. */
    CHK_EQ(next, m.first_engine + ns_at(COPY_BYTES, 55));
    CHK(m.first_engine > 1370000 && m.first_engine < 1380000);

    /* The other order: the slowdown still follows the direction, not the order. */
    duplex_order(&b, true, &h2d, &d2h, &next);
    struct duplex_model r = duplex_expect(COPY_BYTES, 55, 53, 35);
    CHK_EQ(d2h, r.first);
    CHK_EQ(h2d, r.second);
    /* The D2H copy behind it starts when its engine is free and itself meets the H2D copy's
     * tail: slower than alone. */
    CHK(next > r.first_engine + ns_at(COPY_BYTES, 55));
    CHK_EQ(r.second, m.first_engine); /* H2D done at the same time whichever came first */
    CHK_EQ(r.first_engine, m.second); /* and D2H too */

    /* Once the other direction is idle, a copy runs at its full rate again. */
    CHK_EQ(timed(OP_D2H, COPY_BYTES, &b), 1000000);
    return 0;
}

static int c_duplex_wide(void) {
    ctx_up();
    struct timing_bufs b = timing_setup();
    uint64_t h2d, d2h, next;
    /* SIMCUDA_DUPLEX_GBPS=110 splits 35:53 (41.75 + 66.25); D2H is capped at its 55 alone and
     * H2D gets the rest, 55: no contention. */
    duplex_order(&b, false, &h2d, &d2h, &next);
    CHK_EQ(h2d, 1000000);
    CHK_EQ(d2h, 1000000);
    CHK_EQ(next, 2000000);
    return 0;
}

static int c_duplex_narrow(void) {
    ctx_up();
    struct timing_bufs b = timing_setup();
    uint64_t h2d, d2h, next;
    /* SIMCUDA_DUPLEX_GBPS=66 splits in the proportion 35:53: 26.25 (H2D) + 39.75 (D2H). */
    duplex_order(&b, false, &h2d, &d2h, &next);
    struct duplex_model m = duplex_expect(COPY_BYTES, 55, 66.0 * 35 / 88, 66.0 * 53 / 88);
    CHK_EQ(h2d, m.first);
    CHK_EQ(d2h, m.second);
    CHK_EQ(next, m.first_engine + ns_at(COPY_BYTES, 55));
    return 0;
}

/* SIMCUDA_COSTS sets the per-direction duplex rates: link.h2d_duplex 20, link.d2h_duplex 50 */
static int c_duplex_file(void) {
    ctx_up();
    struct timing_bufs b = timing_setup();
    uint64_t h2d, d2h, next;
    duplex_order(&b, false, &h2d, &d2h, &next);
    struct duplex_model m = duplex_expect(COPY_BYTES, 55, 20, 50);
    CHK_EQ(h2d, m.first);
    CHK_EQ(d2h, m.second);
    CHK_EQ(next, m.first_engine + ns_at(COPY_BYTES, 55));
    return 0;
}

static void test_timing(void **state) {
    (void)state;
    run_child("timing_default", c_timing_default, NULL);
    const char *rates[] = {"SIMCUDA_H2D_GBPS=11", "SIMCUDA_D2H_GBPS=110", "SIMCUDA_HBM_GBPS=1000",
                           NULL};
    run_child("timing_rates", c_timing_rates, rates);
    run_child("duplex_default", c_duplex_default, NULL);
    const char *wide[] = {"SIMCUDA_DUPLEX_GBPS=110", NULL};
    run_child("duplex_wide", c_duplex_wide, wide);
    const char *narrow[] = {"SIMCUDA_DUPLEX_GBPS=66", NULL};
    run_child("duplex_narrow", c_duplex_narrow, narrow);
    char path[512], env[600];
    snprintf(path, sizeof path, "%s/duplex-costs.txt", report_dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("# per-direction duplex rates\nlink.h2d_duplex 20\nlink.d2h_duplex 50\n", f);
    fclose(f);
    snprintf(env, sizeof env, "SIMCUDA_COSTS=%s", path);
    const char *file[] = {env, NULL};
    run_child("duplex_file", c_duplex_file, file);
}

/* ------------------------------------------------------------------ pageable memory and the host
 * running ahead */

static int c_pageable_staging(void) {
    ctx_up();
    const size_t n = 256 << 10;
    CUstream s;
    CHK_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr d1, d2;
    CHK_OK(cuMemAlloc(&d1, n));
    CHK_OK(cuMemAlloc(&d2, n));
    unsigned char *pageable = xmalloc(n), *old = xmalloc(n), *back = xmalloc(n);
    void *pinned;
    CHK_OK(cuMemHostAlloc(&pinned, n, 0));
    pattern(pageable, n, 61);
    memcpy(old, pageable, n);
    pattern(pinned, n, 61);

    /* The executor is held (wall clock) until both copies are queued and both sources have
     * been overwritten. The pageable source was staged when the call was made, so the device
     * gets the old bytes; a pinned source is read when the copy runs, like a DMA. */
    launch("mk_block", s, NULL);
    CHK_OK(cuMemcpyHtoDAsync(d1, pageable, n, s));
    CHK_OK(cuMemcpyHtoDAsync(d2, pinned, n, s));
    memset(pageable, 0xdd, n);
    memset(pinned, 0xdd, n);
    atomic_store(&g_go, 1);
    CHK_OK(cuStreamSynchronize(s));
    CHK_OK(cuMemcpyDtoH(back, d1, n));
    CHK(memcmp(back, old, n) == 0);
    CHK_OK(cuMemcpyDtoH(back, d2, n));
    CHK_EQ(back[0], 0xdd);
    CHK_EQ(back[n - 1], 0xdd);

    /* An async D2H into pageable memory is complete when the call returns (the host waited for
     * the 1 ms ahead of it); into pinned memory it returns at once and completes later. */
    fill(d1, 0x51, n / 4, s);
    wait_for(1000000, s);
    uint64_t t0 = simcuda_now_ns();
    memset(back, 0, n);
    CHK_OK(cuMemcpyDtoHAsync(back, d1, n, s));
    CHK(simcuda_now_ns() >= t0 + 1000000);
    CHK_EQ(((uint32_t *)back)[n / 4 - 1], 0x51 + n / 4 - 1);
    wait_for(1000000, s);
    t0 = simcuda_now_ns();
    CHK_OK(cuMemcpyDtoHAsync(pinned, d1, n, s));
    CHK(simcuda_now_ns() < t0 + 10000);
    CHK_CU(CUDA_ERROR_NOT_READY, cuStreamQuery(s));
    CHK_OK(cuStreamSynchronize(s));
    CHK(simcuda_now_ns() >= t0 + 1000000);
    CHK(memcmp(pinned, back, n) == 0);
    CHK_OK(cuStreamDestroy(s));
    free(pageable);
    free(old);
    free(back);
    return 0;
}

static void test_pageable_staging(void **state) {
    (void)state;
    run_child("pageable", c_pageable_staging, NULL);
}

/* ------------------------------------------------------------------ directions */

static int c_directions(void) {
    ctx_up();
    const size_t n = 4096;
    unsigned char *heap = xmalloc(n), *heap2 = xmalloc(n);
    memset(heap, 0x99, n);
    memset(heap2, 0x98, n);
    CUdeviceptr d;
    CHK_OK(cuMemAlloc(&d, n));
    CUstream s;
    CHK_OK(cuStreamCreate(&s, 0));
    /* An explicit-direction copy whose device side is not device memory is refused. */
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD((uintptr_t)heap, heap2, n));
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoH(heap, (uintptr_t)heap2, n));
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoD((uintptr_t)heap, d, n));
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoD(d, (uintptr_t)heap, n));
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoDAsync((uintptr_t)heap, heap2, n, s));
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoHAsync(heap, (uintptr_t)heap2, n, s));
    CHK_CU(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoDAsync(d, (uintptr_t)heap, n, s));
    CHK_OK(cuStreamSynchronize(s));
    for (size_t i = 0; i < n; i++)
        CHK_EQ(heap[i], 0x99);

    /* Mapped pinned memory has a device pointer (the same address): explicit device-to-device
     * copies may use it, and they move over the link at the D2H rate. */
    void *mapped;
    CHK_OK(cuMemHostAlloc(&mapped, COPY_BYTES, CU_MEMHOSTALLOC_DEVICEMAP));
    CUdeviceptr md;
    CHK_OK(cuMemHostGetDevicePointer(&md, mapped, 0));
    CUdeviceptr big;
    CHK_OK(cuMemAlloc(&big, COPY_BYTES));
    CHK_OK(cuMemsetD8(big, 0x6e, COPY_BYTES));
    CUevent e0, e1;
    CHK_OK(cuEventCreate(&e0, 0));
    CHK_OK(cuEventCreate(&e1, 0));
    wait_for(10000, s);
    CHK_OK(cuEventRecord(e0, s));
    CHK_OK(cuMemcpyDtoDAsync(md, big, COPY_BYTES, s));
    CHK_OK(cuEventRecord(e1, s));
    CHK_EQ(event_ns(e0, e1), 1000000);
    CHK_EQ(((unsigned char *)mapped)[COPY_BYTES - 1], 0x6e);
    CHK_OK(cuEventDestroy(e0));
    CHK_OK(cuEventDestroy(e1));
    CHK_OK(cuStreamDestroy(s));
    free(heap);
    free(heap2);
    return 0;
}

static void test_directions(void **state) {
    (void)state;
    run_child("directions", c_directions, NULL);
    assert_int_equal(report("directions", "bytes_d2h"), 55000000);
}

int main(void) {
    if (!suite_init("copy")) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sync_roundtrip), cmocka_unit_test(test_async_pinned),
        cmocka_unit_test(test_unified),        cmocka_unit_test(test_copy_2d),
        cmocka_unit_test(test_memsets),        cmocka_unit_test(test_per_thread_vs_legacy),
        cmocka_unit_test(test_timing),         cmocka_unit_test(test_pageable_staging),
        cmocka_unit_test(test_directions),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    remove_reports();
    return rc;
}
