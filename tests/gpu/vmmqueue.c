/* vmmfacts' queue section: two facts the simulated driver models from published figures or not
 * at all, measured on the driver at hand.
 *
 * 1. The launch queue depth of one stream. The simulator (docs/simcuda.md, "Asynchrony and
 *    virtual time") blocks a launch once its stream holds SIMCUDA_LAUNCH_QUEUE (1024) kernels
 *    that have not ended, from a forum measurement (about 1000). Here one non-blocking stream
 *    gets thousands of launches of kit_spin, a kernel that waits 50 us of the GPU's global timer,
 *    each launch's host time taken on its own. The first launch is a gate: a kit_spin long
 *    enough (10 us per launch to come) that no kernel behind it ends while the queue fills, so
 *    the count is not blurred by kernels ending meanwhile. While the queue has room a launch
 *    returns in a few microseconds; once it is full the next one waits for the gate to end, and
 *    each after it for one more kernel: about the kernel's duration. The depth is the index
 *    (from 0, the gate) of the first launch slower than half the kernel's duration whose next
 *    32 launches (fewer at the end) are slow too by their median: the number of kernels the
 *    stream held, gate included, when a launch first blocked. One slow launch alone (the host
 *    descheduled, a page fault) does not end the count; how many there were is reported too.
 *    The count is of kernels with one 8-byte parameter: a driver whose queue is a ring of
 *    command bytes could hold fewer launches with large parameter blocks.
 *
 * 2. Whether VMM calls on one thread slow launches on another. The engine remaps host-located
 *    slots (cuMemMap, cuMemSetAccess, cuMemUnmap) on the application's thread today; a helper
 *    thread would take that time off the application's critical path only if the driver does
 *    not serialise the two (docs/policy-benchmark.md, "Where the time goes, measured again").
 *    The main thread launches empty kernels and times each launch, first alone, then while a
 *    second thread remaps a pinned host-located 64 MiB slot in a loop (the calls section's
 *    remap); the remap's own time is taken alone and while the launches run.
 *
 * On the simulator the launches are timed with its virtual host clock (simcuda_now_ns), so the
 * depth is its modelled SIMCUDA_LAUNCH_QUEUE. Part 2 there is a smoke test only: the simulator
 * has one host clock that every thread's calls advance, so its figures mean nothing. */
#include "vmmfacts.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* simcuda's virtual host clock, weak: a real libcuda.so.1 does not have it. */
extern uint64_t simcuda_now_ns(void) __attribute__((weak));

enum {
    SPIN_NS = 50000, /* the queued kernel: long against a launch, short against the run */
    LAUNCHES = 4096, /* kernels queued on the stream: 205 ms of GPU time */
    LAUNCHES_QUICK = 1536,
    SLOW_RUN = 32,              /* launches after the first slow one that must be slow too */
    GATE_NS_PER_LAUNCH = 10000, /* the gate kernel outlasts launches of up to 10 us each */
    EMPTY_LAUNCHES = 4000,      /* timed launches of the empty kernel, alone and with remaps */
    EMPTY_LAUNCHES_QUICK = 400,
    EMPTY_BATCH = 256, /* the stream is drained after this many: its queue never fills */
    REMAP_MIB = 64,
    REMAPS_ALONE = 32,
    REMAPS_ALONE_QUICK = 4,
    REMAPS_KEPT = 4096, /* remap times kept while the launches run (more cycles are counted) */
};

/* Seconds: the simulator's virtual host clock there, else the monotonic wall clock. */
static double now(void) {
    if (vf_opt.cubin == NULL && simcuda_now_ns != NULL) return 1e-9 * (double)simcuda_now_ns();
    return kit_now();
}

static double scratch[LAUNCHES > REMAPS_KEPT ? LAUNCHES : REMAPS_KEPT];

/* The median and the 90th percentile of v[0..n) in microseconds, v left as it was; NAN when
 * n == 0 (absent from the JSON). */
