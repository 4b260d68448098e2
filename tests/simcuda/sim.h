/* simcuda internals: the state every family of the simulated driver shares.
 *
 * Model (docs/simcuda.md has the user-facing contract):
 * - One global lock (sim.lock) guards all bookkeeping. It is never held while a kernel body, a
 *   copy's memcpy or a host function runs, and never while a thread waits for the device.
 * - Each device has one executor thread that runs the device's operations in the order they were
 *   enqueued (one FIFO per device). Enqueue order is a valid topological order of stream order and
 *   event waits, so a single FIFO needs no scheduler, and virtual time computed while executing in
 *   that order is deterministic for a deterministic sequence of calls.
 * - Virtual time: sim.host_ns is the host clock; every API call advances it by its row of the cost
 *   table (costs.c; SIMCUDA_LAUNCH_NS for calls without a row of their own).
 *   An operation starts at max(host time at enqueue, its stream's previous end, the ends of what it
 *   waits for, the legacy-stream barrier, its copy engine) and lasts its modelled duration.
 */
#ifndef SIMCUDA_SIM_H
#define SIMCUDA_SIM_H

#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "costs.h"

#define SIM_EXPORT         __attribute__((visibility("default")))
#define SIM_DRIVER_VERSION 13000
#define SIM_GRANULE        (2u << 20) /* VMM allocation granularity, as on Hopper */
#define SIM_HOST_GRANULE   (2u << 20) /* host-located VMM granularity (docs/simcuda.md) */
#define SIM_MAX_DEVICES    16
#define SIM_MANAGED_PAGE   (64u << 10) /* managed-memory fault granule */

/* ---------------------------------------------------------------- configuration (config.c) */

enum sim_data_mode { SIM_DATA_FULL, SIM_DATA_SPARSE };

struct sim_config {
    uint64_t device_mem;     /* SIMCUDA_DEVICE_MEM, bytes per device */
    int devices;             /* SIMCUDA_DEVICES */
    uint64_t launch_ns;      /* SIMCUDA_LAUNCH_NS: host cost of every API call */
    uint64_t launch_queue;   /* SIMCUDA_LAUNCH_QUEUE: unended kernels a stream holds */
    double h2d_gbps;         /* SIMCUDA_H2D_GBPS */
    double d2h_gbps;         /* SIMCUDA_D2H_GBPS */
    double duplex_gbps;      /* SIMCUDA_DUPLEX_GBPS: both directions together */
    double hbm_gbps;         /* SIMCUDA_HBM_GBPS: device-to-device copies and memsets */
    enum sim_data_mode data; /* SIMCUDA_DATA */
    const char *report;      /* SIMCUDA_REPORT, or NULL */
    const char *fail;        /* SIMCUDA_FAIL, or NULL */
    const char *timeline;    /* SIMCUDA_TIMELINE, or NULL (timeline.c) */
};

/* Parses every SIMCUDA_* variable; on a malformed one prints one line naming it and returns false.
 */
bool sim_config_load(struct sim_config *cfg);
/* Parses "12", "64K", "2M", "141G", "1T" (powers of 1024). Returns false on anything else. */
bool sim_parse_size(const char *text, uint64_t *out);

/* ---------------------------------------------------------------- handles */

enum sim_magic {
    SIM_MAGIC_CTX = 0x5c7c0001,
    SIM_MAGIC_STREAM = 0x5c7c0002,
    SIM_MAGIC_EVENT = 0x5c7c0003,
    SIM_MAGIC_MODULE = 0x5c7c0004,
    SIM_MAGIC_FUNC = 0x5c7c0005,
    SIM_MAGIC_LIBRARY = 0x5c7c0006,
    SIM_MAGIC_GRAPH = 0x5c7c0007,
    SIM_MAGIC_GRAPH_EXEC = 0x5c7c0008,
    SIM_MAGIC_NODE = 0x5c7c0009,
    SIM_MAGIC_POOL = 0x5c7c000a,
    SIM_MAGIC_DEAD = 0x5c7cdead,
};

