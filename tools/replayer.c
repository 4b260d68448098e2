/* hostoff-replayer [--mark-steps] TRACE: performs a trace's calls on the CUDA driver, for
 * hostoff replay.
 *
 * hostoff replay runs it under LD_PRELOAD=libhostoff.so against the simulated driver in sparse
 * mode; it reaches the driver through dlopen("libcuda.so.1") and dlsym, the route libcudart
 * uses, so every call below goes through the library's hooks. Each trace line becomes:
 *   alloc   cuMemAllocAsync on its stream when it has "s", cuMemAllocManaged when "managed",
 *           else cuMemAlloc; ids map to the pointers
 *   free    cuMemFreeAsync on its stream when it has "s", else cuMemFree
 *   launch  one kernel taking its duration and a pointer to each used buffer:
 *           hostoff_replay_N(u64 ns, ptr x N), declared ns=param:0 in a simcuda module image
 *   copy    h2d / d2h between the buffer and one pinned host staging buffer; d2d between its two
 *           buffers (destination first); with one buffer, or "memset", a memset; "sync": the
 *           synchronous entry points. Bytes are capped at the buffers' sizes.
 *   sync    cuStreamSynchronize with "s", else cuCtxSynchronize
 *   wait    cuEventRecord on stream "on", cuStreamWaitEvent on stream "s"
 *   step    the host time is noted; hostoff_mark_step() is called when the preloaded library
 *           exports it
 * A recording without markers may name in its first line the lines where its steps began
 * ("recorder": {"step_lines": [...]}, trace_read.h): the host time is noted when the replay
 * reaches each such step's first event (after pacing the host time before it, just before its
 * call), and nothing else happens: the library is not told, its policy must find the steps
 * itself, as in a job that never marks them.
 * With --mark-steps (hostoff replay --mark-steps), each such step start is also a step marker:
 * hostoff_mark_step() is called there, as a "step" line just before the step's first event
 * would be, and the time after it is both the step's start and its marker's time, so the two
 * sets of steps share their boundaries exactly.
 * Stream 0 is the legacy default stream; others are created non-blocking, in order of first use.
 *
 * Host pacing: the host spends, between consecutive calls, what the traced host spent outside
 * the calls: t[i] - t[i-1] - d[i-1] (d: the time spent inside call i-1, 0 when not recorded), so
 * syncs and stalls are simulated afresh rather than copied. The simulator advances its host clock
 * only per call (SIMCUDA_LAUNCH_NS) and by waits, so that time is spent by launching, through the
 * driver's own entry points (not seen by the library), a kernel of the owed length on a private
 * stream and waiting for it. Owed time below four call costs accumulates until it is worth a wait.
 *
 * Prints one JSON line on stdout: the events replayed, the simulated host time at each step
 * marker ("step_marks_ns", --mark-steps' included), at each recorded step's first event
 * ("step_starts_ns") and at the end ("end_ns", after a final cuCtxSynchronize). */
#include "cli.h"
#include "u64map.h"
#include "trace_read.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_USES 128

#if defined(__aarch64__)
#define GLIBC_BASE "GLIBC_2.17"
#else
#define GLIBC_BASE "GLIBC_2.2.5"
#endif

static struct {
    PFN_cuInit_v2000 init;
    PFN_cuDeviceGet_v2000 device_get;
    PFN_cuDevicePrimaryCtxRetain_v7000 ctx_retain;
    PFN_cuCtxSetCurrent_v4000 ctx_set;
    PFN_cuModuleLoadData_v2000 module_load;
    PFN_cuModuleGetFunction_v2000 get_function;
    PFN_cuStreamCreate_v2000 stream_create;
    PFN_cuEventCreate_v2000 event_create;
    PFN_cuEventRecord_v2000 event_record;
    PFN_cuStreamWaitEvent_v3020 wait_event;
    PFN_cuMemAlloc_v3020 alloc;
    PFN_cuMemAllocAsync_v11020 alloc_async;
    PFN_cuMemAllocManaged_v6000 alloc_managed;
    PFN_cuMemFree_v3020 free;
    PFN_cuMemFreeAsync_v11020 free_async;
    PFN_cuMemHostAlloc_v2020 host_alloc;
    PFN_cuLaunchKernel_v4000 launch;
    PFN_cuMemcpyHtoDAsync_v3020 h2d_async;
    PFN_cuMemcpyDtoHAsync_v3020 d2h_async;
    PFN_cuMemcpyDtoDAsync_v3020 d2d_async;
    PFN_cuMemcpyHtoD_v3020 h2d;
    PFN_cuMemcpyDtoH_v3020 d2h;
    PFN_cuMemcpyDtoD_v3020 d2d;
    PFN_cuMemsetD8Async_v3020 memset_async;
    PFN_cuMemsetD8_v3020 memset_sync;
    PFN_cuStreamSynchronize_v2000 stream_sync;
    PFN_cuCtxSynchronize_v2000 ctx_sync;
    /* The driver's own entry points, past the library: host pacing. */
    PFN_cuLaunchKernel_v4000 raw_launch;
    PFN_cuStreamSynchronize_v2000 raw_stream_sync;
    uint64_t (*now)(void); /* simcuda_now_ns */
    void (*mark_step)(void);
} cu;

