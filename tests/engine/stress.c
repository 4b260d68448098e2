/* Integrity stress for the residency engine, on the full-data simulator under LD_PRELOAD.
 *
 * Buffers totalling several times HOSTOFF_BUDGET are filled by kernels; threads, each with its
 * own streams, launch kernels that verify and update random subsets of their buffers, so buffers
 * keep being evicted and restored while other streams' work is in flight. Every word's value is
 * a function of (buffer, version, index): any lost or stale byte shows. A buffer used on another
 * stream than its last use is ordered after that use by an event, as a framework would do. With
 * churn, a thread now and then frees one of its buffers stream-ordered (cuMemFreeAsync) and
 * allocates and fills a new one in its place. At the end every buffer is copied back and checked.
 * Exit 0 only when all of it is bit-exact.
 *
 *   stress THREADS BUFFERS_PER_THREAD BUFFER_MIB KERNELS_PER_THREAD SEED
 *          [STREAMS [MIXED [CHURN [LOCALITY [SHAPES]]]]]
 *
 * STREAMS: streams per thread (default 1). MIXED=1: buffer sizes cycle through 1, 1.5, 2 and
 * 0.25 times BUFFER_MIB (the last ones stay below HOSTOFF_MIN_BYTES in the suite: they pass
 * through and never move); default 0, every buffer BUFFER_MIB. CHURN=N: every N kernels a thread
 * replaces a buffer (default 0: never). LOCALITY=P: P% of the buffers a kernel picks come from a
 * window of two of the thread's buffers that slides by one every 32 kernels (a working set that
 * drifts, as a training step's layers do); the rest, and all of them when P is 0 (the default),
 * are uniformly random. Every pick that misses the device is a move, and a move of a 2 MiB buffer
 * costs the simulator far more CPU time than a kernel: locality keeps thousands of kernels fast.
 *
 * SHAPES=N: one iteration in N (default 0: none) is, in turn, one of the launch shapes real
 * libraries produce instead of a plain launch: a launch over 100+ buffers (the thread's own after
 * WIDE_SMALL small ones: a fused optimizer's by-value pointer list), an NCCL-shaped launch
 * (cuLaunchKernelEx, one 4 KiB by-value struct, BUFFER_SIZE = the bytes used) on the next
 * stream, a graph whose child node is updated in place before each launch, and a batch copy
 * between two buffers of one size.
 *
 * stdout: the summary line, then "sizes: <bytes of each buffer ever allocated>" (the harness
 * computes the managed total and the device bytes the program holds outside the engine). */
#include "engtest.h"

#include <pthread.h>

#define SLOTS       3
#define MAX_THREADS 64
#define MAX_STREAMS 16

/* Kernel: for each slot with a buffer, check every word holds `version`, then write version + 1.
 * Params: (ptr buf, u64 id, u64 version, u64 words) x SLOTS. One launch in eight (by the first
 * slot's version) lasts 400 us of virtual time instead of 20 us, far longer than a copy of its
 * buffers: a move that did not wait for it would remap under it (a hazard). */
void stress_vu(void **p) {
    if (*(uint64_t *)p[2] % 8 == 7) simcuda_set_duration_ns(400000);
    for (int s = 0; s < SLOTS; s++) {
        uint64_t *buf = *(uint64_t **)p[4 * s];
        if (buf == NULL) continue;
        uint64_t id = *(uint64_t *)p[4 * s + 1], v = *(uint64_t *)p[4 * s + 2];
        uint64_t words = *(uint64_t *)p[4 * s + 3], bad = 0;
        for (uint64_t i = 0; i < words; i++) {
            bad += buf[i] != eng_word(id, v, i);
            buf[i] = eng_word(id, v + 1, i);
        }
        if (bad) atomic_fetch_add(&eng_errors, bad);
    }
}

/* stress_struct(b4096): { u64 n; { ptr, id, version, words } e[n] } by value; vu on each. */
void stress_struct(void **p) {
    const unsigned char *s = p[0];
    uint64_t n;
    memcpy(&n, s, 8);
    for (uint64_t i = 0; i < n && 8 + (i + 1) * 32 <= 4096; i++) {
        uint64_t e[4];
        memcpy(e, s + 8 + 32 * i, sizeof e);
        uint64_t *buf = (uint64_t *)(uintptr_t)e[0], bad = 0;
        for (uint64_t k = 0; k < e[3]; k++) {
            bad += buf[k] != eng_word(e[1], e[2], k);
            buf[k] = eng_word(e[1], e[2] + 1, k);
        }
        if (bad) atomic_fetch_add(&eng_errors, bad);
    }
}