struct sim_device;
struct sim_stream;
struct sim_op;
struct sim_graph;

/* A context. Primary contexts are owned by their device; cuCtxCreate makes others. All contexts
 * of a device share the device's executor, memory and capacity, as they share a GPU. */
struct sim_ctx {
    uint32_t magic;
    struct sim_device *dev;
    bool primary;
    unsigned flags;
    struct sim_stream *legacy; /* this context's legacy default stream */
    uint64_t blocking_end_ns;  /* latest end of work on blocking streams (legacy barrier) */
    unsigned long long id;
};

/* One direction of the host link. Its work is a FIFO of transfers; `run_ns` is where the current
 * busy run began and `solo`/`dup` are the rates (GB/s alone / while the other direction runs) of
 * the work queued at its end, which a transfer in the other direction slows down (copy.c). */
struct sim_engine {
    uint64_t free_ns, run_ns;
    double solo, dup;
};

struct sim_device {
    int ordinal;
    struct sim_ctx primary;
    int primary_refs;
    unsigned primary_flags;
    bool primary_active;
    uint64_t used_bytes; /* device memory in use (capacity check) */
    uint64_t peak_bytes;
    /* Stream-ordered frees that have run (reuse.c), oldest first. Their bytes stay counted in
     * used_bytes until an allocation ordered after the free takes them (same stream, or an event
     * dependency) or the free has completed in virtual time (opportunistic reuse); their address
     * range is handed to an ordered allocation of the same size, or offered for reuse at that
     * time. So the footprint, its peak and the addresses handed out depend only on the order of
     * calls. */
    struct sim_release {
        uint64_t bytes, at_ns;
        void *va; /* the address range, NULL once recycled or handed over */
        uint64_t va_size;
        /* Bytes of it the pool still holds: not yet taken by a later allocation of the pool nor
         * given back to the device (at the first synchronising call after it completed). */
        uint64_t held;
        unsigned long long stream; /* the freeing stream's id; 0: a graph's free node */
        bool legacy, blocking;     /* the freeing stream's kind (legacy-stream ordering) */
        struct sim_ctx *ctx;       /* its context */
        uint64_t seq;              /* the free's place in the device FIFO */
        unsigned long long pool;   /* the pool it goes back to (its id) */
    } * releases;
    size_t nreleases, cap_releases;
    uint64_t synced_ns; /* host clock at the latest synchronising call (stream, event, context) */
    uint64_t frees_queued; /* stream-ordered frees enqueued and not yet run */
    /* The executor: FIFO of operations, run by one thread. */
    struct sim_op *head, *tail;
    pthread_t thread;
    bool thread_started;
    uint64_t enqueued_seq, done_seq;
    /* The link, one engine per direction (copy.c): copies and kernels' zero-copy traffic. */
    struct sim_engine h2d, d2h;
    uint64_t max_end_ns; /* latest virtual end of anything that ran */
    uint64_t fault_seq;  /* seq of the first operation that failed on a fault, 0 if none */
    /* Operations that have run and may still be in flight in virtual time (for hazards). */
    /* Operations that have run and may still be in flight in virtual time (for hazards): a
     * min-heap on end_ns, so pruning what has ended costs log n per operation. */
    struct sim_op **inflight;
    size_t ninflight, cap_inflight;
    CUmemoryPool default_pool;
};

/* ---------------------------------------------------------------- streams and events */

/* What a stream's next work is ordered after, through event waits (reuse.c): for each other
 * stream, the FIFO seq of its latest operation known to precede. Bounded: an entry that does not
 * fit is dropped, which only loses reuse, never safety. */
#define SIM_ORDER_MAX 16
struct sim_order {
    struct sim_order_entry {
        unsigned long long stream;
        uint64_t seq;
    } e[SIM_ORDER_MAX];
    int n;
};

