/* simcuda: streams, events, host functions and virtual time.
 *
 * Virtual time is exact, so most checks compare exact nanoseconds: every API call advances the
 * host clock by SIMCUDA_LAUNCH_NS (2500 by default), an operation starts at max(host time at
 * enqueue, its stream's previous end, what it waits for) and lasts its duration.
 *
 * Two groups: the determinism test forks children that run a whole program each, so it runs
 * first, while this process has not initialised CUDA (a fork child of an initialised process
 * cannot use CUDA, and under TSan a child of a multi-threaded process may not create threads). */
#include <math.h>
#include <pthread.h>
#include <sys/stat.h>

#include "simtest.h"

#define LAUNCH_NS 2500ull
#define MS        1000000ull

/* Per-thread-default-stream variants: cuda.h declares them only when a program is compiled with
 * CUDA_API_PER_THREAD_DEFAULT_STREAM, which renames the plain ones as well. */
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned shared, CUstream s, void **params,
                             void **extra);
CUresult cuEventRecord_ptsz(CUevent e, CUstream s);
CUresult cuStreamSynchronize_ptsz(CUstream s);
CUresult cuStreamGetId_ptsz(CUstream s, unsigned long long *id);

/* ------------------------------------------------------------------ kernels */

/* Appends its argument to a log (kernels and host functions of one device run on one executor
 * thread, in order; the test reads the log after synchronising). */
static uint32_t order_log[64];
static int order_len;

void simtest_str_log(void **params) {
    order_log[order_len++] = *(uint32_t *)params[0];
}

/* Writes a value and takes the duration it is given. */
void simtest_str_work(void **params) {
    uint64_t *p = *(uint64_t **)params[0];
    uint64_t ns = *(uint64_t *)params[1];
    p[0] = ns;
    simcuda_set_duration_ns(ns);
}

/* simtest_str_ms has no host function: a body-less kernel of 1 ms. */
static const char image[] = "simcuda-module 1\n"
                            "kernel simtest_str_ms ns=1000000\n"
                            "kernel simtest_str_log u32 ns=1000000\n"
                            "kernel simtest_str_work ptr u64\n";

static CUfunction fn_ms, fn_log, fn_work;

static void load_kernels(void) {
    CUmodule mod;
    CU_OK(cuModuleLoadData(&mod, image));
    CU_OK(cuModuleGetFunction(&fn_ms, mod, "simtest_str_ms"));
    CU_OK(cuModuleGetFunction(&fn_log, mod, "simtest_str_log"));
    CU_OK(cuModuleGetFunction(&fn_work, mod, "simtest_str_work"));
}

static CUresult launch(CUfunction f, CUstream s, void **args) {
    return cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
}

static float elapsed(CUevent a, CUevent b) {
    float ms = -1;
    CU_OK(cuEventElapsedTime(&ms, a, b));
    return ms;
}

static CUevent event(void) {
    CUevent e;
    CU_OK(cuEventCreate(&e, CU_EVENT_DEFAULT));
    return e;
}

/* ------------------------------------------------------------------ determinism (children) */

struct program_out {
    const char *timeline; /* where the program writes what it observed */
};

/* A program with copies, kernels of varying durations on three streams, cross-stream waits,
 * polling and host functions. Run twice, it must observe the same virtual timeline. */
static void host_noop(void *user) {
    (void)user;
}