static void quantiles(const double *v, int n, double *median, double *p90) {
    *median = *p90 = NAN;
    if (n <= 0) return;
    memcpy(scratch, v, (size_t)n * sizeof *v);
    *median = 1e6 * kit_median(scratch, n); /* sorts scratch */
    *p90 = 1e6 * scratch[(n - 1) * 9 / 10];
}

/* ------------------------------------------------------------------------ queue depth */

static double spin_s[LAUNCHES];

/* The depth rule of the top comment: the first slow launch followed by mostly slow ones. */
static int queue_depth(const double *t, int n, double slow, int *isolated) {
    *isolated = 0;
    for (int i = 0; i < n; i++) {
        if (t[i] <= slow) continue;
        int end = i + SLOW_RUN < n ? i + SLOW_RUN : n;
        double med, p90;
        quantiles(t + i, end - i, &med, &p90);
        if (med > 1e6 * slow) return i;
        (*isolated)++;
    }
    return -1;
}

static CUresult spin_once(void *arg, CUstream s) {
    (void)arg;
    return kit_spin_launch(&vf_mod, s, SPIN_NS);
}

/* The kernel's duration in microseconds: `reps` kit_spin launches timed with events. */
static double spin_us(CUstream s, int reps) {
    return 1e3 * vf_events_ms(s, reps, spin_once, NULL) / reps;
}

static void queue_depth_section(void) {
    int n = vf_opt.quick ? LAUNCHES_QUICK : LAUNCHES;
    CUstream s;
    KIT_CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    KIT_CK(kit_spin_launch(&vf_mod, s, 1000)); /* warm-up: a lazily loaded kernel loads here */
    KIT_CK(cuStreamSynchronize(s));
    double kernel_us = spin_us(s, 16);
    /* Launch 0 is the gate: it runs while the others are launched, so none of them ends before
     * the queue is full and the first launch that blocks is launch number `depth`. */
    uint64_t gate_ns = (uint64_t)n * GATE_NS_PER_LAUNCH;
    for (int i = 0; i < n; i++) {
        double a = now();
        KIT_CK(kit_spin_launch(&vf_mod, s, i == 0 ? gate_ns : SPIN_NS));
        spin_s[i] = now() - a;
    }
    KIT_CK(cuStreamSynchronize(s));
    cuStreamDestroy(s);

    double slow = 0.5e-9 * SPIN_NS;
    int isolated = 0, depth = queue_depth(spin_s, n, slow, &isolated);
    double q_med, q_p90, f_med = NAN, f_p90 = NAN;
    quantiles(spin_s, depth < 0 ? n : depth, &q_med, &q_p90);
    if (depth >= 0) quantiles(spin_s + depth + 1, n - depth - 1, &f_med, &f_p90);
    /* The first blocked launch waited for what was left of the gate: much longer than a kernel,
     * unless the gate ended before the queue filled (launches slower than planned); then
     * kernels ended while it filled and the depth counts them too. */
    bool gated = depth >= 0 && spin_s[depth] > 4e-9 * SPIN_NS;

    printf("\n%-52s %10s\n", "launch queue, one stream", "value");
    printf("%-52s %10.1f\n", "kit_spin kernel, us requested", 1e-3 * SPIN_NS);
    printf("%-52s %10.1f\n", "kit_spin kernel, us measured (events, 16 launches)", kernel_us);
    printf("%-52s %10d\n", "launches (the first: a gate kernel)", n);
    printf("%-52s %10.1f\n", "gate kernel, ms", 1e-6 * (double)gate_ns);
    char label[96];
    snprintf(label, sizeof label, "queue depth (launches before one over %.0f us)", 1e6 * slow);
    if (depth >= 0)
        printf("%-52s %10d%s\n", label, depth,
               gated ? "" : "  (the gate ended first: kernels that ended are counted too)");
    else
        printf("%-52s %10s\n", label, "none");
    printf("%-52s %10.2f\n", "launch us while the queue fills, median", q_med);
    printf("%-52s %10.2f\n", "launch us with the queue full, median", f_med);
    printf("%-52s %10d\n", "slow launches before the depth (isolated)", isolated);
    vf_jnum("queue_kernel_us", 1e-3 * SPIN_NS);
    vf_jnum("queue_kernel_us_measured", kernel_us);
    vf_jnum("queue_gate_us", 1e-3 * (double)gate_ns);
    vf_jnum("queue_launches", n);
    if (depth >= 0) vf_jnum("launch_queue_depth", depth);
    if (depth >= 0) vf_jstr("launch_queue_gated", gated ? "yes" : "no");
    vf_jnum("launch_queue_slow_isolated", isolated);
    vf_jnum("launch_us_queued", q_med);
    vf_jnum("launch_us_queued_p90", q_p90);
    vf_jnum("launch_us_full", f_med);
    vf_jnum("launch_us_full_p90", f_p90);
    if (depth >= 0 && gated)
        printf("the simulator's setting for this driver: SIMCUDA_LAUNCH_QUEUE=%d\n", depth);
    else
        printf("no SIMCUDA_LAUNCH_QUEUE from this run (%s)\n",
               depth < 0 ? "the queue never filled" : "the gate ended before the queue filled");
}

