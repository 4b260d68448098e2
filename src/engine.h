/* The residency engine (HOSTOFF_MODE=offload): managed buffers live in the engine's VMM arena and
 * move between device and pinned host memory at the same device address.
 *
 * States (ho_managed.state):
 *     RESIDENT --evict--> EVICTING --copy done, remap to host handle--> HOST
 *     HOST --restore--> RESTORING --copy done, remap to device handle--> RESIDENT
 * A use while EVICTING or RESTORING cancels the move (the address still maps the handle that holds
 * the current bytes). A remap happens only after every use queued before the move began has
 * completed: the move's copy waits for events recorded on every stream that used the buffer, and
 * the remap waits for the copy. A call checks the buffers' states inside an "issuing" section
 * (ho_engine_prepare to ho_engine_finish, a per-thread counter); a move changes the state first,
 * then waits until every thread that was issuing has finished, so no use can slip between the
 * state it saw and the move's barrier. Memory the application maps itself, small allocations,
 * pitched and managed allocations never enter the engine (PINNED). */
#ifndef HOSTOFF_ENGINE_H
#define HOSTOFF_ENGINE_H

#include "cuda_api.h"
#include "registry.h"

#include <stdbool.h>
#include <stdint.h>

/* The buffers one call touches, as the engine tracks them across the real call: no fixed cap
 * (a fused optimizer's launch passes hundreds); past HO_TOUCH_INLINE they live on the heap, and
 * when even that fails the call is unattributed (a barrier, see ho_engine_prepare_ex). */
#define HO_TOUCH_INLINE 64
struct issue_slot;
struct ho_engine_touch {
    struct ho_managed **m; /* m_inline or a heap array */
    struct ho_managed *m_inline[HO_TOUCH_INLINE];
    int n;
    bool unseen;             /* the call also uses what the engine cannot attribute */
    struct issue_slot *slot; /* this thread's issuing slot, while the call is being issued */
    uint64_t func;           /* the launched function (0: a copy, not a launch) */
    bool locked;             /* no slot could be had: eng.lock is held instead */
    CUevent timing_before;   /* recorded just before the call when its step is being timed */
    uint64_t seq;            /* the call's use sequence number */
};

struct ho_options;
/* Starts the engine with the process's options (offload mode). */
void ho_engine_init(const struct ho_options *o);

/* True when the engine runs (offload mode, initialised for this process). */
bool ho_engine_active(void);

/* Allocates a managed buffer; returns CUDA_ERROR_NOT_SUPPORTED when the request should pass
 * through to the driver instead (too small, engine unavailable). */
/* The stream a stream-ordered allocation is made on (NULL for a plain allocation): memory freed on
 * the same stream serves it at once (engine_sfree.c). */
struct ho_alloc_order {
    CUstream stream;
    bool per_thread; /* the _ptsz entry point: NULL means the per-thread stream */
};
CUresult ho_engine_alloc(CUdeviceptr *dptr, size_t bytes, enum ho_buffer_kind kind,
                         const struct ho_alloc_order *order);
/* Frees a managed buffer, stream-ordered after its queued uses (and after the work queued on
 * `stream` so far, for an asynchronous free). False when dptr is not managed: pass through. */
bool ho_engine_free(CUdeviceptr dptr, CUstream stream, bool per_thread, bool async);

/* Before a launch, copy or graph launch: `bufs` are the tracked buffers it touches. Makes each
 * managed one usable (restoring it when `restore` and there is room), announces the use on
 * `stream`, and fills `t`. Must be followed by ho_engine_finish after the real call. */
void ho_engine_prepare(struct ho_buffer *const *bufs, int n, CUstream stream, bool per_thread,
                       bool restore, struct ho_engine_touch *t);
/* The same, for a call that may also use memory the engine cannot tie to buffers (`unseen`):
 * every move between copy and remap gives way first, and ho_engine_finish records the call's
 * stream so that every later move waits for it (docs/ARCHITECTURE.md, "The rule"). */
void ho_engine_prepare_ex(struct ho_buffer *const *bufs, int n, CUstream stream, bool per_thread,
                          bool restore, bool unseen, struct ho_engine_touch *t);
/* Inside an unseen call's section (between prepare and finish): another stream it uses. */
void ho_engine_unseen_also(struct ho_engine_touch *t, CUstream stream, bool per_thread);
void ho_engine_finish(struct ho_engine_touch *t, CUstream stream, bool per_thread, bool issued);

/* The physical handle behind addr is about to leave the library (cuMemRetainAllocationHandle,
 * export, multicast binding, address-range handles): the buffer is brought back to the device
 * when it can be and pinned there for life, so the handle and the address keep naming the same
 * bytes. */
void ho_engine_pin_escaped(uint64_t addr);
/* A stream capture is in progress somewhere in the process (cheap; a hint, not an answer). */
bool ho_engine_capturing(void);

/* A progress point (every intercepted call): completes moves whose copies are done. Cheap when
 * nothing is in flight; never blocks. */
void ho_engine_progress(void);
/* The process is ending and its report is about to be written: the moves still in flight will
 * not complete, and their copies were queued all the same. Each is counted as cancelled with the
 * bytes its copy queued (and traced so), so that the report's and the trace's bytes add up to
 * what the link was asked to carry. The report's and the trace's exit handlers both call it
 * first, whichever runs first; it acts once and never blocks (skipped when another thread holds
 * the engine). */
void ho_engine_count_unfinished(void);
/* The application's thread is about to block in the driver (a synchronisation): evictions the
 * engine still holds back go to the link first (engine_send.c). Cheap when nothing moves. */
void ho_engine_before_block(void);
/* Stream capture began or ended in this process: nothing moves or synchronises meanwhile. */
void ho_engine_capture(int delta);
/* cuMemGetInfo as the engine sees it (see docs/ARCHITECTURE.md). */
void ho_engine_meminfo(size_t *free_bytes, size_t *total);
/* A driver allocation outside the engine failed for lack of memory: evict and say whether a
 * retry may succeed. */
bool ho_engine_reclaim(size_t bytes);
/* The application is destroying stream s: uses queued on it are kept as events instead. */
void ho_engine_stream_destroyed(CUstream s);
/* The buffer holding addr is IPC-exported: never move it. */
void ho_engine_pin(uint64_t addr);
/* Forgets all state in a fork child. (Nothing is drained at exit: moves still queued then are
 * abandoned with the process, as the driver abandons queued work; the report shows them.) */
void ho_engine_fork_child(void);

/* The engine clock: the simulator's virtual clock under simcuda, else CLOCK_MONOTONIC. */
uint64_t ho_clock_ns(void);
const char *ho_engine_backend_name(void);

#endif