static int child_program(void *arg) {
    const struct program_out *out = arg;
    CUcontext ctx;
    CUmodule mod;
    CUfunction work, ms;
    CUstream s1, s2;
    CUdeviceptr d1, d2;
    void *pinned;
    enum { ITER = 20 };
    CUevent base, ev1[ITER], ev2[ITER];
    long polls[ITER];
    uint64_t host_at[ITER];
    C_OK(cuInit(0));
    C_OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    C_OK(cuCtxSetCurrent(ctx));
    C_OK(cuModuleLoadData(&mod, image));
    C_OK(cuModuleGetFunction(&work, mod, "simtest_str_work"));
    C_OK(cuModuleGetFunction(&ms, mod, "simtest_str_ms"));
    C_OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    C_OK(cuStreamCreate(&s2, 0));
    C_OK(cuMemAlloc(&d1, 1 << 20));
    C_OK(cuMemAlloc(&d2, 1 << 20));
    C_OK(cuMemHostAlloc(&pinned, 1 << 20, 0));
    C_OK(cuEventCreate(&base, 0));
    C_OK(cuEventRecord(base, NULL));
    for (int i = 0; i < ITER; i++) {
        uint64_t ns = 10000ull * (uint64_t)(i + 1);
        void *args[] = {&d1, &ns};
        C_OK(cuEventCreate(&ev1[i], 0));
        C_OK(cuEventCreate(&ev2[i], 0));
        C_OK(cuMemcpyHtoDAsync(d1, pinned, (size_t)(256 << 10) * (size_t)(i % 4 + 1), s1));
        C_OK(cuLaunchKernel(work, 1, 1, 1, 1, 1, 1, 0, s1, args, NULL));
        C_OK(cuEventRecord(ev1[i], s1));
        C_OK(cuStreamWaitEvent(s2, ev1[i], 0));
        C_OK(cuLaunchKernel(ms, 1, 1, 1, 1, 1, 1, 0, s2, NULL, NULL));
        C_OK(cuMemcpyDtoHAsync(pinned, d2, 128 << 10, s2));
        C_OK(cuLaunchHostFunc(s2, host_noop, NULL));
        C_OK(cuEventRecord(ev2[i], s2));
        if (i % 5 == 0) C_OK(cuMemsetD8Async(d2, (unsigned char)i, 1 << 20, NULL));
        polls[i] = 0;
        CUresult rc;
        while ((rc = cuStreamQuery(s1)) == CUDA_ERROR_NOT_READY)
            polls[i]++;
        C_OK(rc);
        host_at[i] = simcuda_now_ns();
    }
    C_OK(cuCtxSynchronize());
    FILE *f = fopen(out->timeline, "w");
    C_CHECK(f != NULL);
    for (int i = 0; i < ITER; i++) {
        float a = 0, b = 0;
        C_OK(cuEventElapsedTime(&a, base, ev1[i]));
        C_OK(cuEventElapsedTime(&b, base, ev2[i]));
        fprintf(f, "%d polls=%ld host=%llu ev1=%.9g ev2=%.9g\n", i, polls[i],
                (unsigned long long)host_at[i], (double)a, (double)b);
    }
    fprintf(f, "end host=%llu\n", (unsigned long long)simcuda_now_ns());
    fclose(f);
    /* exit(), not return: the report is written by an atexit handler. */
    exit(0);
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "r");
    if (f == NULL) return NULL;
    static char bufs[2][16384];
    static int which;
    char *buf = bufs[which++ % 2];
    size_t n = fread(buf, 1, sizeof bufs[0] - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static void test_determinism(void **state) {
    (void)state;
    char dir[] = "/tmp/simtest_stream_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char timeline[2][256], report[2][256], env_report[2][300];
    for (int run = 0; run < 2; run++) {
        snprintf(timeline[run], sizeof timeline[run], "%s/timeline%d.txt", dir, run);
        snprintf(report[run], sizeof report[run], "%s/report%d.json", dir, run);
        snprintf(env_report[run], sizeof env_report[run], "SIMCUDA_REPORT=%s", report[run]);
        const char *env[] = {env_report[run], NULL};
        struct program_out out = {timeline[run]};
        assert_int_equal(simtest_run_child(child_program, &out, env), 0);
    }
    char *t0 = read_text(timeline[0]), *t1 = read_text(timeline[1]);
    assert_non_null(t0);
    assert_non_null(t1);
    assert_string_equal(t0, t1);
    long long v0 = simtest_json_int(report[0], "virtual_ns");
    long long v1 = simtest_json_int(report[1], "virtual_ns");
    assert_true(v0 > 20 * (long long)MS); /* 20 iterations of at least a 1 ms kernel */
    assert_int_equal(v0, v1);
    assert_int_equal(simtest_json_int(report[0], "launches"),
                     simtest_json_int(report[1], "launches"));
    assert_int_equal(simtest_json_int(report[0], "illegal_accesses"), 0);
    for (int run = 0; run < 2; run++) {
        remove(timeline[run]);
        remove(report[run]);
    }
    assert_int_equal(rmdir(dir), 0);
}

/* ------------------------------------------------------------------ in-process tests */

static int group_setup(void **state) {
    (void)state;
    simtest_ctx();
    load_kernels();
    return 0;
}

static void test_stream_properties(void **state) {
    (void)state;
    CUstream a, b, c;
    CUcontext ctx, sctx;
    unsigned flags = 99;
    int prio = 99;
    unsigned long long ida = 0, idb = 0, idl = 0, idn = 0;
    CUdevice dev = -1;
    CU_OK(cuCtxGetCurrent(&ctx));
    CU_OK(cuStreamCreate(&a, 0));
    CU_OK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuStreamCreate(&c, 0x4));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuStreamCreate(NULL, 0));
    CU_OK(cuStreamGetFlags(a, &flags));
    assert_int_equal(flags, 0);
    CU_OK(cuStreamGetFlags(b, &flags));
    assert_int_equal(flags, CU_STREAM_NON_BLOCKING);
    CU_OK(cuStreamGetPriority(a, &prio));
    assert_int_equal(prio, 0);
    CU_OK(cuStreamGetCtx(a, &sctx));
    assert_ptr_equal(sctx, ctx);
    CU_OK(cuStreamGetDevice(b, &dev));
    assert_int_equal(dev, 0);
    CU_OK(cuStreamGetId(a, &ida));
    CU_OK(cuStreamGetId(b, &idb));
    assert_true(ida != idb);
    /* NULL and CU_STREAM_LEGACY are the same stream: the context's legacy default stream. */
    CU_OK(cuStreamGetId(NULL, &idl));
    CU_OK(cuStreamGetId(CU_STREAM_LEGACY, &idn));
    assert_int_equal(idl, idn);
    assert_true(idl != ida && idl != idb);
    CU_OK(cuStreamGetFlags(NULL, &flags));
    assert_int_equal(flags, 0);
    CU_OK(cuStreamGetCtx(NULL, &sctx));
    assert_ptr_equal(sctx, ctx);
    /* Priorities outside [greatest, least] = [-5, 0] are clamped. */
    CU_OK(cuStreamCreateWithPriority(&c, 0, -3));
    CU_OK(cuStreamGetPriority(c, &prio));
    assert_int_equal(prio, -3);
    CU_OK(cuStreamDestroy(c));
    CU_OK(cuStreamCreateWithPriority(&c, CU_STREAM_NON_BLOCKING, -100));
    CU_OK(cuStreamGetPriority(c, &prio));
    assert_int_equal(prio, -5);
    CU_OK(cuStreamDestroy(c));
    CU_OK(cuStreamCreateWithPriority(&c, 0, 7));
    CU_OK(cuStreamGetPriority(c, &prio));
    assert_int_equal(prio, 0);
    CU_OK(cuStreamDestroy(c));
    /* The special handles are not destroyed. */
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuStreamDestroy(NULL));
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuStreamDestroy(CU_STREAM_LEGACY));
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuStreamDestroy(CU_STREAM_PER_THREAD));
    /* Work queued on a stream that is destroyed still runs. */
    CUdeviceptr d;
    uint64_t got = 0, ns = 3 * MS;
    CU_OK(cuMemAlloc(&d, sizeof got));
    void *args[] = {&d, &ns};
    CU_OK(launch(fn_work, a, args));
    CU_OK(cuStreamDestroy(a));
    CU_OK(cuCtxSynchronize());
    CU_OK(cuMemcpyDtoH(&got, d, sizeof got));
    assert_int_equal(got, 3 * MS);
    CU_OK(cuMemFree(d));
    CU_OK(cuStreamDestroy(b));
}