struct sim_stream {
    uint32_t magic;
    struct sim_ctx *ctx;
    unsigned flags; /* CU_STREAM_NON_BLOCKING or 0 */
    int priority;
    bool legacy;     /* the context's legacy default stream */
    bool per_thread; /* a per-thread default stream */
    bool destroyed;
    int refs; /* handle + queued operations */
    unsigned long long id;
    uint64_t last_end_ns;   /* virtual end of the last operation that ran */
    struct sim_op *last_op; /* last enqueued operation (referenced), or NULL */
    /* Its launch queue (SIMCUDA_LAUNCH_QUEUE, executor.c): the kernels launched onto it that may
     * not have ended yet, oldest first; a ring of queue_len ops from queue_head (referenced). */
    struct sim_op **queue;
    unsigned queue_head, queue_len;
    /* Capture state (graph.c). */
    struct sim_capture *capture;
    struct sim_order order; /* what its next work is ordered after (reuse.c) */
};

struct sim_event {
    uint32_t magic;
    unsigned flags;
    struct sim_device *dev; /* of the context it was created in: records only on its streams */
    struct sim_op *record;  /* the latest record operation (referenced), or NULL */
    bool timing_disabled;
    struct sim_order order; /* what its latest record is ordered after, its stream included */
    /* Capture: the graph nodes this event was recorded after, while capturing (graph.c). */
    struct sim_capture *capture;
    void *capture_deps; /* CUgraphNode array */
    size_t capture_ndeps;
};

/* ---------------------------------------------------------------- operations */

enum sim_op_kind {
    SIM_OP_KERNEL,
    SIM_OP_COPY,
    SIM_OP_MEMSET,
    SIM_OP_RECORD, /* event record: a point in a stream */
    SIM_OP_WAIT,   /* a no-op with dependencies (stream waits, graph joins) */
    SIM_OP_HOST_FUNC,
    SIM_OP_FREE,     /* stream-ordered free (cuMemFreeAsync) */
    SIM_OP_PREFETCH, /* managed-memory prefetch */
    SIM_OP_CALL,     /* anything else (stream memory operations, graph bodies): runs u.call.run */
};

enum sim_copy_dir { SIM_H2D, SIM_D2H, SIM_D2D, SIM_H2H };

struct sim_range_ref {
    uint64_t addr, bytes; /* bytes 0: a pointer parameter, extent unknown until resolved */
};

struct sim_kernel_op {
    struct sim_func *func;
    void **params; /* kernelParams as the body sees them (points into argbuf) */
    unsigned char *argbuf;
    unsigned grid[3], block[3];
    unsigned shared_bytes;
};

struct sim_copy_op {
    void *dst;
    const void *src;
    size_t bytes;
    enum sim_copy_dir dir;
    void *staging; /* snapshot of a pageable source, freed after the copy */
    /* 2D copies: height rows of bytes each, with pitches. */
    size_t height, dst_pitch, src_pitch;
};

struct sim_memset_op {
    void *dst;
    unsigned value;
    unsigned elem; /* 1, 2 or 4 */
    size_t count;  /* elements per row */
    size_t height, pitch;
};

struct sim_host_func_op {
    void (*fn)(void *);
    void *user;
    /* cuStreamAddCallback's signature, when used. */
    CUstreamCallback cb;
    CUstream cb_stream;
};

struct sim_prefetch_op {
    uint64_t addr, bytes;
    bool to_device;
};

/* An operation defined outside the executor (memop.c, graph_nodes.c): `run` is called with the
 * lock held and returns the virtual duration (it may move *start later, and set op->failed);
 * `drop` frees `data` when the operation is released. */
struct sim_call_op {
    uint64_t (*run)(struct sim_op *op, uint64_t *start);
    void (*drop)(void *data);
    void *(*copy)(const void *data); /* a graph node's template is cloned at every launch */
    void *data;
};

