/* The trace (HOSTOFF_TRACE): what the library observes, written as JSON Lines, schema version 1
 * (docs/trace-format.md): allocations, frees, launches with the buffers they touch, copies,
 * synchronisations, cross-stream waits.
 *
 * Hooks call these around the real driver call:
 *
 *     uint64_t tt = ho_trace_begin();       the call's entry time, 0 when not tracing
 *     ... real call ...
 *     ho_trace_sync(tt, ...);               records the event; nothing when tt == 0
 *
 * When tracing is off, ho_trace_begin is one load and one predictable branch, and every other
 * entry point is a test of the register holding tt: nothing else runs on the hot path.
 *
 * Records go into one process-wide buffer under a mutex: a trace is a diagnostic the user asks
 * for, so one uncontended lock per traced call (tens of ns, next to microseconds of driver call)
 * buys the property the replay needs: lines are in the one order in which calls reached the
 * driver, across threads, without merging per-thread buffers afterwards. The buffer is written
 * out when it holds enough lines whose kernel durations are known, and at exit. */
#ifndef HOSTOFF_TRACE_H
#define HOSTOFF_TRACE_H

#include "cuda_api.h"
#include "registry.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Whether this process traces: decided at the first traced call (after the library initialised,
 * so the options and the mode are known), OFF for good after a fork or at exit. */
enum ho_trace_state { HO_TRACE_OFF, HO_TRACE_UNDECIDED, HO_TRACE_ON };
extern _Atomic int ho_trace_state;

uint64_t ho_trace_begin_slow(void);
void ho_trace_enter_slow(void);

/* A hook's entry, before its progress point (hook.h): the time a traced call begins is noted
 * here, per thread, so that the engine's work at the progress point (completing moves: their
 * remaps are the driver's VMM calls) counts in the call's `d` like the rest of its time. Before,
 * the trace began each call after that work, and it showed as host time between calls: a
 * replay of such a trace charged it again as the application's own, and --breakdown saw about a
 * quarter of the host's time in calls (gpt2-1k.tensor on NVLink-C2C at 70%, last three steps:
 * 326 of 1214 ms in launches, allocations and frees; launches alone 125 of 506). */
static inline void ho_trace_enter(void) {
    /* Only once tracing is on: the decision waits for the first traced call, as before. */
    if (__builtin_expect(atomic_load_explicit(&ho_trace_state, memory_order_relaxed) != HO_TRACE_ON,
                         1))
        return;
    ho_trace_enter_slow();
}

/* The entry time of a traced call (the trace clock, never 0), or 0 when not tracing: the time
 * ho_trace_enter noted for the hook this thread is in, once. */
static inline uint64_t ho_trace_begin(void) {
    if (__builtin_expect(
            atomic_load_explicit(&ho_trace_state, memory_order_relaxed) == HO_TRACE_OFF, 1))
        return 0;
    return ho_trace_begin_slow();
}

/* ---------------------------------------------------------------------- allocations, frees */

void ho_trace_alloc_slow(uint64_t t0, uint64_t ptr, CUstream s, bool has_stream, bool per_thread);
/* An allocation at ptr succeeded (looked up in the registry: only device, stream-ordered and
 * managed buffers are traced). */
static inline void ho_trace_alloc(uint64_t t0, uint64_t ptr, CUstream s, bool has_stream,
                                  bool per_thread) {
    if (__builtin_expect(t0 != 0, 0)) ho_trace_alloc_slow(t0, ptr, s, has_stream, per_thread);
}

uint64_t ho_trace_free_id_slow(uint64_t ptr);
/* Before a free: the traced buffer at ptr (its id), or 0. */
static inline uint64_t ho_trace_free_id(uint64_t t0, uint64_t ptr) {
    return __builtin_expect(t0 != 0, 0) ? ho_trace_free_id_slow(ptr) : 0;
}