/* The host runs ahead: launches cost SIMCUDA_LAUNCH_NS each, whatever the kernels take, and a
 * synchronisation moves the host clock to the completion it waited for. */
static void test_host_runs_ahead(void **state) {
    (void)state;
    CUstream s;
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    uint64_t t0 = simcuda_now_ns();
    for (int i = 0; i < 100; i++)
        CU_OK(launch(fn_ms, s, NULL));
    uint64_t t1 = simcuda_now_ns();
    assert_int_equal(t1 - t0, 100 * LAUNCH_NS);
    CU_EXPECT(CUDA_ERROR_NOT_READY, cuStreamQuery(s));
    CU_OK(cuStreamSynchronize(s));
    uint64_t t2 = simcuda_now_ns();
    assert_true(t2 - t0 >= 100 * MS);
    /* Exactly: the first kernel started when it was enqueued, the rest back to back. */
    assert_int_equal(t2 - t0, LAUNCH_NS + 100 * MS);
    CU_OK(cuStreamQuery(s));
    CU_OK(cuStreamDestroy(s));
}

/* cuStreamQuery and cuEventQuery answer by virtual time; each poll advances the host clock, so a
 * polling loop ends: 1 ms / 2.5 us = 400 polls, the last of which succeeds. */
static void test_query_polling(void **state) {
    (void)state;
    CUstream s;
    CUevent e = event();
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU_OK(cuEventQuery(e)); /* never recorded: complete */

    CU_OK(launch(fn_ms, s, NULL));
    int not_ready = 0;
    CUresult rc;
    while ((rc = cuStreamQuery(s)) == CUDA_ERROR_NOT_READY)
        not_ready++;
    CU_OK(rc);
    assert_int_equal(not_ready, 399);

    CU_OK(launch(fn_ms, s, NULL));
    CU_OK(cuEventRecord(e, s));
    not_ready = 0;
    while ((rc = cuEventQuery(e)) == CUDA_ERROR_NOT_READY)
        not_ready++;
    CU_OK(rc);
    assert_int_equal(not_ready, 398); /* the record cost one more call */
    CU_OK(cuStreamQuery(s));
    CU_OK(cuEventDestroy(e));
    CU_OK(cuStreamDestroy(s));
}

