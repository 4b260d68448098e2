/* bench_move: what moving a buffer costs the residency engine, and what an allocation costs.
 *
 *   bench_move LIBHOSTOFF SIMCUDA_DIR     (meson test --benchmark --suite engine -v, or
 *                                          ninja -C BUILD bench-move)
 *
 * It re-executes itself in child processes under LD_PRELOAD=LIBHOSTOFF against the simulated
 * driver in SIMCUDA_DIR, with SIMCUDA_DATA=sparse (buffers reserve address space, not RAM):
 *
 *  1. Single moves, for buffers of 2, 16, 64 and 512 MiB, with HOSTOFF_BUDGET at twice the size
 *     (two buffers fit) and HOSTOFF_MIN_BYTES=1M (so 2 MiB buffers are managed), in the
 *     simulator's virtual time under its cost table (docs/simcuda.md, "Costs": every driver call
 *     charged its published cost; deterministic: the same figures on any machine):
 *       evict    allocating a third buffer: the least recently used one is copied out and
 *                remapped to host memory before the allocation returns;
 *       restore  a kernel launch on the evicted buffer while there is room: it is copied back and
 *                remapped before the launch returns (a demand restore).
 *     Each is printed as GB/s (bytes moved per virtual ns) and as a share of the modelled link in
 *     its direction (SIMCUDA_D2H_GBPS / SIMCUDA_H2D_GBPS, 55 GB/s each by default). The
 *     application waits for the remap too, so a single move pays every fixed cost in full.
 *     A single eviction cannot reach the link's rate under the published costs whatever the
 *     engine does: the address must map the host copy before the move ends (an unseen use would
 *     otherwise fault), and a host-located cuMemSetAccess alone is ~98 us + ~9 us/MiB against
 *     the copy's ~19 us/MiB at 55 GB/s, so at most ~67% at any size (docs/simcuda.md, "Costs").
 *  1b. Streams: eight buffers evicted together (one allocation needs the room of all eight) and
 *     restored together (one kernel uses all eight): the engine's throughput, where the single
 *     move is its latency; the remap of one move overlaps the copies queued behind it.
 *  2. Trains: eight buffers of each size over a budget of four, a kernel on four of them, then
 *     the other four: each launch needs four in and four out. Printed as GB/s each way and as a
 *     share of the physical limit of moving E = four buffers each way (max(E/d2h, E/h2d,
 *     2E/duplex), the design's bound): the remaps of one move overlap the copies of the next.
 *  3. Driver calls per move by kind, counted by the simulator (simcuda_calls) over the rounds
 *     after the first (the pools are full then): the steady state.
 *  4. Wall-clock ns per cuMemAlloc(4 MiB) + cuMemFree pair, and per cuMemAllocAsync +
 *     cuMemFreeAsync pair on one stream (what PyTorch's cudaMallocAsync backend makes per tensor):
 * through the library (a managed buffer: address range from the engine's pool, stream-ordered free)
 * and straight to the simulator's own entry points (found with glibc's dlsym, which the library
 * does not see), in alternating batches in one process; the median of the batches. CPU times drift
 * on shared machines: read the ratio.
 *
 * Environment: BENCH_MOVE_PAIRS per batch (default 2000), BENCH_MOVE_REPEAT moves per figure
 * (default 4), BENCH_MOVE_BACKEND (HOSTOFF_BACKEND of the children; default: the engine's). */
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

static const char image[] = "simcuda-module 1\nkernel bench_touch ptr ns=1000\n"
                            "kernel bench_touch4 ptr ptr ptr ptr ns=1000\n"
                            "kernel bench_touch8 ptr ptr ptr ptr ptr ptr ptr ptr ns=1000\n";
static CUfunction touch_fn, touch4_fn, touch8_fn;

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
    CK(cuModuleGetFunction(&touch4_fn, mod, "bench_touch4"));
    CK(cuModuleGetFunction(&touch8_fn, mod, "bench_touch8"));
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