static const struct trace *tr;
static CUfunction kernels[MAX_USES + 1], pace_kernel;
static CUstream *streams; /* by stream number; [0] is the legacy stream */
static bool *stream_made;
static CUevent *wait_events;
static struct u64map ptrs, sizes; /* buffer id -> pointer, -> bytes */
static void *staging;

static void die(const struct tev *e, const char *what, CUresult rc) {
    const char *why = rc == CUDA_ERROR_OUT_OF_MEMORY
                          ? ": out of memory (a budget too small for the buffers one call needs?)"
                          : "";
    if (e != NULL)
        fprintf(stderr, "hostoff-replayer: trace line %ld: %s failed (CUDA error %d)%s\n", e->line,
                what, (int)rc, why);
    else
        fprintf(stderr, "hostoff-replayer: %s failed (CUDA error %d)%s\n", what, (int)rc, why);
    exit(1);
}

#define CK(e, call, what)                                                                          \
    do {                                                                                           \
        CUresult rc_ = (call);                                                                     \
        if (rc_ != CUDA_SUCCESS) die(e, what, rc_);                                                \
    } while (0)

typedef void *(*dlsym_fn)(void *, const char *);

static void *need(void *h, const char *name) {
    void *p = dlsym(h, name);
    if (p == NULL) {
        fprintf(stderr, "hostoff-replayer: the driver has no %s\n", name);
        exit(1);
    }
    return p;
}

#define RESOLVE(field, name) cu.field = (__typeof__(cu.field))(uintptr_t)need(h, name)

static void resolve(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (h == NULL) {
        fprintf(stderr, "hostoff-replayer: cannot load libcuda.so.1: %s\n", dlerror());
        exit(1);
    }
    RESOLVE(init, "cuInit");
    RESOLVE(device_get, "cuDeviceGet");
    RESOLVE(ctx_retain, "cuDevicePrimaryCtxRetain");
    RESOLVE(ctx_set, "cuCtxSetCurrent");
    RESOLVE(module_load, "cuModuleLoadData");
    RESOLVE(get_function, "cuModuleGetFunction");
    RESOLVE(stream_create, "cuStreamCreate");
    RESOLVE(event_create, "cuEventCreate");
    RESOLVE(event_record, "cuEventRecord");
    RESOLVE(wait_event, "cuStreamWaitEvent");
    RESOLVE(alloc, "cuMemAlloc_v2");
    RESOLVE(alloc_async, "cuMemAllocAsync");
    RESOLVE(alloc_managed, "cuMemAllocManaged");
    RESOLVE(free, "cuMemFree_v2");
    RESOLVE(free_async, "cuMemFreeAsync");
    RESOLVE(host_alloc, "cuMemHostAlloc");
    RESOLVE(launch, "cuLaunchKernel");
    RESOLVE(h2d_async, "cuMemcpyHtoDAsync_v2");
    RESOLVE(d2h_async, "cuMemcpyDtoHAsync_v2");
    RESOLVE(d2d_async, "cuMemcpyDtoDAsync_v2");
    RESOLVE(h2d, "cuMemcpyHtoD_v2");
    RESOLVE(d2h, "cuMemcpyDtoH_v2");
    RESOLVE(d2d, "cuMemcpyDtoD_v2");
    RESOLVE(memset_async, "cuMemsetD8Async");
    RESOLVE(memset_sync, "cuMemsetD8_v2");
    RESOLVE(stream_sync, "cuStreamSynchronize");
    RESOLVE(ctx_sync, "cuCtxSynchronize");
    cu.now = (uint64_t(*)(void))(uintptr_t)dlsym(h, "simcuda_now_ns");
    cu.mark_step = (void (*)(void))(uintptr_t)dlsym(RTLD_DEFAULT, "hostoff_mark_step");
    /* glibc's own dlsym, which a preloaded library interposing dlsym does not see. */
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    dlsym_fn real = NULL;
    if (libc != NULL) real = (dlsym_fn)(uintptr_t)dlvsym(libc, "dlsym", "GLIBC_2.34");
    if (libc != NULL && real == NULL) real = (dlsym_fn)(uintptr_t)dlvsym(libc, "dlsym", GLIBC_BASE);
    if (real != NULL) {
        cu.raw_launch = (PFN_cuLaunchKernel_v4000)(uintptr_t)real(h, "cuLaunchKernel");
        cu.raw_stream_sync =
            (PFN_cuStreamSynchronize_v2000)(uintptr_t)real(h, "cuStreamSynchronize");
    }
}

