/* truth_prog: the program of issue 16, as a new user writes one against the driver API: NBUF
 * buffers of MIB MiB each, STEPS training-like steps that run a kernel over every buffer
 * forwards then backwards (2 ms each, virtual time on the simulator), a device synchronisation
 * and a step mark (hostoff_mark_step, when the preloaded library exports it) after each.
 *
 *   truth_prog NBUF MIB STEPS [hang]
 *
 * hang: after the last step, without a final synchronisation, print "ready" and wait for a
 * signal (the job a time limit or the OOM killer ends). Exit status 3 when an allocation fails
 * (the status of the driver's error is printed). */
#include <cuda.h>
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CK(call)                                                                                   \
    do {                                                                                           \
        CUresult rc_ = (call);                                                                     \
        if (rc_ != CUDA_SUCCESS) {                                                                 \
            fprintf(stderr, "truth_prog: %s failed: %d\n", #call, (int)rc_);                       \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static const char image[] = "simcuda-module 1\n"
                            "kernel touch ptr ns=2000000\n";

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: truth_prog NBUF MIB STEPS [hang]\n");
        return 2;
    }
    int nbuf = atoi(argv[1]), steps = atoi(argv[3]);
    size_t bytes = (size_t)atoll(argv[2]) << 20;
    bool hang = argc > 4 && strcmp(argv[4], "hang") == 0;
    CUdevice dev;
    CUcontext ctx;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CUmodule mod;
    CUfunction touch;
    CK(cuModuleLoadData(&mod, image));
    CK(cuModuleGetFunction(&touch, mod, "touch"));
    void (*mark)(void) = (void (*)(void))(uintptr_t)dlsym(RTLD_DEFAULT, "hostoff_mark_step");
    CUdeviceptr *buf = calloc((size_t)nbuf, sizeof *buf);
    for (int i = 0; i < nbuf; i++) {
        CUresult rc = cuMemAlloc(&buf[i], bytes);
        if (rc != CUDA_SUCCESS) {
            printf("alloc %d failed: %d\n", i, (int)rc);
            return 3;
        }
    }
    for (int s = 0; s < steps; s++) {
        if (mark != NULL) mark();
        for (int k = 0; k < 2 * nbuf; k++) {
            int i = k < nbuf ? k : 2 * nbuf - 1 - k;
            void *params[] = {&buf[i]};
            CK(cuLaunchKernel(touch, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
        }
        if (!hang || s + 1 < steps) CK(cuCtxSynchronize());
    }
    if (hang) {
        printf("ready\n");
        fflush(stdout);
        for (;;)
            pause();
    }
    for (int i = 0; i < nbuf; i++)
        CK(cuMemFree(buf[i]));
    printf("done\n");
    return 0;
}