/* ------------------------------------------------------------ launches while remapping */

struct remapper {
    struct vf_slot *slot;
    CUcontext ctx;
    atomic_bool stop;
    atomic_bool running;
    CUresult rc;
    int cycles; /* done while the launches ran; the first REMAPS_KEPT are timed in t */
    double t[REMAPS_KEPT];
};

/* One remap cycle's time in seconds (map, set-access, unmap of the slot's second address). */
static CUresult remap_once(struct vf_slot *slot, double *seconds) {
    double m[3], a = now();
    CUresult rc = vf_timed_map_access_unmap(slot->va, slot->size, slot->h, m);
    *seconds = now() - a;
    return rc;
}

/* Thread B: remaps until told to stop. A failure ends the loop; the main thread reports it. No
 * KIT_CK here: it would longjmp out of this thread. */
static void *remap_loop(void *arg) {
    struct remapper *r = arg;
    double t;
    r->rc = cuCtxSetCurrent(r->ctx);
    if (r->rc == CUDA_SUCCESS) r->rc = remap_once(r->slot, &t); /* warm-up, on this thread */
    atomic_store(&r->running, true);
    /* At least one cycle after the launches started, however quickly they end. */
    while (r->rc == CUDA_SUCCESS) {
        r->rc = remap_once(r->slot, &t);
        if (r->rc == CUDA_SUCCESS && r->cycles < REMAPS_KEPT) r->t[r->cycles] = t;
        if (r->rc == CUDA_SUCCESS) r->cycles++;
        if (atomic_load(&r->stop)) break;
    }
    return NULL;
}

/* n timed launches of the empty kernel on s (seconds in t); the stream drained every
 * EMPTY_BATCH, untimed, so the queue never fills and a launch never waits for a kernel. The
 * first failure is returned (no KIT_CK: the caller may have a thread to stop first). */
static CUresult empty_launches(CUstream s, CUdeviceptr sink, double *t, int n) {
    for (int i = 0; i < n; i++) {
        double a = now();
        CUresult rc = kit_read_launch(&vf_mod, s, sink, 0, sink);
        t[i] = now() - a;
        if (rc != CUDA_SUCCESS) return rc;
        if ((i + 1) % EMPTY_BATCH == 0 && (rc = cuStreamSynchronize(s)) != CUDA_SUCCESS) return rc;
    }
    return cuStreamSynchronize(s);
}

static double alone_s[EMPTY_LAUNCHES], with_s[EMPTY_LAUNCHES], remap_alone_s[REMAPS_ALONE];
static struct remapper rm;

