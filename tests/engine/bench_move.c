/* bench_move: what moving a buffer costs the residency engine, and what an allocation costs.
 *
 *   bench_move LIBHOSTOFF SIMCUDA_DIR     (meson test --benchmark --suite engine -v, or
 *                                          ninja -C BUILD bench-move)
 *
 * It re-executes itself in child processes under LD_PRELOAD=LIBHOSTOFF against the simulated
 * driver in SIMCUDA_DIR, with SIMCUDA_DATA=sparse (buffers reserve address space, not RAM):
 *
 *  1. For buffers of 2, 64 and 512 MiB, with HOSTOFF_BUDGET at twice the size (two buffers fit)
 *     and HOSTOFF_MIN_BYTES=1M (so 2 MiB buffers are managed),
 *     in the simulator's virtual time (deterministic: the same figures on any machine):
 *       evict    allocating a third buffer: the least recently used one is copied out and
 *                remapped to host memory before the allocation returns;
 *       restore  a kernel launch on the evicted buffer while there is room: it is copied back and
 *                remapped before the launch returns (a demand restore);
 *       switch   a launch on the evicted buffer while the budget is full: one buffer out, this
 *                one in (what a workload cycling over more than its budget pays per miss).
 *     Each is printed as GB/s (bytes moved per virtual ns) and as a share of the modelled link
 *     (SIMCUDA_H2D_GBPS / SIMCUDA_D2H_GBPS, 55 GB/s each by default). A switch moves the buffer's
 *     bytes once each way, its share is of one direction's rate: 100% means the two copies ran
 *     back to back at the link's rate; more than 100% would mean they overlapped.
 *  2. Wall-clock ns per cuMemAlloc(4 MiB) + cuMemFree pair: through the library (a managed
 *     buffer: address range from the engine's pool, stream-ordered free) and straight to the
 *     simulator's own entry points (found with glibc's dlsym, which the library does not see), in
 *     alternating batches in one process; the median of the batches. CPU times drift on shared
 *     machines: read the ratio.
 *
 * Environment: BENCH_MOVE_PAIRS per batch (default 2000), BENCH_MOVE_REPEAT moves per figure
 * (default 4). */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <simcuda.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MIB     (1ull << 20)
#define BATCHES 11