/* The module: one kernel per use-list length, and the pacing kernel. */
static void load_kernels(uint32_t max_uses) {
    size_t cap = 64 + (size_t)(max_uses + 2) * (40 + 4 * (max_uses + 1));
    char *image = malloc(cap), name[64];
    if (image == NULL) exit(1);
    size_t n = (size_t)snprintf(image, cap,
                                "simcuda-module 1\nkernel hostoff_replay_pace u64 ns=param:0\n");
    for (uint32_t k = 0; k <= max_uses; k++) {
        n += (size_t)snprintf(image + n, cap - n, "kernel hostoff_replay_%u u64", k);
        for (uint32_t i = 0; i < k; i++)
            n += (size_t)snprintf(image + n, cap - n, " ptr");
        n += (size_t)snprintf(image + n, cap - n, " ns=param:0\n");
    }
    CUmodule mod;
    CK(NULL, cu.module_load(&mod, image), "loading the replay kernels (cuModuleLoadData)");
    free(image);
    CK(NULL, cu.get_function(&pace_kernel, mod, "hostoff_replay_pace"), "cuModuleGetFunction");
    for (uint32_t k = 0; k <= max_uses; k++) {
        snprintf(name, sizeof name, "hostoff_replay_%u", k);
        CK(NULL, cu.get_function(&kernels[k], mod, name), "cuModuleGetFunction");
    }
}

static CUstream stream(const struct tev *e, uint32_t s) {
    if (s == 0) return NULL;
    if (!stream_made[s]) {
        CK(e, cu.stream_create(&streams[s], CU_STREAM_NON_BLOCKING), "cuStreamCreate");
        stream_made[s] = true;
    }
    return streams[s];
}

static CUdeviceptr ptr_of(uint64_t id, uint64_t *bytes) {
    uint64_t p = 0;
    u64map_get(&ptrs, id, &p); /* the reader checked every id is live */
    if (bytes != NULL) u64map_get(&sizes, id, bytes);
    return (CUdeviceptr)p;
}

/* ------------------------------------------------------------------------------ pacing */

static CUstream pace_stream;
static int64_t owed;      /* host time owed to the trace, ns */
static uint64_t pace_min; /* owed time worth a wait */
static uint64_t call_ns;  /* SIMCUDA_LAUNCH_NS */

static void pace(void) {
    if (owed < (int64_t)pace_min || cu.now == NULL || cu.raw_launch == NULL) return;
    uint64_t t0 = cu.now();
    /* The launch call costs one call; the wait, which ends at the kernel's end, one more. */
    uint64_t ns = (uint64_t)owed > call_ns ? (uint64_t)owed - call_ns : 1;
    void *params[] = {&ns};
    CK(NULL, cu.raw_launch(pace_kernel, 1, 1, 1, 1, 1, 1, 0, pace_stream, params, NULL),
       "the pacing launch");
    CK(NULL, cu.raw_stream_sync(pace_stream), "the pacing wait");
    owed -= (int64_t)(cu.now() - t0);
}

/* ----------------------------------------------------------------------------- the events */

static void do_alloc(const struct tev *e) {
    CUdeviceptr p = 0;
    if (e->has_s)
        CK(e, cu.alloc_async(&p, e->bytes, stream(e, e->s)), "cuMemAllocAsync");
    else if (e->managed)
        CK(e, cu.alloc_managed(&p, e->bytes, CU_MEM_ATTACH_GLOBAL), "cuMemAllocManaged");
    else
        CK(e, cu.alloc(&p, e->bytes), "cuMemAlloc");
    if (!u64map_put(&ptrs, e->id, p) || !u64map_put(&sizes, e->id, e->bytes)) exit(1);
}

