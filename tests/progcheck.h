/* Checks for the test programs that run under LD_PRELOAD (tests/integration, tests/engine): a
 * failed check prints file, line and what failed, and ends the program with status 1, which the
 * harness reports. Only the CUresult's number is printed: some programs reach the driver through
 * dlopen and cannot call cuGetErrorName. */
#ifndef HOSTOFF_TESTS_PROGCHECK_H
#define HOSTOFF_TESTS_PROGCHECK_H

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

static inline void progcheck_fail_rc(CUresult rc, const char *what, const char *file, int line) {
    fprintf(stderr, "%s:%d: %s failed: CUresult %d\n", file, line, what, (int)rc);
    exit(1);
}

/* A driver call that must succeed. */
#define CK(call)                                                                                   \
    do {                                                                                           \
        CUresult ck_rc_ = (call);                                                                  \
        if (ck_rc_ != CUDA_SUCCESS) progcheck_fail_rc(ck_rc_, #call, __FILE__, __LINE__);          \
    } while (0)

/* A condition that must hold. */
#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* cuInit, then device `ordinal`'s primary context made current; returns the context. */
static inline CUcontext progcheck_primary(int ordinal) {
    CUdevice dev;
    CUcontext ctx;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, ordinal));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    return ctx;
}

#endif