struct sim_op {
    enum sim_op_kind kind;
    int refs;
    uint64_t seq;
    struct sim_device *dev;
    struct sim_stream *stream; /* referenced; NULL for graph-internal nodes */
    bool stream_ordered;       /* false for graph nodes: ordering comes from deps */
    uint64_t enq_ns, start_ns, end_ns;
    bool done;
    bool failed;          /* did not run: sticky error, or faulted */
    struct sim_op **deps; /* extra dependencies (referenced) */
    int ndeps;
    struct sim_range_ref *refs_list; /* ranges this operation touches (hazards, remote, managed) */
    int nrefs;
    struct sim_op *next; /* FIFO link */
    union {
        struct sim_kernel_op kernel;
        struct sim_copy_op copy;
        struct sim_memset_op memset;
        struct sim_host_func_op host;
        struct sim_prefetch_op prefetch;
        struct sim_call_op call;
        struct {
            uint64_t addr;
            unsigned long long pool; /* the pool the memory goes back to (its id) */
        } free;
    } u;
};

/* ---------------------------------------------------------------- modules and functions */

enum sim_param_type {
    SIM_T_PTR,
    SIM_T_U8,
    SIM_T_U16,
    SIM_T_U32,
    SIM_T_U64,
    SIM_T_I32,
    SIM_T_I64,
    SIM_T_F32,
    SIM_T_F64,
    SIM_T_BYTES,
};

struct sim_param {
    enum sim_param_type type;
    size_t offset, size;
};

typedef void (*sim_kernel_body)(void **params);

struct sim_func {
    uint32_t magic;
    char name[128];
    int nparams;
    struct sim_param *params;
    size_t argbytes;      /* packed size of all parameters */
    uint64_t default_ns;  /* ns= from the image, else 1000 */
    int ns_param;         /* ns=param:N: duration taken from u64 parameter N, else -1 */
    sim_kernel_body body; /* NULL: a body-less kernel (duration only) */
    struct sim_module *module;
};

struct sim_module {
    uint32_t magic;
    int nfuncs;
    struct sim_func *funcs;
    bool is_library;
};

/* Parses a text image into a module. Returns CUDA_SUCCESS or CUDA_ERROR_INVALID_IMAGE. */
CUresult sim_module_parse(const char *image, struct sim_module **out);
void sim_module_free(struct sim_module *m);
struct sim_func *sim_func_from_handle(const void *h);

/* ---------------------------------------------------------------- memory (memory.c) */

enum sim_range_kind {
    SIM_R_DEVICE,     /* cuMemAlloc, pitch and pool allocations */
    SIM_R_HOST,       /* cuMemHostAlloc / cuMemAllocHost: pinned host memory */
    SIM_R_REGISTERED, /* cuMemHostRegister */
    SIM_R_MANAGED,    /* cuMemAllocManaged */
    SIM_R_RESERVED,   /* cuMemAddressReserve */
};

struct sim_mapping; /* vmm.c */

struct sim_range {
    uint64_t base, size;
    enum sim_range_kind kind;
    int device;
    unsigned flags;
    bool from_pool;              /* stream-ordered allocation */
    bool graph_owned;            /* allocated while its stream captured: graph memory */
    CUmemoryPool pool;           /* the pool it came from (stream-ordered allocations) */
    struct sim_mapping *maps;    /* SIM_R_RESERVED: mappings, sorted by address */
    struct sim_managed *managed; /* SIM_R_MANAGED */
    unsigned long long buffer_id;
    /* Handed over from a stream-ordered free that completes at this virtual time: work that
     * touches it earlier races the previous allocation's users (a hazard; reuse.c). */
    uint64_t reused_until_ns;
};

/* Where a byte lives, as the device sees it. */
enum sim_loc { SIM_LOC_NONE, SIM_LOC_DEVICE, SIM_LOC_HOST, SIM_LOC_MANAGED };

