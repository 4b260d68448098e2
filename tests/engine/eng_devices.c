/* eng_devices: managed buffers on every device at once (run with SIMCUDA_DEVICES=2).
 *
 *   eng_devices BUFFERS_PER_DEVICE KERNELS_PER_THREAD
 *
 * Each device's primary context gets BUFFERS_PER_DEVICE 4 MiB buffers, filled by kernels; two
 * threads per device, each with its own stream and half of that device's buffers, launch
 * verify-and-update kernels on random ones. The budget applies to each device: moves on one
 * device must never touch the other's buffers or copy streams. At the end every buffer is checked
 * bit-exactly from its own context.
 *
 * stdout: "meminfo DEVICE free FREE total TOTAL" per device (after the run, with every buffer
 * still allocated), then "data: ok". */
#include "engtest.h"

#include <pthread.h>

#define BYTES       (4 * MIB)
#define MAX_DEVICES 4
#define MAX_BUFS    64

static const char image[] = "simcuda-module 1\n" ENG_KERNELS;

struct dev {
    CUcontext ctx;
    struct eng_module m;
    CUdeviceptr buf[MAX_BUFS];
    uint64_t id[MAX_BUFS], ver[MAX_BUFS];
};

struct worker {
    struct dev *d;
    int first, count, kernels;
    unsigned seed;
};

/* Launches made with another context current than the one the thread set: the library makes
 * progress on every device's moves at each call (their context pushed, then popped, nested pushes
 * of the same context eliding the driver's calls), and must leave the thread's own current. */
static atomic_ullong ctx_changed;

static void *work(void *arg) {
    struct worker *w = arg;
    CK(cuCtxSetCurrent(w->d->ctx));
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int k = 0; k < w->kernels; k++) {
        int i = w->first + (int)(rand_r(&w->seed) % (unsigned)w->count);
        CK(eng_launch(w->d->m.vu, s, w->d->buf[i], w->d->id[i], w->d->ver[i], BYTES));
        w->d->ver[i]++;
        CUcontext now = NULL;
        CK(cuCtxGetCurrent(&now));
        if (now != w->d->ctx) {
            atomic_fetch_add(&ctx_changed, 1);
            CK(cuCtxSetCurrent(w->d->ctx));
        }
    }
    CK(cuStreamSynchronize(s));
    CK(cuStreamDestroy(s));
    return NULL;
}

int main(int argc, char **argv) {
    int per = argc > 1 ? atoi(argv[1]) : 12, kernels = argc > 2 ? atoi(argv[2]) : 300;
    EXPECT(per >= 2 && per <= MAX_BUFS, "BUFFERS_PER_DEVICE out of range");
    CK(cuInit(0));
    int ndev = 0;
    CK(cuDeviceGetCount(&ndev));
    EXPECT(ndev >= 2 && ndev <= MAX_DEVICES, "run with SIMCUDA_DEVICES=2 (found %d)", ndev);
    static struct dev devs[MAX_DEVICES];
    for (int d = 0; d < ndev; d++) {
        struct dev *x = &devs[d];
        x->ctx = eng_primary(d);
        eng_load(&x->m, image);
        for (int i = 0; i < per; i++) {
            CK(cuMemAlloc(&x->buf[i], BYTES));
            x->id[i] = (uint64_t)(d + 1) * 1000 + (uint64_t)i;
            CK(eng_launch(x->m.fill, NULL, x->buf[i], x->id[i], 0, BYTES));
        }
    }
    pthread_t tid[2 * MAX_DEVICES];
    struct worker w[2 * MAX_DEVICES];
    for (int d = 0; d < ndev; d++) {
        for (int h = 0; h < 2; h++) {
            w[2 * d + h] = (struct worker){.d = &devs[d],
                                           .first = h * (per / 2),
                                           .count = h ? per - per / 2 : per / 2,
                                           .kernels = kernels,
                                           .seed = 17u * (unsigned)d + (unsigned)h};
            EXPECT(pthread_create(&tid[2 * d + h], NULL, work, &w[2 * d + h]) == 0, "thread");
        }
    }
    for (int t = 0; t < 2 * ndev; t++)
        pthread_join(tid[t], NULL);
    for (int d = 0; d < ndev; d++) {
        struct dev *x = &devs[d];
        CK(cuCtxSetCurrent(x->ctx));
        CK(cuCtxSynchronize());
        size_t free_b = 0, total = 0;
        CK(cuMemGetInfo(&free_b, &total));
        printf("meminfo %d free %zu total %zu\n", d, free_b, total);
        for (int i = 0; i < per; i++) {
            uint64_t bad = eng_host_check(x->buf[i], x->id[i], x->ver[i], BYTES);
            EXPECT(bad == 0, "device %d buffer %d: %llu words differ", d, i,
                   (unsigned long long)bad);
            CK(cuMemFree(x->buf[i]));
        }
    }
    EXPECT(atomic_load(&eng_errors) == 0, "%llu mismatches seen by kernels",
           (unsigned long long)atomic_load(&eng_errors));
    EXPECT(atomic_load(&ctx_changed) == 0, "%llu launches left another context current",
           (unsigned long long)atomic_load(&ctx_changed));
    printf("data: ok\n");
    return 0;
}
