/* Child-process harness shared by the simulator's memory, VMM, copy and sparse suites.
 *
 * Each test runs in a forked child that has not initialised the simulator (SIMCUDA_* is read once
 * per process, an illegal access is sticky for the process, and each child writes its own
 * SIMCUDA_REPORT, which the parent then reads). Inside a child, cmocka's assertions would jump
 * back into the copy of the test runner the child inherited, so children check with CHK*, which
 * print the failing line and end the child with status 1. Header-only: each suite is one
 * program. */
#ifndef SIMCHILD_H
#define SIMCHILD_H

#include <dirent.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/mman.h>

#include "simtest.h"

#define CHK(cond)                                                                                  \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            _exit(1);                                                                              \
        }                                                                                          \
    } while (0)
#define CHK_CU(want, call)                                                                         \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != (want)) {                                                                        \
            fprintf(stderr, "%s:%d: %s returned %d, expected %d\n", __FILE__, __LINE__, #call,     \
                    (int)r_, (int)(want));                                                         \
            _exit(1);                                                                              \
        }                                                                                          \
    } while (0)
#define CHK_OK(call) CHK_CU(CUDA_SUCCESS, call)
#define CHK_EQ(a, b)                                                                               \
    do {                                                                                           \
        unsigned long long a_ = (unsigned long long)(a), b_ = (unsigned long long)(b);             \
        if (a_ != b_) {                                                                            \
            fprintf(stderr, "%s:%d: %s is %llu (0x%llx), expected %s = %llu (0x%llx)\n", __FILE__, \
                    __LINE__, #a, a_, a_, #b, b_, b_);                                             \
            _exit(1);                                                                              \
        }                                                                                          \
    } while (0)

/* |a - b| <= tol, for virtual times read back through cuEventElapsedTime's float milliseconds. */
#define CHK_NEAR(a, b, tol)                                                                        \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (a_ - b_ > (long long)(tol) || b_ - a_ > (long long)(tol)) {                            \
            fprintf(stderr, "%s:%d: %s is %lld, expected %s = %lld +- %lld\n", __FILE__, __LINE__, \
                    #a, a_, #b, b_, (long long)(tol));                                             \
            _exit(1);                                                                              \
        }                                                                                          \
    } while (0)

/* ------------------------------------------------------------------ running children */

static char report_dir[256];
/* A MAP_SHARED page: children hand values (addresses they were given) back to the parent. */
static volatile uint64_t *g_shared;

struct child_fn {
    int (*fn)(void);
};

static int child_entry(void *arg) {
    int code = ((struct child_fn *)arg)->fn();
    exit(code); /* exit, not _exit: the simulator writes its report from an atexit handler */
}

static void report_path(char *out, size_t n, const char *name) {
    snprintf(out, n, "%s/%s.json", report_dir, name);
}

/* Runs fn in a fresh child with SIMCUDA_REPORT=<dir>/<name>.json plus env (NULL-ended, may be
 * NULL); fails the test unless the child exits 0. */
static void run_child(const char *name, int (*fn)(void), const char *const *env) {
    char path[512], assign[600];
    report_path(path, sizeof path, name);
    unlink(path);
    snprintf(assign, sizeof assign, "SIMCUDA_REPORT=%s", path);
    const char *all[16];
    size_t n = 0;
    all[n++] = assign;
    for (const char *const *e = env; e != NULL && *e != NULL && n < 15; e++)
        all[n++] = *e;
    all[n] = NULL;
    struct child_fn c = {fn};
    int status = simtest_run_child(child_entry, &c, all);
    if (status != 0) fail_msg("child '%s' exited with status %d", name, status);
}

static long long report(const char *name, const char *key) {
    char path[512];
    report_path(path, sizeof path, name);
    long long v = simtest_json_int(path, key);
    if (v < 0) fail_msg("report %s has no key %s", path, key);
    return v;
}

static void remove_reports(void) {
    DIR *d = opendir(report_dir);
    if (d == NULL) return;
    struct dirent *e;
    char path[600];
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", report_dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(report_dir);
}

/* ------------------------------------------------------------------ helpers for children */

/* Each suite uses some of these helpers. */
#define MAYBE_UNUSED __attribute__((unused))

MAYBE_UNUSED static CUcontext ctx_up(void) {
    CUdevice dev;
    CUcontext ctx;
    CHK_OK(cuInit(0));
    CHK_OK(cuDeviceGet(&dev, 0));
    CHK_OK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHK_OK(cuCtxSetCurrent(ctx));
    return ctx;
}

