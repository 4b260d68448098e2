/* simcuda: illegal accesses and the sticky error, the program's own faults, the report, fault
 * injection (SIMCUDA_FAIL) and unimplemented entry points.
 *
 * Every test runs in a forked child of a parent that never calls cuInit: the illegal-address
 * error is sticky for the whole process, and the report is written when the process exits. */
#include <dirent.h>
#include <dlfcn.h>
#include <signal.h>

#include "simtest.h"

static const char *const no_env[] = {NULL};

/* A scratch directory per test, for reports. */
struct scratch {
    char dir[64];
    char report[128];
    char env[160];
};

static void scratch_init(struct scratch *s) {
    snprintf(s->dir, sizeof s->dir, "/tmp/simtest_faults_XXXXXX");
    assert_non_null(mkdtemp(s->dir));
    snprintf(s->report, sizeof s->report, "%s/report.json", s->dir);
    snprintf(s->env, sizeof s->env, "SIMCUDA_REPORT=%s", s->report);
}

/* Removes the report and the directory; fails if anything else (a temporary file) was left. */
static void scratch_done(struct scratch *s) {
    remove(s->report);
    DIR *d = opendir(s->dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        fail_msg("%s left in %s", e->d_name, s->dir);
    }
    closedir(d);
    assert_int_equal(rmdir(s->dir), 0);
}

static void run_in_child(int (*fn)(void *), void *arg, const char *const *env) {
    int status = simtest_run_child(fn, arg, env);
    if (status != 0) fail_msg("child exited with status %d", status);
}

/* The child's own faults must reach the default action, not cmocka's handler, which the child
 * inherited from the test that forked it. */
static void default_fault_handlers(void) {
    signal(SIGSEGV, SIG_DFL);
    signal(SIGBUS, SIG_DFL);
}

static int setup_ctx(void) {
    CUcontext ctx;
    C_OK(cuInit(0));
    C_OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    C_OK(cuCtxSetCurrent(ctx));
    return 0;
}

/* ------------------------------------------------------------------ kernels */

void simtest_f_touch(void **params) {
    volatile uint32_t *p = *(uint32_t **)params[0];
    *p = 1;
}

/* Writes a mark to host memory: proves whether a kernel ran. */
void simtest_f_mark(void **params) {
    uint32_t *p = *(uint32_t **)params[0];
    uint32_t v = *(uint32_t *)params[1];
    *p = v;
}

static const char image[] = "simcuda-module 1\n"
                            "kernel simtest_f_touch ptr ns=10000\n"
                            "kernel simtest_f_mark ptr u32 ns=1000\n";

static int load(CUfunction *touch, CUfunction *mark) {
    CUmodule mod;
    C_OK(cuModuleLoadData(&mod, image));
    C_OK(cuModuleGetFunction(touch, mod, "simtest_f_touch"));
    C_OK(cuModuleGetFunction(mark, mod, "simtest_f_mark"));
    return 0;
}

/* Reserved, never mapped: PROT_NONE, as unmapped device memory. */
static int reserve(CUdeviceptr *va) {
    C_OK(cuMemAddressReserve(va, 2u << 20, 0, 0, 0));
    return 0;
}

/* ------------------------------------------------------------------ illegal access from a kernel
 */

static uint32_t host_fn_ran;
static CUresult callback_status = CUDA_SUCCESS;
static int callback_calls;

static void host_fn(void *user) {
    (void)user;
    host_fn_ran = 1;
}

static void callback(CUstream s, CUresult status, void *user) {
    (void)s;
    (void)user;
    callback_status = status;
    callback_calls++;
}