void ho_trace_free_slow(uint64_t t0, uint64_t id, CUstream s, bool has_stream, bool per_thread);
/* After the free: records it when it succeeded; returns rc. */
static inline CUresult ho_trace_freed(uint64_t t0, uint64_t id, CUstream s, bool has_stream,
                                      bool per_thread, CUresult rc) {
    if (__builtin_expect(id != 0, 0) && rc == CUDA_SUCCESS)
        ho_trace_free_slow(t0, id, s, has_stream, per_thread);
    return rc;
}

/* -------------------------------------------------------------------------------- launches */

/* One launch, from its hook's entry to its end. The kernel's device duration is measured by a
 * pair of events recorded around the real launch and read back once the application has
 * synchronised that stream (or at exit): never a wait of the library's own. */
struct ho_trace_launch {
    uint64_t t0;   /* entry time; 0: not traced */
    CUevent ev[2]; /* start and end, or NULL: not timed */
};

void ho_trace_launch_begin_slow(struct ho_trace_launch *l, uint64_t t0);
static inline void ho_trace_launch_begin(struct ho_trace_launch *l) {
    l->t0 = ho_trace_begin();
    if (__builtin_expect(l->t0 != 0, 0)) ho_trace_launch_begin_slow(l, l->t0);
}

/* The buffers the launch touches (track.c, from its parameter scan; the registry's read side
 * held). Kept per thread until the launch ends. */
void ho_trace_uses_slow(struct ho_buffer *const *bufs, int n);
static inline void ho_trace_uses(struct ho_buffer *const *bufs, int n) {
    if (__builtin_expect(atomic_load_explicit(&ho_trace_state, memory_order_relaxed) == HO_TRACE_ON,
                         0))
        ho_trace_uses_slow(bufs, n);
}

void ho_trace_launch_issue_slow(struct ho_trace_launch *l, CUstream s, bool per_thread);
/* Right before the real launch: records the start event. */
static inline void ho_trace_launch_issue(struct ho_trace_launch *l, CUstream s, bool per_thread) {
    if (__builtin_expect(l->t0 != 0, 0)) ho_trace_launch_issue_slow(l, s, per_thread);
}

void ho_trace_launch_issued_slow(struct ho_trace_launch *l, CUstream s, bool per_thread,
                                 CUresult rc);
/* Right after the real launch: records the end event, before the engine's work after a launch
 * (planning, starting moves). That work is host time in the launch call; were the end event
 * recorded after it, an idle stream would complete the event only then, and the kernel's
 * duration would include the host's wait (a 2 ms kernel once read as 332 ms), which a replay of
 * the trace without a budget would then count as the step without offload. */
static inline void ho_trace_launch_issued(struct ho_trace_launch *l, CUstream s, bool per_thread,
                                          CUresult rc) {
    if (__builtin_expect(l->t0 != 0, 0)) ho_trace_launch_issued_slow(l, s, per_thread, rc);
}

void ho_trace_launch_end_slow(struct ho_trace_launch *l, const void *func, CUstream s,
                              bool per_thread, CUresult rc);
/* At the end of the launch call: records the launch (when it succeeded), its host time `d`
 * including the engine's work after it. */
static inline void ho_trace_launch_end(struct ho_trace_launch *l, const void *func, CUstream s,
                                       bool per_thread, CUresult rc) {
    if (__builtin_expect(l->t0 != 0, 0)) ho_trace_launch_end_slow(l, func, s, per_thread, rc);
}

/* ------------------------------------------------------------------------- copies, memsets */

void ho_trace_copy_slow(uint64_t t0, uint64_t dst, uint64_t src, uint64_t bytes, CUstream s,
                        bool per_thread, const char *entry, bool memset);
/* A copy of `bytes` from src to dst (or a memset of dst: src 0) by entry point `entry` (its
 * name says whether it is synchronous), once the driver accepted it. */