/* Driver calls by kind, as the simulator charges them (simcuda_calls): each kind sums its
 * device and host-located rows. */
static const char *const kinds[] = {"cuMemCreate",   "cuMemRelease",  "cuMemHostAlloc",
                                    "cuMemMap",      "cuMemUnmap",    "cuMemSetAccess",
                                    "cuMemcpyAsync", "cuEventRecord", "cuStreamWaitEvent"};
#define NKINDS (sizeof kinds / sizeof kinds[0])

static void calls_now(uint64_t out[NKINDS]) {
    char key[64];
    for (size_t k = 0; k < NKINDS; k++) {
        snprintf(key, sizeof key, "%s.device", kinds[k]);
        out[k] = simcuda_calls(key);
        snprintf(key, sizeof key, "%s.host", kinds[k]);
        out[k] += simcuda_calls(key);
    }
}

static void print_calls(const char *tag, const uint64_t a[NKINDS], const uint64_t b[NKINDS],
                        unsigned moves) {
    printf("calls %s %u", tag, moves);
    for (size_t k = 0; k < NKINDS; k++)
        printf(" %llu", (unsigned long long)(b[k] - a[k]));
    printf("\n");
}

static void touch4(CUdeviceptr p[4]) {
    void *args[] = {&p[0], &p[1], &p[2], &p[3]};
    CK(cuLaunchKernel(touch4_fn, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
}

/* Child, single moves of buffers of `mib` MiB (HOSTOFF_BUDGET = 2 * mib MiB): evict (a third
 * allocation pushes the least recently used buffer out), restore (a launch on it once the third
 * is freed). The first two rounds fill the pools (each of the two buffers is evicted once); the
 * figures and the calls are those of the rounds after. Prints "move MIB EVICT_NS RESTORE_NS"
 * (virtual ns, the mean) and a calls line. */
static int child_move(unsigned mib) {
    setup();
    uint64_t bytes = mib * MIB, evict = 0, restore = 0, before[NKINDS], after[NKINDS];
    unsigned repeat = env_uint("BENCH_MOVE_REPEAT", 4);
    CUdeviceptr buf[3];
    CK(cuMemAlloc(&buf[0], bytes));
    CK(cuMemAlloc(&buf[1], bytes));
    touch(buf[0]);
    touch(buf[1]);
    CK(cuCtxSynchronize());
    for (unsigned r = 0; r < 2 + repeat; r++) {
        if (r == 2) calls_now(before);
        uint64_t t0 = simcuda_now_ns();
        CK(cuMemAlloc(&buf[2], bytes));
        if (r >= 2) evict += simcuda_now_ns() - t0;
        int out = on_device(buf[0]) ? 1 : 0;
        if (on_device(buf[out])) {
            fprintf(stderr, "bench_move: nothing was evicted (is HOSTOFF_BUDGET set?)\n");
            return 1;
        }
        touch(buf[2]);
        CK(cuCtxSynchronize());
        CK(cuMemFree(buf[2]));
        CK(cuCtxSynchronize());
        t0 = simcuda_now_ns();
        touch(buf[out]);
        if (r >= 2) restore += simcuda_now_ns() - t0;
        CK(cuCtxSynchronize());
        if (!on_device(buf[out])) {
            fprintf(stderr, "bench_move: the buffer was not restored\n");
            return 1;
        }
    }
    calls_now(after);
    for (int i = 0; i < 2; i++)
        CK(cuMemFree(buf[i]));
    printf("move %u %llu %llu\n", mib, (unsigned long long)(evict / repeat),
           (unsigned long long)(restore / repeat));
    print_calls("single", before, after, 2 * repeat);
    return 0;
}

/* Child, trains of moves: eight buffers of `mib` MiB under a budget of four (HOSTOFF_BUDGET =
 * 4 * mib MiB), one kernel on four of them, then on the other four, and so on: each launch needs
 * four buffers in and four out, which the engine moves as trains (the evictions together, the
 * restores as room appears), so copies run back to back in both directions. The first two launches
 * fill the pools; the figures are those of the launches after. Prints "train MIB NS" (virtual ns
 * per launch, the mean) and a calls line. */
static void touch8(CUdeviceptr p[8]) {
    void *args[] = {&p[0], &p[1], &p[2], &p[3], &p[4], &p[5], &p[6], &p[7]};
    CK(cuLaunchKernel(touch8_fn, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
}

/* Child, streams of moves in one direction: eight buffers of `mib` MiB fill the budget
 * (HOSTOFF_BUDGET = 8 * mib MiB); allocating one buffer of eight times the size evicts all eight
 * at once (the copies queue back to back, and the remap of one overlaps the copies still queued
 * behind it); once that buffer is freed, a kernel on all eight restores them together. This is
 * how a policy moves when it plans (a batch of evictions, a batch of prefetches): the link's share
 * here is the engine's throughput, where a single move is its latency. Prints "stream MIB
 * EVICT_NS RESTORE_NS" (virtual ns for the eight, the mean). */
static int child_stream(unsigned mib) {
    setup();
    uint64_t bytes = mib * MIB, evict = 0, restore = 0;
    unsigned repeat = env_uint("BENCH_MOVE_REPEAT", 4);
    CUdeviceptr buf[8], big;
    for (int i = 0; i < 8; i++)
        CK(cuMemAlloc(&buf[i], bytes));
    touch8(buf);
    CK(cuCtxSynchronize());
    for (unsigned r = 0; r < 1 + repeat; r++) {
        uint64_t t0 = simcuda_now_ns();
        CK(cuMemAlloc(&big, 8 * bytes));
        if (r >= 1) evict += simcuda_now_ns() - t0;
        for (int i = 0; i < 8; i++) {
            if (on_device(buf[i])) {
                fprintf(stderr, "bench_move: the stream did not evict all eight buffers\n");
                return 1;
            }
        }
        touch(big);
        CK(cuCtxSynchronize());
        CK(cuMemFree(big));
        CK(cuCtxSynchronize());
        t0 = simcuda_now_ns();
        touch8(buf);
        if (r >= 1) restore += simcuda_now_ns() - t0;
        CK(cuCtxSynchronize());
        for (int i = 0; i < 8; i++) {
            if (!on_device(buf[i])) {
                fprintf(stderr, "bench_move: the stream did not restore all eight buffers\n");
                return 1;
            }
        }
    }
    for (int i = 0; i < 8; i++)
        CK(cuMemFree(buf[i]));
    printf("stream %u %llu %llu\n", mib, (unsigned long long)(evict / repeat),
           (unsigned long long)(restore / repeat));
    return 0;
}

static int child_train(unsigned mib) {
    setup();
    uint64_t bytes = mib * MIB, ns = 0, before[NKINDS], after[NKINDS];
    unsigned repeat = env_uint("BENCH_MOVE_REPEAT", 4);
    CUdeviceptr buf[8];
    for (int i = 0; i < 8; i++)
        CK(cuMemAlloc(&buf[i], bytes));
    for (unsigned r = 0; r < 2 + 2 * repeat; r++) {
        if (r == 2) calls_now(before);
        CUdeviceptr *group = &buf[4 * (r % 2)];
        uint64_t t0 = simcuda_now_ns();
        touch4(group);
        if (r >= 2) ns += simcuda_now_ns() - t0;
        CK(cuCtxSynchronize());
        for (int i = 0; i < 4; i++) {
            if (!on_device(group[i]) || on_device(buf[4 * ((r + 1) % 2) + i])) {
                fprintf(stderr, "bench_move: the train did not move all eight buffers\n");
                return 1;
            }
        }
    }
    calls_now(after);
    for (int i = 0; i < 8; i++)
        CK(cuMemFree(buf[i]));
    printf("train %u %llu\n", mib, (unsigned long long)(ns / (2 * repeat)));
    print_calls("train", before, after, 16 * repeat);
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

/* The same pairs stream-ordered, as PyTorch's cudaMallocAsync backend makes them: one
 * cuMemAllocAsync and one cuMemFreeAsync per tensor, on one stream. */
static double async_pairs_ns(PFN_cuMemAllocAsync_v11020 alloc, PFN_cuMemFreeAsync_v11020 release,
                             CUstream s, unsigned n) {
    uint64_t t0 = wall_ns();
    for (unsigned i = 0; i < n; i++) {
        CUdeviceptr p;
        CK(alloc(&p, 4 * MIB, s));
        CK(release(p, s));
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
    PFN_cuMemAllocAsync_v11020 drv_alloc_async =
        (PFN_cuMemAllocAsync_v11020)(uintptr_t)real(cuda, "cuMemAllocAsync");
    PFN_cuMemFreeAsync_v11020 drv_free_async =
        (PFN_cuMemFreeAsync_v11020)(uintptr_t)real(cuda, "cuMemFreeAsync");
    if (drv_alloc_async == NULL || drv_free_async == NULL) return 1;
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    async_pairs_ns(cuMemAllocAsync, cuMemFreeAsync, s, n);
    async_pairs_ns(drv_alloc_async, drv_free_async, s, n);
    uint64_t creates = simcuda_calls("cuMemCreate.device"), vt = simcuda_now_ns();
    async_pairs_ns(cuMemAllocAsync, cuMemFreeAsync, s, n);
    creates = simcuda_calls("cuMemCreate.device") - creates;
    vt = simcuda_now_ns() - vt;
    for (int b = 0; b < BATCHES; b++) {
        eng[b] = async_pairs_ns(cuMemAllocAsync, cuMemFreeAsync, s, n);
        drv[b] = async_pairs_ns(drv_alloc_async, drv_free_async, s, n);
    }
    CK(cuStreamSynchronize(s));
    qsort(eng, BATCHES, sizeof eng[0], cmp_double);
    qsort(drv, BATCHES, sizeof drv[0], cmp_double);
    printf("async %.0f %.0f %.3f %.0f\n", eng[BATCHES / 2], drv[BATCHES / 2], (double)creates / n,
           (double)vt / n);
    return 0;
}

/* Parent: runs `self` with args under the library; returns its stdout (up to cap - 1 bytes). */
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
        const char *backend = getenv("BENCH_MOVE_BACKEND");
        if (backend != NULL)
            setenv("HOSTOFF_BACKEND", backend, 1);
        else
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
    size_t got = f != NULL ? fread(line, 1, cap - 1, f) : 0;
    line[got] = '\0';
    if (f != NULL) fclose(f);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 && line[0] != '\0' ? 0 : -1;
}

/* The figures of one "calls TAG MOVES n..." line of a child's output. */
static bool parse_calls(const char *out, const char *tag, unsigned *moves,
                        unsigned long long n[NKINDS]) {
    char want[32];
    snprintf(want, sizeof want, "calls %s ", tag);
    const char *p = strstr(out, want);
    if (p == NULL) return false;
    p += strlen(want);
    char *end;
    *moves = (unsigned)strtoul(p, &end, 10);
    for (size_t k = 0; k < NKINDS; k++) {
        p = end;
        n[k] = strtoull(p, &end, 10);
        if (end == p) return false;
    }
    return *moves > 0;
}

static void print_calls_row(unsigned mib, const char *what, unsigned moves,
                            const unsigned long long n[NKINDS]) {
    /* kinds[]: create, release, host alloc, map, unmap, set access, copies, records, waits */
    double per = (double)moves;
    printf("%4u MiB  %-8s %6.2f %7.2f %9.2f %5.2f %5.2f %9.2f   %8.2f   %6.2f %7.2f %5.2f\n", mib,
           what, n[0] / per, n[1] / per, n[2] / per, n[3] / per, n[4] / per, n[5] / per,
           (n[0] + n[1] + n[3] + n[4] + n[5]) / per, n[6] / per, n[7] / per, n[8] / per);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--move") == 0) return child_move((unsigned)atoi(argv[2]));
    if (argc == 3 && strcmp(argv[1], "--train") == 0) return child_train((unsigned)atoi(argv[2]));
    if (argc == 3 && strcmp(argv[1], "--stream") == 0) return child_stream((unsigned)atoi(argv[2]));
    if (argc == 2 && strcmp(argv[1], "--pairs") == 0) return child_pairs();
    if (argc != 3) {
        fprintf(stderr, "usage: bench_move LIBHOSTOFF SIMCUDA_DIR\n");
        return 2;
    }
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return 1;
    self[len] = '\0';
    /* The link the children run under, as the simulator resolves it (its cost file and
     * SIMCUDA_* variables): this process runs on the simulator too. */
    double link[4];
    if (cuInit(0) != CUDA_SUCCESS || !simcuda_link_gbps(link)) {
        fprintf(stderr,
                "bench_move: the simulated driver did not start (its SIMCUDA_* variables)\n");
        return 1;
    }
    double h2d = link[0], d2h = link[1], duplex = link[2] + link[3];
    printf(
        "bench_move: moves in virtual time under the simulator's cost table (SIMCUDA_DATA=sparse;"
        " link %.0f GB/s to host, %.0f to device, %.0f both ways at once)\n",
        d2h, h2d, duplex);
    static const unsigned sizes[] = {2, 16, 64, 512};
    enum { NSIZES = sizeof sizes / sizeof sizes[0] };
    static char out[3][NSIZES][4096];
    for (size_t i = 0; i < NSIZES; i++) {
        char mib[16], budget[32];
        snprintf(mib, sizeof mib, "%u", sizes[i]);
        snprintf(budget, sizeof budget, "%uM", 2 * sizes[i]);
        char *margs[] = {"--move", mib, NULL};
        if (run_child(self, argv[1], argv[2], margs, budget, out[0][i], sizeof out[0][i]) != 0) {
            fprintf(stderr, "bench_move: the %u MiB move child failed\n", sizes[i]);
            return 1;
        }
        snprintf(budget, sizeof budget, "%uM", 4 * sizes[i]);
        char *targs[] = {"--train", mib, NULL};
        if (run_child(self, argv[1], argv[2], targs, budget, out[1][i], sizeof out[1][i]) != 0) {
            fprintf(stderr, "bench_move: the %u MiB train child failed\n", sizes[i]);
            return 1;
        }
        snprintf(budget, sizeof budget, "%uM", 8 * sizes[i]);
        char *sargs[] = {"--stream", mib, NULL};
        if (run_child(self, argv[1], argv[2], sargs, budget, out[2][i], sizeof out[2][i]) != 0) {
            fprintf(stderr, "bench_move: the %u MiB stream child failed\n", sizes[i]);
            return 1;
        }
    }
    printf("\nsingle moves: the application waits for each (an allocation evicts one buffer; a "
           "launch restores it)\n");
    printf("%8s  %22s  %22s  %24s\n", "buffer", "evict GB/s (% link)", "restore GB/s (% link)",
           "beyond the copy (us)");
    for (size_t i = 0; i < NSIZES; i++) {
        unsigned got;
        unsigned long long ev, re;
        if (sscanf(out[0][i], "move %u %llu %llu", &got, &ev, &re) != 3) return 1;
        double bytes = (double)sizes[i] * MIB, gev = bytes / (double)ev, gre = bytes / (double)re;
        /* What the move took beyond its copy at the link's rate: the remap's driver calls and the
         * waits, which a single move cannot hide. */
        printf("%4u MiB  %12.1f (%5.1f%%)  %12.1f (%5.1f%%)  %11.0f %11.0f\n", sizes[i], gev,
               100 * gev / d2h, gre, 100 * gre / h2d, ((double)ev - bytes / d2h) / 1e3,
               ((double)re - bytes / h2d) / 1e3);
    }
    printf("\nstreams: 8 buffers leave together, then come back together (a planned batch)\n");
    printf("%8s  %22s  %22s\n", "buffer", "evict GB/s (% link)", "restore GB/s (% link)");
    for (size_t i = 0; i < NSIZES; i++) {
        unsigned got;
        unsigned long long ev, re;
        if (sscanf(out[2][i], "stream %u %llu %llu", &got, &ev, &re) != 3) return 1;
        double bytes = 8.0 * sizes[i] * MIB, gev = bytes / (double)ev, gre = bytes / (double)re;
        printf("%4u MiB  %12.1f (%5.1f%%)  %12.1f (%5.1f%%)   [virtual ns: %llu, %llu]\n", sizes[i],
               gev, 100 * gev / d2h, gre, 100 * gre / h2d, ev, re);
    }
    printf("\ntrains: 8 buffers over a budget of 4; each launch needs 4 in and 4 out (E = 4 "
           "buffers each way)\n");
    printf("%8s  %14s  %14s  %16s  %12s\n", "buffer", "evict GB/s", "restore GB/s",
           "launch (virt ns)", "% of limit");
    for (size_t i = 0; i < NSIZES; i++) {
        unsigned got;
        unsigned long long ns;
        if (sscanf(out[1][i], "train %u %llu", &got, &ns) != 2) return 1;
        double e = 4.0 * sizes[i] * MIB, rate = e / (double)ns;
        /* The physical limit of moving E each way (docs/ARCHITECTURE.md, DESIGN "Measuring"). */
        double limit = e / d2h;
        if (e / h2d > limit) limit = e / h2d;
        if (2 * e / duplex > limit) limit = 2 * e / duplex;
        printf("%4u MiB  %14.1f  %14.1f  %16llu  %11.1f%%\n", sizes[i], rate, rate, ns,
               100 * limit / (double)ns);
    }
    printf("\ndriver calls per move, steady state (after the first round fills the pools)\n");
    printf("%8s  %-8s %6s %7s %9s %5s %5s %9s   %8s   %6s %7s %5s\n", "buffer", "moves", "create",
           "release", "hostalloc", "map", "unmap", "setaccess", "VMM/move", "copies", "records",
           "waits");
    for (size_t i = 0; i < NSIZES; i++) {
        unsigned moves;
        unsigned long long n[NKINDS];
        if (!parse_calls(out[0][i], "single", &moves, n)) return 1;
        print_calls_row(sizes[i], "single", moves, n);
        if (!parse_calls(out[1][i], "train", &moves, n)) return 1;
        print_calls_row(sizes[i], "train", moves, n);
    }
    char line[256];
    char *args[] = {"--pairs", NULL};
    double eng, drv, aeng, adrv, acreates, avirt;
    if (run_child(self, argv[1], argv[2], args, NULL, line, sizeof line) != 0 ||
        sscanf(line, "pairs %lf %lf async %lf %lf %lf %lf", &eng, &drv, &aeng, &adrv, &acreates,
               &avirt) != 6) {
        fprintf(stderr, "bench_move: the allocation child failed\n");
        return 1;
    }
    printf("\ncuMemAlloc(4 MiB) + cuMemFree, wall clock, median of %d batches of %u:\n", BATCHES,
           env_uint("BENCH_MOVE_PAIRS", 2000));
    printf("  through the engine (managed buffer) %8.0f ns\n", eng);
    printf("  straight to the simulator           %8.0f ns   (engine / simulator: %.2fx)\n", drv,
           eng / drv);
    printf("cuMemAllocAsync(4 MiB) + cuMemFreeAsync on one stream (PyTorch's cudaMallocAsync "
           "backend, one pair per tensor), same batches:\n");
    printf("  through the engine (managed buffer) %8.0f ns\n", aeng);
    printf("  straight to the simulator           %8.0f ns   (engine / simulator: %.2fx)\n", adrv,
           aeng / adrv);
    printf("  through the engine, per pair: %.3f device cuMemCreate, %.0f ns of virtual time\n",
           acreates, avirt);
    return 0;
}