static int child_kernel_fault(void *arg) {
    (void)arg;
    CUfunction touch, mark;
    CUdeviceptr va, d;
    CUstream s;
    CUevent e;
    uint32_t *marks;
    default_fault_handlers();
    if (setup_ctx() || load(&touch, &mark) || reserve(&va)) return 1;
    C_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    C_OK(cuEventCreate(&e, 0));
    C_OK(cuMemAlloc(&d, 4096));
    C_OK(cuMemHostAlloc((void **)&marks, 64 * sizeof *marks, 0));
    memset(marks, 0, 64 * sizeof *marks);
    /* Work before the fault runs. */
    uint32_t v = 7;
    void *mark_args[] = {&marks, &v};
    C_OK(cuLaunchKernel(mark, 1, 1, 1, 1, 1, 1, 0, s, mark_args, NULL));
    C_OK(cuStreamSynchronize(s));
    C_CHECK(marks[0] == 7);

    /* The faulting launch succeeds: the error is asynchronous. So does everything launched
     * before a call waits for it, however far the executor has got meanwhile. */
    CUdeviceptr bad = va + 4096;
    void *touch_args[] = {&bad};
    C_OK(cuLaunchKernel(touch, 1, 1, 1, 1, 1, 1, 0, s, touch_args, NULL));
    for (uint32_t i = 1; i < 40; i++) {
        uint32_t *slot = &marks[i];
        void *args[] = {&slot, &i};
        C_OK(cuLaunchKernel(mark, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    }
    C_OK(cuLaunchHostFunc(s, host_fn, NULL));
    C_OK(cuStreamAddCallback(s, callback, NULL, 0));
    C_OK(cuEventRecord(e, s));
    C_OK(cuMemsetD8Async(d, 1, 4096, s));

    /* The first synchronising call reports it, and every one after it. */
    C_EXPECT(CUDA_ERROR_ILLEGAL_ADDRESS, cuStreamSynchronize(s));
    C_EXPECT(CUDA_ERROR_ILLEGAL_ADDRESS, cuStreamSynchronize(s));
    C_EXPECT(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
    C_EXPECT(CUDA_ERROR_ILLEGAL_ADDRESS, cuStreamQuery(s));
    C_EXPECT(CUDA_ERROR_ILLEGAL_ADDRESS, cuStreamSynchronize(NULL));
    C_EXPECT(CUDA_ERROR_ILLEGAL_ADDRESS, cuEventSynchronize(e));
    C_EXPECT(CUDA_ERROR_ILLEGAL_ADDRESS, cuEventQuery(e));
    C_EXPECT(CUDA_ERROR_ILLEGAL_ADDRESS,
             cuLaunchKernel(mark, 1, 1, 1, 1, 1, 1, 0, s, mark_args, NULL));
    C_EXPECT(CUDA_ERROR_ILLEGAL_ADDRESS, cuMemcpyHtoD(d, marks, 16));
    C_EXPECT(CUDA_ERROR_ILLEGAL_ADDRESS, cuMemcpyDtoH(marks, d, 16));
    C_EXPECT(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
    /* Nothing after the fault ran; callbacks were still called, with the error. */
    for (int i = 1; i < 40; i++)
        C_CHECK(marks[i] == 0);
    C_CHECK(host_fn_ran == 0);
    C_CHECK(callback_calls == 1 && callback_status == CUDA_ERROR_ILLEGAL_ADDRESS);
    /* exit(), not return: the report is written at exit. */
    exit(0);
}

static void test_kernel_illegal_access(void **state) {
    (void)state;
    struct scratch s;
    scratch_init(&s);
    const char *env[] = {s.env, NULL};
    run_in_child(child_kernel_fault, NULL, env);
    assert_int_equal(simtest_json_int(s.report, "illegal_accesses"), 1);
    assert_int_equal(simtest_json_int(s.report, "hazards"), 0);
    scratch_done(&s);
}

/* The error appears where the program first waits for the fault, and not before: a call that
 * waits only for earlier work does not report it. */
static int child_fault_ordering(void *arg) {
    (void)arg;
    CUfunction touch, mark;
    CUdeviceptr va;
    CUstream before, faulting;
    default_fault_handlers();
    if (setup_ctx() || load(&touch, &mark) || reserve(&va)) return 1;
    C_OK(cuStreamCreate(&before, CU_STREAM_NON_BLOCKING));
    C_OK(cuStreamCreate(&faulting, CU_STREAM_NON_BLOCKING));
    uint32_t slot = 0, v = 1;
    uint32_t *p = &slot;
    void *mark_args[] = {&p, &v};
    C_OK(cuLaunchKernel(mark, 1, 1, 1, 1, 1, 1, 0, before, mark_args, NULL));
    void *touch_args[] = {&va};
    C_OK(cuLaunchKernel(touch, 1, 1, 1, 1, 1, 1, 0, faulting, touch_args, NULL));
    C_OK(cuStreamSynchronize(before)); /* waited only for work enqueued before the fault */
    C_OK(cuLaunchKernel(mark, 1, 1, 1, 1, 1, 1, 0, before, mark_args, NULL));
    C_EXPECT(CUDA_ERROR_ILLEGAL_ADDRESS, cuStreamSynchronize(faulting));
    C_EXPECT(CUDA_ERROR_ILLEGAL_ADDRESS, cuStreamSynchronize(before));
    return 0;
}

static void test_fault_reported_in_call_order(void **state) {
    (void)state;
    for (int i = 0; i < 5; i++)
        run_in_child(child_fault_ordering, NULL, no_env);
}

/* Destroying a context succeeds after an illegal address: it is how a program recovers. */
static int child_destroy_after_fault(void *arg) {
    (void)arg;
    CUcontext ctx;
    CUfunction touch, mark;
    CUdeviceptr va;
    default_fault_handlers();
    C_OK(cuInit(0));
    C_OK(cuCtxCreate(&ctx, NULL, 0, 0));
    if (load(&touch, &mark) || reserve(&va)) return 1;
    void *args[] = {&va};
    C_OK(cuLaunchKernel(touch, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    C_EXPECT(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
    C_OK(cuCtxDestroy(ctx));
    return 0;
}

static void test_destroy_after_fault(void **state) {
    (void)state;
    run_in_child(child_destroy_after_fault, NULL, no_env);
}

/* ------------------------------------------------------------------ illegal access from a copy */

static int child_copy_fault(void *arg) {
    int async = *(int *)arg;
    CUdeviceptr va;
    CUstream s;
    char src[256];
    default_fault_handlers();
    if (setup_ctx() || reserve(&va)) return 1;
    memset(src, 3, sizeof src);
    C_OK(cuStreamCreate(&s, 0));
    if (async) {
        void *pinned;
        C_OK(cuMemHostAlloc(&pinned, sizeof src, 0));
        C_OK(cuMemcpyHtoDAsync(va + 8192, pinned, sizeof src, s));
        C_EXPECT(CUDA_ERROR_ILLEGAL_ADDRESS, cuStreamSynchronize(s));
    } else {
        /* A synchronous copy waits for itself: it reports its own fault. */
        C_EXPECT(CUDA_ERROR_ILLEGAL_ADDRESS, cuMemcpyHtoD(va + 8192, src, sizeof src));
    }
    C_EXPECT(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
    exit(0);
}

static void test_copy_illegal_access(void **state) {
    (void)state;
    for (int async = 0; async < 2; async++) {
        struct scratch s;
        scratch_init(&s);
        const char *env[] = {s.env, NULL};
        run_in_child(child_copy_fault, &async, env);
        assert_int_equal(simtest_json_int(s.report, "illegal_accesses"), 1);
        scratch_done(&s);
    }
}

/* ------------------------------------------------------------------ the program's own fault */

static int child_own_segv(void *arg) {
    (void)arg;
    CUfunction touch, mark;
    CUdeviceptr va;
    default_fault_handlers();
    if (setup_ctx() || load(&touch, &mark) || reserve(&va)) return 1;
    /* A kernel runs first, so the executor and the fault guard are in place. */
    uint32_t slot = 0, v = 1;
    uint32_t *p = &slot;
    void *args[] = {&p, &v};
    C_OK(cuLaunchKernel(mark, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    C_OK(cuCtxSynchronize());
    /* The host touching an unmapped device address is the program's bug, not the device's. */
    *(volatile uint32_t *)(uintptr_t)va = 1;
    return 0; /* not reached */
}

static void test_own_segv_not_swallowed(void **state) {
    (void)state;
    int status = simtest_run_child(child_own_segv, NULL, no_env);
    assert_int_equal(status, 128 + SIGSEGV);
}

/* ------------------------------------------------------------------ the report */

static int child_clean_program(void *arg) {
    (void)arg;
    CUfunction touch, mark;
    CUdeviceptr d1, d2;
    if (setup_ctx() || load(&touch, &mark)) return 1;
    C_OK(cuMemAlloc(&d1, 3u << 20));
    C_OK(cuMemAlloc(&d2, 1u << 20));
    C_OK(cuMemFree(d2));
    C_OK(cuMemAlloc(&d2, 512u << 10));
    uint32_t v = 9;
    void *args[] = {&d1, &v};
    C_OK(cuLaunchKernel(mark, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    C_OK(cuCtxSynchronize());
    exit(0);
}

static void test_report(void **state) {
    (void)state;
    struct scratch s;
    scratch_init(&s);
    const char *env[] = {s.env, NULL};
    run_in_child(child_clean_program, NULL, env);
    static const char *const keys[] = {"illegal_accesses", "remote_accesses", "hazards",
                                       "managed_faults"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (simtest_json_int(s.report, keys[i]) != 0) fail_msg("%s is not 0", keys[i]);
    assert_true(simtest_json_int(s.report, "virtual_ns") > 0);
    assert_int_equal(simtest_json_int(s.report, "peak_device_bytes"), 4u << 20);
    /* A JSON object, integers unquoted. */
    FILE *f = fopen(s.report, "r");
    assert_non_null(f);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    assert_true(buf[0] == '{');
    assert_non_null(strstr(buf, "\"virtual_ns\": "));
    assert_null(strstr(buf, "\"virtual_ns\": \""));
    assert_non_null(strchr(buf, '}'));
    scratch_done(&s); /* fails if a temporary file was left behind */
}

/* ------------------------------------------------------------------ SIMCUDA_FAIL */

static int child_fail_second_alloc(void *arg) {
    (void)arg;
    CUdeviceptr d;
    if (setup_ctx()) return 1;
    C_OK(cuMemAlloc(&d, 4096));
    C_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&d, 4096));
    C_OK(cuMemAlloc(&d, 4096));
    C_OK(cuMemAlloc(&d, 4096));
    return 0;
}

static int child_fail_code(void *arg) {
    (void)arg;
    CUdeviceptr d;
    CUfunction touch, mark;
    if (setup_ctx() || load(&touch, &mark)) return 1;
    C_EXPECT((CUresult)999, cuMemAlloc(&d, 4096));
    C_OK(cuMemAlloc(&d, 4096));
    uint32_t v = 1;
    void *args[] = {&d, &v};
    C_OK(cuLaunchKernel(mark, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    C_EXPECT(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
             cuLaunchKernel(mark, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    C_OK(cuLaunchKernel(mark, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    C_OK(cuCtxSynchronize());
    return 0;
}

static int child_fail_malformed(void *arg) {
    (void)arg;
    /* The one-line complaint is the device suite's business; keep this one quiet. */
    if (freopen("/dev/null", "w", stderr) == NULL) return 1;
    C_EXPECT(CUDA_ERROR_INVALID_VALUE, cuInit(0));
    return 0;
}

static void test_fail_injection(void **state) {
    (void)state;
    static const char *const second[] = {"SIMCUDA_FAIL=cuMemAlloc_v2:2", NULL};
    run_in_child(child_fail_second_alloc, NULL, second);
    static const char *const code[] = {"SIMCUDA_FAIL=cuMemAlloc_v2:1:999,cuLaunchKernel:2:701",
                                       NULL};
    run_in_child(child_fail_code, NULL, code);
    static const char *const malformed[] = {
        "SIMCUDA_FAIL=cuMemAlloc_v2:first", "SIMCUDA_FAIL=cuMemAlloc_v2",
        "SIMCUDA_FAIL=cuMemAlloc_v2:0", "SIMCUDA_FAIL=cuMemAlloc_v2:1:-3",
        /* Names that are not fault points: refused, never a rule that silently never fires. */
        "SIMCUDA_FAIL=cuMemAlloc:1", "SIMCUDA_FAIL=cuMemMap:1,cuEventRecrod:2",
        "SIMCUDA_FAIL=cumemmap:1", "SIMCUDA_FAIL= cuMemMap:1"};
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        const char *env[] = {malformed[i], NULL};
        run_in_child(child_fail_malformed, NULL, env);
    }
}

/* Every driver call the engine makes is a fault point: each fails once, on its first call, with
 * the code asked for, and works again on the next. */
static int child_fail_engine_points(void *arg) {
    (void)arg;
    const CUresult X = (CUresult)999;
    if (setup_ctx()) return 1;
    CUevent ev;
    CUstream st;
    C_EXPECT(X, cuEventCreate(&ev, 0));
    C_OK(cuEventCreate(&ev, 0));
    C_EXPECT(X, cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    C_OK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    C_EXPECT(X, cuEventRecord(ev, st));
    C_OK(cuEventRecord(ev, st));
    C_EXPECT(X, cuStreamWaitEvent(NULL, ev, 0));
    C_OK(cuStreamWaitEvent(NULL, ev, 0));
    C_EXPECT(X, cuEventQuery(ev));
    C_OK(cuEventQuery(ev));
    C_EXPECT(X, cuEventSynchronize(ev));
    C_OK(cuEventSynchronize(ev));
    C_EXPECT(X, cuStreamSynchronize(st));
    C_OK(cuStreamSynchronize(st));
    C_EXPECT(X, cuCtxSynchronize());
    C_OK(cuCtxSynchronize());
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    size_t gran = 0;
    C_EXPECT(X, cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    C_OK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUdeviceptr va = 0, m = 0;
    C_EXPECT(X, cuMemAddressReserve(&va, gran, 0, 0, 0));
    C_OK(cuMemAddressReserve(&va, gran, 0, 0, 0));
    CUmemGenericAllocationHandle h;
    C_OK(cuMemCreate(&h, gran, &prop, 0));
    C_EXPECT(X, cuMemRelease(h));
    C_OK(cuMemRelease(h));
    C_EXPECT(X, cuMemAddressFree(va, gran));
    C_OK(cuMemAddressFree(va, gran));
    /* cuMemMapPrefix counts only the maps of less than a whole handle. */
    CUmemGenericAllocationHandle big;
    CUdeviceptr pv = 0;
    C_OK(cuMemCreate(&big, 2 * gran, &prop, 0));
    C_OK(cuMemAddressReserve(&pv, 2 * gran, 0, 0, 0));
    C_OK(cuMemMap(pv, 2 * gran, 0, big, 0)); /* the whole handle: not a prefix */
    C_OK(cuMemUnmap(pv, 2 * gran));
    C_EXPECT(X, cuMemMap(pv, gran, 0, big, 0));
    C_OK(cuMemMap(pv, gran, 0, big, 0));
    C_OK(cuMemUnmap(pv, gran));
    C_OK(cuMemRelease(big));
    C_OK(cuMemAddressFree(pv, 2 * gran));
    C_EXPECT(X, cuMemAllocManaged(&m, 1 << 20, CU_MEM_ATTACH_GLOBAL));
    C_OK(cuMemAllocManaged(&m, 1 << 20, CU_MEM_ATTACH_GLOBAL));
    CUmemLocation dev0 = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
    C_EXPECT(X, cuMemPrefetchAsync(m, 1 << 20, dev0, 0, st));
    C_OK(cuMemPrefetchAsync(m, 1 << 20, dev0, 0, st));
    C_EXPECT(X, cuMemFree(m));
    C_OK(cuMemFree(m));
    C_EXPECT(X, cuEventDestroy(ev));
    C_OK(cuEventDestroy(ev));
    return 0;
}

static void test_fail_engine_points(void **state) {
    (void)state;
    static const char *const env[] = {
        "SIMCUDA_FAIL=cuEventCreate:1:999,cuStreamCreate:1:999,cuEventRecord:1:999,"
        "cuStreamWaitEvent:1:999,cuEventQuery:1:999,cuEventSynchronize:1:999,"
        "cuStreamSynchronize:1:999,cuCtxSynchronize:1:999,cuMemGetAllocationGranularity:1:999,"
        "cuMemAddressReserve:1:999,cuMemRelease:1:999,cuMemAddressFree:1:999,"
        "cuMemAllocManaged:1:999,cuMemPrefetchAsync:1:999,cuMemFree:1:999,cuEventDestroy:1:999,"
        "cuMemMapPrefix:1:999",
        NULL};
    run_in_child(child_fail_engine_points, NULL, env);
}

/* ------------------------------------------------------------------ unimplemented entry points */

static int child_not_supported(void *arg) {
    (void)arg;
    if (setup_ctx()) return 1;
    /* Exported, as by NVIDIA's driver, but not simulated: a clean error, never a crash. */
    void *sym = dlsym(RTLD_DEFAULT, "cuArrayCreate_v2");
    C_CHECK(sym != NULL);
    CUresult (*array_create)(CUarray *, const CUDA_ARRAY_DESCRIPTOR *);
    memcpy(&array_create, &sym, sizeof sym);
    CUarray arr;
    CUDA_ARRAY_DESCRIPTOR desc = {
        .Width = 16, .Height = 16, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
    C_EXPECT(CUDA_ERROR_NOT_SUPPORTED, array_create(&arr, &desc));
    /* The same through the resolver, as cudart finds it. */
    void *pfn = NULL;
    CUdriverProcAddressQueryResult status;
    C_OK(cuGetProcAddress("cuArrayCreate", &pfn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status));
    C_CHECK(pfn != NULL && status == CU_GET_PROC_ADDRESS_SUCCESS);
    memcpy(&array_create, &pfn, sizeof pfn);
    C_EXPECT(CUDA_ERROR_NOT_SUPPORTED, array_create(&arr, &desc));
    /* Private export tables are not offered. */
    const void *table = &table;
    CUuuid id;
    memset(&id, 0x42, sizeof id);
    C_EXPECT(CUDA_ERROR_NOT_SUPPORTED, cuGetExportTable(&table, &id));
    C_CHECK(table == NULL);
    /* The simulator still works afterwards. */
    CUdeviceptr d;
    C_OK(cuMemAlloc(&d, 64));
    C_OK(cuMemsetD8(d, 1, 64));
    C_OK(cuCtxSynchronize());
    return 0;
}

static void test_unimplemented_entry_points(void **state) {
    (void)state;
    run_in_child(child_not_supported, NULL, no_env);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_illegal_access),
        cmocka_unit_test(test_fault_reported_in_call_order),
        cmocka_unit_test(test_destroy_after_fault),
        cmocka_unit_test(test_copy_illegal_access),
        cmocka_unit_test(test_own_segv_not_swallowed),
        cmocka_unit_test(test_report),
        cmocka_unit_test(test_fail_injection),
        cmocka_unit_test(test_fail_engine_points),
        cmocka_unit_test(test_unimplemented_entry_points),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
