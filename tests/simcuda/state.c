/* Global state, initialisation, the host clock and fork handling. */
#include "sim.h"
#include "costs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sim_state sim = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .progress = PTHREAD_COND_INITIALIZER,
    .init_error = CUDA_ERROR_NOT_INITIALIZED,
};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

void sim_lock(void) {
    pthread_mutex_lock(&sim.lock);
}

void sim_unlock(void) {
    pthread_mutex_unlock(&sim.lock);
}

uint64_t sim_now(void) {
    return atomic_load_explicit(&sim.host_ns, memory_order_relaxed);
}

void sim_tick(void) {
    sim_charge_pending();
}

/* A fork child inherits the parent's address space but not its executor threads: on a GPU the
 * child cannot use the parent's CUDA state either, so every call fails there, as on the device. */
static void after_fork_child(void) {
    pthread_mutex_init(&sim.lock, NULL);
    pthread_cond_init(&sim.progress, NULL);
    if (sim.initialized) {
        sim.forked_child = true;
        sim.initialized = false;
        sim.init_error = CUDA_ERROR_NOT_INITIALIZED;
    } else {
        init_once = (pthread_once_t)PTHREAD_ONCE_INIT;
    }
    for (int i = 0; i < SIM_MAX_DEVICES; i++)
        sim.devices[i].thread_started = false;
}

static void device_setup(struct sim_device *d, int ordinal) {
    d->ordinal = ordinal;
    d->primary.magic = SIM_MAGIC_CTX;
    d->primary.dev = d;
    d->primary.primary = true;
    d->primary.id = ++sim.next_id;
    d->default_pool = sim_pool_default(ordinal);
}

static void init_once_fn(void) {
    if (!sim_config_load(&sim.cfg) || !sim_costs_load(&sim.cfg) || !sim_fail_validate()) {
        sim.init_error = CUDA_ERROR_INVALID_VALUE;
        return;
    }
    sim.ndevices = sim.cfg.devices;
    for (int i = 0; i < sim.ndevices; i++)
        device_setup(&sim.devices[i], i);
    sim_fault_install();
    sim_report_install();
    pthread_atfork(NULL, NULL, after_fork_child);
    sim.init_error = CUDA_SUCCESS;
    sim.initialized = true;
}

SIM_EXPORT CUresult cuInit(unsigned int flags) {
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (sim.forked_child) return CUDA_ERROR_NOT_INITIALIZED;
    pthread_once(&init_once, init_once_fn);
    if (sim.initialized) sim_tick();
    return sim.init_error;
}

SIM_EXPORT int simcuda_link_gbps(double out[4]) {
    if (!sim.initialized || out == NULL) return 0;
    const struct sim_link *l = sim_link();
    out[0] = l->h2d;
    out[1] = l->d2h;
    out[2] = l->h2d_duplex;
    out[3] = l->d2h_duplex;
    return 1;
}

CUresult sim_enter(void) {
    if (!sim.initialized) return sim.forked_child ? CUDA_ERROR_NOT_INITIALIZED : sim.init_error;
    sim_tick();
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDriverGetVersion(int *version) {
    if (version == NULL) return CUDA_ERROR_INVALID_VALUE;
    *version = SIM_DRIVER_VERSION;
    return CUDA_SUCCESS;
}

uint64_t sim_bytes_ns(uint64_t bytes, double gbps) {
    /* GB/s == bytes per ns; round up so a non-empty transfer always takes time. */
    double ns = (double)bytes / gbps;
    uint64_t whole = (uint64_t)ns;
    return whole + ((double)whole < ns ? 1 : 0);
}
