/* Initialisation, fork handling and the report at exit. */
#include "init.h"

#include "driver.h"
#include "log.h"
#include "paramcache.h"
#include "registry.h"
#include "report.h"
#include "stats.h"
#include "track.h"
#include "engine.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

_Atomic int ho_mode_value = HO_MODE_OFF;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static _Atomic bool ready;
static _Thread_local bool initialising;
static bool forked_child;

void ho_degrade(const char *why) {
    int expected = atomic_load(&ho_mode_value);
    if (expected == HO_MODE_OFF) return;
    if (atomic_compare_exchange_strong(&ho_mode_value, &expected, HO_MODE_OFF))
        ho_log(HO_LOG_ERROR, "%s: tracking stops, calls pass straight to the driver", why);
}

static void write_report_at_exit(void) {
    const struct ho_options *o = ho_options();
    if (o->report == NULL) return;
    /* A fork child writes its own report only where the path tells processes apart. */
    if (forked_child && strstr(o->report, "%p") == NULL) return;
    struct ho_report_interpose ip = {.hooked = NULL, .nhooked = 0};
    const char *names[HO_NHOOKS];
    for (int i = 0; i < HO_NHOOKS; i++)
        if (atomic_load_explicit(&ho_hook_routed[i], memory_order_relaxed))
            names[ip.nhooked++] = ho_hooks[i].name;
    ip.hooked = names;
    ip.proc_lookups = atomic_load(&ho_stats.proc_lookups);
    static const char *const names_of_modes[] = {"off", "track", "offload"};
    ho_report_write(o->report, names_of_modes[ho_mode()], &ip);
}

/* The child of a fork forgets the parent's CUDA state: on a GPU, the parent's contexts and
 * allocations are unusable there. It keeps passing calls through. */
static void after_fork_child(void) {
    forked_child = true;
    ho_registry_reset();
    ho_paramcache_reset();
    ho_stats_reset();
    ho_track_reset();
    ho_engine_fork_child();
    for (int i = 0; i < HO_NHOOKS; i++)
        atomic_store(&ho_hook_routed[i], 0);
}

static void init_once(void) {
    const struct ho_options *o = ho_options();
    enum ho_mode mode = o->mode;
    if (!ho_driver_load(o->libcuda)) {
        /* The library's own configuration must not break the job: pass through to the driver the
         * process would use without it. */
        if (o->libcuda == NULL || !ho_driver_load(NULL)) return;
        mode = HO_MODE_OFF;
    }
    if (mode != HO_MODE_OFF && !ho_registry_init()) {
        ho_log(HO_LOG_ERROR, "out of memory setting up the buffer registry: calls pass through");
        mode = HO_MODE_OFF;
    }
    if (mode == HO_MODE_OFFLOAD) ho_engine_init(o);
    atomic_store(&ho_mode_value, (int)mode);
    if (o->report != NULL) atexit(write_report_at_exit);
    pthread_atfork(NULL, NULL, after_fork_child);
    static const char *const mode_names[] = {"off", "track", "offload"};
    ho_log(HO_LOG_INFO, "mode %s, driver %s", mode_names[mode],
           o->libcuda != NULL ? o->libcuda : "libcuda.so.1");
    atomic_store_explicit(&ready, true, memory_order_release);
}

bool ho_init(void) {
    if (atomic_load_explicit(&ready, memory_order_acquire)) return true;
    if (initialising) return false;
    initialising = true;
    pthread_once(&once, init_once);
    initialising = false;
    return atomic_load_explicit(&ready, memory_order_acquire);
}