static void test_event_timing(void **state) {
    (void)state;
    CUstream s;
    CUevent a = event(), b = event(), c = event(), never = event(), nt;
    float ms = -1;
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU_OK(cuEventCreate(&nt, CU_EVENT_DISABLE_TIMING));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuEventCreate(&nt, 0x80));
    /* Keep the stream busy first, so the events bracket exactly the kernels between them. */
    uint64_t t0 = simcuda_now_ns();
    CU_OK(launch(fn_ms, s, NULL));
    CU_OK(cuEventRecord(a, s));
    CU_OK(launch(fn_ms, s, NULL));
    CU_OK(cuEventRecord(b, s));
    CU_OK(launch(fn_ms, s, NULL));
    CU_OK(launch(fn_ms, s, NULL));
    CU_OK(cuEventRecord(c, s));
    CU_OK(cuEventRecord(nt, s));
    /* Not complete in virtual time yet. */
    CU_EXPECT(CUDA_ERROR_NOT_READY, cuEventElapsedTime(&ms, a, c));
    CU_EXPECT(CUDA_ERROR_NOT_READY, cuEventQuery(c));
    CU_OK(cuEventSynchronize(c));
    /* Four 1 ms kernels, the first starting when it was launched: the synchronisation moved the
     * host clock to exactly that end. */
    assert_int_equal(simcuda_now_ns() - t0, LAUNCH_NS + 4 * MS);
    CU_OK(cuEventQuery(c));
    assert_float_equal(elapsed(a, b), 1.0f, 0.0f);
    assert_float_equal(elapsed(a, c), 3.0f, 0.0f);
    assert_float_equal(elapsed(c, a), -3.0f, 0.0f);
    assert_float_equal(elapsed(b, b), 0.0f, 0.0f);
    /* Timing disabled, or never recorded: no elapsed time. */
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(&ms, a, nt));
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(&ms, nt, a));
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(&ms, a, never));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuEventElapsedTime(NULL, a, b));
    /* Re-recording moves the event. The stream is idle now, so the kernels start at launch. */
    uint64_t t1 = simcuda_now_ns();
    CU_OK(launch(fn_ms, s, NULL));
    CU_OK(launch(fn_ms, s, NULL));
    CU_OK(cuEventRecord(b, s));
    CU_OK(cuEventSynchronize(b));
    assert_int_equal(simcuda_now_ns() - t1, LAUNCH_NS + 2 * MS);
    double c_at = (double)(t0 + LAUNCH_NS + 4 * MS), b_at = (double)(t1 + LAUNCH_NS + 2 * MS);
    assert_float_equal(elapsed(c, b), (float)((b_at - c_at) / 1e6), 0.0f);
    CUevent handles[] = {a, b, c, never, nt};
    for (size_t i = 0; i < sizeof handles / sizeof handles[0]; i++)
        CU_OK(cuEventDestroy(handles[i]));
    CU_OK(cuStreamDestroy(s));
}