static const char image[] = "simcuda-module 1\n" ENG_KERNELS
                            "kernel stress_vu ptr u64 u64 u64 ptr u64 u64 u64 ptr u64 u64 u64 "
                            "ns=20000\n"
                            "kernel stress_struct b4096 ns=40000\n";

#define WIDE_SMALL  100   /* small buffers per thread ahead of its own in a wide launch */
#define SMALL_BYTES 65536 /* below HOSTOFF_MIN_BYTES in the suite: they pass through */

struct buffer {
    CUdeviceptr ptr;
    uint64_t bytes, id, version;
    CUevent last;    /* recorded after its last use */
    int last_stream; /* where that use was queued, or -1 */
};

struct worker {
    CUcontext ctx;
    CUfunction vu, fill, strct;
    int nbuf, kernels, streams, churn, locality, shapes;
    struct buffer *bufs;
    struct buffer small[WIDE_SMALL];
    CUgraph graph;
    CUgraphExec exec;
    CUgraphNode child;
    unsigned seed;
    CUresult error;
    const char *failed_call;
};

static _Atomic uint64_t next_id;
static pthread_mutex_t sizes_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *sizes;
static size_t nsizes, cap_sizes;

static void note_size(uint64_t bytes) {
    pthread_mutex_lock(&sizes_lock);
    if (nsizes == cap_sizes) {
        cap_sizes = cap_sizes ? 2 * cap_sizes : 64;
        sizes = realloc(sizes, cap_sizes * sizeof *sizes);
        EXPECT(sizes != NULL, "out of memory");
    }
    sizes[nsizes++] = bytes;
    pthread_mutex_unlock(&sizes_lock);
}

/* Orders stream `st` after the last use of b (when it was on another stream). */
static CUresult order_after(struct buffer *b, CUstream *streams, int st) {
    if (b->last_stream < 0 || b->last_stream == st) return CUDA_SUCCESS;
    return cuStreamWaitEvent(streams[st], b->last, 0);
}

static CUresult used_on(struct buffer *b, CUstream *streams, int st) {
    b->last_stream = st;
    return cuEventRecord(b->last, streams[st]);
}

#define TRY(call)                                                                                  \
    do {                                                                                           \
        if ((w->error = (call)) != CUDA_SUCCESS) {                                                 \
            w->failed_call = #call;                                                                \
            return NULL;                                                                           \
        }                                                                                          \
    } while (0)

/* Replaces buffer b: a stream-ordered free after its last use, a new buffer filled on st. */
static void *churn(struct worker *w, struct buffer *b, CUstream *streams, int st) {
    TRY(order_after(b, streams, st));
    TRY(cuMemFreeAsync(b->ptr, streams[st]));
    TRY(cuMemAlloc(&b->ptr, b->bytes));
    note_size(b->bytes);
    b->id = atomic_fetch_add(&next_id, 1) + 1;
    b->version = 0;
    TRY(eng_launch(w->fill, streams[st], b->ptr, b->id, 0, b->bytes));
    TRY(used_on(b, streams, st));
    return w;
}

/* Packs entries for bufs into a stress_struct argument; returns the bytes used. */
static size_t pack(unsigned char *arg, struct buffer **bufs, int n) {
    memset(arg, 0, 4096);
    uint64_t count = (uint64_t)n;
    memcpy(arg, &count, 8);
    for (int i = 0; i < n; i++) {
        uint64_t e[4] = {bufs[i]->ptr, bufs[i]->id, bufs[i]->version++, bufs[i]->bytes / 8};
        memcpy(arg + 8 + 32 * (size_t)i, e, sizeof e);
    }
    return 8 + 32 * (size_t)n;
}

/* One launch over the thread's small buffers and all of its own (100+ buffers, by value). */
static void *shape_wide(struct worker *w, CUstream *streams, int st) {
    struct buffer *list[WIDE_SMALL + 24];
    int n = 0;
    for (int i = 0; i < WIDE_SMALL; i++)
        list[n++] = &w->small[i];
    for (int i = 0; i < w->nbuf && n < WIDE_SMALL + 24; i++)
        list[n++] = &w->bufs[i];
    for (int i = 0; i < n; i++)
        TRY(order_after(list[i], streams, st));
    static _Thread_local unsigned char arg[4096];
    pack(arg, list, n);
    void *args[] = {arg};
    TRY(cuLaunchKernel(w->strct, 1, 1, 1, 1, 1, 1, 0, streams[st], args, NULL));
    for (int i = 0; i < n; i++)
        TRY(used_on(list[i], streams, st));
    return w;
}