static inline void ho_trace_copy(uint64_t t0, uint64_t dst, uint64_t src, uint64_t bytes,
                                 CUstream s, bool per_thread, const char *entry, CUresult rc) {
    if (__builtin_expect(t0 != 0, 0) && rc == CUDA_SUCCESS)
        ho_trace_copy_slow(t0, dst, src, bytes, s, per_thread, entry, false);
}
static inline void ho_trace_memset(uint64_t t0, uint64_t dst, uint64_t bytes, CUstream s,
                                   bool per_thread, const char *entry, CUresult rc) {
    if (__builtin_expect(t0 != 0, 0) && rc == CUDA_SUCCESS)
        ho_trace_copy_slow(t0, dst, 0, bytes, s, per_thread, entry, true);
}

/* ------------------------------------------------------------- synchronisation and order */

/* A stream synchronisation (device: a context synchronisation). */
void ho_trace_sync(uint64_t t0, CUstream s, bool per_thread, bool device);
/* An event synchronisation: a synchronisation of the stream the event was recorded on. */
void ho_trace_event_sync(uint64_t t0, CUevent e);
/* An event recorded on a stream: remembered for the waits on it. */
void ho_trace_record(uint64_t t0, CUevent e, CUstream s, bool per_thread);
/* Stream s waits for event e: "s waits for stream on". */
void ho_trace_wait(uint64_t t0, CUstream s, bool per_thread, CUevent e);
/* A stream capture began (+1) or ended (-1): captured work does not run, so it is not traced. */
void ho_trace_capture(int delta);
/* A step marker (for an explicit step API). */
void ho_trace_step(void);

/* --------------------------------------------------------------- the engine's timeline */

/* What the engine did, for reports (docs/trace-format.md, "The engine's timeline"): one line per
 * move whose copy completed and per wait of the application for a move. engine.c calls these with
 * its lock held (the trace lock is taken inside; nothing under the trace lock takes the engine's).
 * Times given are the engine clock (ho_clock_ns); they are written on the trace clock. */
enum ho_trace_move_kind {
    HO_MOVE_EVICT,    /* device to host */
    HO_MOVE_RESTORE,  /* host to device: written as "restore" when this thread named the buffer
                         with ho_trace_demand (the application waits for it), else "prefetch" */
    HO_MOVE_PREFETCH, /* host to device, started ahead of use */
};

void ho_trace_move_slow(enum ho_trace_move_kind kind, uint64_t id, uint64_t bytes,
                        uint64_t start_ns, bool cancelled);
/* A move of buffer `id` (`bytes` copied) submitted at start_ns has completed now: the copy is
 * done (now is an upper bound of when it finished: completion is noticed at a progress point).
 * `cancelled`: the copy ran but the buffer stayed where it was (a use came first). */
static inline void ho_trace_move(enum ho_trace_move_kind kind, uint64_t id, uint64_t bytes,
                                 uint64_t start_ns, bool cancelled) {
    if (__builtin_expect(atomic_load_explicit(&ho_trace_state, memory_order_relaxed) == HO_TRACE_ON,
                         0))
        ho_trace_move_slow(kind, id, bytes, start_ns, cancelled);
}

void ho_trace_demand_slow(uint64_t id);
/* This thread is about to wait for the restore of buffer `id` that a use needs now (a demand
 * restore): its restore and the stall are labelled "demand". */
static inline void ho_trace_demand(uint64_t id) {
    if (__builtin_expect(atomic_load_explicit(&ho_trace_state, memory_order_relaxed) == HO_TRACE_ON,
                         0))
        ho_trace_demand_slow(id);
}

void ho_trace_stall_slow(uint64_t id, uint64_t ns, enum ho_trace_move_kind waited_for);
/* The application waited `ns` (ending now) for a move of buffer `id`: an eviction making room
 * (HO_MOVE_EVICT) or a restore (HO_MOVE_RESTORE: on demand when named by ho_trace_demand, else a
 * prefetch that had not landed). */
static inline void ho_trace_stall(uint64_t id, uint64_t ns, enum ho_trace_move_kind waited_for) {
    if (__builtin_expect(ns != 0 && atomic_load_explicit(&ho_trace_state, memory_order_relaxed) ==
                                        HO_TRACE_ON,
                         0))
        ho_trace_stall_slow(id, ns, waited_for);
}

#endif