struct sim_lookup {
    struct sim_range *range; /* NULL: not device memory the simulator knows */
    enum sim_loc loc;
    bool mapped;                         /* accessible from the device */
    uint64_t mapping_base, mapping_size; /* the extent of the mapping (or allocation) */
    int fd;             /* the memfd behind a VMM mapping of addr, else -1 (holecopy.c) */
    uint64_t fd_offset; /* addr's offset in it */
};

/* Registry of ranges, sorted by base. Caller holds sim.lock. */
struct sim_range *sim_range_add(uint64_t base, uint64_t size, enum sim_range_kind kind, int device);
void sim_range_remove(struct sim_range *r);
struct sim_range *sim_range_find(uint64_t addr);
/* Memory pools (pool.c). */
CUmemoryPool sim_pool_default(int device);
/* Takes a stream-ordered allocation off its pool's books (lock held); a no-op for other ranges
 * and when called again. cuMemFreeAsync calls it at once, cuMemFree when it frees. */
void sim_pool_forget(struct sim_range *r);
/* Classifies addr for the device (lock held). */
void sim_lookup(uint64_t addr, struct sim_lookup *out);

/* Copies that keep holes (holecopy.c): a stretch of a copy's source, from its start. */
struct sim_copy_segment {
    uint64_t at, bytes;
};
/* Lock held, full data mode: punches the destination where the source is a hole and returns the
 * stretches (at most cap) the caller must still copy, or -1 when the copy must be made whole. */
int sim_holecopy_plan(const struct sim_copy_op *c, struct sim_copy_segment *seg, int cap);

/* The memory behind a VMM handle (physfd.c): a memfd and its home mapping, which carries the page
 * tables from one whole mapping of the handle to the next (NULL while a mapping holds it). */
struct sim_physmem {
    int fd;
    uint64_t size;
    void *home;
    bool populated; /* the home's page tables are all present */
};
/* A memfd of `size` bytes (one released earlier when there is one). */
bool sim_physmem_open(struct sim_physmem *pm, uint64_t size);
/* Gives it back (kept for reuse, or closed); no mapping of it may remain. */
void sim_physmem_close(struct sim_physmem *pm);
/* Maps [offset, offset+size) of it at `at` (replacing what is there), PROT_NONE; *holds_home
 * when the home mapping moved there. */
bool sim_physmem_map(struct sim_physmem *pm, void *at, uint64_t size, uint64_t offset,
                     bool *holds_home);
/* Unmaps it from `at`, leaving the address reserved and PROT_NONE. */
void sim_physmem_unmap(struct sim_physmem *pm, void *at, uint64_t size, bool holds_home);
/* Fills the page tables of an accessible mapping when its pages all exist (full data mode). */
void sim_physmem_populate(struct sim_physmem *pm, void *at, uint64_t size, bool writable,
                          bool holds_home);

/* VMM (vmm.c): classifies addr inside a reservation; frees a reservation's mappings. */
void sim_vmm_lookup(struct sim_range *r, uint64_t addr, struct sim_lookup *out);

/* Device capacity accounting (lock held): false when it would exceed SIMCUDA_DEVICE_MEM. */
bool sim_capacity_take(struct sim_device *dev, uint64_t bytes);
void sim_capacity_give(struct sim_device *dev, uint64_t bytes);
/* Host side, before reading or changing the footprint: lets queued stream-ordered frees run
 * (wall clock only), then applies every release whose time has come (lock held). */
void sim_capacity_settle(struct sim_device *dev);

/* Stream-ordered reuse (reuse.c; lock held). */
/* Records a stream-ordered free the executor ran at virtual time at_ns: its bytes stay in use
 * (held by its pool) and its (closed) address range is kept until an ordered allocation or
 * completion takes them. */
void sim_release_add(struct sim_device *dev, const struct sim_op *free_op, uint64_t bytes, void *va,
                     uint64_t va_size, uint64_t at_ns);
/* Gives back what completed frees hold: a pool's bytes at the first synchronising call after
 * their free completed (release threshold 0; bytes freed outside a pool at completion), address
 * ranges at completion. */
