/* The engine's own state, shared by its files: engine.c (state, the public calls that are not
 * uses, allocations or moves), engine_clock.c, engine_uses.c (issuing and use lists),
 * engine_move.c (moves and progress), engine_room.c (budget, victims), engine_alloc.c,
 * engine_plan.c / engine_timing.c (the policy's side) and arena.c (address ranges, physical
 * handles, events, per-device setup). Everything here is guarded by eng.lock except the fields
 * marked atomic, which the launch fast path reads and writes.
 *
 * Locks, in the order they are taken: a thread holding one takes only locks further down.
 *
 *   lock                        guards                               notes
 *   graphs_lock (track_graph.c) graph executables' buffer lists,     reads the registry under it
 *                               conditional nodes' bodies
 *   registry rwlock             address -> buffer records            launches take eng.lock under
 *                                                                    its read side: alloc and free
 *                                                                    write it outside eng.lock
 *   tmap_lock, ptrs_lock        learnt descriptors and pointer       taken under the registry's
 *   (track_learn.c, rwlocks)    arrays                               read side; take nothing
 *   eng.lock (struct ho_mutex)  this header's state, the policy      slow paths only, never the
 *                                                                    launch fast path
 *   unseen_lock                 unattributed uses' events            also taken inside the issuing
 *   (engine_unseen.c)                                                section, without eng.lock
 *   m->users_lock (spin)        one buffer's stream and event lists  a few loads and stores
 *   events_lock (arena.c)       the event pools                      a pop or a push
 *   the trace lock (trace.c)    the trace buffer                     takes nothing of the engine's
 *
 * Not a lock, but ordered like one: a thread holding eng.lock waits (ho_issue_wait) for threads
 * inside the issuing section, so a thread inside it never takes eng.lock (engine_uses.c leaves
 * the section first). Functions that need eng.lock say so and check it in checked builds:
 * HO_ASSERT_HELD(&eng.lock) (mutex.h). */
#ifndef HOSTOFF_ENGINE_INTERNAL_H
#define HOSTOFF_ENGINE_INTERNAL_H

#include "engine.h"
#include "mutex.h"
#include "options.h"
#include "policy.h"

#include <pthread.h>
#include <stdatomic.h>

#define HO_MAX_DEVICES 16
#define HO_MAX_USERS   16

enum ho_state { HO_RESIDENT, HO_EVICTING, HO_HOST, HO_RESTORING };

/* Pinned host memory: a host-located handle, mapped for the device at its own window address so
 * copies can reach it. Kept in a pool once its buffer no longer needs it. A buffer on the host
 * holds one slot, or up to HO_HOST_PIECES chained in address order: its address maps each one's
 * first `held` bytes in turn (the whole slot but for the last, which may be a prefix; pool_host.c
 * says why). */
#define HO_HOST_PIECES 64
struct ho_host_slot {
    CUmemGenericAllocationHandle handle; /* uvm backend: unused */
    CUdeviceptr window;
    uint64_t span;
    uint64_t held;             /* bytes of its buffer it holds; 0 while idle */
    struct ho_host_slot *next; /* idle: the pool's list; in use: the buffer's next piece */
};

/* What an address range maps, in address order: piece i is the first len[i] bytes of h[i]. */
struct ho_layout {
    int n;
    CUmemGenericAllocationHandle h[HO_HOST_PIECES];
    uint64_t len[HO_HOST_PIECES];
};

struct ho_transition;

/* Pooled device memory (pool_device.c): a handle no buffer holds, still mapped with device
 * access at va (a freed buffer's address, or a copy window) and perhaps at a second window, kept
 * for the next allocation or restore of the same size: an allocation/free pair or a restore costs
 * no create. Counted as resident (it holds device memory) and the first thing given up under
 * pressure. */
struct ho_cached {
    CUdeviceptr va;
    CUmemGenericAllocationHandle dev;
    CUdeviceptr window; /* 0, or a second mapping of dev */
    uint64_t span;
    struct ho_cached *next;
};

/* An event recorded right after a launch, shared by the buffers it used: a move of one of them
 * waits for that launch only, not for everything queued on its stream since (the host may be
 * far ahead of the device). Counted references; eng.lock held for all uses. */
struct ho_clock {
    CUevent e;
    int refs;
};