static void print_pair(const char *label, const char *key, const double *t, int n) {
    double med, p90;
    char k90[64];
    quantiles(t, n, &med, &p90);
    printf("%-52s %10.2f %10.2f\n", label, med, p90);
    snprintf(k90, sizeof k90, "%s_p90", key);
    vf_jnum(key, med);
    vf_jnum(k90, p90);
}

static void remap_launch_section(void) {
    char label[64];
    CUmemAllocationProp p;
    size_t size;
    if (vf_host_loc == 0) {
        printf("\n%-52s %10s\n", "launches while another thread remaps", "n/a (no host VMM)");
        return;
    }
    printf("\n%-52s %10s %10s\n", "launches while another thread remaps, us", "median", "p90");
    if (!vf_measurement(vf_host_loc, REMAP_MIB, " remap", label, sizeof label, &p, &size)) return;
    int n = vf_opt.quick ? EMPTY_LAUNCHES_QUICK : EMPTY_LAUNCHES;
    int nr = vf_opt.quick ? REMAPS_ALONE_QUICK : REMAPS_ALONE;
    CUstream s;
    CUdeviceptr sink;
    KIT_CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    KIT_CK(cuMemAlloc(&sink, 4096));
    KIT_CK(empty_launches(s, sink, alone_s, EMPTY_BATCH)); /* warm-up */
    KIT_CK(empty_launches(s, sink, alone_s, n));

    struct vf_slot slot;
    CUresult rc = vf_slot_open(&slot, &p, size);
    double warm;
    if (rc == CUDA_SUCCESS) rc = remap_once(&slot, &warm);
    for (int i = 0; i < nr && rc == CUDA_SUCCESS; i++)
        rc = remap_once(&slot, &remap_alone_s[i]);
    if (rc != CUDA_SUCCESS) vf_slot_close(&slot);
    KIT_CK(rc);

    memset(&rm, 0, sizeof rm);
    rm.slot = &slot;
    atomic_init(&rm.stop, false);
    atomic_init(&rm.running, false);
    KIT_CK(cuCtxGetCurrent(&rm.ctx));
    pthread_t b;
    if (pthread_create(&b, NULL, remap_loop, &rm) != 0) {
        vf_slot_close(&slot);
        kit_die_rc(CUDA_ERROR_OPERATING_SYSTEM, "pthread_create", __FILE__, __LINE__);
    }
    while (!atomic_load(&rm.running))
        sched_yield();
    rc = empty_launches(s, sink, with_s, n);
    atomic_store(&rm.stop, true);
    pthread_join(b, NULL);
    vf_slot_close(&slot);
    KIT_CK(rc);
    if (rm.rc != CUDA_SUCCESS) /* ends the section as KIT_CK does, naming the thread */
        kit_die_rc(rm.rc, "the second thread's remap (cuMemMap, cuMemSetAccess, cuMemUnmap)",
                   __FILE__, __LINE__);

    print_pair("cuLaunchKernel (empty kernel), alone", "launch_us_alone", alone_s, n);
    print_pair("cuLaunchKernel, while the other thread remaps", "launch_us_with_remaps", with_s, n);
    snprintf(label, sizeof label, "%s %llu MiB remap (map+access+unmap), alone",
             vf_loc_name(vf_host_loc), (unsigned long long)REMAP_MIB);
    print_pair(label, "remap_us_alone", remap_alone_s, nr);
    snprintf(label, sizeof label, "the same remap, while launches run (%d)", rm.cycles);
    print_pair(label, "remap_us_with_launches", rm.t,
               rm.cycles < REMAPS_KEPT ? rm.cycles : REMAPS_KEPT);
    vf_jnum("remap_mib", REMAP_MIB);
    vf_jnum("remap_cycles_with_launches", rm.cycles);
    vf_jnum("empty_launches", n);
    cuMemFree(sink);
    cuStreamDestroy(s);
}

void vf_section_queue(void) {
    queue_depth_section();
    vf_jflush();
    remap_launch_section();
}