void sim_releases_apply(struct sim_device *dev);
/* Bytes pool `pool` still holds from frees on device dev (reserved, not in use). */
uint64_t sim_pool_held(const struct sim_device *dev, unsigned long long pool);
/* cuMemPoolTrimTo: gives back the bytes of pool `pool`'s completed frees, oldest first, until it
 * holds no more than `keep` of them. */
void sim_pool_trim(struct sim_device *dev, unsigned long long pool, uint64_t keep);
/* A stream-ordered allocation on s from pool `pool`: reuses frees ordered before it (the same
 * stream; with follow_events, event waits and the legacy stream; opportunistically, completed
 * ones), handing over the address range of one of the same size, and takes from the device only
 * what the bytes they hold do not cover, as sim_device_alloc does. */
CUresult sim_reuse_alloc(struct sim_device *dev, struct sim_stream *s, unsigned long long pool,
                         bool follow_events, uint64_t bytes, uint64_t *out);
/* Event ordering: a record snapshots what its stream is ordered after; a wait merges it. */
void sim_order_note_record(struct sim_event *e, struct sim_stream *s, uint64_t seq);
void sim_order_note_wait(struct sim_stream *s, const struct sim_event *e);
/* Pools (pool.c): whether memory freed into pool `id` may be reused opportunistically. */
bool sim_pool_opportunistic(unsigned long long id);
/* Bytes of freed memory pool `id` keeps at a synchronising call: its release threshold less
 * what its allocations in use reserve. */
uint64_t sim_pool_keeps(unsigned long long id);
unsigned long long sim_pool_id(CUmemoryPool pool);

/* Virtual-address space: reserve a PROT_NONE range; release it back to PROT_NONE (kept reserved,
 * reused later, so that stale device pointers fault rather than hit unrelated host memory). */
void *sim_va_reserve(uint64_t size, uint64_t align);
void sim_va_retire(void *addr, uint64_t size);
/* The two halves of retiring: make it PROT_NONE now; offer it for reuse later. */
void sim_va_close(void *addr, uint64_t size);
void sim_va_recycle(void *addr, uint64_t size);
bool sim_va_commit(void *addr, uint64_t size);
/* Frees a device allocation (lock held); used by cuMemFree and the executor's stream-ordered free.
 */
void sim_free_range_locked(struct sim_range *r);
/* The same for a stream-ordered free the executor runs at virtual time at_ns. */
void sim_free_range_at(struct sim_range *r, const struct sim_op *free_op, uint64_t at_ns);
/* The page-rounded extent and alignment of a linear allocation of `size` bytes. */
uint64_t sim_alloc_va_size(uint64_t size);
uint64_t sim_alloc_align(uint64_t size);
/* The size of the range that addr falls in, 0 if none (takes the lock; for cost lookups). */
uint64_t sim_range_bytes(uint64_t addr);
/* Allocates linear device memory (lock held). */
CUresult sim_device_alloc(struct sim_device *dev, uint64_t bytes, bool from_pool, uint64_t *out);

/* ---------------------------------------------------------------- managed memory (managed.c) */

struct sim_managed {
    uint64_t pages;
    unsigned char *resident; /* per page: 1 if on the device */
    int preferred;           /* CU_DEVICE_INVALID (none), CU_DEVICE_CPU or a device */
    bool accessed_by_device;
    bool read_mostly;
};

/* The executor asks this before a kernel runs: migrates non-resident pages that a pointer
 * parameter points into, counting faults; returns extra virtual ns the migration costs. */
uint64_t sim_managed_touch(struct sim_device *dev, uint64_t addr, bool *remote);
void sim_managed_free(struct sim_range *r);
/* Moves the pages of [addr, addr+bytes) to or from the device; returns the bytes that moved. */
uint64_t sim_managed_prefetch(struct sim_device *dev, uint64_t addr, uint64_t bytes,
                              bool to_device);

/* ---------------------------------------------------------------- global state */

