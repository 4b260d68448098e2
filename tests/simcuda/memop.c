/* Stream memory operations: cuStreamWriteValue32/64, cuStreamWaitValue32/64 and
 * cuStreamBatchMemOp (every ABI: the original, _v2 and _ptsz names share one implementation, as
 * their signatures are the same). Each write or wait is one operation on the stream, ordered like
 * a kernel: a write stores its value when it runs; a wait reads its word when it runs and holds
 * the device's queue until the condition holds. Both touch their word for hazard detection, and
 * an unmapped word is an illegal access.
 *
 * Limit of the one-queue-per-device model: a wait can only be released by what ran before it on
 * its device, by another device or by the host; a write queued later on another stream of the
 * same device cannot overtake it. A wait still unsatisfied after 10 s of wall time fails (a hang
 * on the device) instead of blocking the process for ever. Capturing these calls is not modelled
 * (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED). They take no virtual time beyond the call. */
/* Declares every ABI next to the current one, so each entry point below is checked against its
 * own prototype. */
#define __CUDA_API_VERSION_INTERNAL 1
#include "sim.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

struct memop {
    uint64_t addr, value;
    unsigned size; /* 4 or 8 */
    bool wait;
    unsigned flags; /* waits: CU_STREAM_WAIT_VALUE_* */
    uint64_t seen;  /* what the last read found */
};

static void *memop_copy(const void *d) {
    struct memop *m = malloc(sizeof *m);
    if (m != NULL) memcpy(m, d, sizeof *m);
    return m;
}

static void do_write(void *arg) {
    struct memop *m = arg;
    if (m->size == 4) {
        uint32_t v = (uint32_t)m->value;
        memcpy((void *)(uintptr_t)m->addr, &v, 4);
    } else {
        memcpy((void *)(uintptr_t)m->addr, &m->value, 8);
    }
}

static void do_read(void *arg) {
    struct memop *m = arg;
    volatile const unsigned char *p = (volatile const unsigned char *)(uintptr_t)m->addr;
    if (m->size == 4) {
        uint32_t v = 0;
        memcpy(&v, (const void *)p, 4);
        m->seen = v;
    } else {
        memcpy(&m->seen, (const void *)p, 8);
    }
}

static bool satisfied(const struct memop *m) {
    uint64_t mask = m->size == 4 ? 0xffffffffull : ~0ull;
    uint64_t seen = m->seen & mask, v = m->value & mask;
    switch (m->flags & 3u) {
    case CU_STREAM_WAIT_VALUE_GEQ:
        /* Cyclic comparison, as the driver documents for GEQ. */
        return m->size == 4 ? (int32_t)((uint32_t)seen - (uint32_t)v) >= 0
                            : (int64_t)(seen - v) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ:
        return seen == v;
    case CU_STREAM_WAIT_VALUE_AND:
        return (seen & v) != 0;
    default: /* CU_STREAM_WAIT_VALUE_NOR */
        return (~(seen | v) & mask) != 0;
    }
}

static bool mapped(uint64_t addr, unsigned size) {
    struct sim_lookup lk;
    sim_lookup(addr, &lk);
    if (lk.range == NULL) return true; /* host memory the simulator does not manage */
    return lk.mapped && addr + size <= lk.mapping_base + lk.mapping_size;
}

static uint64_t memop_run(struct sim_op *op, uint64_t *start) {
    (void)start;
    struct memop *m = op->u.call.data;
    if (!mapped(m->addr, m->size)) {
        sim_record_fault(m->addr);
        op->failed = true;
        return 0;
    }
    if (sim.cfg.data != SIM_DATA_FULL) return 0;
    if (!m->wait) {
        if (!sim_run_unlocked(do_write, m)) op->failed = true;
        return 0;
    }
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        if (!sim_run_unlocked(do_read, m)) {
            op->failed = true;
            return 0;
        }
        if (satisfied(m)) return 0;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec >= 10) {
            sim_record_fault(m->addr); /* the device would hang here: give up loudly */
            op->failed = true;
            return 0;
        }
        sim_unlock();
        struct timespec nap = {0, 50000};
        nanosleep(&nap, NULL);
        sim_lock();
    }
}