/* A managed buffer. */
struct ho_managed {
    /* The registry's id, written once after the buffer is already on eng.all (ho_engine_alloc
     * registers it outside eng.lock), where another thread's move of it may read it: atomic. */
    _Atomic uint64_t id;
    CUdeviceptr va;
    uint64_t size, span; /* bytes asked for; mapped (granule multiple) */
    int device;
    struct ho_buffer *record;  /* the registry's record (until freed) */
    _Atomic int state;         /* enum ho_state */
    _Atomic uint64_t last_use; /* engine use sequence, for LRU */
    atomic_flag users_lock;    /* for writers of the lists below; readers scan lock-free */
    _Atomic int nusers;
    bool users_overflow;                   /* too many streams: a move waits for the whole device */
    _Atomic(CUstream) users[HO_MAX_USERS]; /* streams with uses queued since the last move */
    int nuse_events;
    CUevent use_events[HO_MAX_USERS]; /* uses on per-thread default streams, recorded at once */
    CUmemGenericAllocationHandle dev; /* device handle while it holds the bytes */
    CUdeviceptr dev_window;    /* 0, or a second mapping of dev (the window it was restored through:
                                  it goes back to the pool with dev, ready as a copy target) */
    struct ho_host_slot *host; /* host copy while it holds the bytes */
    struct ho_transition *tr;  /* the move in flight, if any */
    bool pinned;
    bool free_requested;    /* freed while a move was in flight */
    CUstream free_stream;   /* freed on this stream, its memory held for reuse (engine_sfree.c) */
    bool wanted;            /* on its device's prefetch queue, waiting for room */
    bool deferred;          /* on its device's list of planned evictions, waiting for its use */
    struct ho_clock *clock; /* recorded after its latest clocked use, on clock_stream */
    uint64_t clock_seq;     /* the use sequence of that use: valid while it equals last_use */
    CUstream clock_stream;
    struct ho_policy_buffer pol; /* the policy's name and note for it */
    uint64_t site;               /* where it was allocated (site.h) */
    struct ho_managed *next;     /* all managed buffers of the process */
};

enum ho_tr_kind { HO_TR_EVICT, HO_TR_RESTORE, HO_TR_FREE };

struct ho_transition {
    enum ho_tr_kind kind;
    struct ho_managed *m;
    CUevent done; /* recorded after its copy; an eviction still sending has none yet */
    bool cancelled;
    struct ho_host_slot *host; /* evict: the destination */
    /* evict: its copy goes to the link a chunk at a time (engine_send.c). `sent`: bytes of it
     * queued on the eviction stream so far (m->span for a copy queued whole); `sending`: chunks
     * remain to be queued, and `done` is recorded once the last one is (or the move is
     * cancelled); `gate`: recorded on the device's gate stream after the move's barrier, waited
     * for by its first chunk (NULL once waited for, or when the barrier is on the stream). */
    uint64_t sent;
    bool sending;
    CUevent gate;
    CUmemGenericAllocationHandle dev; /* restore: the new device handle */
    CUdeviceptr window;               /* restore: where the new handle is mapped for the copy */
    uint64_t start_ns;
    CUevent timed[2]; /* restore: timing events around the copy, when this one measures the link */
    bool demand;      /* restore: started for a use about to be issued (ho_demand_restores) */
    struct ho_transition *next;
};

/* A planned eviction waiting for the launch after which the plan moves the buffer out: it starts
 * once that launch has run on the device (its event completed), so the eviction queue only holds
 * copies that can run now and never makes an allocation wait behind work the host queued ahead. */
struct ho_deferred {
    struct ho_managed *m;
    CUevent after;
};

/* A use waiting for the next clock (engine.c): the buffer and the use's sequence number. */
struct ho_pending_use {
    struct ho_managed *m;
    uint64_t seq;
};
#define HO_CLOCK_PENDING 128

/* A launch being timed for the lookahead policy: events around it on its stream. */
struct ho_timed_launch {
    uint64_t launch; /* the policy's index of the launch */
    int device;
    CUevent before, after;
};

/* One copy stream per direction per device, and one for stream-ordered frees (they wait for the
 * buffer's last use, which may lie far ahead of the device: on the eviction stream they would
 * hold back every eviction queued after them). Moves complete in order on each. */
enum { HO_Q_EVICT, HO_Q_RESTORE, HO_Q_FREE, HO_NQUEUES };