/* cuStreamWaitEvent orders work across streams: B's kernel starts when A's ends. */
static void test_wait_event_orders_streams(void **state) {
    (void)state;
    CUstream a, b;
    CUevent a_end = event(), b_end = event();
    CU_OK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    CU_OK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    for (int wait = 0; wait < 2; wait++) {
        CU_OK(cuCtxSynchronize());
        CU_OK(launch(fn_ms, a, NULL));
        CU_OK(launch(fn_ms, a, NULL));
        CU_OK(cuEventRecord(a_end, a));
        if (wait) CU_OK(cuStreamWaitEvent(b, a_end, 0));
        CU_OK(launch(fn_ms, b, NULL));
        CU_OK(cuEventRecord(b_end, b));
        CU_OK(cuCtxSynchronize());
        float ms = elapsed(a_end, b_end);
        if (wait) {
            assert_float_equal(ms, 1.0f, 0.0f); /* start(B) == end(A), B lasts 1 ms */
        } else {
            assert_true(ms < -0.9f); /* unordered: B ran alongside A's first kernel */
        }
    }
    /* Waiting on an event never recorded is a no-op. */
    CUevent never = event();
    CU_OK(cuStreamWaitEvent(b, never, 0));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuStreamWaitEvent(b, never, 0x8));
    CU_OK(cuStreamSynchronize(b));
    CU_OK(cuEventDestroy(never));
    CU_OK(cuEventDestroy(a_end));
    CU_OK(cuEventDestroy(b_end));
    CU_OK(cuStreamDestroy(a));
    CU_OK(cuStreamDestroy(b));
}

/* Runs `first` then `second`, each a 1 ms kernel with an event after it; returns the virtual
 * time from the end of the first to the end of the second. */
static float ordered_pair(CUstream first, CUstream second) {
    CUevent e1 = event(), e2 = event();
    CU_OK(cuCtxSynchronize());
    CU_OK(launch(fn_ms, first, NULL));
    CU_OK(cuEventRecord(e1, first));
    CU_OK(launch(fn_ms, second, NULL));
    CU_OK(cuEventRecord(e2, second));
    CU_OK(cuCtxSynchronize());
    float ms = elapsed(e1, e2);
    CU_OK(cuEventDestroy(e1));
    CU_OK(cuEventDestroy(e2));
    return ms;
}

/* The legacy default stream waits for all earlier work on blocking streams, and blocking streams
 * wait for earlier work on it; CU_STREAM_NON_BLOCKING streams do neither. */