/* Queues the operations of one call (all or none). */
static CUresult memops_submit(CUstream hs, bool pt, const struct memop *ops, unsigned n) {
    struct sim_ctx *c;
    CUresult rc = sim_require_ctx(&c);
    if (rc != CUDA_SUCCESS) return rc;
    struct sim_stream *s = sim_stream_resolve(hs, pt, &rc);
    if (s == NULL) return rc;
    for (unsigned i = 0; i < n; i++)
        if (ops[i].addr == 0 || ops[i].addr % ops[i].size != 0) return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    if (sim.sticky != CUDA_SUCCESS) {
        rc = sim.sticky;
        sim_unlock();
        return rc;
    }
    if (s->capture != NULL) {
        sim_unlock();
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    for (unsigned i = 0; i < n && rc == CUDA_SUCCESS; i++) {
        struct sim_op *op = sim_op_new(SIM_OP_CALL, s);
        void *data = op != NULL ? memop_copy(&ops[i]) : NULL;
        if (data == NULL) {
            sim_op_release(op);
            rc = CUDA_ERROR_OUT_OF_MEMORY;
            break;
        }
        op->u.call = (struct sim_call_op){memop_run, free, memop_copy, data};
        sim_op_add_ref(op, ops[i].addr, ops[i].size);
        sim_op_enqueue(op);
        sim_op_release(op);
    }
    sim_unlock();
    return rc;
}

static CUresult write_value(CUstream s, bool pt, CUdeviceptr addr, uint64_t v, unsigned size,
                            unsigned flags) {
    if (flags & ~(unsigned)CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER) return CUDA_ERROR_INVALID_VALUE;
    struct memop m = {.addr = addr, .value = v, .size = size};
    return memops_submit(s, pt, &m, 1);
}

static CUresult wait_value(CUstream s, bool pt, CUdeviceptr addr, uint64_t v, unsigned size,
                           unsigned flags) {
    if (flags & ~(3u | (unsigned)CU_STREAM_WAIT_VALUE_FLUSH)) return CUDA_ERROR_INVALID_VALUE;
    struct memop m = {.addr = addr, .value = v, .size = size, .wait = true, .flags = flags};
    return memops_submit(s, pt, &m, 1);
}

static CUresult batch(CUstream s, bool pt, unsigned count, CUstreamBatchMemOpParams *p,
                      unsigned flags) {
    if (flags != 0 || count == 0 || count > 256 || p == NULL) return CUDA_ERROR_INVALID_VALUE;
    struct memop ops[256];
    unsigned n = 0;
    for (unsigned i = 0; i < count; i++) {
        switch (p[i].operation) {
        case CU_STREAM_MEM_OP_WAIT_VALUE_32:
        case CU_STREAM_MEM_OP_WAIT_VALUE_64: {
            bool w64 = p[i].operation == CU_STREAM_MEM_OP_WAIT_VALUE_64;
            ops[n++] = (struct memop){.addr = p[i].waitValue.address,
                                      .value = w64 ? p[i].waitValue.value64 : p[i].waitValue.value,
                                      .size = w64 ? 8 : 4,
                                      .wait = true,
                                      .flags = p[i].waitValue.flags};
            break;
        }
        case CU_STREAM_MEM_OP_WRITE_VALUE_32:
        case CU_STREAM_MEM_OP_WRITE_VALUE_64: {
            bool w64 = p[i].operation == CU_STREAM_MEM_OP_WRITE_VALUE_64;
            ops[n++] =
                (struct memop){.addr = p[i].writeValue.address,
                               .value = w64 ? p[i].writeValue.value64 : p[i].writeValue.value,
                               .size = w64 ? 8 : 4};
            break;
        }
        case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
        case CU_STREAM_MEM_OP_BARRIER:
            break; /* ordering only: the queue already runs in order */
        default:
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    if (n == 0) {
        struct sim_ctx *c;
        return sim_require_ctx(&c);
    }
    return memops_submit(s, pt, ops, n);
}

#define MEMOP_ENTRY_POINTS(NAME, PT)                                                               \
    SIM_EXPORT CUresult cuStreamWriteValue32##NAME(CUstream s, CUdeviceptr a, cuuint32_t v,        \
                                                   unsigned int f) {                               \
        return write_value(s, PT, a, v, 4, f);                                                     \
    }                                                                                              \
    SIM_EXPORT CUresult cuStreamWriteValue64##NAME(CUstream s, CUdeviceptr a, cuuint64_t v,        \
                                                   unsigned int f) {                               \
        return write_value(s, PT, a, v, 8, f);                                                     \
    }                                                                                              \
    SIM_EXPORT CUresult cuStreamWaitValue32##NAME(CUstream s, CUdeviceptr a, cuuint32_t v,         \
                                                  unsigned int f) {                                \
        return wait_value(s, PT, a, v, 4, f);                                                      \
    }                                                                                              \
    SIM_EXPORT CUresult cuStreamWaitValue64##NAME(CUstream s, CUdeviceptr a, cuuint64_t v,         \
                                                  unsigned int f) {                                \
        return wait_value(s, PT, a, v, 8, f);                                                      \
    }                                                                                              \
    SIM_EXPORT CUresult cuStreamBatchMemOp##NAME(CUstream s, unsigned int n,                       \
                                                 CUstreamBatchMemOpParams *p, unsigned int f) {    \
        return batch(s, PT, n, p, f);                                                              \
    }

MEMOP_ENTRY_POINTS(, false)
MEMOP_ENTRY_POINTS(_v2, false)
MEMOP_ENTRY_POINTS(_ptsz, true)
MEMOP_ENTRY_POINTS(_v2_ptsz, true)