/* NCCL's shape: cuLaunchKernelEx(cfg, f, NULL, extra), the struct as long as the bytes used, on
 * the next stream. */
static void *shape_nccl(struct worker *w, CUstream *streams, int st) {
    int st2 = (st + 1) % w->streams;
    struct buffer *list[2] = {&w->bufs[rand_r(&w->seed) % (unsigned)w->nbuf], NULL};
    list[1] = &w->bufs[rand_r(&w->seed) % (unsigned)w->nbuf];
    int n = list[1] == list[0] ? 1 : 2;
    for (int i = 0; i < n; i++)
        TRY(order_after(list[i], streams, st2));
    static _Thread_local unsigned char arg[4096];
    size_t used = pack(arg, list, n);
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, arg, CU_LAUNCH_PARAM_BUFFER_SIZE, &used,
                     CU_LAUNCH_PARAM_END};
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = streams[st2];
    TRY(cuLaunchKernelEx(&cfg, w->strct, NULL, extra));
    for (int i = 0; i < n; i++)
        TRY(used_on(list[i], streams, st2));
    return w;
}

/* A graph whose one child node fills a buffer with its next version: each time the child is
 * replaced in the exec (cuGraphExecChildGraphNodeSetParams) to name another buffer. */
static void *shape_graph(struct worker *w, CUstream *streams, int st) {
    struct buffer *b = &w->bufs[rand_r(&w->seed) % (unsigned)w->nbuf];
    TRY(order_after(b, streams, st));
    uint64_t ver = b->version + 1, words = b->bytes / 8;
    void *args[] = {&b->ptr, &b->id, &ver, &words};
    CUDA_KERNEL_NODE_PARAMS kp;
    memset(&kp, 0, sizeof kp);
    kp.func = w->fill;
    kp.gridDimX = kp.gridDimY = kp.gridDimZ = kp.blockDimX = kp.blockDimY = kp.blockDimZ = 1;
    kp.kernelParams = args;
    CUgraph child;
    CUgraphNode kn;
    TRY(cuGraphCreate(&child, 0));
    TRY(cuGraphAddKernelNode(&kn, child, NULL, 0, &kp));
    if (w->exec == NULL) {
        TRY(cuGraphCreate(&w->graph, 0));
        TRY(cuGraphAddChildGraphNode(&w->child, w->graph, NULL, 0, child));
        TRY(cuGraphInstantiateWithFlags(&w->exec, w->graph, 0));
    } else {
        TRY(cuGraphExecChildGraphNodeSetParams(w->exec, w->child, child));
    }
    TRY(cuGraphDestroy(child));
    TRY(cuGraphLaunch(w->exec, streams[st]));
    b->version = ver;
    TRY(used_on(b, streams, st));
    return w;
}

/* A batch copy from one buffer to another of the same size. */
static void *shape_batch(struct worker *w, CUstream *streams, int st) {
    struct buffer *a = &w->bufs[rand_r(&w->seed) % (unsigned)w->nbuf], *b = NULL;
    for (int i = 0; i < w->nbuf && b == NULL; i++)
        if (&w->bufs[i] != a && w->bufs[i].bytes == a->bytes) b = &w->bufs[i];
    if (b == NULL) return w;
    TRY(order_after(a, streams, st));
    TRY(order_after(b, streams, st));
    CUdeviceptr dst[1] = {b->ptr}, src[1] = {a->ptr};
    size_t size[1] = {a->bytes}, idx = 0;
    CUmemcpyAttributes attr;
    memset(&attr, 0, sizeof attr);
    attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    TRY(cuMemcpyBatchAsync(dst, src, size, 1, &attr, &idx, 1, streams[st]));
    b->id = a->id;
    b->version = a->version;
    TRY(used_on(a, streams, st));
    TRY(used_on(b, streams, st));
    return w;
}

