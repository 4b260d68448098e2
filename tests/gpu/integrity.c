/* Driver-API integrity test of the GPU kit: one host source for both kernel images (kit.h).
 *
 * Buffers totalling --total-mib (the kit runs it with HOSTOFF_BUDGET at a third of that) are
 * shared by --threads host threads, each with --streams non-blocking streams. Every operation
 * picks buffers at random, orders its stream after each buffer's last use (an event, as a
 * framework would) and then, holding those buffers' locks (taken in index order):
 *   - vu3 (most operations): a kernel verifies 1 to 3 buffers word by word and writes the next
 *     version of each;
 *   - copy: cuMemcpyDtoDAsync from one buffer into another of the same size (the destination
 *     takes the source's content);
 *   - upload: cuMemcpyHtoDAsync of new content from pageable host memory;
 *   - churn: a free (cuMemFreeAsync, or cuMemFree for a cuMemAlloc'd buffer) and a new buffer
 *     (cuMemAllocAsync) filled by a kernel.
 * Buffers are allocated alternately with cuMemAlloc and cuMemAllocAsync.
 * Every word's value is a function of (content id, version, index), so a lost, stale or
 * misplaced byte shows. At the end a kernel checks every buffer on the device and every buffer
 * is copied back and checked on the host. Exit 0 only when all of it is bit-exact.
 *
 * Sizes cycle through 1, 0.5, 1.5 and 1 times --buffer-mib; --small more buffers of 1 MiB stay
 * below HOSTOFF_MIN_BYTES (pass-through). Without --cubin the kernels come from the simulator's
 * text image (kernel bodies in kit_sim.c); with it, from the cubin (kernels.cu).
 *
 * --wide N adds N buffers of --wide-kib each and one more thread that, --wide-rounds times,
 * verifies and rewrites all of them in ONE launch whose by-value struct holds every pointer
 * (kit_wide: the shape of PyTorch's multi-tensor apply), while the other threads' work pushes
 * buffers out under a budget. A move that overlapped such a launch shows as wrong words.
 *
 * stdout: "integrity: ok|FAILED key=value ..." and, with --json PATH, the same as JSON. */
#include "kit.h"

#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_THREADS 64
#define MAX_STREAMS 16

struct options {
    const char *cubin, *json;
    bool corrupt;
    uint64_t total_mib, buffer_mib;
    int small, threads, streams, ops, copy_pct, upload_pct, churn_pct;
    int wide, wide_rounds;
    uint64_t wide_kib;
    unsigned seed;
};

struct buffer {
    pthread_mutex_t lock;
    CUdeviceptr ptr;
    uint64_t bytes;
    uint64_t id, version; /* the content: word i holds kit_word(id, version, i) */
    bool async;           /* from cuMemAllocAsync (freed with cuMemFreeAsync), else cuMemAlloc */
    CUevent last;         /* recorded after the last operation on it */
};

struct counts {
    _Atomic uint64_t vu3, copies, uploads, churns, wide, kernel_bytes, copy_bytes;
};

static struct options opt = {
    .total_mib = 96,
    .buffer_mib = 8,
    .small = 4,
    .threads = 4,
    .streams = 2,
    .ops = 400,
    .copy_pct = 10,
    .upload_pct = 3,
    .churn_pct = 3,
    .wide_rounds = 8,
    .wide_kib = 4096,
    .seed = 1,
};
static struct kit_module mod;
static CUcontext ctx;
static struct buffer *bufs; /* nbufs for the workers, then nwide for the wide thread */
static int nbufs, nwide;
static uint64_t max_bytes;
static CUdeviceptr errors_dev; /* mismatches counted by kernels */
static _Atomic uint64_t next_id;
static struct counts counts;

struct worker {
    int index;
    unsigned seed;
    CUstream streams[MAX_STREAMS];
    uint64_t *host; /* upload staging (pageable), max_bytes */
    CUresult rc;
    const char *failed;
};