struct sim_stats {
    uint64_t illegal_accesses, remote_accesses, hazards, managed_faults;
    uint64_t launches, copies, memsets, bytes_h2d, bytes_d2h, bytes_d2d;
    uint64_t bytes_zerocopy;  /* host-located bytes kernels were charged for (executor.c) */
    uint64_t reuse_handovers; /* address ranges handed from a pending free to an allocation */
    uint64_t first_illegal_addr;
};

struct sim_state {
    pthread_mutex_t lock;
    pthread_cond_t progress; /* broadcast whenever an operation completes or is enqueued */
    struct sim_config cfg;
    bool config_ok;
    bool initialized;  /* cuInit succeeded */
    bool forked_child; /* a fork after initialisation: CUDA unusable, as on a GPU */
    CUresult init_error;
    int ndevices;
    struct sim_device devices[SIM_MAX_DEVICES];
    _Atomic uint64_t host_ns; /* the host's virtual clock */
    /* A fault sets device_error at once (executors run nothing more), but the program sees it,
     * as sticky, only from a call that waited for the faulting operation (executor.c): so which
     * calls return it depends on the order of calls, never on how far the executor has got. */
    CUresult device_error; /* CUDA_ERROR_ILLEGAL_ADDRESS once a fault happened */
    CUresult sticky;       /* device_error, once a synchronising call has reached it */
    struct sim_stats stats;
    unsigned long long next_id;
};

extern struct sim_state sim;

/* ---------------------------------------------------------------- common helpers */

/* Every entry point starts with this: checks initialisation and advances the host clock. */
CUresult sim_enter(void);
/* Entry points that are legal before cuInit (version queries). */
void sim_tick(void);
uint64_t sim_now(void);
void sim_lock(void);
void sim_unlock(void);

/* Current context of this thread (primary context of device 0 after cuDevicePrimaryCtxRetain). */
struct sim_ctx *sim_current_ctx(void);
CUresult sim_require_ctx(struct sim_ctx **out);
struct sim_ctx *sim_ctx_from_handle(CUcontext h);

/* Resolves a CUstream handle for the calling thread; per_thread selects what NULL means. */
struct sim_stream *sim_stream_resolve(CUstream h, bool per_thread, CUresult *err);
struct sim_stream *sim_stream_new(struct sim_ctx *ctx, unsigned flags, int priority);
struct sim_event *sim_event_from_handle(CUevent h);

/* Operations (stream.c). */
struct sim_op *sim_op_new(enum sim_op_kind kind, struct sim_stream *s);
/* SIMCUDA_TIMELINE: writes a completed kernel, copy, memset or prefetch (timeline.c; sim.lock
 * held). */
void sim_timeline_op(const struct sim_op *op);
void sim_op_add_dep(struct sim_op *op, struct sim_op *dep);
void sim_op_add_ref(struct sim_op *op, uint64_t addr, uint64_t bytes);
/* Enqueues on the device's FIFO (lock held). The queue takes a reference of its own. */
void sim_op_enqueue(struct sim_op *op);
void sim_op_release(struct sim_op *op);
/* Waits (wall clock) until op has run; lock held on entry and exit. */
void sim_op_wait_done(struct sim_op *op);
/* Waits for op, holding a reference meanwhile, and returns its virtual end (lock held). */
uint64_t sim_op_wait_end(struct sim_op *op);
/* Waits until every operation enqueued on dev so far has run (lock held). */
void sim_device_drain(struct sim_device *dev);
/* Stream synchronisation helpers (lock held): advance the host clock to the stream's completion.
 * Return the sticky error if one is set. */
CUresult sim_stream_sync_locked(struct sim_stream *s);
/* A kernel about to be enqueued on s takes a place in s's launch queue, the host first waiting
 * (in virtual time) for the oldest kernel there to end when the queue is full. Lock held. */