static void do_free(const struct tev *e) {
    CUdeviceptr p = ptr_of(e->id, NULL);
    if (e->has_s)
        CK(e, cu.free_async(p, stream(e, e->s)), "cuMemFreeAsync");
    else
        CK(e, cu.free(p), "cuMemFree");
    u64map_del(&ptrs, e->id);
    u64map_del(&sizes, e->id);
}

static void do_launch(const struct tev *e) {
    uint64_t ns = e->ns;
    CUdeviceptr p[MAX_USES];
    void *params[MAX_USES + 1];
    params[0] = &ns;
    uint32_t n = e->nuse < MAX_USES ? e->nuse : MAX_USES;
    for (uint32_t i = 0; i < n; i++) {
        p[i] = ptr_of(tr->uses[e->use_at + i], NULL);
        params[i + 1] = &p[i];
    }
    CK(e, cu.launch(kernels[n], 1, 1, 1, 1, 1, 1, 0, stream(e, e->s), params, NULL),
       "cuLaunchKernel");
}

static void do_copy(const struct tev *e) {
    uint64_t size0 = 0, size1 = 0;
    CUdeviceptr a = ptr_of(tr->uses[e->use_at], &size0);
    CUstream s = stream(e, e->s);
    uint64_t bytes = e->bytes < size0 ? e->bytes : size0;
    if (e->dir == TEV_D2D && e->nuse >= 2 && !e->memset) {
        CUdeviceptr b = ptr_of(tr->uses[e->use_at + 1], &size1);
        if (size1 < bytes) bytes = size1;
        if (e->sync)
            CK(e, cu.d2d(a, b, bytes), "cuMemcpyDtoD");
        else
            CK(e, cu.d2d_async(a, b, bytes, s), "cuMemcpyDtoDAsync");
    } else if (e->dir == TEV_D2D) {
        if (e->sync)
            CK(e, cu.memset_sync(a, 0, bytes), "cuMemsetD8");
        else
            CK(e, cu.memset_async(a, 0, bytes, s), "cuMemsetD8Async");
    } else if (e->dir == TEV_H2D) {
        if (e->sync)
            CK(e, cu.h2d(a, staging, bytes), "cuMemcpyHtoD");
        else
            CK(e, cu.h2d_async(a, staging, bytes, s), "cuMemcpyHtoDAsync");
    } else {
        if (e->sync)
            CK(e, cu.d2h(staging, a, bytes), "cuMemcpyDtoH");
        else
            CK(e, cu.d2h_async(staging, a, bytes, s), "cuMemcpyDtoHAsync");
    }
}

