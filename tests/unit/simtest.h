/* Shared helpers for the simulator's CMocka suites. Header-only: each suite is one program. */
#ifndef SIMTEST_H
#define SIMTEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <cuda.h>

#include "simcuda.h"

/* Asserts a driver call returns `want`, naming the call on failure. */
#define CU_EXPECT(want, call)                                                                      \
    do {                                                                                           \
        CUresult rc_ = (call);                                                                     \
        if (rc_ != (want)) fail_msg("%s returned %d, expected %d", #call, (int)rc_, (int)(want));  \
    } while (0)
#define CU_OK(call) CU_EXPECT(CUDA_SUCCESS, call)

/* Checks inside a forked child: cmocka's assertions would jump back into the parent's test frame
 * and carry on running the parent's tests in the child, so a child reports the failing line on
 * stderr and returns a code below 128 from its function instead. */
#define C_CHECK(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            return 100;                                                                            \
        }                                                                                          \
    } while (0)
#define C_EXPECT(want, call)                                                                       \
    do {                                                                                           \
        CUresult rc_ = (call);                                                                     \
        if (rc_ != (want)) {                                                                       \
            fprintf(stderr, "%s:%d: %s returned %d, expected %d\n", __FILE__, __LINE__, #call,     \
                    (int)rc_, (int)(want));                                                        \
            return 101;                                                                            \
        }                                                                                          \
    } while (0)
#define C_OK(call) C_EXPECT(CUDA_SUCCESS, call)

/* cuInit, device 0's primary context made current. Returns the context. */
static inline CUcontext simtest_ctx(void) {
    CUdevice dev;
    CUcontext ctx;
    CU_OK(cuInit(0));
    CU_OK(cuDeviceGet(&dev, 0));
    CU_OK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CU_OK(cuCtxSetCurrent(ctx));
    return ctx;
}

static inline int simtest_group_setup(void **state) {
    (void)state;
    simtest_ctx();
    return 0;
}

/* Runs fn in a forked child with the given environment assignments ("NAME=value", NULL-ended)
 * and returns its exit status (or 128+signal). The simulator reads SIMCUDA_* once per process,
 * so every test of a configuration runs in a fresh child that has not called cuInit. */
static inline int simtest_run_child(int (*fn)(void *), void *arg, const char *const *env) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        for (const char *const *e = env; e != NULL && *e != NULL; e++)
            putenv((char *)*e);
        int code = fn(arg);
        /* exit, not _exit: the simulator writes SIMCUDA_REPORT from an atexit handler. */
        exit(code);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
}

/* Reads the integer value of "key" from a flat JSON object in a file; -1 when absent. */
static inline long long simtest_json_int(const char *path, const char *key) {
    FILE *f = fopen(path, "r");
    if (f == NULL) return -1;
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(buf, pat);
    if (p == NULL) return -1;
    return strtoll(p + strlen(pat), NULL, 10);
}

/* Loads a text module image into the current context and returns the named function. */
static inline CUfunction simtest_function(const char *image, const char *name) {
    CUmodule mod;
    CUfunction f;
    CU_OK(cuModuleLoadData(&mod, image));
    CU_OK(cuModuleGetFunction(&f, mod, name));
    return f;
}

#endif