static void *shape(struct worker *w, CUstream *streams, int st, int turn) {
    switch (turn % 4) {
    case 0:
        return shape_wide(w, streams, st);
    case 1:
        return shape_nccl(w, streams, st);
    case 2:
        return shape_graph(w, streams, st);
    default:
        return shape_batch(w, streams, st);
    }
}

static void *work(void *arg) {
    struct worker *w = arg;
    CUstream streams[MAX_STREAMS];
    TRY(cuCtxSetCurrent(w->ctx));
    for (int i = 0; i < w->streams; i++)
        TRY(cuStreamCreate(&streams[i], CU_STREAM_NON_BLOCKING));
    for (int k = 0; k < w->kernels; k++) {
        int st = (int)(rand_r(&w->seed) % (unsigned)w->streams);
        if (w->churn > 0 && k > 0 && k % w->churn == 0) {
            struct buffer *b = &w->bufs[rand_r(&w->seed) % (unsigned)w->nbuf];
            if (churn(w, b, streams, st) == NULL) return NULL;
        }
        if (w->shapes > 0 && k % w->shapes == w->shapes - 1) {
            if (shape(w, streams, st, k / w->shapes) == NULL) return NULL;
            continue;
        }
        CUdeviceptr ptr[SLOTS] = {0};
        uint64_t id[SLOTS] = {0}, ver[SLOTS] = {0}, words[SLOTS] = {0};
        struct buffer *chosen[SLOTS];
        int want = 1 + (int)(rand_r(&w->seed) % SLOTS), n = 0;
        if (want > w->nbuf) want = w->nbuf;
        while (n < want) {
            unsigned pick = rand_r(&w->seed) % (unsigned)w->nbuf;
            if ((int)(rand_r(&w->seed) % 100) < w->locality)
                pick = (unsigned)(k / 32 + (int)(rand_r(&w->seed) % 2)) % (unsigned)w->nbuf;
            struct buffer *b = &w->bufs[pick];
            bool dup = false;
            for (int j = 0; j < n; j++)
                dup |= chosen[j] == b;
            if (dup) continue;
            TRY(order_after(b, streams, st));
            chosen[n] = b;
            ptr[n] = b->ptr;
            id[n] = b->id;
            ver[n] = b->version++;
            words[n] = b->bytes / 8;
            n++;
        }
        void *args[4 * SLOTS];
        for (int j = 0; j < SLOTS; j++) {
            args[4 * j] = &ptr[j];
            args[4 * j + 1] = &id[j];
            args[4 * j + 2] = &ver[j];
            args[4 * j + 3] = &words[j];
        }
        TRY(cuLaunchKernel(w->vu, 1, 1, 1, 1, 1, 1, 0, streams[st], args, NULL));
        for (int j = 0; j < n; j++)
            TRY(used_on(chosen[j], streams, st));
    }
    for (int i = 0; i < w->streams; i++) {
        TRY(cuStreamSynchronize(streams[i]));
        TRY(cuStreamDestroy(streams[i]));
    }
    if (w->exec != NULL) {
        TRY(cuGraphExecDestroy(w->exec));
        TRY(cuGraphDestroy(w->graph));
    }
    return NULL;
}

static uint64_t size_of(int b, uint64_t unit, bool mixed) {
    if (!mixed) return unit;
    static const uint64_t quarters[4] = {4, 6, 8, 1}; /* 1, 1.5, 2 and 0.25 units */
    return unit / 4 * quarters[b % 4];
}