#define CK(call)                                                                                   \
    do {                                                                                           \
        CUresult ck_rc_ = (call);                                                                  \
        if (ck_rc_ != CUDA_SUCCESS) {                                                              \
            fprintf(stderr, "bench_move: %s failed: %d\n", #call, (int)ck_rc_);                    \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static const char image[] = "simcuda-module 1\nkernel bench_touch ptr ns=1000\n";
static CUfunction touch_fn;

static unsigned env_uint(const char *name, unsigned def) {
    const char *v = getenv(name);
    return v != NULL && *v != '\0' ? (unsigned)strtoul(v, NULL, 10) : def;
}

static void setup(void) {
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CK(cuModuleLoadData(&mod, image));
    CK(cuModuleGetFunction(&touch_fn, mod, "bench_touch"));
}

static void touch(CUdeviceptr p) {
    void *args[] = {&p};
    CK(cuLaunchKernel(touch_fn, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
}

/* Where the bytes of p are: true when a device-located handle backs it. */
static bool on_device(CUdeviceptr p) {
    /* Asked of the simulator: cuMemRetainAllocationHandle would pin the buffer. */
    return simcuda_where((const void *)(uintptr_t)p) != 'H';
}

/* Child: the three moves for buffers of `mib` MiB (HOSTOFF_BUDGET = 2 * mib MiB). Prints
 * "move MIB EVICT_NS RESTORE_NS SWITCH_NS" (virtual ns, the mean over the repeats). */
static int child_move(unsigned mib) {
    setup();
    uint64_t bytes = mib * MIB, evict = 0, restore = 0, sw = 0;
    unsigned repeat = env_uint("BENCH_MOVE_REPEAT", 4);
    CUdeviceptr buf[3];
    CK(cuMemAlloc(&buf[0], bytes));
    CK(cuMemAlloc(&buf[1], bytes));
    touch(buf[0]);
    touch(buf[1]);
    CK(cuCtxSynchronize());
    for (unsigned r = 0; r < repeat; r++) {
        /* evict: a third allocation pushes the least recently used buffer out. */
        uint64_t t0 = simcuda_now_ns();
        CK(cuMemAlloc(&buf[2], bytes));
        evict += simcuda_now_ns() - t0;
        int out = on_device(buf[0]) ? 1 : 0;
        if (on_device(buf[out])) {
            fprintf(stderr, "bench_move: nothing was evicted (is HOSTOFF_BUDGET set?)\n");
            return 1;
        }
        touch(buf[2]);
        CK(cuCtxSynchronize());
        CK(cuMemFree(buf[2]));
        CK(cuCtxSynchronize());
        /* restore: the evicted buffer comes back into the room the free left. */
        t0 = simcuda_now_ns();
        touch(buf[out]);
        restore += simcuda_now_ns() - t0;
        CK(cuCtxSynchronize());
        if (!on_device(buf[out])) {
            fprintf(stderr, "bench_move: the buffer was not restored\n");
            return 1;
        }
    }
    /* switch: three buffers over a budget of two, touched in turn: each launch misses. */
    CK(cuMemAlloc(&buf[2], bytes));
    touch(buf[2]);
    CK(cuCtxSynchronize());
    int next = 0;
    for (int i = 0; i < 3 && on_device(buf[next]); i++)
        next = (next + 1) % 3;
    for (unsigned r = 0; r < repeat; r++) {
        uint64_t t0 = simcuda_now_ns();
        touch(buf[next]);
        sw += simcuda_now_ns() - t0;
        CK(cuCtxSynchronize());
        next = (next + 1) % 3; /* the least recently used one: evicted by this launch */
    }
    for (int i = 0; i < 3; i++)
        CK(cuMemFree(buf[i]));
    printf("move %u %llu %llu %llu\n", mib, (unsigned long long)(evict / repeat),
           (unsigned long long)(restore / repeat), (unsigned long long)(sw / repeat));
    return 0;
}

static uint64_t wall_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

typedef void *(*dlsym_fn)(void *, const char *);

static double pairs_ns(PFN_cuMemAlloc_v3020 alloc, PFN_cuMemFree_v3020 release, unsigned n) {
    uint64_t t0 = wall_ns();
    for (unsigned i = 0; i < n; i++) {
        CUdeviceptr p;
        CK(alloc(&p, 4 * MIB));
        CK(release(p));
    }
    return (double)(wall_ns() - t0) / n;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Child: "pairs ENGINE_NS DRIVER_NS". */
static int child_pairs(void) {
    setup();
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    dlsym_fn real = NULL;
    if (libc != NULL) real = (dlsym_fn)(uintptr_t)dlvsym(libc, "dlsym", "GLIBC_2.34");
    if (libc != NULL && real == NULL)
        real = (dlsym_fn)(uintptr_t)dlvsym(libc, "dlsym", "GLIBC_2.2.5");
    if (real == NULL || cuda == NULL) {
        fprintf(stderr, "bench_move: cannot find the driver's own entry points\n");
        return 1;
    }
    PFN_cuMemAlloc_v3020 drv_alloc = (PFN_cuMemAlloc_v3020)(uintptr_t)real(cuda, "cuMemAlloc_v2");
    PFN_cuMemFree_v3020 drv_free = (PFN_cuMemFree_v3020)(uintptr_t)real(cuda, "cuMemFree_v2");
    if (drv_alloc == NULL || drv_free == NULL) return 1;
    unsigned n = env_uint("BENCH_MOVE_PAIRS", 2000);
    double eng[BATCHES], drv[BATCHES];
    pairs_ns(cuMemAlloc, cuMemFree, n); /* warm: the engine's pools fill */
    pairs_ns(drv_alloc, drv_free, n);
    for (int b = 0; b < BATCHES; b++) {
        eng[b] = pairs_ns(cuMemAlloc, cuMemFree, n);
        drv[b] = pairs_ns(drv_alloc, drv_free, n);
    }
    qsort(eng, BATCHES, sizeof eng[0], cmp_double);
    qsort(drv, BATCHES, sizeof drv[0], cmp_double);
    printf("pairs %.0f %.0f\n", eng[BATCHES / 2], drv[BATCHES / 2]);
    return 0;
}

/* Parent: runs `self` with args under the library; returns its first stdout line. */
static int run_child(const char *self, const char *lib, const char *simdir, char *const args[],
                     const char *budget, char *line, size_t cap) {
    int fd[2];
    if (pipe(fd) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        char ldpath[4096];
        const char *old = getenv("LD_LIBRARY_PATH");
        snprintf(ldpath, sizeof ldpath, "%s%s%s", simdir, old != NULL ? ":" : "",
                 old != NULL ? old : "");
        setenv("LD_LIBRARY_PATH", ldpath, 1);
        setenv("LD_PRELOAD", lib, 1);
        setenv("SIMCUDA_DATA", "sparse", 1);
        unsetenv("SIMCUDA_REPORT");
        unsetenv("SIMCUDA_FAIL");
        unsetenv("HOSTOFF_REPORT");
        setenv("HOSTOFF_MIN_BYTES", "1M", 1); /* the 2 MiB buffers are the engine's too */
        unsetenv("HOSTOFF_MODE");
        unsetenv("HOSTOFF_BACKEND");
        if (budget != NULL)
            setenv("HOSTOFF_BUDGET", budget, 1);
        else
            unsetenv("HOSTOFF_BUDGET");
        char *argv[8] = {(char *)self};
        for (int i = 0; args[i] != NULL && i < 6; i++)
            argv[i + 1] = args[i];
        execv(self, argv);
        _exit(127);
    }
    close(fd[1]);
    FILE *f = fdopen(fd[0], "r");
    line[0] = '\0';
    if (f == NULL || fgets(line, (int)cap, f) == NULL) line[0] = '\0';
    if (f != NULL) fclose(f);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 && line[0] != '\0' ? 0 : -1;
}

static double link_gbps(const char *var) {
    const char *v = getenv(var);
    return v != NULL && *v != '\0' ? strtod(v, NULL) : 55.0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--move") == 0) return child_move((unsigned)atoi(argv[2]));
    if (argc == 2 && strcmp(argv[1], "--pairs") == 0) return child_pairs();
    if (argc != 3) {
        fprintf(stderr, "usage: bench_move LIBHOSTOFF SIMCUDA_DIR\n");
        return 2;
    }
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return 1;
    self[len] = '\0';
    double d2h = link_gbps("SIMCUDA_D2H_GBPS"), h2d = link_gbps("SIMCUDA_H2D_GBPS");
    printf("bench_move: moves in virtual time (SIMCUDA_DATA=sparse; link %.0f GB/s to host, "
           "%.0f GB/s to device)\n",
           d2h, h2d);
    printf("%8s  %22s  %22s  %26s\n", "buffer", "evict GB/s (% link)", "restore GB/s (% link)",
           "switch GB/s (% one way)");
    static const unsigned sizes[] = {2, 64, 512};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char mib[16], budget[32], line[256];
        snprintf(mib, sizeof mib, "%u", sizes[i]);
        snprintf(budget, sizeof budget, "%uM", 2 * sizes[i]);
        char *args[] = {"--move", mib, NULL};
        unsigned long long ev, re, sw;
        unsigned got;
        if (run_child(self, argv[1], argv[2], args, budget, line, sizeof line) != 0 ||
            sscanf(line, "move %u %llu %llu %llu", &got, &ev, &re, &sw) != 4) {
            fprintf(stderr, "bench_move: the %u MiB child failed\n", sizes[i]);
            return 1;
        }
        double bytes = (double)sizes[i] * MIB;
        double gev = bytes / (double)ev, gre = bytes / (double)re, gsw = 2 * bytes / (double)sw;
        printf("%4u MiB  %12.1f (%5.1f%%)  %12.1f (%5.1f%%)  %16.1f (%5.1f%%)\n", sizes[i], gev,
               100 * gev / d2h, gre, 100 * gre / h2d, gsw, 100 * gsw / (d2h < h2d ? d2h : h2d));
        printf("          virtual ns: evict %llu, restore %llu, switch %llu\n", ev, re, sw);
    }
    char line[256];
    char *args[] = {"--pairs", NULL};
    double eng, drv;
    if (run_child(self, argv[1], argv[2], args, NULL, line, sizeof line) != 0 ||
        sscanf(line, "pairs %lf %lf", &eng, &drv) != 2) {
        fprintf(stderr, "bench_move: the allocation child failed\n");
        return 1;
    }
    printf("cuMemAlloc(4 MiB) + cuMemFree, wall clock, median of %d batches of %u:\n", BATCHES,
           env_uint("BENCH_MOVE_PAIRS", 2000));
    printf("  through the engine (managed buffer) %8.0f ns\n", eng);
    printf("  straight to the simulator           %8.0f ns   (engine / simulator: %.2fx)\n", drv,
           eng / drv);
    return 0;
}
