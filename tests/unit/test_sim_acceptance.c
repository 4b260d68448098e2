/* Acceptance: a program written only against cuda.h and the simulator's contract (docs/simcuda.md)
 * loads an image, allocates, launches, copies back, reserves and maps VMM memory, touches an
 * unmapped address, and sees what the contract promises. */
#include "simtest.h"

#include <stdint.h>

void acc_scale(void **params) {
    float *v = *(float **)params[0];
    float factor = *(float *)params[1];
    uint32_t n = *(uint32_t *)params[2];
    for (uint32_t i = 0; i < n; i++)
        v[i] *= factor;
}

void acc_poke(void **params) {
    volatile uint32_t *p = *(uint32_t **)params[0];
    *p = 0xdeadbeef;
}

static const char image[] = "simcuda-module 1\n"
                            "kernel acc_scale ptr f32 u32 ns=5000\n"
                            "kernel acc_poke ptr\n";

static void allocate_launch_copy_back(void **state) {
    (void)state;
    simtest_ctx();
    CUfunction scale = simtest_function(image, "acc_scale");
    enum { N = 1 << 16 };
    static float host[N];
    for (int i = 0; i < N; i++)
        host[i] = (float)i;
    CUdeviceptr d;
    CU_OK(cuMemAlloc(&d, sizeof host));
    CU_OK(cuMemcpyHtoD(d, host, sizeof host));
    float factor = 3.0f;
    uint32_t n = N;
    void *args[] = {&d, &factor, &n};
    uint64_t before = simcuda_now_ns();
    CU_OK(cuLaunchKernel(scale, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    /* The launch returns before the kernel's 5 us of virtual time have passed. */
    assert_true(simcuda_now_ns() - before < 5000);
    CU_OK(cuMemcpyDtoH(host, d, sizeof host));
    for (int i = 0; i < N; i++)
        assert_true(host[i] == (float)i * 3.0f);
    assert_true(simcuda_now_ns() - before >= 5000);
    CU_OK(cuMemFree(d));
}

static int vmm_and_illegal_access(void *arg) {
    (void)arg;
    simtest_ctx();
    CUfunction poke = simtest_function(image, "acc_poke");
    size_t gran = 0;
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CU_OK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    if (gran != 2u << 20) return 10;
    CUdeviceptr va;
    CU_OK(cuMemAddressReserve(&va, 2 * gran, 0, 0, 0));
    CUmemGenericAllocationHandle h;
    CU_OK(cuMemCreate(&h, gran, &prop, 0));
    CU_OK(cuMemMap(va, gran, 0, h, 0));
    CUmemAccessDesc rw = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CU_OK(cuMemSetAccess(va, gran, &rw, 1));
    void *args[] = {&va};
    CU_OK(cuLaunchKernel(poke, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    uint32_t back = 0;
    CU_OK(cuMemcpyDtoH(&back, va, sizeof back));
    if (back != 0xdeadbeef) return 11;
    /* The second granule is reserved but not mapped: touching it is an illegal access, reported
     * by the next synchronising call and from then on (sticky). */
    CUdeviceptr unmapped = va + gran;
    void *bad[] = {&unmapped};
    CU_OK(cuLaunchKernel(poke, 1, 1, 1, 1, 1, 1, 0, NULL, bad, NULL));
    if (cuCtxSynchronize() != CUDA_ERROR_ILLEGAL_ADDRESS) return 12;
    if (cuCtxSynchronize() != CUDA_ERROR_ILLEGAL_ADDRESS) return 13;
    return 0;
}

static void vmm_then_unmapped_touch(void **state) {
    (void)state;
    char report[] = "/tmp/simcuda-acceptance-XXXXXX";
    int fd = mkstemp(report);
    assert_true(fd >= 0);
    close(fd);
    char env[128];
    snprintf(env, sizeof env, "SIMCUDA_REPORT=%s", report);
    const char *const vars[] = {env, NULL};
    assert_int_equal(simtest_run_child(vmm_and_illegal_access, NULL, vars), 0);
    assert_int_equal(simtest_json_int(report, "illegal_accesses"), 1);
    assert_int_equal(simtest_json_int(report, "hazards"), 0);
    assert_true(simtest_json_int(report, "virtual_ns") > 0);
    assert_int_equal(simtest_json_int(report, "peak_device_bytes"), 2 << 20);
    unlink(report);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(vmm_then_unmapped_touch),
        cmocka_unit_test(allocate_launch_copy_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
