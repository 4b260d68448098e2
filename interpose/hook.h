/* What every hook starts with. */
#ifndef HOSTOFF_HOOK_H
#define HOSTOFF_HOOK_H

#include "init.h"
#include "mode.h"
#include "route.h"
#include "stats.h"
#include "trace.h"
#include "track.h"
#include "engine.h"

/* Initialises on first use and records that this entry point was reached. False when the real
 * driver is not available (then the hook can only fail the way a missing driver would). */
static inline bool ho_enter(enum ho_hook_id id) {
    if (!ho_init()) return false;
    if (!atomic_load_explicit(&ho_hook_routed[id], memory_order_relaxed))
        atomic_store_explicit(&ho_hook_routed[id], 1, memory_order_relaxed);
    ho_trace_enter();     /* the call's time in the trace includes the progress point's */
    ho_engine_progress(); /* a progress point: nearly free when nothing is moving */
    return true;
}

/* The engine moves buffers (offload mode). */
static inline bool ho_offloading(void) {
    return ho_mode() == HO_MODE_OFFLOAD && ho_engine_active();
}

static inline bool ho_tracking(void) {
    return ho_mode() != HO_MODE_OFF;
}

/* Calls the real entry point; a driver without it answers as for any unsupported call. */
#define HO_REAL(exp, ...)                                                                          \
    (ho_real.exp != NULL ? ho_real.exp(__VA_ARGS__) : CUDA_ERROR_NOT_SUPPORTED)

/* The prologue: initialise, or fail as a process without a usable driver would. */
#define HO_ENTER(exp)                                                                              \
    do {                                                                                           \
        if (!ho_enter(HO_ID_##exp)) return CUDA_ERROR_NOT_INITIALIZED;                             \
    } while (0)

#endif