/* Chunks of evictions queued on the eviction stream and not known to be done, at most (counting
 * those with another chunk of the same eviction after them): the rest of an eviction waits in
 * the engine, where a free or a use can still call it off (engine_send.c). */
#define HO_SEND_AHEAD 4

struct ho_dev {
    bool ready, failed;
    CUcontext ctx; /* the device's primary context */
    CUstream stream[HO_NQUEUES];
    struct ho_transition *head[HO_NQUEUES], *tail[HO_NQUEUES];
    /* Chunked evictions (engine_send.c): while chunks of earlier evictions are held, a new one's
     * barrier waits on `gate` (no copy is ever queued there), so that a chunk of an earlier
     * eviction queued later never waits behind it; `ahead` holds an event after each chunk
     * counted in HO_SEND_AHEAD, oldest first. */
    CUstream gate; /* NULL: not created; evictions are queued whole */
    CUevent ahead[HO_SEND_AHEAD];
    int nahead;
    uint64_t total_mem, budget; /* budget: lowered for a moment by ho_reclaim_device */
    bool budgeted; /* a budget was given; set once at setup, so the launch path reads it unlocked */
    uint64_t resident; /* device bytes held by managed buffers */
    uint64_t evicting; /* of which: on their way out */
    CUmemAllocationProp dev_prop, host_prop;
    CUevent *free_events;
    size_t nfree_events, cap_events;
    struct ho_managed **want; /* prefetches waiting for room, oldest first */
    size_t nwant, capwant;
    struct ho_deferred *defer; /* planned evictions waiting for their launch, oldest first */
    size_t ndefer, capdefer;
    struct ho_cached *cache; /* newest first */
    uint64_t cached;         /* bytes in the cache (part of `resident`) */
    /* Buffers freed on a stream whose memory waits for the next allocation on that stream
     * (engine_sfree.c), newest first, linked by `next`; part of `resident`. */
    struct ho_managed *sfree;
    unsigned nsfree;
    uint64_t sfree_bytes;
};

struct ho_engine {
    struct ho_mutex lock;
    bool active;
    enum ho_backend backend;
    uint64_t min_bytes, host_limit;
    uint64_t send_chunk; /* HOSTOFF_EVICT_CHUNK: evictions copy in chunks of this (0: whole) */
    struct ho_dev dev[HO_MAX_DEVICES];
    struct ho_managed *all;
    uint64_t granule;
    _Atomic uint64_t use_seq;
    _Atomic int inflight;     /* moves in flight, all devices */
    _Atomic int moving;       /* evictions and restores between state change and completion */
    _Atomic int capturing;    /* stream captures in progress */
    struct ho_policy policy;  /* lru, lookahead or oracle: asked only through its operations */
    bool policy_budget_given; /* it was told the budget (of the first device it saw a launch on) */
    uint64_t policy_launches; /* launches the policy was told of (for the move cost refresh) */
    _Atomic bool timing;      /* the policy wants this step's launches timed */
    struct ho_timed_launch
        *timed; /* timed launches whose durations are not read yet, oldest first */
    size_t ntimed, captimed;
    unsigned restores_timed;                      /* restores that measured the link */
    double link_bytes_per_ns;                     /* the fastest restore seen */
    struct ho_pending_use pend[HO_CLOCK_PENDING]; /* uses since the last clock */
    int npend, pend_launches;
    CUstream pend_stream;
    struct ho_dev *pend_dev;
    uint64_t host_used;      /* bytes buffers hold on the host (their spans) */
    uint64_t host_waste;     /* slot bytes in use beyond those spans (pool_host.c) */
    uint64_t host_pooled;    /* idle slot bytes */
    uint64_t host_peak_used; /* the most host_used has been (pool_host.c's hygiene bound) */
    bool host_exact;         /* the driver refused a prefix mapping: slots serve exact spans */
    struct ho_host_slot *host_pool;
    struct va_range *va_pool;
};

extern struct ho_engine eng;

/* A launch or call on the default stream with per-thread semantics. */
static inline bool implicit_per_thread(CUstream s, bool per_thread) {
    return per_thread && (s == NULL || s == CU_STREAM_PER_THREAD);
}

static inline struct ho_dev *dev_of(const struct ho_managed *m) {
    return &eng.dev[m->device];
}