static void do_wait(const struct tev *e) {
    if (e->s == e->on) return;
    if (wait_events[e->on] == NULL)
        CK(e, cu.event_create(&wait_events[e->on], CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    CK(e, cu.event_record(wait_events[e->on], stream(e, e->on)), "cuEventRecord");
    CK(e, cu.wait_event(stream(e, e->s), wait_events[e->on], 0), "cuStreamWaitEvent");
}

static uint64_t env_u64(const char *name, uint64_t def) {
    const char *v = getenv(name);
    uint64_t x;
    return v != NULL && cli_parse_uint(v, false, &x) ? x : def;
}

/* A recorded step begins here (step_at): noted, and with --mark-steps also marked. */
static void recorded_step(bool mark_steps, uint64_t start, uint64_t *starts, size_t *nstarts,
                          uint64_t *marks, size_t *nmarks) {
    if (mark_steps && cu.mark_step != NULL) cu.mark_step();
    uint64_t now = cu.now != NULL ? cu.now() - start : 0;
    starts[(*nstarts)++] = now;
    if (mark_steps) marks[(*nmarks)++] = now;
}

int main(int argc, char **argv) {
    bool mark_steps = argc == 3 && strcmp(argv[1], "--mark-steps") == 0;
    if (argc != 2 && !mark_steps) {
        fprintf(stderr, "usage: hostoff-replayer [--mark-steps] TRACE   (run by hostoff replay)\n");
        return 2;
    }
    const char *path = argv[argc - 1];
    static struct trace t;
    char err[1024];
    if (trace_read(path, &t, err, sizeof err) != 0) {
        fprintf(stderr, "hostoff-replayer: %s\n", err);
        return 2;
    }
    tr = &t;
    if (t.max_uses > MAX_USES) {
        fprintf(stderr, "hostoff-replayer: a launch uses %u buffers; the replay handles %d\n",
                t.max_uses, MAX_USES);
        return 2;
    }
    resolve();
    CUdevice dev;
    CUcontext ctx;
    CK(NULL, cu.init(0), "cuInit");
    CK(NULL, cu.device_get(&dev, 0), "cuDeviceGet");
    CK(NULL, cu.ctx_retain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    CK(NULL, cu.ctx_set(ctx), "cuCtxSetCurrent");
    load_kernels(t.max_uses);
    uint32_t ns = t.nstreams > 0 ? t.nstreams : 1;
    streams = calloc(ns, sizeof *streams);
    stream_made = calloc(ns, sizeof *stream_made);
    wait_events = calloc(ns, sizeof *wait_events);
    if (streams == NULL || stream_made == NULL || wait_events == NULL) return 1;
    if (t.max_copy_host > 0)
        CK(NULL, cu.host_alloc(&staging, t.max_copy_host, 0), "cuMemHostAlloc (staging)");
    call_ns = env_u64("SIMCUDA_LAUNCH_NS", 2500);
    pace_min = 4 * (call_ns > 0 ? call_ns : 1);
    if (cu.raw_launch != NULL)
        CK(NULL, cu.stream_create(&pace_stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");

    struct cli_progress prog;
    cli_progress_start(&prog, "replay");
    if (getenv("HOSTOFF_REPLAYER_PROGRESS") == NULL) prog.on = false;
    /* A trace's markers, and with --mark-steps the recorded steps' too. */
    uint64_t *marks = calloc(t.steps + (mark_steps ? t.nstep_at : 0) + 1, sizeof *marks);
    uint64_t *starts = calloc(t.nstep_at + 1, sizeof *starts);
    if (marks == NULL || starts == NULL) return 1;
    size_t nmarks = 0, nstarts = 0;
    uint64_t start = cu.now != NULL ? cu.now() : 0;
    for (size_t i = 0; i < t.n; i++) {
        const struct tev *e = &t.ev[i];
        if (i > 0) {
            const struct tev *p = &t.ev[i - 1];
            uint64_t spent = p->t + p->d;
            if (e->t > spent) owed += (int64_t)(e->t - spent);
            pace();
        }
        /* A recorded step begins at this event: noted only, unless --mark-steps (see the top). */
        while (nstarts < t.nstep_at && t.step_at[nstarts] == i)
            recorded_step(mark_steps, start, starts, &nstarts, marks, &nmarks);
        switch (e->kind) {
        case TEV_ALLOC:
            do_alloc(e);
            break;
        case TEV_FREE:
            do_free(e);
            break;
        case TEV_LAUNCH:
            do_launch(e);
            break;
        case TEV_COPY:
            do_copy(e);
            break;
        case TEV_SYNC:
            if (e->has_s)
                CK(e, cu.stream_sync(stream(e, e->s)), "cuStreamSynchronize");
            else
                CK(e, cu.ctx_sync(), "cuCtxSynchronize");
            break;
        case TEV_WAIT:
            do_wait(e);
            break;
        case TEV_STEP:
            if (cu.mark_step != NULL) cu.mark_step();
            marks[nmarks++] = cu.now != NULL ? cu.now() - start : 0;
            break;
        }
        if ((i & 1023) == 0) cli_progress(&prog, i, t.n);
    }
    /* Steps whose lines hold no event (only lines the reader skips) begin at the end. */
    while (nstarts < t.nstep_at)
        recorded_step(mark_steps, start, starts, &nstarts, marks, &nmarks);
    CK(NULL, cu.ctx_sync(), "the final cuCtxSynchronize");
    uint64_t end = cu.now != NULL ? cu.now() - start : 0;
    cli_progress_end(&prog);
    printf("{\"events\":%zu,\"launches\":%zu,\"end_ns\":%llu,\"step_marks_ns\":[", t.n, t.launches,
           (unsigned long long)end);
    for (size_t k = 0; k < nmarks; k++)
        printf("%s%llu", k ? "," : "", (unsigned long long)marks[k]);
    printf("],\"step_starts_ns\":[");
    for (size_t k = 0; k < nstarts; k++)
        printf("%s%llu", k ? "," : "", (unsigned long long)starts[k]);
    printf("]}\n");
    fflush(stdout);
    return 0;
}
