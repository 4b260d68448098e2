/* simcuda under concurrent use: several host threads launching on their own streams, waiting on
 * each other's events, and churning through the API at once. Also run under TSan: the simulator
 * must be free of data races however the program's threads interleave. */
#include <pthread.h>

#include "simtest.h"

#define THREADS   4
#define LAUNCHES  2000
#define PHASES    4
#define PER_PHASE (LAUNCHES / PHASES)

/* ------------------------------------------------------------------ kernels */

/* Verifies the counter holds the launch's index, then increments it: any reordering or lost
 * launch on the stream shows up as an error count. Takes the virtual duration it is given. */
void simtest_t_inc(void **params) {
    uint32_t *counter = *(uint32_t **)params[0];
    uint32_t expect = *(uint32_t *)params[1];
    uint32_t *errors = *(uint32_t **)params[2];
    if (*counter != expect) (*errors)++;
    *counter += 1;
    simcuda_set_duration_ns(*(uint64_t *)params[3]);
}

/* Checks another thread's counter has reached at least `want`: it may run only after that
 * thread's event. */
void simtest_t_at_least(void **params) {
    uint32_t *counter = *(uint32_t **)params[0];
    uint32_t want = *(uint32_t *)params[1];
    uint32_t *errors = *(uint32_t **)params[2];
    if (*counter < want) (*errors)++;
}

static const char image[] = "simcuda-module 1\n"
                            "kernel simtest_t_inc ptr u32 ptr u64\n"
                            "kernel simtest_t_at_least ptr u32 ptr ns=100\n";

static CUcontext ctx;
static CUfunction f_inc, f_at_least;

static int group_setup(void **state) {
    (void)state;
    CUmodule mod;
    ctx = simtest_ctx();
    CU_OK(cuModuleLoadData(&mod, image));
    CU_OK(cuModuleGetFunction(&f_inc, mod, "simtest_t_inc"));
    CU_OK(cuModuleGetFunction(&f_at_least, mod, "simtest_t_at_least"));
    return 0;
}

/* ------------------------------------------------------------------ launchers with event waits */

struct launcher {
    int index;
    CUdeviceptr counter, errors;
    CUdeviceptr *counters; /* everyone's, to check a neighbour */
    CUevent (*phase_done)[PHASES];
    CUevent (*check_done)[PHASES];
    pthread_barrier_t *barrier;
    CUresult rc;
    int line;
};