void sim_stream_admit(struct sim_stream *s, struct sim_op *op);
/* Drops s's launch queue (the stream is destroyed). Lock held. */
void sim_stream_queue_drop(struct sim_stream *s);
CUresult sim_ctx_sync_locked(struct sim_ctx *ctx);
/* Checks whether freeing/unmapping [addr, addr+bytes) now would pull memory from under work
 * still in flight in virtual time; counts a hazard if so (lock held). */
void sim_hazard_check(struct sim_device *dev, uint64_t addr, uint64_t bytes, uint64_t at_ns);

/* The executor's own steps, for operations defined elsewhere (lock held): runs one operation as
 * the executor would (an inline graph body's nodes); records an illegal access at addr; runs
 * fn(arg) with the lock released and faults caught (false, recorded, on a fault). */
void sim_op_run(struct sim_op *op, uint64_t *start);
void sim_record_fault(uint64_t addr);
bool sim_run_unlocked(void (*fn)(void *), void *arg);

/* Tensor maps (tensormap.c): whether the 128 bytes at p are a descriptor the simulator made,
 * and the global range it reaches. */
bool sim_tensor_map_decode(const void *p, uint64_t *addr, uint64_t *extent);

/* Peer access (peer.c, lock held): whether a kernel on device `dev` may touch memory that
 * lives on device `owner` (always when they are the same device). */
bool sim_peer_allowed(int dev, int owner);

/* Fault guard (fault.c): runs fn(arg) on the calling executor thread; returns false and records
 * the faulting address when it touches unmapped memory. */
bool sim_guarded_run(void (*fn)(void *), void *arg, uint64_t *fault_addr);
void sim_fault_install(void);

/* Copy helpers (copy.c). */
enum sim_copy_dir sim_classify_copy(uint64_t dst, uint64_t src);
uint64_t sim_copy_duration(struct sim_device *dev, enum sim_copy_dir dir, uint64_t bytes,
                           uint64_t *start_ns);
/* Moves `bytes` over one direction of dev's link at `solo` GB/s alone and `dup` GB/s while the
 * other direction runs, starting no earlier than *start_ns (moved to when the direction is free);
 * returns the duration and slows the other direction's queued work for the overlap. */
uint64_t sim_link_transfer(struct sim_device *dev, bool to_device, uint64_t bytes, double solo,
                           double dup, uint64_t *start_ns);

/* Capture (graph.c): when s is capturing, adds op as a node instead of enqueueing it and returns
 * true. Illegal-during-capture checks for synchronous calls. */
bool sim_capture_intercept(struct sim_stream *s, struct sim_op *op, CUresult *err);
CUresult sim_capture_check_sync(struct sim_stream *s);
CUresult sim_capture_check_unsafe(void);
void sim_capture_event_record(struct sim_stream *s, struct sim_event *e);
bool sim_capture_stream_wait(struct sim_stream *s, struct sim_event *e, CUresult *err);
/* Context synchronisation: fails (and invalidates) while a stream of the device captures. Event
 * query/synchronize: fails on an event recorded in a live capture. Both then apply the unsafe-call
 * rules. Called without the lock. */
CUresult sim_capture_check_ctx(struct sim_ctx *ctx);
CUresult sim_capture_check_event(struct sim_event *e);
/* Forgets an event's capture record: a plain record, or destruction (lock held). */
void sim_capture_event_clear(struct sim_event *e);

/* Launch (launch.c): builds a kernel op from parameters. */
CUresult sim_build_kernel_op(struct sim_func *f, struct sim_stream *s, const unsigned grid[3],
                             const unsigned block[3], unsigned shared, void **params, void **extra,
                             struct sim_op **out);

/* Fault injection (SIMCUDA_FAIL): returns the error to inject for this call of fn, or CUDA_SUCCESS.
 */
CUresult sim_fail_check(const char *fn);
/* Parses SIMCUDA_FAIL at cuInit; false (after one line on stderr) when malformed. */
bool sim_fail_validate(void);

/* Report (report.c). */
void sim_report_install(void);

uint64_t sim_bytes_ns(uint64_t bytes, double gbps);

#endif
