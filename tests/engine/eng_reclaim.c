/* eng_reclaim: a restore whose cuMemCreate runs out of memory reclaims (evicts) while a launch is
 * being prepared: the buffers that launch already settled must not be left leaving under it.
 *
 *   eng_reclaim
 *
 * Run with HOSTOFF_BUDGET=10M HOSTOFF_MIN_BYTES=2M HOSTOFF_POLICY=lru and
 * SIMCUDA_FAIL=cuMemCreate:6 (the restore's create; the first five are B, X, A, B's host slot
 * and D, in that order). Single-threaded, so every step is deterministic:
 *
 *   1. B (2 MiB), X (2 MiB), A (3 MiB, a 4 MiB span) filled in that order: 8 MiB resident;
 *   2. D (4 MiB) evicts B (the least recently used); D is freed: its chunk is pooled;
 *   3. one launch uses A (resident) then B (on the host). Settling A leaves it as it is; B's
 *      demand restore has room once D's chunk is given back, so it creates a handle, which
 *      fails; the reclaim that follows evicts the least recently used, X then A (not protected
 *      there), and waits only until X's chunk (exactly B's span) is pooled. Unless the engine
 *      keeps A from being chosen, or cancels or finishes its eviction before the launch is
 *      issued, A's copy to the host is taken before the launch writes A, and A's eviction then
 *      remaps A to that stale copy: the launch's writes are lost.
 *   4. every buffer is checked by a kernel and by a copy back.
 *
 * stdout: "data: ok". */
#include "engtest.h"

/* pair_vu: eng_vu on two buffers: (ptr, id, version, words) x 2. */
void pair_vu(void **p) {
    eng_vu(p);
    eng_vu(p + 4);
}

static const char image[] =
    "simcuda-module 1\n" ENG_KERNELS "kernel pair_vu ptr u64 u64 u64 ptr u64 u64 u64 ns=20000\n";

struct buf {
    CUdeviceptr ptr;
    uint64_t id, version, bytes;
};

static void fill(const struct eng_module *m, CUstream s, struct buf *b) {
    CK(eng_launch(m->fill, s, b->ptr, b->id, b->version, b->bytes));
    CK(cuStreamSynchronize(s));
}

int main(void) {
    eng_primary(0);
    struct eng_module m;
    eng_load(&m, image);
    CUfunction pair;
    CK(cuModuleGetFunction(&pair, m.mod, "pair_vu"));
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

    struct buf b = {0, 1, 0, 2 * MIB}, x = {0, 2, 0, 2 * MIB}, a = {0, 3, 0, 3 * MIB},
               d = {0, 4, 0, 4 * MIB};
    CK(cuMemAlloc(&b.ptr, b.bytes));
    CK(cuMemAlloc(&x.ptr, x.bytes));
    CK(cuMemAlloc(&a.ptr, a.bytes));
    fill(&m, s, &b);
    fill(&m, s, &x);
    fill(&m, s, &a);

    CK(cuMemAlloc(&d.ptr, d.bytes)); /* evicts B */
    fill(&m, s, &d);
    CK(cuMemFree(d.ptr)); /* its chunk is pooled: room for B, but not of B's size */

    uint64_t aw = a.bytes / 8, bw = b.bytes / 8;
    void *args[] = {&a.ptr, &a.id, &a.version, &aw, &b.ptr, &b.id, &b.version, &bw};
    CK(cuLaunchKernel(pair, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    a.version++;
    b.version++;
    CK(cuStreamSynchronize(s));

    /* Each buffer must hold what the launch wrote. */
    CK(eng_launch(m.check, s, a.ptr, a.id, a.version, a.bytes));
    CK(eng_launch(m.check, s, b.ptr, b.id, b.version, b.bytes));
    CK(eng_launch(m.check, s, x.ptr, x.id, x.version, x.bytes));
    CK(cuStreamSynchronize(s));
    uint64_t in_kernels = atomic_load(&eng_errors);
    uint64_t at_end = eng_host_check(a.ptr, a.id, a.version, a.bytes) +
                      eng_host_check(b.ptr, b.id, b.version, b.bytes) +
                      eng_host_check(x.ptr, x.id, x.version, x.bytes);
    printf("eng_reclaim: %llu mismatches in kernels, %llu at the end\n",
           (unsigned long long)in_kernels, (unsigned long long)at_end);
    EXPECT(in_kernels == 0 && at_end == 0, "data lost");
    CK(cuMemFree(a.ptr));
    CK(cuMemFree(b.ptr));
    CK(cuMemFree(x.ptr));
    printf("data: ok\n");
    return 0;
}
