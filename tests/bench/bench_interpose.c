/* bench_interpose: what libhostoff.so adds to a kernel launch and to an allocation.
 *
 * Run it (one invocation; it re-executes itself without the library and under LD_PRELOAD):
 *
 *   meson test -C BUILD --benchmark --suite bench -v
 *   ninja -C BUILD bench-interpose
 *   BUILD/tests/bench/bench_interpose BUILD/interpose/libhostoff.so BUILD/tests/simcuda
 *
 * Against the simulated driver with SIMCUDA_LAUNCH_NS=0 and SIMCUDA_DATA=sparse (10,000 live 1 MiB
 * buffers reserve address space, not RAM) it measures, in child processes:
 *   - ns per cuLaunchKernel of a kernel with 8 pointer parameters, each an interior pointer into a
 *     different one of the 10,000 live tracked buffers;
 *   - ns per cuMemAlloc(1 MiB) + cuMemFree pair, with the 10,000 buffers live.
 * Children: one without the library, and under LD_PRELOAD one each with HOSTOFF_MODE=off,
 * HOSTOFF_MODE=track, HOSTOFF_MODE=offload (every buffer the engine's, no budget) and offload
 * with HOSTOFF_BUDGET=90% (nothing moves, but the policy sees every launch). Each preloaded child
 * times, batch by batch in alternation, the same calls made straight to the driver's own entry
 * points (found with glibc's dlsym, which the library does not see) and through the library's
 * hooks: the difference is the library's cost, measured in one process with one heap. (Across
 * processes the simulator's own cost moves by more than that: its per-launch mallocs land
 * differently once the library has allocated its records.) Each child reports the median of BATCHES
 * batches; the children run ROUNDS times, interleaved, and the table shows the median of their
 * medians. CPU times drift on shared machines: read the differences and ratios measured side by
 * side, not the absolute figures.
 *
 * Launches go in bursts while the simulator's executor is parked in a host function
 * (cuLaunchHostFunc, not hooked) until the burst is enqueued; the device then drains, untimed.
 * Otherwise the executor competes for the simulator's lock at every launch, and with
 * SIMCUDA_LAUNCH_NS=0 (a virtual clock that stands still) its in-flight list grows with the
 * burst: the figure would be the simulator's bookkeeping, with noise far above tens of ns.
 *
 * Environment: BENCH_ROUNDS (default 5), BENCH_LAUNCHES per batch (default 20000), BENCH_PAIRS
 * per batch (default 2000), BENCH_BUFFERS (default 10000). */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BATCHES    11
#define BURST      1000
#define MIB        (1u << 20)
#define MAX_ROUNDS 50