#define TRY(call)                                                                                  \
    do {                                                                                           \
        CUresult try_rc_ = (call);                                                                 \
        if (try_rc_ != CUDA_SUCCESS) {                                                             \
            w->rc = try_rc_;                                                                       \
            w->failed = #call;                                                                     \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

static uint64_t size_of(int b) {
    static const uint64_t quarters[4] = {4, 2, 6, 4};
    return opt.buffer_mib * KIT_MIB / 4 * quarters[b % 4];
}

static int cmp_int(const void *a, const void *b) {
    return *(const int *)a - *(const int *)b;
}

/* Locks the buffers (sorted, distinct indices) and orders stream s after their last uses. */
static CUresult acquire(const int *idx, int n, CUstream s) {
    CUresult rc = CUDA_SUCCESS;
    for (int i = 0; i < n; i++)
        pthread_mutex_lock(&bufs[idx[i]].lock);
    for (int i = 0; i < n && rc == CUDA_SUCCESS; i++)
        rc = cuStreamWaitEvent(s, bufs[idx[i]].last, 0);
    return rc;
}

/* Records each buffer's last use on s and unlocks them. */
static CUresult release(const int *idx, int n, CUstream s) {
    CUresult rc = CUDA_SUCCESS;
    for (int i = 0; i < n; i++) {
        if (rc == CUDA_SUCCESS) rc = cuEventRecord(bufs[idx[i]].last, s);
        pthread_mutex_unlock(&bufs[idx[i]].lock);
    }
    return rc;
}

static void *work(void *arg) {
    struct worker *w = arg;
    int held[KIT_SLOTS], nheld = 0;
    CUstream s = NULL;
    w->rc = cuCtxSetCurrent(ctx);
    if (w->rc != CUDA_SUCCESS) {
        w->failed = "cuCtxSetCurrent";
        return NULL;
    }
    for (int i = 0; i < opt.streams; i++)
        TRY(cuStreamCreate(&w->streams[i], CU_STREAM_NON_BLOCKING));
    int ops = opt.ops / opt.threads + (w->index < opt.ops % opt.threads);
    for (int k = 0; k < ops; k++) {
        s = w->streams[rand_r(&w->seed) % (unsigned)opt.streams];
        int r = (int)(rand_r(&w->seed) % 100);
        if (r < opt.copy_pct) {
            int src = (int)(rand_r(&w->seed) % (unsigned)nbufs), dst = -1;
            int start = (int)(rand_r(&w->seed) % (unsigned)nbufs);
            for (int j = 0; j < nbufs && dst < 0; j++) {
                int c = (start + j) % nbufs;
                if (c != src && bufs[c].bytes == bufs[src].bytes) dst = c;
            }
            if (dst >= 0) {
                held[0] = src < dst ? src : dst;
                held[1] = src < dst ? dst : src;
                nheld = 2;
                TRY(acquire(held, nheld, s));
                struct buffer *a = &bufs[src], *b = &bufs[dst];
                TRY(cuMemcpyDtoDAsync(b->ptr, a->ptr, a->bytes, s));
                b->id = a->id;
                b->version = a->version;
                counts.copies++;
                counts.copy_bytes += a->bytes;
                TRY(release(held, nheld, s));
                nheld = 0;
                continue;
            }
        } else if (r < opt.copy_pct + opt.upload_pct) {
            held[0] = (int)(rand_r(&w->seed) % (unsigned)nbufs);
            nheld = 1;
            struct buffer *b = &bufs[held[0]];
            uint64_t id = atomic_fetch_add(&next_id, 1) + 1;
            TRY(acquire(held, nheld, s));
            for (uint64_t i = 0; i < b->bytes / 8; i++)
                w->host[i] = kit_word(id, 0, i);
            /* Pageable source: the driver stages it before returning, so reuse is safe. */
            TRY(cuMemcpyHtoDAsync(b->ptr, w->host, b->bytes, s));
            b->id = id;
            b->version = 0;
            counts.uploads++;
            counts.copy_bytes += b->bytes;
            TRY(release(held, nheld, s));
            nheld = 0;
            continue;
        } else if (r < opt.copy_pct + opt.upload_pct + opt.churn_pct) {
            held[0] = (int)(rand_r(&w->seed) % (unsigned)nbufs);
            nheld = 1;
            struct buffer *b = &bufs[held[0]];
            TRY(acquire(held, nheld, s));
            /* cuMemAlloc'd memory is freed with cuMemFree (which waits for the device). */
            TRY(b->async ? cuMemFreeAsync(b->ptr, s) : cuMemFree(b->ptr));
            b->ptr = 0;
            TRY(cuMemAllocAsync(&b->ptr, b->bytes, s));
            b->async = true;
            b->id = atomic_fetch_add(&next_id, 1) + 1;
            b->version = 0;
            TRY(kit_fill_launch(&mod, s, b->ptr, b->id, 0, b->bytes));
            counts.churns++;
            counts.kernel_bytes += b->bytes;
            TRY(release(held, nheld, s));
            nheld = 0;
            continue;
        }
        /* vu3 on 1 to 3 distinct buffers. */
        int want = 1 + (int)(rand_r(&w->seed) % KIT_SLOTS);
        if (want > nbufs) want = nbufs;
        nheld = 0;
        while (nheld < want) {
            int c = (int)(rand_r(&w->seed) % (unsigned)nbufs);
            bool dup = false;
            for (int j = 0; j < nheld; j++)
                dup |= held[j] == c;
            if (!dup) held[nheld++] = c;
        }
        qsort(held, (size_t)nheld, sizeof held[0], cmp_int);
        TRY(acquire(held, nheld, s));
        CUdeviceptr ptr[KIT_SLOTS] = {0};
        uint64_t id[KIT_SLOTS] = {0}, ver[KIT_SLOTS] = {0}, words[KIT_SLOTS] = {0}, most = 0;
        void *args[4 * KIT_SLOTS + 1];
        for (int j = 0; j < KIT_SLOTS; j++) {
            if (j < nheld) {
                struct buffer *b = &bufs[held[j]];
                ptr[j] = b->ptr;
                id[j] = b->id;
                ver[j] = b->version++;
                words[j] = b->bytes / 8;
                if (words[j] > most) most = words[j];
                counts.kernel_bytes += 2 * b->bytes;
            }
            args[4 * j] = &ptr[j];
            args[4 * j + 1] = &id[j];
            args[4 * j + 2] = &ver[j];
            args[4 * j + 3] = &words[j];
        }
        args[4 * KIT_SLOTS] = &errors_dev;
        TRY(cuLaunchKernel(mod.vu3, kit_blocks(&mod, most), 1, 1, 256, 1, 1, 0, s, args, NULL));
        counts.vu3++;
        TRY(release(held, nheld, s));
        nheld = 0;
    }
    for (int i = 0; i < opt.streams; i++) {
        TRY(cuStreamSynchronize(w->streams[i]));
        TRY(cuStreamDestroy(w->streams[i]));
    }
    return NULL;
out:
    for (int i = 0; i < nheld; i++)
        pthread_mutex_unlock(&bufs[held[i]].lock);
    return NULL;
}

/* The wide thread: --wide-rounds launches of kit_wide over every wide buffer. Only this thread
 * uses them, so it needs no locks; every other round it waits for its stream, so some launches
 * meet buffers that were moved out meanwhile and some are still queued when the next moves
 * start. */
static void *wide_work(void *arg) {
    struct worker *w = arg;
    CUstream s = NULL;
    static struct kit_wide_args a; /* 2 KiB: not on the stack; one wide thread */
    w->rc = cuCtxSetCurrent(ctx);
    if (w->rc != CUDA_SUCCESS) {
        w->failed = "cuCtxSetCurrent";
        return NULL;
    }
    TRY(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    struct buffer *wb = bufs + nbufs;
    for (int r = 0; r < opt.wide_rounds; r++) {
        memset(&a, 0, sizeof a);
        for (int b = 0; b < nwide; b++) {
            TRY(cuStreamWaitEvent(s, wb[b].last, 0));
            a.buf[b] = (uint64_t *)(uintptr_t)wb[b].ptr;
            a.id[b] = wb[b].id;
        }
        a.words = wb[0].bytes / 8;
        a.version = wb[0].version;
        a.count = (uint64_t)nwide;
        TRY(kit_wide_launch(&mod, s, &a, errors_dev));
        for (int b = 0; b < nwide; b++) {
            wb[b].version++;
            TRY(cuEventRecord(wb[b].last, s));
        }
        counts.wide++;
        counts.kernel_bytes += 2 * a.words * 8 * (uint64_t)nwide;
        if (r % 2 == 1) TRY(cuStreamSynchronize(s));
    }
    TRY(cuStreamSynchronize(s));
    TRY(cuStreamDestroy(s));
    return NULL;
out:
    return NULL;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: integrity [--cubin PATH] [--total-mib N] [--buffer-mib N] [--small N]\n"
            "                 [--threads N] [--streams N] [--ops N] [--seed N] [--copy-pct N]\n"
            "                 [--upload-pct N] [--churn-pct N] [--json PATH] [--corrupt]\n"
            "                 [--wide N] [--wide-kib N] [--wide-rounds N]\n"
            "Buffers totalling --total-mib (default 96) in sizes cycling 1, 0.5, 1.5, 1 x\n"
            "--buffer-mib (default 8), plus --small 1 MiB ones (default 4); --threads (4) x\n"
            "--streams (2) issue --ops (400) random operations; every byte is checked at the end.\n"
            "Without --cubin the kernels are the simulator's text image (kit_sim.c).\n"
            "--corrupt: overwrite one word before verifying (the check must then fail).\n"
            "--wide N (up to 128): N more buffers of --wide-kib (4096) that one more thread\n"
            "rewrites --wide-rounds (8) times, all of them in one launch (a by-value struct).\n");
}

static int parse(int argc, char **argv) {
    static const struct option longs[] = {
        {"cubin", required_argument, NULL, 'c'},
        {"total-mib", required_argument, NULL, 't'},
        {"buffer-mib", required_argument, NULL, 'b'},
        {"small", required_argument, NULL, 'm'},
        {"threads", required_argument, NULL, 'T'},
        {"streams", required_argument, NULL, 'S'},
        {"ops", required_argument, NULL, 'o'},
        {"seed", required_argument, NULL, 's'},
        {"copy-pct", required_argument, NULL, 'C'},
        {"upload-pct", required_argument, NULL, 'U'},
        {"churn-pct", required_argument, NULL, 'H'},
        {"json", required_argument, NULL, 'j'},
        {"corrupt", no_argument, NULL, 'X'},
        {"wide", required_argument, NULL, 'W'},
        {"wide-kib", required_argument, NULL, 'K'},
        {"wide-rounds", required_argument, NULL, 'R'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        switch (c) {
        case 'c':
            opt.cubin = optarg;
            break;
        case 'j':
            opt.json = optarg;
            break;
        case 't':
            opt.total_mib = strtoull(optarg, NULL, 10);
            break;
        case 'b':
            opt.buffer_mib = strtoull(optarg, NULL, 10);
            break;
        case 'm':
            opt.small = atoi(optarg);
            break;
        case 'T':
            opt.threads = atoi(optarg);
            break;
        case 'S':
            opt.streams = atoi(optarg);
            break;
        case 'o':
            opt.ops = atoi(optarg);
            break;
        case 's':
            opt.seed = (unsigned)strtoul(optarg, NULL, 10);
            break;
        case 'C':
            opt.copy_pct = atoi(optarg);
            break;
        case 'U':
            opt.upload_pct = atoi(optarg);
            break;
        case 'H':
            opt.churn_pct = atoi(optarg);
            break;
        case 'X':
            opt.corrupt = true;
            break;
        case 'W':
            opt.wide = atoi(optarg);
            break;
        case 'K':
            opt.wide_kib = strtoull(optarg, NULL, 10);
            break;
        case 'R':
            opt.wide_rounds = atoi(optarg);
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc || opt.total_mib < 1 || opt.buffer_mib < 4 || opt.buffer_mib % 4 != 0 ||
        opt.small < 0 || opt.threads < 1 || opt.threads > MAX_THREADS || opt.streams < 1 ||
        opt.streams > MAX_STREAMS || opt.ops < 0 || opt.copy_pct < 0 || opt.upload_pct < 0 ||
        opt.churn_pct < 0 || opt.copy_pct + opt.upload_pct + opt.churn_pct > 100 || opt.wide < 0 ||
        opt.wide > KIT_WIDE_MAX || opt.wide_rounds < 1 || opt.wide_kib < 4 ||
        opt.wide_kib % 4 != 0) {
        fprintf(stderr,
                "integrity: arguments out of range (--buffer-mib: a multiple of 4; "
                "--wide: 0 to %d; --wide-kib: a multiple of 4)\n",
                KIT_WIDE_MAX);
        usage(stderr);
        return 2;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (parse(argc, argv) != 0) return 2;
    CUdevice dev;
    ctx = kit_primary(&dev);
    kit_load(&mod, opt.cubin);
    KIT_CK(cuMemAlloc(&errors_dev, 4096));
    KIT_CK(cuMemsetD8(errors_dev, 0, 4096));

    /* Buffers: sizes cycle until the total is reached, then the small ones. */
    uint64_t total = 0, want = opt.total_mib * KIT_MIB;
    int cap = 0;
    while (total < want)
        total += size_of(cap++);
    cap += opt.small;
    nwide = opt.wide;
    bufs = calloc((size_t)(cap + nwide), sizeof *bufs);
    if (bufs == NULL) return 1;
    total = 0;
    double t0 = kit_now();
    for (nbufs = 0; nbufs < cap + nwide; nbufs++) {
        struct buffer *b = &bufs[nbufs];
        b->bytes = nbufs >= cap              ? opt.wide_kib * 1024
                   : nbufs < cap - opt.small ? size_of(nbufs)
                                             : KIT_MIB;
        if (b->bytes > max_bytes) max_bytes = b->bytes;
        total += b->bytes;
        pthread_mutex_init(&b->lock, NULL);
        b->async = nbufs % 2 == 1; /* both allocation paths, alternately */
        if (b->async)
            KIT_CK(cuMemAllocAsync(&b->ptr, b->bytes, NULL));
        else
            KIT_CK(cuMemAlloc(&b->ptr, b->bytes));
        b->id = atomic_fetch_add(&next_id, 1) + 1;
        KIT_CK(cuEventCreate(&b->last, CU_EVENT_DISABLE_TIMING));
        KIT_CK(kit_fill_launch(&mod, NULL, b->ptr, b->id, 0, b->bytes));
        KIT_CK(cuEventRecord(b->last, NULL));
    }
    KIT_CK(cuCtxSynchronize());
    nbufs = cap; /* the workers' buffers; the wide ones follow */
    const char *budget = getenv("HOSTOFF_BUDGET");
    printf("integrity: %d buffers (%d wide), %.1f MiB in all, HOSTOFF_BUDGET=%s, kernels from "
           "%s\n",
           nbufs + nwide, nwide, (double)total / KIT_MIB, budget ? budget : "(unset)", mod.image);
    fflush(stdout);

    double t1 = kit_now();
    struct worker *ws = calloc((size_t)opt.threads + 1, sizeof *ws);
    pthread_t *tids = calloc((size_t)opt.threads + 1, sizeof *tids);
    if (ws == NULL || tids == NULL) return 1;
    for (int t = 0; t < opt.threads; t++) {
        ws[t].index = t;
        ws[t].seed = opt.seed * 7919u + (unsigned)t;
        ws[t].host = malloc(max_bytes);
        if (ws[t].host == NULL) return 1;
        pthread_create(&tids[t], NULL, work, &ws[t]);
    }
    int nthreads = opt.threads;
    if (nwide > 0) {
        ws[nthreads].index = nthreads;
        pthread_create(&tids[nthreads], NULL, wide_work, &ws[nthreads]);
        nthreads++;
    }
    int failed_threads = 0;
    for (int t = 0; t < nthreads; t++) {
        pthread_join(tids[t], NULL);
        if (ws[t].rc != CUDA_SUCCESS) {
            fprintf(stderr, "integrity: thread %d: %s failed: %s (%d)\n", t, ws[t].failed,
                    kit_rc_name(ws[t].rc), (int)ws[t].rc);
            failed_threads++;
        }
        free(ws[t].host);
    }
    free(ws);
    free(tids);
    CUresult sync_rc = cuCtxSynchronize();
    /* --corrupt: one word of a buffer in the middle (of the wide ones when there are). */
    int victim = nwide > 0 ? nbufs + nwide / 2 : nbufs / 2;
    if (opt.corrupt && sync_rc == CUDA_SUCCESS && nbufs + nwide > 0)
        sync_rc = cuMemsetD8(bufs[victim].ptr + 8 * 5, 0xff, 8);
    double t2 = kit_now();

    /* Verification: on the device, then every byte on the host. */
    uint64_t device_bad = 0, host_bad = 0;
    int bad_buffers = 0;
    CUresult verify_rc = sync_rc;
    nbufs += nwide; /* every buffer from here on */
    for (int i = 0; i < nbufs && verify_rc == CUDA_SUCCESS; i++)
        verify_rc = kit_check_launch(&mod, NULL, bufs[i].ptr, bufs[i].id, bufs[i].version,
                                     bufs[i].bytes, errors_dev);
    if (verify_rc == CUDA_SUCCESS) verify_rc = cuCtxSynchronize();
    if (verify_rc == CUDA_SUCCESS)
        verify_rc = cuMemcpyDtoH(&device_bad, errors_dev, sizeof device_bad);
    uint64_t *host = malloc(max_bytes);
    if (host == NULL) return 1;
    for (int i = 0; i < nbufs && verify_rc == CUDA_SUCCESS; i++) {
        struct buffer *b = &bufs[i];
        verify_rc = cuMemcpyDtoH(host, b->ptr, b->bytes);
        uint64_t bad = 0, first = 0;
        for (uint64_t j = 0; j < b->bytes / 8 && verify_rc == CUDA_SUCCESS; j++) {
            if (host[j] != kit_word(b->id, b->version, j) && bad++ == 0) first = j;
        }
        if (bad != 0) {
            if (bad_buffers++ < 8)
                fprintf(stderr,
                        "integrity: buffer %d (%llu bytes): %llu words wrong, first at word "
                        "%llu: %#llx, expected %#llx\n",
                        i, (unsigned long long)b->bytes, (unsigned long long)bad,
                        (unsigned long long)first, (unsigned long long)host[first],
                        (unsigned long long)kit_word(b->id, b->version, first));
            host_bad += bad;
        }
    }
    free(host);
    double t3 = kit_now();
    for (int i = 0; i < nbufs; i++) {
        cuEventDestroy(bufs[i].last);
        pthread_mutex_destroy(&bufs[i].lock);
    }
    if (verify_rc != CUDA_SUCCESS)
        fprintf(stderr, "integrity: synchronising or verifying failed: %s (%d)\n",
                kit_rc_name(verify_rc), (int)verify_rc);

    bool ok = failed_threads == 0 && verify_rc == CUDA_SUCCESS && device_bad == 0 && host_bad == 0;
    char line[1024];
    snprintf(line, sizeof line,
             "buffers=%d total_bytes=%llu threads=%d streams=%d ops=%d vu3=%llu copies=%llu "
             "uploads=%llu churns=%llu wide_buffers=%d wide_launches=%llu kernel_bytes=%llu "
             "copy_bytes=%llu device_mismatches=%llu "
             "host_mismatches=%llu bad_buffers=%d failed_threads=%d setup_s=%.3f ops_s=%.3f "
             "verify_s=%.3f",
             nbufs, (unsigned long long)total, opt.threads, opt.streams, opt.ops,
             (unsigned long long)counts.vu3, (unsigned long long)counts.copies,
             (unsigned long long)counts.uploads, (unsigned long long)counts.churns, nwide,
             (unsigned long long)counts.wide, (unsigned long long)counts.kernel_bytes,
             (unsigned long long)counts.copy_bytes, (unsigned long long)device_bad,
             (unsigned long long)host_bad, bad_buffers, failed_threads, t1 - t0, t2 - t1, t3 - t2);
    printf("integrity: %s %s\n", ok ? "ok" : "FAILED", line);
    if (opt.json != NULL) {
        FILE *f = fopen(opt.json, "w");
        if (f != NULL) {
            fprintf(f, "{\"ok\": %s, \"image\": \"%s\"", ok ? "true" : "false",
                    opt.cubin ? "cubin" : "simulator");
            for (char *tok = strtok(line, " "); tok != NULL; tok = strtok(NULL, " ")) {
                char *eq = strchr(tok, '=');
                if (eq == NULL) continue;
                *eq = '\0';
                fprintf(f, ", \"%s\": %s", tok, eq + 1);
            }
            fprintf(f, "}\n");
            fclose(f);
        }
    }
    free(bufs);
    return ok ? 0 : 1;
}
