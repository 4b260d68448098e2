/* eng_pool: buffers of many sizes cycled through a budget, step after step, for the host pool
 * (src/pool_host.c): how many pinned host slots each step creates and releases.
 *
 *   eng_pool STEPS MIB...
 *
 * One buffer per MIB argument, of that many MiB less a page (so its span rounds up to the 2 MiB
 * granule, as an application's odd sizes do). Each step runs one verify-and-update kernel on
 * every buffer in order, then the buffers in reverse order, so the engine evicts and restores
 * buffers of every size in a different mix of sizes on the host at each moment, and every kernel
 * checks every word of its buffer (a byte lost or stale after an eviction counts as a mismatch).
 * Every buffer is checked bit-exactly through a synchronous copy at the end.
 *
 * stdout, per step: "step S host_creates C host_releases R" (the simulator's cumulative counts
 * of host-located cuMemCreate and cuMemRelease after that step), then "data: ok". */
#include "engtest.h"

#define MAXBUF 32

static const char image[] = "simcuda-module 1\n" ENG_KERNELS;

int main(int argc, char **argv) {
    EXPECT(argc >= 3 && argc - 2 <= MAXBUF, "usage: eng_pool STEPS MIB... (at most %d)", MAXBUF);
    int steps = atoi(argv[1]), n = argc - 2;
    eng_primary(0);
    struct eng_module m;
    eng_load(&m, image);
    CUdeviceptr buf[MAXBUF];
    uint64_t bytes[MAXBUF], ver[MAXBUF];
    for (int i = 0; i < n; i++) {
        bytes[i] = strtoull(argv[i + 2], NULL, 10) * MIB - 4096;
        CK(cuMemAlloc(&buf[i], bytes[i]));
        ver[i] = 0;
        CK(eng_launch(m.fill, NULL, buf[i], (uint64_t)i + 1, 0, bytes[i]));
    }
    for (int s = 0; s < steps; s++) {
        for (int k = 0; k < 2 * n; k++) {
            int i = k < n ? k : 2 * n - 1 - k;
            CK(eng_launch(m.vu, NULL, buf[i], (uint64_t)i + 1, ver[i], bytes[i]));
            ver[i]++;
        }
        CK(cuCtxSynchronize());
        printf("step %d host_creates %llu host_releases %llu\n", s + 1,
               (unsigned long long)simcuda_calls("cuMemCreate.host"),
               (unsigned long long)simcuda_calls("cuMemRelease.host"));
    }
    for (int i = 0; i < n; i++) {
        uint64_t bad = eng_host_check(buf[i], (uint64_t)i + 1, ver[i], bytes[i]);
        EXPECT(bad == 0, "buffer %d: %llu words differ", i, (unsigned long long)bad);
        CK(cuMemFree(buf[i]));
    }
    EXPECT(atomic_load(&eng_errors) == 0, "%llu mismatches seen by kernels",
           (unsigned long long)atomic_load(&eng_errors));
    printf("data: ok\n");
    return 0;
}