static unsigned env_uint(const char *name, unsigned def) {
    const char *v = getenv(name);
    if (v == NULL || *v == '\0') return def;
    char *end;
    unsigned long x = strtoul(v, &end, 10);
    return *end == '\0' && x > 0 && x < 100000000 ? (unsigned)x : def;
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#define CK(call)                                                                                   \
    do {                                                                                           \
        CUresult rc_ = (call);                                                                     \
        if (rc_ != CUDA_SUCCESS) {                                                                 \
            fprintf(stderr, "bench_interpose: %s failed: %d\n", #call, (int)rc_);                  \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static const char image[] = "simcuda-module 1\n"
                            "kernel bench_k8 ptr ptr ptr ptr ptr ptr ptr ptr ns=1\n";

/* ------------------------------------------------------------------------------ the child */

/* A gate the device's executor waits at (inside a host function) while a burst is enqueued. */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static bool gate_is_open = true;

static void gate_set(bool open) {
    pthread_mutex_lock(&gate_lock);
    gate_is_open = open;
    pthread_cond_broadcast(&gate_cond);
    pthread_mutex_unlock(&gate_lock);
}

static void CUDA_CB gate_wait(void *unused) {
    (void)unused;
    pthread_mutex_lock(&gate_lock);
    while (!gate_is_open)
        pthread_cond_wait(&gate_cond, &gate_lock);
    pthread_mutex_unlock(&gate_lock);
}

/* One way to reach the driver: its own entry points, or whatever the process binds to. */
struct route {
    PFN_cuLaunchKernel_v4000 launch;
    PFN_cuMemAlloc_v3020 alloc;
    PFN_cuMemFree_v3020 free;
};

static CUfunction fn;
static void *args[8];

static double time_launches(const struct route *r, unsigned launches) {
    uint64_t spent = 0;
    unsigned done = 0;
    for (; done + BURST <= launches; done += BURST) {
        gate_set(false);
        CK(cuLaunchHostFunc(NULL, gate_wait, NULL));
        uint64_t t0 = now_ns();
        for (unsigned i = 0; i < BURST; i++)
            CK(r->launch(fn, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL));
        spent += now_ns() - t0;
        gate_set(true);
        CK(cuCtxSynchronize());
    }
    return (double)spent / done;
}

static double time_pairs(const struct route *r, unsigned pairs) {
    uint64_t t0 = now_ns();
    for (unsigned i = 0; i < pairs; i++) {
        CUdeviceptr x;
        CK(r->alloc(&x, MIB));
        CK(r->free(x));
    }
    return (double)(now_ns() - t0) / pairs;
}

typedef void *(*dlsym_fn)(void *, const char *);

/* The driver's own entry points, past any interposed dlsym. */
static void driver_route(struct route *r) {
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    dlsym_fn real = NULL;
    if (libc != NULL) real = (dlsym_fn)(uintptr_t)dlvsym(libc, "dlsym", "GLIBC_2.34");
    if (libc != NULL && real == NULL)
        real = (dlsym_fn)(uintptr_t)dlvsym(libc, "dlsym", "GLIBC_2.2.5");
    if (real == NULL || cuda == NULL) {
        fprintf(stderr, "bench_interpose: cannot find the driver's own entry points\n");
        exit(1);
    }
    r->launch = (PFN_cuLaunchKernel_v4000)(uintptr_t)real(cuda, "cuLaunchKernel");
    r->alloc = (PFN_cuMemAlloc_v3020)(uintptr_t)real(cuda, "cuMemAlloc_v2");
    r->free = (PFN_cuMemFree_v3020)(uintptr_t)real(cuda, "cuMemFree_v2");
    if (r->launch == NULL || r->alloc == NULL || r->free == NULL) exit(1);
}

static int child(void) {
    unsigned nbuf = env_uint("BENCH_BUFFERS", 10000), launches = env_uint("BENCH_LAUNCHES", 20000),
             pairs = env_uint("BENCH_PAIRS", 2000);
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CK(cuModuleLoadData(&mod, image));
    CK(cuModuleGetFunction(&fn, mod, "bench_k8"));
    if (nbuf < 16) nbuf = 16;
    CUdeviceptr *bufs = malloc(nbuf * sizeof *bufs);
    if (bufs == NULL) return 1;
    for (unsigned i = 0; i < nbuf; i++)
        CK(cuMemAlloc(&bufs[i], MIB));
    /* Eight interior pointers into buffers spread over the registry. */
    static CUdeviceptr p[8];
    for (int i = 0; i < 8; i++) {
        p[i] = bufs[(unsigned)i * (nbuf / 8) + (unsigned)i] + 4096u * (unsigned)(i + 1);
        args[i] = &p[i];
    }
    /* Route 0: the driver's own entry points; route 1: what the program binds to (the hooks
     * under LD_PRELOAD, the driver without). */
    struct route routes[2] = {{0}, {cuLaunchKernel, cuMemAlloc, cuMemFree}};
    driver_route(&routes[0]);
    for (int r = 0; r < 2; r++)
        time_launches(&routes[r], 2 * BURST); /* warm up */

    double launch_ns[2][BATCHES], pair_ns[2][BATCHES];
    for (int b = 0; b < BATCHES; b++)
        for (int r = 0; r < 2; r++)
            launch_ns[r][b] = time_launches(&routes[(b + r) % 2 == 0 ? 0 : 1], launches);
    for (int b = 0; b < BATCHES; b++)
        for (int r = 0; r < 2; r++)
            pair_ns[r][b] = time_pairs(&routes[(b + r) % 2 == 0 ? 0 : 1], pairs);
    /* Batches alternate which route goes first; sort them back by route. */
    double l[2][BATCHES], a[2][BATCHES];
    for (int b = 0; b < BATCHES; b++)
        for (int r = 0; r < 2; r++) {
            int route = (b + r) % 2 == 0 ? 0 : 1;
            l[route][b] = launch_ns[r][b];
            a[route][b] = pair_ns[r][b];
        }
    printf("%.2f %.2f %.2f %.2f\n", median(l[0], BATCHES), median(l[1], BATCHES),
           median(a[0], BATCHES), median(a[1], BATCHES));
    return 0;
}

/* ----------------------------------------------------------------------------- the parent */

enum { NONE, OFF, TRACK, OFFLOAD, BUDGET, NVARIANTS };
static const char *const variant_name[NVARIANTS] = {"without the library", "HOSTOFF_MODE=off",
                                                    "HOSTOFF_MODE=track", "HOSTOFF_MODE=offload",
                                                    "HOSTOFF_MODE=offload HOSTOFF_BUDGET=90%"};

/* Runs this program as a child in one variant: out = launch (driver, bound), pair (driver, bound).
 */
static int run_child(const char *self, const char *lib, const char *simdir, int variant,
                     double out[4]) {
    int fd[2];
    if (pipe(fd) != 0) return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        dup2(fd[1], STDOUT_FILENO);
        close(fd[0]);
        close(fd[1]);
        const char *old = getenv("LD_LIBRARY_PATH");
        char path[8192];
        snprintf(path, sizeof path, "%s%s%s", simdir, old && *old ? ":" : "", old ? old : "");
        setenv("LD_LIBRARY_PATH", path, 1);
        setenv("BENCH_ROLE", "child", 1);
        setenv("SIMCUDA_LAUNCH_NS", "0", 1);
        setenv("SIMCUDA_DATA", "sparse", 1);
        unsetenv("HOSTOFF_REPORT");
        unsetenv("SIMCUDA_REPORT");
        if (variant == NONE) {
            unsetenv("LD_PRELOAD");
        } else {
            setenv("LD_PRELOAD", lib, 1);
            static const char *const mode[NVARIANTS] = {"", "off", "track", "offload", "offload"};
            setenv("HOSTOFF_MODE", mode[variant], 1);
            /* Offload: every 1 MiB buffer is a managed (engine) buffer, all resident: the launch
             * takes the engine's fast path for each of its 8 buffers; a free goes through the
             * engine's stream-ordered free and its device-memory cache. */
            if (variant >= OFFLOAD) setenv("HOSTOFF_MIN_BYTES", "1M", 1);
            /* With a budget (above what the buffers need: nothing moves) the policy runs after
             * every launch: the lookahead policy's step learning and the launch's clock event. */
            if (variant == BUDGET)
                setenv("HOSTOFF_BUDGET", "90%", 1);
            else
                unsetenv("HOSTOFF_BUDGET");
        }
        execl(self, self, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    char buf[256];
    size_t got = 0;
    ssize_t n;
    while (got < sizeof buf - 1 && (n = read(fd[0], buf + got, sizeof buf - 1 - got)) > 0)
        got += (size_t)n;
    close(fd[0]);
    int status;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
    buf[got] = '\0';
    return sscanf(buf, "%lf %lf %lf %lf", &out[0], &out[1], &out[2], &out[3]) == 4 ? 0 : -1;
}

int main(int argc, char **argv) {
    const char *role = getenv("BENCH_ROLE");
    if (role != NULL && strcmp(role, "child") == 0) return child();
    if (argc != 3) {
        fprintf(stderr, "usage: %s LIBHOSTOFF.so SIMCUDA_DIR\n", argv[0]);
        return 2;
    }
    const char *lib = argv[1], *simdir = argv[2];
    if (access(lib, R_OK) != 0 || access(simdir, R_OK) != 0) {
        fprintf(stderr, "bench_interpose: %s or %s: %s\n", lib, simdir, strerror(errno));
        return 2;
    }
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return 2;
    self[n] = '\0';
    unsigned rounds = env_uint("BENCH_ROUNDS", 5);
    if (rounds > MAX_ROUNDS) rounds = MAX_ROUNDS;
    printf("command: %s %s %s\n", argv[0], lib, simdir);
    printf(
        "setup:   SIMCUDA_LAUNCH_NS=0 SIMCUDA_DATA=sparse, %u live 1 MiB buffers, a kernel with 8 "
        "pointer parameters;\n         median of %u interleaved runs x %d batches (%u launches "
        "and %u alloc/free pairs per batch)\n",
        env_uint("BENCH_BUFFERS", 10000), rounds, BATCHES, env_uint("BENCH_LAUNCHES", 20000),
        env_uint("BENCH_PAIRS", 2000));
    static double fig[NVARIANTS][4][MAX_ROUNDS];
    for (unsigned r = 0; r < rounds; r++) {
        for (int v = 0; v < NVARIANTS; v++) {
            double out[4];
            if (run_child(self, lib, simdir, v, out) != 0) {
                fprintf(stderr, "bench_interpose: the run %s failed\n", variant_name[v]);
                return 1;
            }
            for (int k = 0; k < 4; k++)
                fig[v][k][r] = out[k];
        }
    }
    double m[NVARIANTS][4];
    for (int v = 0; v < NVARIANTS; v++)
        for (int k = 0; k < 4; k++)
            m[v][k] = median(fig[v][k], (int)rounds);
    static const char *const what[2] = {"cuLaunchKernel, 8 pointer params",
                                        "cuMemAlloc+cuMemFree 1 MiB"};
    printf(
        "\nns per call; \"driver\": the driver's own entry point, \"hook\": through libhostoff.so, "
        "same process\n");
    printf("%-32s %9s | %-24s | %-24s | %-24s | %-24s\n", "", "no lib", "   HOSTOFF_MODE=off",
           "   HOSTOFF_MODE=track", "   HOSTOFF_MODE=offload", "   offload, budget 90%");
    printf("%-32s %9s | %7s %7s %8s | %7s %7s %8s | %7s %7s %8s | %7s %7s %8s\n", "", "driver",
           "driver", "hook", "added", "driver", "hook", "added", "driver", "hook", "added",
           "driver", "hook", "added");
    for (int k = 0; k < 2; k++) {
        printf("%-32s %9.1f", what[k], m[NONE][2 * k]);
        for (int v = OFF; v < NVARIANTS; v++)
            printf(" | %7.1f %7.1f %8.1f", m[v][2 * k], m[v][2 * k + 1],
                   m[v][2 * k + 1] - m[v][2 * k]);
        printf("\n");
    }
    for (int v = TRACK; v < NVARIANTS; v++) {
        double added = m[v][1] - m[v][0];
        printf("added per launch, %s: %.1f ns (%.2fx the driver's own); target at most 60 ns: %s\n",
               variant_name[v], added, m[v][1] / m[v][0], added <= 60 ? "met" : "NOT met");
    }
    return 0;
}