int main(int argc, char **argv) {
    if (argc < 6 || argc > 11) {
        fprintf(stderr, "usage: stress THREADS BUFFERS_PER_THREAD BUFFER_MIB KERNELS SEED "
                        "[STREAMS [MIXED [CHURN [LOCALITY [SHAPES]]]]]\n");
        return 2;
    }
    int threads = atoi(argv[1]), per = atoi(argv[2]), mib = atoi(argv[3]), kernels = atoi(argv[4]);
    unsigned seed = (unsigned)atoi(argv[5]);
    int streams = argc > 6 ? atoi(argv[6]) : 1;
    bool mixed = argc > 7 && atoi(argv[7]) != 0;
    int churn_every = argc > 8 ? atoi(argv[8]) : 0;
    int locality = argc > 9 ? atoi(argv[9]) : 0;
    int shapes = argc > 10 ? atoi(argv[10]) : 0;
    if (threads < 1 || threads > MAX_THREADS || per < 1 || mib < 1 || kernels < 0 || streams < 1 ||
        streams > MAX_STREAMS || churn_every < 0 || locality < 0 || locality > 100 || shapes < 0 ||
        (shapes > 0 && per + WIDE_SMALL > 124)) {
        fprintf(stderr, "stress: arguments out of range\n");
        return 2;
    }
    CUcontext ctx = eng_primary(0);
    struct eng_module m;
    eng_load(&m, image);
    CUfunction vu, strct;
    CK(cuModuleGetFunction(&vu, m.mod, "stress_vu"));
    CK(cuModuleGetFunction(&strct, m.mod, "stress_struct"));

    int total = threads * per;
    struct buffer *bufs = calloc((size_t)total, sizeof *bufs);
    EXPECT(bufs != NULL, "out of memory");
    for (int b = 0; b < total; b++) {
        struct buffer *x = &bufs[b];
        x->bytes = size_of(b, (uint64_t)mib * MIB, mixed);
        CK(cuMemAlloc(&x->ptr, x->bytes));
        note_size(x->bytes);
        x->id = atomic_fetch_add(&next_id, 1) + 1;
        x->last_stream = -1;
        CK(cuEventCreate(&x->last, CU_EVENT_DISABLE_TIMING));
        CK(eng_launch(m.fill, NULL, x->ptr, x->id, 0, x->bytes));
    }
    CK(cuCtxSynchronize());

    pthread_t tid[MAX_THREADS];
    struct worker w[MAX_THREADS];
    for (int t = 0; t < threads; t++) {
        w[t] = (struct worker){.ctx = ctx,
                               .vu = vu,
                               .fill = m.fill,
                               .strct = strct,
                               .shapes = shapes,
                               .nbuf = per,
                               .bufs = &bufs[t * per],
                               .kernels = kernels,
                               .streams = streams,
                               .churn = churn_every,
                               .locality = locality,
                               .seed = seed * 7919u + (unsigned)t};
        for (int i = 0; shapes > 0 && i < WIDE_SMALL; i++) {
            struct buffer *x = &w[t].small[i];
            x->bytes = SMALL_BYTES;
            CK(cuMemAlloc(&x->ptr, x->bytes));
            note_size(x->bytes);
            x->id = atomic_fetch_add(&next_id, 1) + 1;
            x->last_stream = -1;
            CK(cuEventCreate(&x->last, CU_EVENT_DISABLE_TIMING));
            CK(eng_launch(m.fill, NULL, x->ptr, x->id, 0, x->bytes));
        }
        CK(cuCtxSynchronize());
        EXPECT(pthread_create(&tid[t], NULL, work, &w[t]) == 0, "pthread_create");
    }
    int failed = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(tid[t], NULL);
        if (w[t].error != CUDA_SUCCESS) {
            fprintf(stderr, "stress: thread %d: %s failed: %d\n", t, w[t].failed_call,
                    (int)w[t].error);
            failed = 1;
        }
    }
    CK(cuCtxSynchronize());

    /* Every buffer, copied back, must hold its final version in every word. */
    uint64_t final_bad = 0;
    for (int b = 0; b < total; b++) {
        final_bad += eng_host_check(bufs[b].ptr, bufs[b].id, bufs[b].version, bufs[b].bytes);
        CK(cuMemFree(bufs[b].ptr));
        CK(cuEventDestroy(bufs[b].last));
    }
    for (int t = 0; shapes > 0 && t < threads; t++) {
        for (int i = 0; i < WIDE_SMALL; i++) {
            struct buffer *x = &w[t].small[i];
            final_bad += eng_host_check(x->ptr, x->id, x->version, x->bytes);
            CK(cuMemFree(x->ptr));
            CK(cuEventDestroy(x->last));
        }
    }
    uint64_t in_kernel = atomic_load(&eng_errors);
    printf("stress: %d threads x %d streams x %d kernels over %d buffers of %d MiB%s: %llu "
           "mismatches in kernels, %llu at the end\n",
           threads, streams, kernels, total, mib, mixed ? " (mixed sizes)" : "",
           (unsigned long long)in_kernel, (unsigned long long)final_bad);
    printf("sizes:");
    for (size_t i = 0; i < nsizes; i++)
        printf(" %llu", (unsigned long long)sizes[i]);
    printf("\n");
    free(bufs);
    free(sizes);
    return failed || in_kernel != 0 || final_bad != 0 ? 1 : 0;
}