static void test_legacy_default_stream(void **state) {
    (void)state;
    CUstream blocking, nonblocking;
    CU_OK(cuStreamCreate(&blocking, 0));
    CU_OK(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING));
    /* Serialised: the second kernel starts when the first ends, so the ends are 1 ms apart. */
    assert_float_equal(ordered_pair(blocking, NULL), 1.0f, 0.0f);
    assert_float_equal(ordered_pair(NULL, blocking), 1.0f, 0.0f);
    assert_float_equal(ordered_pair(blocking, CU_STREAM_LEGACY), 1.0f, 0.0f);
    assert_float_equal(ordered_pair(CU_STREAM_LEGACY, blocking), 1.0f, 0.0f);
    /* Concurrent: the second starts two calls (5 us) after the first. */
    assert_float_equal(ordered_pair(nonblocking, NULL), 0.005f, 1e-6f);
    assert_float_equal(ordered_pair(NULL, nonblocking), 0.005f, 1e-6f);
    /* Two ordinary streams never wait for each other. */
    CUstream other;
    CU_OK(cuStreamCreate(&other, 0));
    assert_float_equal(ordered_pair(blocking, other), 0.005f, 1e-6f);
    CU_OK(cuStreamDestroy(other));
    CU_OK(cuStreamDestroy(blocking));
    CU_OK(cuStreamDestroy(nonblocking));
}

/* ------------------------------------------------------------------ per-thread default stream */

struct ptds_thread {
    CUcontext ctx;
    pthread_barrier_t *launched;
    CUevent end;
    unsigned long long id_ptsz, id_handle, id_again;
    CUresult rc;
};

