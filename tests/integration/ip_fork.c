/* ip_fork: a process that initialised CUDA forks. The child calls driver functions, gets the
 * errors CUDA gives after fork (the simulator: CUDA_ERROR_NOT_INITIALIZED), and exits cleanly;
 * the parent goes on using its buffers and checks their data.
 *
 * stdout: "parent PID", "child PID" (the harness finds their reports by pid) and what the child's
 * calls returned. */
#include "iptest.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

/* k_add(ptr p, u32 n, u32 v): p[i] += v */
void k_add(void **p) {
    uint32_t *d = *(uint32_t **)p[0];
    uint32_t n = *(uint32_t *)p[1], v = *(uint32_t *)p[2];
    for (uint32_t i = 0; i < n; i++)
        d[i] += v;
}

static const char image[] = "simcuda-module 1\nkernel k_add ptr u32 u32 ns=1000\n";
#define WORDS 2048u

static void launch_add(CUfunction f, CUdeviceptr p, uint32_t v) {
    uint32_t n = WORDS;
    void *args[] = {&p, &n, &v};
    CK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL));
}

static int child(CUfunction f, CUdeviceptr a) {
    CUdeviceptr p = 0;
    uint32_t n = WORDS, v = 1;
    void *args[] = {&a, &n, &v};
    CUresult r_alloc = cuMemAlloc(&p, 4096);
    CUresult r_launch = cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL);
    CUresult r_sync = cuCtxSynchronize();
    CUresult r_free = cuMemFree(a);
    CUresult r_init = cuInit(0);
    printf("child: alloc %d launch %d sync %d free %d init %d\n", (int)r_alloc, (int)r_launch,
           (int)r_sync, (int)r_free, (int)r_init);
    int bad = r_alloc == CUDA_SUCCESS || r_launch == CUDA_SUCCESS || r_sync == CUDA_SUCCESS ||
              r_free == CUDA_SUCCESS || r_init == CUDA_SUCCESS;
    fflush(stdout);
    return bad;
}

int main(void) {
    ip_primary(0);
    CUmodule mod;
    CUfunction f;
    CK(cuModuleLoadData(&mod, image));
    CK(cuModuleGetFunction(&f, mod, "k_add"));
    CUdeviceptr a, b;
    CK(cuMemAlloc(&a, WORDS * 4));
    CK(cuMemAlloc(&b, WORDS * 4));
    CK(cuMemsetD32(a, 10, WORDS));
    CK(cuMemsetD32(b, 20, WORDS));
    launch_add(f, a, 1);
    CK(cuCtxSynchronize());
    printf("parent %ld\n", (long)getpid());
    fflush(stdout);

    pid_t pid = fork();
    EXPECT(pid >= 0, "fork failed");
    if (pid == 0) exit(child(f, a));
    printf("child %ld\n", (long)pid);
    fflush(stdout);
    /* The child must neither crash nor hang. */
    int status = 0;
    for (int waited = 0;; waited++) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        EXPECT(w >= 0, "waitpid failed");
        if (w == pid) break;
        if (waited == 3000) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            EXPECT(0, "the child hung for 30 s");
        }
        usleep(10000);
    }
    EXPECT(WIFEXITED(status), "the child died (signal %d)",
           WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    EXPECT(WEXITSTATUS(status) == 0, "the child exited with %d", WEXITSTATUS(status));

    /* The parent's CUDA state is intact. */
    launch_add(f, a, 2);
    launch_add(f, b, 3);
    uint32_t ha[WORDS], hb[WORDS];
    CK(cuMemcpyDtoH(ha, a, sizeof ha));
    CK(cuMemcpyDtoH(hb, b, sizeof hb));
    for (uint32_t i = 0; i < WORDS; i++) {
        EXPECT(ha[i] == 13, "a[%u] = %u", i, ha[i]);
        EXPECT(hb[i] == 23, "b[%u] = %u", i, hb[i]);
    }
    CK(cuMemFree(b));
    printf("data: parent ok\n");
    printf("expect counts allocs 2 frees 1 launches 3 copies 2\n");
    printf("expect uses 1 4\nexpect uses 2 3\n");
    return 0;
}