#define T_OK(call)                                                                                 \
    do {                                                                                           \
        CUresult rc_ = (call);                                                                     \
        if (rc_ != CUDA_SUCCESS) {                                                                 \
            t->rc = rc_;                                                                           \
            t->line = __LINE__;                                                                    \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

static void *launcher_main(void *arg) {
    struct launcher *t = arg;
    CUstream s = NULL;
    int next = (t->index + 1) % THREADS;
    /* Each thread's kernels take a different time (20, 40, 60, 80 us), more than the host spends
     * launching them: the streams fall behind the host by different amounts, so a check that
     * ignored its wait would start before the event it waits for, in virtual time. */
    uint64_t ns = 20000ull * (uint64_t)(t->index + 1);
    int barriers_passed = 0;
    T_OK(cuCtxSetCurrent(ctx));
    T_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int p = 0; p < PHASES; p++) {
        for (uint32_t i = p * PER_PHASE; i < (uint32_t)(p + 1) * PER_PHASE; i++) {
            void *args[] = {&t->counter, &i, &t->errors, &ns};
            T_OK(cuLaunchKernel(f_inc, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
        }
        T_OK(cuEventRecord(t->phase_done[t->index][p], s));
        /* Every thread has recorded its event for this phase before anyone waits on one. */
        pthread_barrier_wait(t->barrier);
        barriers_passed++;
        T_OK(cuStreamWaitEvent(s, t->phase_done[next][p], 0));
        uint32_t want = (uint32_t)(p + 1) * PER_PHASE;
        void *args[] = {&t->counters[next], &want, &t->errors};
        T_OK(cuLaunchKernel(f_at_least, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
        T_OK(cuEventRecord(t->check_done[t->index][p], s));
    }
    T_OK(cuStreamSynchronize(s));
    T_OK(cuStreamDestroy(s));
    s = NULL;
out:
    /* A thread that failed still takes part in the remaining barriers, so none deadlocks. */
    for (; barriers_passed < PHASES; barriers_passed++)
        pthread_barrier_wait(t->barrier);
    return NULL;
}

static void test_launchers_with_cross_thread_waits(void **state) {
    (void)state;
    CUdeviceptr counters[THREADS], errors[THREADS];
    CUevent phase_done[THREADS][PHASES], check_done[THREADS][PHASES];
    struct launcher t[THREADS];
    pthread_t th[THREADS];
    pthread_barrier_t barrier;
    for (int i = 0; i < THREADS; i++) {
        CU_OK(cuMemAlloc(&counters[i], sizeof(uint32_t)));
        CU_OK(cuMemAlloc(&errors[i], sizeof(uint32_t)));
        CU_OK(cuMemsetD32(counters[i], 0, 1));
        CU_OK(cuMemsetD32(errors[i], 0, 1));
        for (int p = 0; p < PHASES; p++) {
            CU_OK(cuEventCreate(&phase_done[i][p], 0));
            CU_OK(cuEventCreate(&check_done[i][p], 0));
        }
    }
    pthread_barrier_init(&barrier, NULL, THREADS);
    for (int i = 0; i < THREADS; i++) {
        t[i] = (struct launcher){.index = i,
                                 .counter = counters[i],
                                 .errors = errors[i],
                                 .counters = counters,
                                 .phase_done = phase_done,
                                 .check_done = check_done,
                                 .barrier = &barrier};
        assert_int_equal(pthread_create(&th[i], NULL, launcher_main, &t[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&barrier);
    for (int i = 0; i < THREADS; i++) {
        if (t[i].rc != CUDA_SUCCESS)
            fail_msg("thread %d: call at line %d returned %d", i, t[i].line, (int)t[i].rc);
        uint32_t counter = 0, errs = 0;
        CU_OK(cuMemcpyDtoH(&counter, counters[i], sizeof counter));
        CU_OK(cuMemcpyDtoH(&errs, errors[i], sizeof errs));
        assert_int_equal(counter, LAUNCHES);
        assert_int_equal(errs, 0);
        /* In virtual time too, each check (100 ns) started after the event it waited for. */
        for (int p = 0; p < PHASES; p++) {
            float ms = -1;
            CU_OK(cuEventElapsedTime(&ms, phase_done[(i + 1) % THREADS][p], check_done[i][p]));
            if (ms < 0.0000999f)
                fail_msg("thread %d phase %d: check ended %g ms after the event it waited for", i,
                         p, (double)ms);
        }
        CU_OK(cuMemFree(counters[i]));
        CU_OK(cuMemFree(errors[i]));
    }
    for (int i = 0; i < THREADS; i++) {
        for (int p = 0; p < PHASES; p++) {
            CU_OK(cuEventDestroy(phase_done[i][p]));
            CU_OK(cuEventDestroy(check_done[i][p]));
        }
    }
}

/* ------------------------------------------------------------------ API churn */

#define CHURN_ROUNDS 150

struct churner {
    int index;
    CUresult rc;
    int line;
    int bad;
};

/* Creates and destroys streams, events and allocations while the other threads do the same,
 * polls by virtual time, and checks its own data each round. */
static void *churner_main(void *arg) {
    struct churner *t = arg;
    CUstream s = NULL;
    CUevent e = NULL;
    CUdeviceptr d = 0;
    T_OK(cuCtxSetCurrent(ctx));
    for (int r = 0; r < CHURN_ROUNDS; r++) {
        uint32_t value = (uint32_t)(t->index * 100000 + r), got[16];
        T_OK(cuStreamCreate(&s, r % 2 ? CU_STREAM_NON_BLOCKING : 0));
        T_OK(cuEventCreate(&e, 0));
        T_OK(cuMemAlloc(&d, sizeof got));
        T_OK(cuMemsetD32Async(d, value, 16, s));
        CUdeviceptr errors = d + 15 * sizeof(uint32_t);
        uint32_t expect = value;
        uint64_t ns = 500;
        void *args[] = {&d, &expect, &errors, &ns};
        T_OK(cuLaunchKernel(f_inc, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
        T_OK(cuEventRecord(e, s));
        CUresult q;
        while ((q = cuEventQuery(e)) == CUDA_ERROR_NOT_READY) {
        }
        T_OK(q);
        T_OK(cuMemcpyDtoHAsync(got, d, sizeof got, s));
        T_OK(cuStreamSynchronize(s));
        if (got[0] != value + 1 || got[1] != value || got[15] != value) t->bad++;
        T_OK(cuMemFree(d));
        d = 0;
        T_OK(cuEventDestroy(e));
        e = NULL;
        T_OK(cuStreamDestroy(s));
        s = NULL;
    }
out:
    return NULL;
}

static void test_api_churn(void **state) {
    (void)state;
    struct churner t[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        t[i] = (struct churner){.index = i};
        assert_int_equal(pthread_create(&th[i], NULL, churner_main, &t[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < THREADS; i++) {
        if (t[i].rc != CUDA_SUCCESS)
            fail_msg("thread %d: call at line %d returned %d", i, t[i].line, (int)t[i].rc);
        assert_int_equal(t[i].bad, 0);
    }
    CU_OK(cuCtxSynchronize());
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_launchers_with_cross_thread_waits),
        cmocka_unit_test(test_api_churn),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