static void *ptds_main(void *arg) {
    struct ptds_thread *t = arg;
    CUresult rc = cuCtxSetCurrent(t->ctx);
    if (rc == CUDA_SUCCESS) rc = cuEventCreate(&t->end, 0);
    /* NULL through a _ptsz entry point and CU_STREAM_PER_THREAD anywhere both name this
     * thread's own default stream. */
    if (rc == CUDA_SUCCESS) rc = cuStreamGetId_ptsz(NULL, &t->id_ptsz);
    if (rc == CUDA_SUCCESS) rc = cuStreamGetId(CU_STREAM_PER_THREAD, &t->id_handle);
    if (rc == CUDA_SUCCESS) rc = cuLaunchKernel_ptsz(fn_ms, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
    if (rc == CUDA_SUCCESS)
        rc = cuLaunchKernel(fn_ms, 1, 1, 1, 1, 1, 1, 0, CU_STREAM_PER_THREAD, NULL, NULL);
    if (rc == CUDA_SUCCESS) rc = cuEventRecord_ptsz(t->end, NULL);
    pthread_barrier_wait(t->launched);
    if (rc == CUDA_SUCCESS) rc = cuStreamSynchronize_ptsz(NULL);
    if (rc == CUDA_SUCCESS) rc = cuStreamGetId_ptsz(NULL, &t->id_again);
    t->rc = rc;
    return NULL;
}

static void test_per_thread_default_stream(void **state) {
    (void)state;
    CUcontext ctx;
    pthread_barrier_t launched;
    struct ptds_thread t[2];
    pthread_t th[2];
    unsigned long long legacy_id = 0, mine = 0;
    CU_OK(cuCtxGetCurrent(&ctx));
    CU_OK(cuCtxSynchronize());
    CU_OK(cuStreamGetId(NULL, &legacy_id));
    CU_OK(cuStreamGetId_ptsz(NULL, &mine));
    assert_true(mine != legacy_id);
    pthread_barrier_init(&launched, NULL, 2);
    for (int i = 0; i < 2; i++) {
        memset(&t[i], 0, sizeof t[i]);
        t[i].ctx = ctx;
        t[i].launched = &launched;
        assert_int_equal(pthread_create(&th[i], NULL, ptds_main, &t[i]), 0);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&launched);
    for (int i = 0; i < 2; i++) {
        CU_OK(t[i].rc);
        assert_int_equal(t[i].id_ptsz, t[i].id_handle);
        assert_int_equal(t[i].id_ptsz, t[i].id_again);
        assert_true(t[i].id_ptsz != legacy_id && t[i].id_ptsz != mine);
    }
    assert_true(t[0].id_ptsz != t[1].id_ptsz);
    /* Each thread's two kernels ran back to back on its own stream, and the two streams were
     * not serialised with each other: their ends are microseconds apart, not 2 ms. */
    float ms = elapsed(t[0].end, t[1].end);
    assert_true(fabsf(ms) < 0.5f);
    CU_OK(cuEventDestroy(t[0].end));
    CU_OK(cuEventDestroy(t[1].end));

    /* The per-thread default stream is a blocking stream: it synchronises with the legacy
     * default stream. */
    CUevent e1 = event(), e2 = event();
    CU_OK(cuCtxSynchronize());
    CU_OK(launch(fn_ms, NULL, NULL));
    CU_OK(cuEventRecord(e1, NULL));
    CU_OK(cuLaunchKernel_ptsz(fn_ms, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    CU_OK(cuEventRecord_ptsz(e2, NULL));
    CU_OK(cuStreamSynchronize_ptsz(NULL));
    assert_float_equal(elapsed(e1, e2), 1.0f, 0.0f);
    CU_OK(cuEventDestroy(e1));
    CU_OK(cuEventDestroy(e2));
}

/* ------------------------------------------------------------------ host functions */

static void host_log(void *user) {
    order_log[order_len++] = (uint32_t)(uintptr_t)user;
}

static CUstream callback_stream;
static CUresult callback_status = (CUresult)-1;

static void callback_log(CUstream s, CUresult status, void *user) {
    callback_stream = s;
    callback_status = status;
    order_log[order_len++] = (uint32_t)(uintptr_t)user;
}

static void test_host_functions_in_order(void **state) {
    (void)state;
    CUstream s;
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU_OK(cuCtxSynchronize());
    order_len = 0;
    uint32_t v1 = 1, v3 = 3, v5 = 5;
    void *a1[] = {&v1}, *a3[] = {&v3}, *a5[] = {&v5};
    CU_OK(launch(fn_log, s, a1));
    CU_OK(cuLaunchHostFunc(s, host_log, (void *)(uintptr_t)2));
    CU_OK(launch(fn_log, s, a3));
    CU_OK(cuStreamAddCallback(s, callback_log, (void *)(uintptr_t)4, 0));
    CU_OK(launch(fn_log, s, a5));
    CU_OK(cuLaunchHostFunc(NULL, host_log, (void *)(uintptr_t)6)); /* legacy stream too */
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuLaunchHostFunc(s, NULL, NULL));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuStreamAddCallback(s, callback_log, NULL, 1));
    CU_OK(cuStreamSynchronize(s));
    CU_OK(cuCtxSynchronize());
    assert_int_equal(order_len, 6);
    for (int i = 0; i < 6; i++)
        assert_int_equal(order_log[i], (uint32_t)i + 1);
    assert_ptr_equal(callback_stream, s);
    assert_int_equal(callback_status, CUDA_SUCCESS);
    CU_OK(cuStreamDestroy(s));
}

/* A stream holds SIMCUDA_LAUNCH_QUEUE (1024) kernels that have not ended; the next launch waits
 * for the oldest to end, as the driver's does, and each stream has its own queue. 3000 launches
 * of 1 ms kernels: kernel k runs [t0 + 2.5 us + (k-1) ms, t0 + 2.5 us + k ms), launch k (k >
 * 1024) returns when kernel k - 1024 ends, so the 3000th returns at kernel 1976's end (without
 * the queue, at t0 + 3000 x 2.5 us = 7.5 ms). */
static void test_launch_queue_fills(void **state) {
    (void)state;
    CUstream s, other;
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU_OK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
    CU_OK(cuCtxSynchronize());
    uint64_t t0 = simcuda_now_ns();
    for (int k = 1; k <= 1024; k++)
        CU_OK(launch(fn_ms, s, NULL));
    assert_int_equal(simcuda_now_ns() - t0, 1024 * LAUNCH_NS); /* room for every one */
    for (int k = 1025; k <= 3000; k++)
        CU_OK(launch(fn_ms, s, NULL));
    assert_int_equal(simcuda_now_ns() - t0, LAUNCH_NS + 1976 * MS);
    /* Another stream's queue is empty: its launches return at once. */
    uint64_t t1 = simcuda_now_ns();
    for (int k = 0; k < 10; k++)
        CU_OK(launch(fn_ms, other, NULL));
    assert_int_equal(simcuda_now_ns() - t1, 10 * LAUNCH_NS);
    /* The queued kernels all run: the stream ends at kernel 3000's end. */
    CU_OK(cuStreamSynchronize(s));
    assert_int_equal(simcuda_now_ns() - t0, LAUNCH_NS + 3000 * MS);
    CU_OK(cuStreamDestroy(s));
    CU_OK(cuStreamDestroy(other));
}

struct queue_thread {
    CUcontext ctx;
    CUstream s;
    int launches;
    CUresult rc;
};

static void *queue_main(void *arg) {
    struct queue_thread *t = arg;
    CUresult rc = cuCtxSetCurrent(t->ctx);
    for (int k = 0; k < t->launches && rc == CUDA_SUCCESS; k++)
        rc = launch(fn_ms, t->s, NULL);
    t->rc = rc;
    return NULL;
}

/* Two threads launch onto one stream whose queue is full. A launch that waited for a place may
 * find another thread took it (the wait releases the simulator's lock); whether a run hits that
 * interleaving depends on how far the executor thread has got in wall-clock time, so this test
 * cannot force it. What it checks: every kernel runs once, in order (the stream ends 3000
 * kernels of 1 ms after the first began), and the launches could not all have returned before
 * kernel 1976 ended (at most 1024 queued). */
static void test_launch_queue_two_threads(void **state) {
    (void)state;
    CUstream s;
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU_OK(cuCtxSynchronize());
    struct queue_thread t[2];
    pthread_t th[2];
    CUcontext ctx;
    CU_OK(cuCtxGetCurrent(&ctx));
    uint64_t t0 = simcuda_now_ns();
    for (int i = 0; i < 2; i++) {
        t[i] = (struct queue_thread){ctx, s, 1500, CUDA_SUCCESS};
        assert_int_equal(pthread_create(&th[i], NULL, queue_main, &t[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        CU_OK(t[i].rc);
    }
    assert_true(simcuda_now_ns() - t0 >= 1976 * MS);
    CU_OK(cuStreamSynchronize(s));
    uint64_t took = simcuda_now_ns() - t0;
    assert_true(took >= 3000 * MS);
    assert_true(took < 3001 * MS);
    CU_OK(cuStreamDestroy(s));
}

int main(void) {
    const struct CMUnitTest children[] = {
        cmocka_unit_test(test_determinism),
    };
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_properties),
        cmocka_unit_test(test_host_runs_ahead),
        cmocka_unit_test(test_query_polling),
        cmocka_unit_test(test_event_timing),
        cmocka_unit_test(test_wait_event_orders_streams),
        cmocka_unit_test(test_legacy_default_stream),
        cmocka_unit_test(test_per_thread_default_stream),
        cmocka_unit_test(test_host_functions_in_order),
        cmocka_unit_test(test_launch_queue_fills),
        cmocka_unit_test(test_launch_queue_two_threads),
    };
    int failed = cmocka_run_group_tests_name("stream_children", children, NULL, NULL);
    failed += cmocka_run_group_tests_name("stream", tests, group_setup, NULL);
    return failed;
}
