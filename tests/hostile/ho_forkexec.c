/* ho_forkexec [child]: a traced process that allocates and launches, then forks a child that
 * execs this program again ("child": it uses CUDA too, under the same HOSTOFF_TRACE with no %p),
 * waits for it, and then allocates and launches more. The parent's trace must hold all of its
 * own lines, whole; the child's goes elsewhere (PATH.PID). Prints "parent PID" / "child PID". */
#include <cuda.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CK(call)                                                                                   \
    do {                                                                                           \
        CUresult rc_ = (call);                                                                     \
        if (rc_ != CUDA_SUCCESS) {                                                                 \
            fprintf(stderr, "ho_forkexec: %s failed: %d\n", #call, (int)rc_);                      \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static const char image[] = "simcuda-module 1\nkernel k_use ptr ns=1000\n";

/* n allocations of 2 MiB, each used by one launch, then freed. */
static void work(CUfunction k, int n) {
    for (int i = 0; i < n; i++) {
        CUdeviceptr d;
        CK(cuMemAlloc(&d, 2 << 20));
        void *params[] = {&d};
        CK(cuLaunchKernel(k, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
        CK(cuCtxSynchronize());
        CK(cuMemFree(d));
    }
}

int main(int argc, char **argv) {
    bool child = argc > 1 && strcmp(argv[1], "child") == 0;
    CUdevice dev;
    CUcontext ctx;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CUmodule mod;
    CUfunction k;
    CK(cuModuleLoadData(&mod, image));
    CK(cuModuleGetFunction(&k, mod, "k_use"));
    if (child) {
        work(k, 3);
        printf("child %ld\n", (long)getpid());
        return 0;
    }
    work(k, 5);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
        execl("/proc/self/exe", argv[0], "child", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "ho_forkexec: the child failed (status %d)\n", status);
        return 1;
    }
    work(k, 7);
    printf("parent %ld\n", (long)getpid());
    return 0;
}