/* The policy's id for a buffer: the engine's own pointer, opaque to it; and back. */
static inline uint64_t policy_id(const struct ho_managed *m) {
    return (uint64_t)(uintptr_t)m;
}

static inline struct ho_managed *policy_buffer(uint64_t id) {
    return (struct ho_managed *)(uintptr_t)id;
}

/* engine.c: the device of the calling thread's current context, when there is one the engine
 * can manage (false: no context, or a device number beyond HO_MAX_DEVICES). */
bool ho_current_device(int *device);

/* arena.c (eng.lock held, except for the event pool, which has its own lock): per-device setup,
 * pooled events (recorded on a stream, per-thread default stream when per_thread), address
 * ranges, device mappings, pinned host slots, the device's context made current. */
/* engine_unseen.c: unattributed uses (eng.lock held for cancel, wait and order; record takes
 * its own lock only). */
bool ho_unseen_pending(void);
void ho_unseen_cancel_moves(void);
void ho_unseen_record(CUstream s, bool per_thread);
void ho_unseen_wait(CUstream q);
void ho_order_after_stream(struct ho_dev *d, CUstream q, CUstream s);
void ho_unseen_fork_child(void);
void ho_sync_all_devices(void);

bool ho_dev_setup(int device);
CUevent ho_event_get(struct ho_dev *d);
void ho_event_put(struct ho_dev *d, CUevent e);
CUresult ho_event_record(CUevent e, CUstream s, bool per_thread);
CUdeviceptr ho_va_get(uint64_t span);
void ho_va_put(CUdeviceptr va, uint64_t span);
/* Undoes a mapping of the engine's own, as far as it got: unmaps [va, va + span) when `mapped`,
 * returns the range (va 0: none was had) and releases handle h (0: none, or it lives on). */
void ho_range_drop(CUdeviceptr va, uint64_t span, CUmemGenericAllocationHandle h, bool mapped);
void ho_ctx_push(struct ho_dev *d);
void ho_ctx_pop(void);
/* Whether the work before event e (of device d) has completed: CUDA_SUCCESS, NOT_READY, or the
 * driver's error. Asked without pushing d's context: an event names its own, and the driver
 * answers a query whichever context is current (CUDA C++ Programming Guide, multi-device "Stream
 * and Event Behavior": cudaEventQuery succeeds on an event of a device other than the current
 * one; cuEventQuery lists no context error). A progress point asks at almost every intercepted
 * call, so the push and pop it saves are two driver calls on the hot path. Where the driver
 * refuses it all the same (no context current on the thread, say), it is asked again with d's
 * context pushed. */
CUresult ho_event_query(struct ho_dev *d, CUevent e);

/* engine_remap.c (eng.lock held, context current): map [va, va + span) to h with device
 * access, each call retried (false: left unmapped); remap m's address from handle `from` to `to`
 * (both hold its bytes): done, kept on `from` (rolled back), or lost (the driver refused every
 * mapping of both, each retried: the address is unmapped and the caller must not move m again). */
enum ho_remap { HO_REMAP_DONE, HO_REMAP_KEPT, HO_REMAP_LOST };
/* Fills desc with read-write access for `device` and every device that can reach its memory
 * (peer access); returns how many (arena.c). */
int ho_peers_of(int device, CUmemAccessDesc *desc);
bool ho_map_rw(struct ho_dev *d, CUdeviceptr va, uint64_t span, CUmemGenericAllocationHandle h,
               int device);
enum ho_remap ho_remap(struct ho_managed *m, const struct ho_layout *to,
                       const struct ho_layout *from);
/* One handle mapped whole (span bytes); unmapping a layout's pieces from va, each retried. */
struct ho_layout ho_layout_one(CUmemGenericAllocationHandle h, uint64_t span);
void ho_unmap_layout(CUdeviceptr va, const struct ho_layout *l);
/* Waits, each retried and then widened (event -> its stream -> the device); false when the
 * driver refused them all: the work is not known to be done (context current). */
bool ho_event_wait(CUevent e, CUstream s);
bool ho_stream_drain(CUstream s);
bool ho_device_drain(void);

