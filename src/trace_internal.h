/* The trace's state, shared by trace.c (entry points), trace_maps.c (stream, event and kernel
 * numbering), trace_timing.c (kernel durations from events) and trace_write.c (JSON lines).
 * Everything here is guarded by tr.lock unless said otherwise; the functions below said to run
 * with the lock held assert it (HO_ASSERT_HELD) in checked builds. */
#ifndef HOSTOFF_TRACE_INTERNAL_H
#define HOSTOFF_TRACE_INTERNAL_H

#include "mutex.h"
#include "trace.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

enum trec_kind {
    TR_ALLOC,
    TR_FREE,
    TR_LAUNCH,
    TR_COPY,
    TR_SYNC,
    TR_WAIT,
    TR_STEP,
    TR_MOVE,
    TR_STALL
};
enum trec_dir { TR_H2D, TR_D2H, TR_D2D };

#define TRF_STREAM    0x01u /* "s" is written (optional for alloc, free, sync) */
#define TRF_SYNC      0x02u /* a synchronous copy or memset */
#define TRF_MEMSET    0x04u /* a memset, written as a d2d copy with one buffer */
#define TRF_MANAGED   0x08u /* an allocation of managed memory */
#define TRF_PENDING   0x10u /* a launch whose duration is not known yet */
#define TRF_CANCELLED 0x20u /* a move whose copy ran but whose remap did not happen */

/* One line to be written. Times are the trace clock (absolute; the first line's is subtracted
 * when written). */
struct trec {
    uint8_t kind, dir, flags; /* dir: a copy's trec_dir; a move's or stall's ho_trace_move_kind */
    int32_t s, on;            /* stream numbers */
    uint32_t kname;           /* launches: index in the kernel-name table */
    uint32_t nuse;            /* launches and copies: ids at uses[use_at ...] */
    size_t use_at;
    uint64_t t, d;          /* entry time, time spent in the call */
    uint64_t id, bytes, ns; /* buffer id (alloc, free, move, stall), bytes (alloc, copy, move),
                               duration (launch, move, stall) */
    CUevent ev[2];          /* TRF_PENDING: the start and end events */
    uint64_t site;          /* alloc: its site (site.h), 0: none */
};

struct trace_state {
    struct ho_mutex lock;
    int fd;           /* the output file */
    struct trec *rec; /* buffered lines, oldest first */
    size_t nrec, caprec;
    uint64_t *uses; /* their use lists, in the same order */
    size_t nuses, capuses;
    size_t pending;   /* launches whose duration is not known yet */
    bool header_done; /* the first line is written */
    bool have_base;
    uint64_t base;            /* the first line's time */
    _Atomic int capturing;    /* stream captures open in the process (read without the lock) */
    _Atomic uint64_t self_ns; /* clock time spent in the trace's own driver calls */
    /* Samples of (ho_clock_ns, self_ns) taken as self_ns grows, newest at self_at - 1: they map
     * an engine time from the past (a move's start) to the trace clock. */
    struct {
        uint64_t clock, self;
    } self_ring[1024];
    unsigned self_at, self_n;
};

extern struct trace_state tr;

/* The trace clock: ho_clock_ns() (virtual under simcuda) less the time the trace spent in its
 * own driver calls, so tracing does not show up as host work between the application's calls. */
uint64_t ho_trace_clock(void);
/* The trace clock at an earlier engine time (ho_clock_ns), from the self-time samples. Lock
 * held. */
uint64_t ho_trace_clock_at(uint64_t engine_ns);
/* Brackets the trace's own driver calls (self-time accounting). */
uint64_t ho_trace_self_begin(void);
void ho_trace_self_end(uint64_t started);

/* Appends a line (lock held); NULL when out of memory (tracing then stops). */
struct trec *ho_trace_append(enum trec_kind kind, uint64_t t0, const uint64_t *ids, uint32_t n);
/* Stops tracing for good after an internal failure (lock held). */
void ho_trace_fail(const char *why);

/* trace_maps.c (lock held). Stream numbers: 0 is the legacy default stream, others in order of
 * first appearance; each thread's per-thread default stream is a stream of its own. */
int ho_trace_stream_num(CUstream s, bool per_thread);
void ho_trace_event_set(CUevent e, int stream);
int ho_trace_event_stream(CUevent e); /* -1: never seen recorded */
uint32_t ho_trace_kernel_name(const void *func);
const char *ho_trace_kernel_name_at(uint32_t idx);

/* trace_timing.c. Events for a launch's start and end (lock not held: driver calls). */
void ho_trace_timing_start(struct ho_trace_launch *l, CUstream s, bool per_thread);
void ho_trace_timing_end(struct ho_trace_launch *l, CUstream s, bool per_thread, bool ok);
/* Reads the durations of pending launches on stream s (or every stream), whose events were
 * recorded before `before`, without waiting; `wait`: wait for them (exit). Lock held. */
void ho_trace_timing_resolve(int s, bool every_stream, uint64_t before, bool wait);
/* Reads, without waiting, the durations of the oldest pending launches, up to the first whose
 * events have not completed. Lock held. */
void ho_trace_timing_poll(void);

/* trace_write.c (lock held). Writes every line up to the first pending launch; `all`: at exit. */
void ho_trace_flush(bool all);

#endif