/* Kernels: bodies are the functions below (found by dlsym); nobody_* have no body, only a
 * duration, and their pointer parameter is what hazard detection sees. */
static const char image[] = "simcuda-module 1\n"
                            "kernel mk_fill ptr u32 u64 ns=2000\n"
                            "kernel mk_hash ptr u64\n"
                            "kernel mk_touch ptr\n"
                            "kernel mk_mark\n"
                            "kernel mk_block\n"
                            "kernel nobody_use ptr u64 ns=param:1\n"
                            "kernel nobody_wait u64 ns=param:0\n";

MAYBE_UNUSED static CUfunction kfn(const char *name) {
    static CUmodule mod;
    if (mod == NULL) CHK_OK(cuModuleLoadData(&mod, image));
    CUfunction f;
    CHK_OK(cuModuleGetFunction(&f, mod, name));
    return f;
}

MAYBE_UNUSED static void launch(const char *name, CUstream s, void **args) {
    CHK_OK(cuLaunchKernel(kfn(name), 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
}

MAYBE_UNUSED static uint64_t fnv(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

MAYBE_UNUSED static void pattern(void *p, size_t n, uint32_t seed) {
    unsigned char *b = p;
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        b[i] = (unsigned char)x;
    }
}

static _Atomic uint64_t g_hash;
static atomic_int g_marked, g_go;

void mk_fill(void **params) {
    uint32_t *p, v;
    uint64_t n;
    memcpy(&p, params[0], sizeof p);
    memcpy(&v, params[1], sizeof v);
    memcpy(&n, params[2], sizeof n);
    for (uint64_t i = 0; i < n; i++)
        p[i] = v + (uint32_t)i;
}

void mk_hash(void **params) {
    const void *p;
    uint64_t n;
    memcpy(&p, params[0], sizeof p);
    memcpy(&n, params[1], sizeof n);
    atomic_store(&g_hash, fnv(p, n));
}

void mk_touch(void **params) {
    const volatile unsigned char *p;
    memcpy(&p, params[0], sizeof p);
    (void)p[100];
}

void mk_mark(void **params) {
    (void)params;
    atomic_store(&g_marked, 1);
}

/* Holds the executor (wall clock) until the host says go: makes "queued, not yet run" certain. */
void mk_block(void **params) {
    (void)params;
    while (!atomic_load(&g_go))
        usleep(200);
}

MAYBE_UNUSED static void fill(CUdeviceptr p, uint32_t v, uint64_t words, CUstream s) {
    void *args[] = {&p, &v, &words};
    launch("mk_fill", s, args);
}

MAYBE_UNUSED static uint64_t device_hash(CUdeviceptr p, uint64_t n, CUstream s) {
    void *args[] = {&p, &n};
    launch("mk_hash", s, args);
    CHK_OK(cuStreamSynchronize(s));
    return atomic_load(&g_hash);
}

MAYBE_UNUSED static void use_for(CUdeviceptr p, uint64_t ns, CUstream s) {
    void *args[] = {&p, &ns};
    launch("nobody_use", s, args);
}

MAYBE_UNUSED static void wait_for(uint64_t ns, CUstream s) {
    void *args[] = {&ns};
    launch("nobody_wait", s, args);
}

/* Whether the host may read addr (from /proc/self/maps: PROT_NONE ranges show "---p"). */
MAYBE_UNUSED static bool host_readable(uint64_t addr) {
    FILE *f = fopen("/proc/self/maps", "r");
    CHK(f != NULL);
    char line[512];
    bool readable = false;
    while (fgets(line, sizeof line, f) != NULL) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && addr >= lo && addr < hi) {
            readable = perms[0] == 'r';
            break;
        }
    }
    fclose(f);
    return readable;
}

MAYBE_UNUSED static size_t free_bytes(void) {
    size_t fr, total;
    CHK_OK(cuMemGetInfo(&fr, &total));
    return fr;
}

#define MiB (1ull << 20)
#define GiB (1ull << 30)

/* The parent's setup: a directory for the children's reports and the shared page. */
static bool suite_init(const char *suite) {
    const char *tmp = getenv("TMPDIR");
    snprintf(report_dir, sizeof report_dir, "%s/simtest-%s-XXXXXX",
             tmp != NULL && *tmp != '\0' ? tmp : "/tmp", suite);
    if (mkdtemp(report_dir) == NULL) {
        perror("mkdtemp");
        return false;
    }
    void *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) return false;
    g_shared = shared;
    return true;
}

#endif
