/* The engine clock: the simulator's virtual clock under simcuda (stalls are then measured in its
 * time, like everything else), else CLOCK_MONOTONIC. */
#include "engine.h"
#include "real.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

typedef uint64_t (*sim_clock_fn)(void);
static sim_clock_fn sim_clock;
static pthread_once_t sim_clock_once = PTHREAD_ONCE_INIT;

/* Once, whichever thread asks first (moves and stalls are timed from any thread). */
static void sim_clock_probe(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void *f = h != NULL ? ho_real_dlsym_fn(h, "simcuda_now_ns") : NULL;
    sim_clock = (sim_clock_fn)(uintptr_t)f;
}

uint64_t ho_clock_ns(void) {
    pthread_once(&sim_clock_once, sim_clock_probe);
    if (sim_clock != NULL) return sim_clock();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
