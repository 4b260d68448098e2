/* Initialisation, fork handling and the report at exit. */
#include "init.h"

#include "framework_env.h"
#include "log.h"
#include "mode.h"
#include "ending.h"
#include "route.h"
#include "paramcache.h"
#include "registry.h"
#include "report.h"
#include "stats.h"
#include "track.h"
#include "engine.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static _Atomic bool ready;
static _Thread_local bool initialising;
static bool forked_child;

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
    ho_engine_count_unfinished();
    ho_report_write(o->report, ho_mode_name(ho_mode()), &ip);
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
    if (!ho_route_load(o->libcuda)) {
        /* The library's own configuration must not break the job: pass through to the driver the
         * process would use without it. */
        if (o->libcuda == NULL || !ho_route_load(NULL)) return;
        mode = HO_MODE_OFF;
    }
    if (mode != HO_MODE_OFF && !ho_registry_init()) {
        ho_log(HO_LOG_ERROR, "out of memory setting up the buffer registry: calls pass through");
        mode = HO_MODE_OFF;
    }
    if (mode == HO_MODE_OFFLOAD) ho_engine_init(o);
    ho_mode_set(mode);
    if (o->report != NULL) ho_ending_add(write_report_at_exit); /* exit, SIGTERM, SIGINT */
    pthread_atfork(NULL, NULL, after_fork_child);
    ho_log(HO_LOG_INFO, "mode %s, driver %s", ho_mode_name(mode),
           o->libcuda != NULL ? o->libcuda : "libcuda.so.1");
    if (mode != HO_MODE_OFF) ho_framework_env_say();
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
