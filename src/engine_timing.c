/* Timing for the lookahead policy: kernel durations of the steps it asks to have timed, read
 * back at progress points and given to the policy by launch index. */
#include "engine_internal.h"
#include "real.h"

#include <stdlib.h>
#include <string.h>

/* Made and destroyed as needed: only sampled steps and a few restores use them. */
CUevent ho_timing_event(struct ho_dev *d, CUstream s, bool per_thread) {
    CUevent e = NULL;
    ho_ctx_push(d);
    if (ho_real.cuEventCreate(&e, CU_EVENT_DEFAULT) == CUDA_SUCCESS) {
        if (ho_event_record(e, s, per_thread) != CUDA_SUCCESS) {
            ho_real.cuEventDestroy_v2(e);
            e = NULL;
        }
    }
    ho_ctx_pop();
    return e;
}

void ho_timing_drop(struct ho_dev *d, CUevent e) {
    if (e == NULL) return;
    ho_ctx_push(d);
    ho_real.cuEventDestroy_v2(e);
    ho_ctx_pop();
}

/* Device time between two completed events, ns (0 when it cannot be read). */
uint64_t ho_timing_read(struct ho_dev *d, CUevent a, CUevent b) {
    float ms = 0;
    ho_ctx_push(d);
    CUresult rc = ho_real.cuEventElapsedTime_v2(&ms, a, b);
    ho_ctx_pop();
    return rc == CUDA_SUCCESS && ms > 0 ? (uint64_t)((double)ms * 1e6) : 0;
}

#define TIMED_MAX 65536 /* launches timed but not read yet: beyond this, timing pauses */

/* Reads the durations of timed launches that have run, oldest first. eng.lock held. */
void ho_timing_poll(void) {
    HO_ASSERT_HELD(&eng.lock);
    size_t done = 0;
    struct ho_dev *pushed = NULL; /* one push per device in a row: those nested make no call */
    while (done < eng.ntimed) {
        struct ho_timed_launch *tl = &eng.timed[done];
        struct ho_dev *d = &eng.dev[tl->device];
        CUresult rc = ho_event_query(d, tl->after);
        if (rc == CUDA_ERROR_NOT_READY) break;
        if (d != pushed) {
            if (pushed != NULL) ho_ctx_pop();
            ho_ctx_push(d);
            pushed = d;
        }
        if (rc == CUDA_SUCCESS) {
            uint64_t ns = ho_timing_read(d, tl->before, tl->after);
            eng.policy.ops->duration(eng.policy.self, tl->launch, ns);
        }
        ho_timing_drop(d, tl->before);
        ho_timing_drop(d, tl->after);
        done++;
    }
    if (pushed != NULL) ho_ctx_pop();
    if (done == 0) return;
    memmove(eng.timed, eng.timed + done, (eng.ntimed - done) * sizeof *eng.timed);
    eng.ntimed -= done;
    atomic_fetch_sub(&eng.inflight, (int)done);
}

/* A timed launch was issued as the policy's launch `launch`. eng.lock held. */
void ho_timing_add(struct ho_dev *d, CUevent before, uint64_t launch, CUstream s, bool per_thread) {
    HO_ASSERT_HELD(&eng.lock);
    CUevent after = NULL;
    if (eng.ntimed < TIMED_MAX && eng.ntimed == eng.captimed) {
        size_t cap = eng.captimed ? eng.captimed * 2 : 1024;
        struct ho_timed_launch *n = realloc(eng.timed, cap * sizeof *n);
        if (n != NULL) {
            eng.timed = n;
            eng.captimed = cap;
        }
    }
    if (eng.ntimed < eng.captimed) after = ho_timing_event(d, s, per_thread);
    if (after == NULL) {
        ho_timing_drop(d, before);
        return;
    }
    eng.timed[eng.ntimed++] = (struct ho_timed_launch){launch, (int)(d - eng.dev), before, after};
    atomic_fetch_add(&eng.inflight, 1); /* keeps progress points polling */
}