/* pool_host.c (eng.lock held): pinned host slots for a buffer of `span` bytes, one or a chain of
 * pieces (NULL: HOSTOFF_HOST_LIMIT or the driver refused); give a chain back to the pool; the
 * layout a chain maps at the buffer's address; whether it is one slot mapped whole (else a
 * prefix or pieces); note that the driver refused a mapping of the other kind (one exact slot per
 * buffer from then on); the size class a new slot of `span` gets (no lock).
 * pool_device.c (eng.lock held): whether a pooled chunk of exactly `span` bytes is there; whether
 * `span` more bytes fit the budget, counting such a chunk as room; give pooled memory back until
 * `need` fits under `limit` (keeping a chunk of exactly `need`); take a chunk of `span` (its
 * address, handle and second window, if any); take one as a copy target (one mapping, *window);
 * pool a chunk (false: not kept, the caller releases it). */
struct ho_host_slot *ho_host_slot_get(struct ho_dev *d, uint64_t span);
void ho_host_slot_put(struct ho_host_slot *s);
struct ho_layout ho_host_layout(const struct ho_host_slot *s);
bool ho_host_one_whole(const struct ho_host_slot *s);
void ho_host_layout_refused(void);
uint64_t ho_host_class(uint64_t span, uint64_t granule);
bool ho_cache_has(const struct ho_dev *d, uint64_t span);
bool ho_room_for(const struct ho_dev *d, uint64_t span);
void ho_cache_trim(struct ho_dev *d, uint64_t need, uint64_t limit);
bool ho_cache_take(struct ho_dev *d, uint64_t span, CUdeviceptr *va,
                   CUmemGenericAllocationHandle *dev, CUdeviceptr *window);
bool ho_cache_take_window(struct ho_dev *d, uint64_t span, CUmemGenericAllocationHandle *dev,
                          CUdeviceptr *window);
bool ho_cache_put(struct ho_dev *d, CUdeviceptr va, CUmemGenericAllocationHandle dev,
                  CUdeviceptr window, uint64_t span);

/* engine_uses.c: the issuing section and the use lists (the protocol in engine.h). Wait until no
 * thread is issuing a call that may have seen a state from before now (eng.lock held, after a
 * state change); draw a use's sequence number; note that a use of m is being queued on s; keep
 * event e, recorded on s now, as a use of m (false: not kept, e went back to the pool); take s
 * off m's list (false: it was not on it); whether any use is listed; order copy queue q of m's
 * device after every listed use and start the list afresh (eng.lock held, context current). */
void ho_issue_wait(void);
uint64_t ho_use_seq_next(void);
void ho_users_add(struct ho_managed *m, CUstream s, bool per_thread, uint64_t seq);
bool ho_users_add_event(struct ho_managed *m, CUevent e, CUstream s, bool per_thread);
bool ho_users_drop_stream(struct ho_managed *m, CUstream s);
bool ho_users_queued(struct ho_managed *m);
void ho_barrier(struct ho_managed *m, int q);
/* The same for stream s of m's device, whatever it is (the gate stream of engine_send.c). */
void ho_barrier_on(struct ho_managed *m, CUstream s);

/* engine_send.c (eng.lock held, the device context current where said; every eviction of the
 * vmm backend goes this way, one of a chunk or less as one chunk, so that the eviction stream's
 * order is the queue's): issue tr's barrier (on the eviction stream, or on the gate while
 * chunks of earlier evictions are held; context current) before tr is queued; queue more chunks
 * of the device's evictions, within HO_SEND_AHEAD, or all of them up to and including `upto`
 * (non-NULL: a caller is about to wait), and end the sending of those a use or a free called
 * off (ctx_current: the caller made the device's context current); the same for every device,
 * all of it (before the thread blocks, or a capture begins). */
void ho_send_begin(struct ho_dev *d, struct ho_transition *tr);
void ho_send_pump(struct ho_dev *d, const struct ho_transition *upto, bool ctx_current);
void ho_send_flush_all(void);

/* engine_move.c (eng.lock held): start an eviction or a restore (false when it could not start;
 * a restore adds what waiting for room cost to *stall); wait for m's move in flight and complete
 * it with everything queued before it (returns the stall, ns); free m once its queued uses are
 * done; bring m back and wait for it (a demand restore; true when m is then resident). */
bool ho_start_evict(struct ho_managed *m);
bool ho_start_restore(struct ho_managed *m, struct ho_managed *const *protect, int nprotect,
                      uint64_t *stall);
