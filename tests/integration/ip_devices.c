/* ip_devices: two simulated devices (SIMCUDA_DEVICES=2). Buffers on each device's primary
 * context, kernels on each, a peer copy between them; one stream-ordered allocation on device
 * 1's stream made while device 0's context is current. Data checked bit-exactly.
 *
 * stdout: "data:" lines and "expect device ID ORDINAL" lines for the report. */
#include "iptest.h"

/* k_fill(ptr p, u32 n, u32 v): p[i] = v * i */
void k_fill(void **p) {
    uint32_t *d = *(uint32_t **)p[0];
    uint32_t n = *(uint32_t *)p[1], v = *(uint32_t *)p[2];
    for (uint32_t i = 0; i < n; i++)
        d[i] = v * i;
}

static const char image[] = "simcuda-module 1\nkernel k_fill ptr u32 u32 ns=1000\n";
#define WORDS 4096u

static void fill(CUfunction f, CUdeviceptr p, uint32_t v, CUstream s) {
    uint32_t n = WORDS;
    void *args[] = {&p, &n, &v};
    CK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
}

static void check(const char *what, CUdeviceptr p, uint32_t v) {
    uint32_t h[WORDS];
    CK(cuMemcpyDtoH(h, p, sizeof h));
    for (uint32_t i = 0; i < WORDS; i++)
        EXPECT(h[i] == v * i, "%s[%u] = %u", what, i, h[i]);
    printf("data: %s %016llx\n", what, (unsigned long long)ip_hash(h, sizeof h));
}

int main(void) {
    CUcontext c0 = ip_primary(0);
    int count = 0;
    CK(cuDeviceGetCount(&count));
    EXPECT(count == 2, "expected SIMCUDA_DEVICES=2, found %d devices", count);
    CUdevice d1;
    CUcontext c1;
    CK(cuDeviceGet(&d1, 1));
    CK(cuDevicePrimaryCtxRetain(&c1, d1));

    CUmodule m0, m1;
    CUfunction f0, f1;
    CK(cuModuleLoadData(&m0, image));
    CK(cuModuleGetFunction(&f0, m0, "k_fill"));
    CUdeviceptr a0, b0, a1, b1, async1;
    CK(cuMemAlloc(&a0, WORDS * 4)); /* id 1, device 0 */
    CK(cuCtxSetCurrent(c1));
    CK(cuModuleLoadData(&m1, image));
    CK(cuModuleGetFunction(&f1, m1, "k_fill"));
    CK(cuMemAlloc(&a1, WORDS * 4)); /* id 2, device 1 */
    CUstream s1;
    CK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CK(cuCtxSetCurrent(c0));
    CK(cuMemAlloc(&b0, WORDS * 4));              /* id 3, device 0 */
    CK(cuMemAllocAsync(&async1, WORDS * 4, s1)); /* id 4, device 1: the stream's device */
    CK(cuCtxSetCurrent(c1));
    CK(cuMemAlloc(&b1, WORDS * 4)); /* id 5, device 1 */

    CK(cuCtxSetCurrent(c0));
    fill(f0, a0, 3, NULL);
    CK(cuCtxSetCurrent(c1));
    fill(f1, a1, 5, NULL);
    fill(f1, async1, 7, s1);
    CK(cuStreamSynchronize(s1));
    CK(cuCtxSynchronize());
    CK(cuCtxSetCurrent(c0));
    CK(cuCtxSynchronize());
    CK(cuMemcpyPeer(b1, c1, a0, c0, WORDS * 4)); /* device 0 -> device 1 */
    CK(cuMemcpyPeer(b0, c0, a1, c1, WORDS * 4)); /* device 1 -> device 0 */
    check("a0", a0, 3);
    check("b0", b0, 5);
    CK(cuCtxSetCurrent(c1));
    check("a1", a1, 5);
    check("b1", b1, 3);
    check("async1", async1, 7);
    CK(cuMemFreeAsync(async1, s1));
    CK(cuStreamSynchronize(s1));
    printf("expect device 1 0\nexpect device 2 1\nexpect device 3 0\nexpect device 4 1\n"
           "expect device 5 1\n");
    return 0;
}