uint64_t ho_wait_move(struct ho_managed *m);
void ho_start_free(struct ho_managed *m);
/* Stream-ordered reuse (engine_sfree.c), eng.lock held. put: keeps m, freed on s, for the next
 * allocation of its span on s (false: free it as usual). take: gives m a held buffer's memory and
 * uses when one of its span was freed on s. flush: frees the held buffers of `span` (0: all). */
bool ho_sfree_put(struct ho_managed *m, CUstream s, bool per_thread);
bool ho_sfree_take(struct ho_dev *d, struct ho_managed *m, CUstream s, bool per_thread);
void ho_sfree_flush(struct ho_dev *d, uint64_t span);
bool ho_demand_restore(struct ho_managed *m, struct ho_managed *const *protect, int nprotect);
/* A use of several host-located buffers (eng.lock held, not capturing): the evictions that make
 * room for all of them start together, then every restore, so copies run back to back in both
 * directions and each remap overlaps the next copy; the use then waits for each (settle). */
void ho_demand_restores(struct ho_managed *const *ms, int n);

/* engine_room.c (eng.lock held): the device and host byte counts of the report; give up cached
 * memory until `need` fits under `limit`; take cached memory of exactly `span` bytes; start
 * evicting, on device d, the least valuable buffers (needed later than `beyond` launches, when a
 * policy predicts) until `need` more bytes fit (sets *host_full when the host side refused);
 * make `need` bytes fit the budget, waiting for copies; reclaim after the driver ran out of
 * memory; create a device handle, reclaiming while the driver is out of memory; count a stall. */
enum ho_room { HO_ROOM_OK, HO_ROOM_OVER_LIMIT, HO_ROOM_NONE };
void ho_device_bytes(int64_t delta);
void ho_note_host_peak(void);
size_t ho_evict_for(struct ho_dev *d, uint64_t need, struct ho_managed *const *protect,
                    int nprotect, uint64_t beyond, bool *host_full);
enum ho_room ho_make_room(struct ho_dev *d, uint64_t need, struct ho_managed *const *protect,
                          int nprotect, uint64_t *stall);
bool ho_reclaim_device(struct ho_dev *d, uint64_t need, struct ho_managed *const *protect,
                       int nprotect, uint64_t *stall);
CUresult ho_create_device_handle(struct ho_dev *d, uint64_t span, CUmemGenericAllocationHandle *h,
                                 struct ho_managed *const *protect, int nprotect, uint64_t *stall);
void ho_count_stall(uint64_t ns);

/* engine_timing.c: timing-capable events (the pooled ones are not), recorded on s at once (NULL
 * when that fails); the device time between two completed ones (0: unreadable); timed launches
 * (eng.lock held for poll and add). The first HO_LINK_FIRST restores, then one in
 * HO_LINK_SAMPLE, are timed too: the fastest gives the link's rate. */
#define HO_LINK_FIRST  16
#define HO_LINK_SAMPLE 64
CUevent ho_timing_event(struct ho_dev *d, CUstream s, bool per_thread);
void ho_timing_drop(struct ho_dev *d, CUevent e);
uint64_t ho_timing_read(struct ho_dev *d, CUevent a, CUevent b);
void ho_timing_poll(void);
void ho_timing_add(struct ho_dev *d, CUevent before, uint64_t launch, CUstream s, bool per_thread);

/* engine_plan.c, the engine's side of the policies (eng.lock held): whether a policy predicts
 * next uses now, and launches until m's; release a clock reference; record the pending clock
 * now; forget a freed buffer's pending use; planned evictions (drop one, start those whose
 * launch has run); prefetches waiting for room (drop one, start what fits); after a launch, ask
 * the policy and start what it says (takes eng.lock itself). */
bool ho_predicting(void);
uint64_t ho_predicted_next_use(const struct ho_managed *m);
void ho_clock_put(struct ho_dev *d, struct ho_clock *c);
void ho_clock_flush(void);
void ho_clock_forget(struct ho_managed *m);
void ho_defer_drop(struct ho_dev *d, struct ho_managed *m);
void ho_defer_poll(struct ho_dev *d);
void ho_want_drop(struct ho_dev *d, struct ho_managed *m);
void ho_want_start(struct ho_dev *d);
struct ho_engine_touch;
void ho_plan_after_launch(const struct ho_engine_touch *t, CUstream s, bool per_thread);

#endif
