/* eng_reach: uses of managed buffers that plain launch scanning does not see, raced against moves.
 *
 *   eng_reach SHAPE ROUNDS
 *
 * Each round makes a few "target" buffers resident with a plain launch (seen), then uses them the
 * way SHAPE does, with a kernel that lasts 400 us of virtual time (far longer than a move of its
 * buffers), then works "pressure" buffers totalling the budget on another stream, which forces
 * every other buffer out. A move that did not wait for the SHAPE use remaps under it (a hazard
 * in the simulator's report) or copies before it wrote (a lost write, seen by the checks). Every
 * word is a function of (buffer id, version, index); kernels verify before they update, and the
 * end copies every buffer back and checks it. stdout: "data: ok" when all of it is bit-exact.
 *
 * SHAPEs (run under HOSTOFF_BUDGET=12M, HOSTOFF_MIN_BYTES=256K by engine_harness.py):
 *   many        one launch whose by-value struct points to 106 buffers (multi-tensor apply):
 *               100 small ones (pass-through) first, then 6 managed ones
 *   nccl        cuLaunchKernelEx(cfg, f, NULL, extra) on a second stream: one 4 KiB by-value
 *               parameter, CU_LAUNCH_PARAM_BUFFER_SIZE = the bytes used
 *   capture     cuMemAllocAsync / cuMemFreeAsync inside a stream capture, the graph replayed
 *               while a buffer of the same size is live
 *   retain      cuMemRetainAllocationHandle on a buffer, the handle mapped at a second address
 *               and written through it
 *   graph       child-graph and conditional nodes, updated in place with every exec setter
 *   copies      cuMemcpyBatchAsync, cuMemcpy3DBatchAsync, cuMemcpy3DPeerAsync,
 *               cuStreamWriteValue32/64, cuStreamWaitValue32/64, cuStreamBatchMemOp
 *   peer        device 1's stream using device 0's buffers (SIMCUDA_DEVICES=2, peer access on)
 *   tensormap   buffers reached only through CUtensorMap descriptors
 *   ptrarray    buffers reached only through a pointer array in device memory
 *   unknown     a kernel with more parameters than any layout query covers (300): the buffer's
 *               pointer is parameter 297 */
#include "engtest.h"

#include <pthread.h>

#define NT_MAX   106 /* targets */
#define NSMALL   100 /* many: small buffers ahead of the managed ones */
#define NP       6   /* pressure buffers: 6 x 2 MiB = the 12 MiB budget */
#define LONG_NS  400000
#define TGT_SIZE (2 * MIB)

struct buf {
    CUdeviceptr p;
    uint64_t id, ver, bytes;
};

static struct buf tgt[NT_MAX], prs[NP];
static int nt = 4;
static struct eng_module em;
static CUmodule mod;
static CUstream s1, s2, s3; /* warm-ups, pressure, the uses under test */

/* One entry of the by-value structs and device arrays below. */
struct entry {
    uint64_t ptr, id, ver, words;
};

/* ---------------------------------------------------------------------------- kernels */

static void vu_words(uint64_t *b, uint64_t id, uint64_t v, uint64_t n) {
    uint64_t bad = 0;
    for (uint64_t i = 0; i < n; i++) {
        bad += b[i] != eng_word(id, v, i);
        b[i] = eng_word(id, v + 1, i);
    }
    if (bad) atomic_fetch_add(&eng_errors, bad);
}

/* reach_vu_long(ptr, id, ver, words): eng_vu that lasts LONG_NS. */
void reach_vu_long(void **p) {
    simcuda_set_duration_ns(LONG_NS);
    vu_words(*(uint64_t **)p[0], *(uint64_t *)p[1], *(uint64_t *)p[2], *(uint64_t *)p[3]);
}

/* reach_fill_long(ptr, id, ver, words): eng_fill that lasts LONG_NS (graph nodes replay the
 * same arguments: they write a version rather than advance one). */
void reach_fill_long(void **p) {
    simcuda_set_duration_ns(LONG_NS);
    eng_fill(p);
}

/* reach_struct(b4096): { u64 n; struct entry e[n] } by value; vu on each entry. */
void reach_struct(void **p) {
    simcuda_set_duration_ns(LONG_NS);
    const unsigned char *s = p[0];
    uint64_t n;
    memcpy(&n, s, 8);
    for (uint64_t i = 0; i < n && 8 + (i + 1) * sizeof(struct entry) <= 4096; i++) {
        struct entry e;
        memcpy(&e, s + 8 + i * sizeof e, sizeof e);
        vu_words((uint64_t *)(uintptr_t)e.ptr, e.id, e.ver, e.words);
    }
}

/* reach_tmap(b128 map, id, ver, words): vu on the tensor map's global address. */
void reach_tmap(void **p) {
    simcuda_set_duration_ns(LONG_NS);
    uint64_t *b = (uint64_t *)(uintptr_t)simcuda_tensor_map_address(p[0]);
    if (b == NULL) {
        atomic_fetch_add(&eng_errors, 1);
        return;
    }
    vu_words(b, *(uint64_t *)p[1], *(uint64_t *)p[2], *(uint64_t *)p[3]);
}

/* reach_array(ptr arr, n): arr is a device array of n entries; vu on each (declared). */
void reach_array(void **p) {
    simcuda_set_duration_ns(LONG_NS);
    const struct entry *arr = *(const struct entry **)p[0];
    uint64_t n = *(uint64_t *)p[1];
    for (uint64_t i = 0; i < n; i++) {
        simcuda_kernel_access((const void *)(uintptr_t)arr[i].ptr, arr[i].words * 8);
        vu_words((uint64_t *)(uintptr_t)arr[i].ptr, arr[i].id, arr[i].ver, arr[i].words);
    }
}

/* reach_wide(u64 x 296, ptr, id, ver, words): vu through parameter 296. */
#define WIDE_PAD 296
void reach_wide(void **p) {
    simcuda_set_duration_ns(LONG_NS);
    vu_words(*(uint64_t **)p[WIDE_PAD], *(uint64_t *)p[WIDE_PAD + 1], *(uint64_t *)p[WIDE_PAD + 2],
             *(uint64_t *)p[WIDE_PAD + 3]);
}

static CUfunction fn(const char *name) {
    CUfunction f;
    CK(cuModuleGetFunction(&f, mod, name));
    return f;
}

static void load(void) {
    static char image[8192];
    int n = snprintf(image, sizeof image,
                     "simcuda-module 1\n" ENG_KERNELS "kernel reach_vu_long ptr u64 u64 u64\n"
                     "kernel reach_fill_long ptr u64 u64 u64\n"
                     "kernel reach_struct b4096\n"
                     "kernel reach_tmap b128 u64 u64 u64\n"
                     "kernel reach_array ptr u64\n"
                     "kernel reach_wide");
    for (int i = 0; i < WIDE_PAD; i++)
        n += snprintf(image + n, sizeof image - (size_t)n, " u64");
    snprintf(image + n, sizeof image - (size_t)n, " ptr u64 u64 u64\n");
    eng_load(&em, image);
    mod = em.mod;
}

/* ---------------------------------------------------------------------------- helpers */

static uint64_t next_id = 1;

static void alloc_buf(struct buf *b, uint64_t bytes) {
    b->bytes = bytes;
    b->id = next_id++;
    b->ver = 0;
    CK(cuMemAlloc(&b->p, bytes));
    CK(eng_launch(em.fill, s1, b->p, b->id, 0, bytes));
}

static void launch4(CUfunction f, CUstream s, struct buf *b) {
    CK(eng_launch(f, s, b->p, b->id, b->ver, b->bytes));
    b->ver++;
}

/* A seen use of each target: brings them back to the device. */
static void warm(int from, int to) {
    for (int i = from; i < to; i++)
        launch4(em.vu, s1, &tgt[i]);
}

/* The use under test runs on s3, after the warm-up on s1 (ordered by an event, as a framework
 * orders streams) but not joined back until the pressure has been queued: only a move that
 * waits for s3's work itself keeps clear of it. */
static void fork_use(void) {
    CUevent e;
    CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    CK(cuEventRecord(e, s1));
    CK(cuStreamWaitEvent(s3, e, 0));
    CK(cuEventDestroy(e));
}

static void join_use(void) {
    CUevent e;
    CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    CK(cuEventRecord(e, s3));
    CK(cuStreamWaitEvent(s1, e, 0));
    CK(cuEventDestroy(e));
}

/* Works every pressure buffer on s2: with the budget they fill, every other buffer must leave. */
static void pressure(void) {
    for (int i = 0; i < NP; i++)
        launch4(em.vu, s2, &prs[i]);
}

static struct entry entry_of(const struct buf *b) {
    return (struct entry){b->p, b->id, b->ver, b->bytes / 8};
}

static void check_all(void) {
    CK(cuCtxSynchronize());
    for (int i = 0; i < nt; i++) {
        uint64_t bad = eng_host_check(tgt[i].p, tgt[i].id, tgt[i].ver, tgt[i].bytes);
        EXPECT(bad == 0, "target %d: %llu words differ", i, (unsigned long long)bad);
    }
    for (int i = 0; i < NP; i++) {
        uint64_t bad = eng_host_check(prs[i].p, prs[i].id, prs[i].ver, prs[i].bytes);
        EXPECT(bad == 0, "pressure buffer %d: %llu words differ", i, (unsigned long long)bad);
    }
}

/* ----------------------------------------------------------------------------- shapes */

/* A by-value struct of entries, given as kernelParams (many) or as a short extra buffer (nccl). */
static void struct_round(int from, int to, bool extra, CUstream s) {
    static unsigned char arg[4096];
    memset(arg, 0, sizeof arg);
    uint64_t n = (uint64_t)(to - from);
    memcpy(arg, &n, 8);
    for (int i = from; i < to; i++) {
        struct entry e = entry_of(&tgt[i]);
        memcpy(arg + 8 + (size_t)(i - from) * sizeof e, &e, sizeof e);
        tgt[i].ver++;
    }
    if (!extra) {
        void *args[] = {arg};
        CK(cuLaunchKernel(fn("reach_struct"), 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
        return;
    }
    size_t used = 8 + (size_t)n * sizeof(struct entry);
    void *ex[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, arg, CU_LAUNCH_PARAM_BUFFER_SIZE, &used,
                  CU_LAUNCH_PARAM_END};
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = s;
    CK(cuLaunchKernelEx(&cfg, fn("reach_struct"), NULL, ex));
}

static void shape_many(int rounds) {
    for (int r = 0; r < rounds; r++) {
        warm(NSMALL, nt); /* the managed ones: past any fixed cap of 64 */
        fork_use();
        struct_round(0, nt, false, s3);
        pressure();
        join_use();
    }
}

static void shape_nccl(int rounds) {
    for (int r = 0; r < rounds; r++) {
        warm(0, nt);
        fork_use(); /* the collective on its own stream, ordered by an event, as NCCL does */
        struct_round(0, nt, true, s3);
        pressure();
        join_use();
    }
}

/* Graph memory: a scratch buffer allocated and freed inside the capture. The graph fills it
 * and copies it into tgt[0]; meanwhile a buffer of the same size, allocated after the capture
 * ended, must keep its own contents. */
static void shape_capture(int rounds) {
    CUgraph g;
    CUgraphExec x;
    CUdeviceptr scratch;
    const uint64_t sid = 999;
    CK(cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_RELAXED));
    CK(cuMemAllocAsync(&scratch, TGT_SIZE, s1));
    CK(eng_launch(fn("reach_fill_long"), s1, scratch, sid, 5, TGT_SIZE));
    CK(cuMemcpyDtoDAsync(tgt[0].p, scratch, TGT_SIZE, s1));
    CK(cuMemFreeAsync(scratch, s1));
    CK(cuStreamEndCapture(s1, &g));
    CK(cuGraphInstantiateWithFlags(&x, g, 0));
    tgt[0].id = sid;
    tgt[0].ver = 5;
    struct buf other;
    alloc_buf(&other, TGT_SIZE);
    for (int r = 0; r < rounds; r++) {
        CK(cuGraphLaunch(x, s1));
        launch4(em.vu, s2, &other);
        pressure();
        CK(cuStreamSynchronize(s1));
        /* The copy landed: tgt[0] holds the scratch pattern; advance it like any buffer. */
        launch4(em.vu, s1, &tgt[0]);
        CK(cuStreamSynchronize(s1));
        tgt[0].ver = 5; /* the next launch writes version 5 again */
    }
    CK(cuCtxSynchronize());
    tgt[0].ver = 6;
    uint64_t bad = eng_host_check(other.p, other.id, other.ver, other.bytes);
    EXPECT(bad == 0, "the buffer allocated after the capture: %llu words differ",
           (unsigned long long)bad);
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
    CK(cuMemFree(other.p));
}

/* The buffer's physical handle escapes: the program maps it at a second address and writes
 * through that one only. */
static void shape_retain(int rounds) {
    launch4(em.vu, s1, &tgt[0]); /* on the device when its handle escapes */
    CK(cuStreamSynchronize(s1));
    CUmemGenericAllocationHandle h;
    CUresult rc = cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)tgt[0].p);
    if (rc == CUDA_ERROR_INVALID_VALUE) {
        /* Without the library cuMemAlloc memory is not VMM memory: the driver says so. */
        printf("retain: not a VMM mapping\n");
        return;
    }
    CK(rc);
    CUdeviceptr alias;
    CK(cuMemAddressReserve(&alias, TGT_SIZE, 0, 0, 0));
    CK(cuMemMap(alias, TGT_SIZE, 0, h, 0));
    CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CK(cuMemSetAccess(alias, TGT_SIZE, &acc, 1));
    struct buf via = tgt[0];
    via.p = alias;
    for (int r = 0; r < rounds; r++) {
        warm(1, nt);
        fork_use();
        launch4(fn("reach_vu_long"), s3, &via);
        pressure();
        join_use();
    }
    CK(cuCtxSynchronize());
    tgt[0].ver = via.ver; /* checked through its own address */
    check_all();
    CK(cuMemUnmap(alias, TGT_SIZE));
    CK(cuMemAddressFree(alias, TGT_SIZE));
    CK(cuMemRelease(h));
}

/* One kernel node's parameters: fill_long(b, id, ver). */
struct knode {
    CUDA_KERNEL_NODE_PARAMS kp;
    void *args[4];
    CUdeviceptr p;
    uint64_t id, ver, words;
};

static void knode_set(struct knode *k, const struct buf *b, uint64_t ver) {
    memset(&k->kp, 0, sizeof k->kp);
    k->p = b->p;
    k->id = b->id;
    k->ver = ver;
    k->words = b->bytes / 8;
    k->args[0] = &k->p;
    k->args[1] = &k->id;
    k->args[2] = &k->ver;
    k->args[3] = &k->words;
    k->kp.func = fn("reach_fill_long");
    k->kp.gridDimX = k->kp.gridDimY = k->kp.gridDimZ = 1;
    k->kp.blockDimX = k->kp.blockDimY = k->kp.blockDimZ = 1;
    k->kp.kernelParams = k->args;
}

static CUgraph child_with(struct knode *k, const struct buf *b, uint64_t ver) {
    CUgraph c;
    CUgraphNode n;
    CK(cuGraphCreate(&c, 0));
    knode_set(k, b, ver);
    CK(cuGraphAddKernelNode(&n, c, NULL, 0, &k->kp));
    return c;
}

/* A graph of: a kernel node on tgt[0], a child graph whose kernel fills tgt[1], a conditional
 * (IF, default 1) whose body fills tgt[2], a copy node tgt[3] -> tgt[4] and a memset node on
 * tgt[5]; every round launches it while the pressure runs, then moves one of its nodes to other
 * buffers with an exec setter. Graph kernels write a version (they replay their arguments). */
static void shape_graph(int rounds) {
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    CUcontext ctx;
    CK(cuCtxGetCurrent(&ctx));
    struct knode k0, kc, kb, kc2;
    uint64_t ver = 100;
    CUgraphNode n0, nc, nif, ncp, nms;
    knode_set(&k0, &tgt[0], ver);
    CK(cuGraphAddKernelNode(&n0, g, NULL, 0, &k0.kp));
    CUgraph child = child_with(&kc, &tgt[1], ver);
    CK(cuGraphAddChildGraphNode(&nc, g, NULL, 0, child));
    CUgraphConditionalHandle h;
    CK(cuGraphConditionalHandleCreate(&h, g, ctx, 1, CU_GRAPH_COND_ASSIGN_DEFAULT));
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    np.conditional.handle = h;
    np.conditional.type = CU_GRAPH_COND_TYPE_IF;
    np.conditional.size = 1;
    np.conditional.ctx = ctx;
    CK(cuGraphAddNode(&nif, g, NULL, NULL, 0, &np));
    CUgraphNode nb;
    knode_set(&kb, &tgt[2], ver);
    CK(cuGraphAddKernelNode(&nb, np.conditional.phGraph_out[0], NULL, 0, &kb.kp));
    CUDA_MEMCPY3D cp;
    memset(&cp, 0, sizeof cp);
    cp.srcMemoryType = cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    cp.srcDevice = tgt[3].p;
    cp.dstDevice = tgt[4].p;
    cp.WidthInBytes = TGT_SIZE;
    cp.Height = cp.Depth = 1;
    CK(cuGraphAddMemcpyNode(&ncp, g, &n0, 1, &cp, ctx));
    CUDA_MEMSET_NODE_PARAMS ms;
    memset(&ms, 0, sizeof ms);
    ms.dst = tgt[5].p;
    ms.value = 0x5a5a5a5a;
    ms.elementSize = 4;
    ms.width = TGT_SIZE / 4;
    ms.height = 1;
    CK(cuGraphAddMemsetNode(&nms, g, &n0, 1, &ms, ctx));
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g, 0));
    /* The conditional's body always fills tgt[2] (an exec cannot set a body's nodes); the other
     * five roles rotate over the other five buffers, one step per round. */
    static const int others[5] = {0, 1, 3, 4, 5};
    int k0_dst = 0, child_dst = 1, copy_src = 3, copy_dst = 4, set_dst = 5;
    for (int r = 0; r < rounds; r++) {
        warm(0, nt); /* every buffer back on the device, at a new version */
        fork_use();
        CK(cuGraphLaunch(x, s3));
        pressure();
        join_use();
        CK(cuStreamSynchronize(s1));
        /* What each buffer holds now: kernels wrote (id, ver); the copy node gave copy_dst what
         * copy_src held; the memset node filled set_dst (checked here, then refilled). */
        tgt[k0_dst].ver = tgt[child_dst].ver = ver;
        tgt[2].ver = 100; /* the body kept the arguments it was built with */
        tgt[copy_dst].id = tgt[copy_src].id;
        tgt[copy_dst].ver = tgt[copy_src].ver;
        uint32_t *hm = malloc(TGT_SIZE);
        EXPECT(hm != NULL, "out of memory");
        CK(cuMemcpyDtoH(hm, tgt[set_dst].p, TGT_SIZE));
        for (size_t i = 0; i < TGT_SIZE / 4; i++)
            EXPECT(hm[i] == 0x5a5a5a5a, "memset node target word %zu is %#x", i, hm[i]);
        free(hm);
        CK(eng_launch(em.fill, s1, tgt[set_dst].p, tgt[set_dst].id, 0, TGT_SIZE));
        tgt[set_dst].ver = 0;
        /* Update in place: each exec setter moves its node to other buffers. */
        ver++;
        k0_dst = others[(r + 1) % 5];
        child_dst = others[(r + 2) % 5];
        copy_src = others[(r + 3) % 5];
        copy_dst = others[(r + 4) % 5];
        set_dst = others[(r + 5) % 5];
        knode_set(&k0, &tgt[k0_dst], ver);
        CK(cuGraphExecKernelNodeSetParams(x, n0, &k0.kp));
        CUgraph c2 = child_with(&kc2, &tgt[child_dst], ver);
        if (r % 2 == 0) {
            CK(cuGraphExecChildGraphNodeSetParams(x, nc, c2));
        } else {
            CUgraphNodeParams cn;
            memset(&cn, 0, sizeof cn);
            cn.type = CU_GRAPH_NODE_TYPE_GRAPH;
            cn.graph.graph = c2;
            CK(cuGraphExecNodeSetParams(x, nc, &cn));
        }
        CK(cuGraphDestroy(c2));
        cp.srcDevice = tgt[copy_src].p;
        cp.dstDevice = tgt[copy_dst].p;
        CK(cuGraphExecMemcpyNodeSetParams(x, ncp, &cp, ctx));
        ms.dst = tgt[set_dst].p;
        CK(cuGraphExecMemsetNodeSetParams(x, nms, &ms, ctx));
    }
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
    CK(cuGraphDestroy(child));
}

static void shape_copies(int rounds) {
    /* tgt[0] is the source, tgt[1..3] receive batch, 3D batch and 3D peer copies, tgt[4] and
     * tgt[5] take stream memory operations. Each call is queued behind a long kernel on s3, so
     * it runs long after the pressure began. */
    CUcontext ctx;
    CK(cuCtxGetCurrent(&ctx));
    for (int r = 0; r < rounds; r++) {
        warm(0, nt);
        fork_use();
        launch4(fn("reach_vu_long"), s3, &tgt[0]);
        CUdeviceptr dsts[1] = {tgt[1].p}, srcs[1] = {tgt[0].p};
        size_t sizes[1] = {TGT_SIZE}, idx = 0;
        CUmemcpyAttributes attr;
        memset(&attr, 0, sizeof attr);
        attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
        CK(cuMemcpyBatchAsync(dsts, srcs, sizes, 1, &attr, &idx, 1, s3));
        CUDA_MEMCPY3D_BATCH_OP op;
        memset(&op, 0, sizeof op);
        op.src.type = op.dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
        op.src.op.ptr.ptr = tgt[0].p;
        op.dst.op.ptr.ptr = tgt[2].p;
        op.extent.width = TGT_SIZE / 16;
        op.extent.height = 4;
        op.extent.depth = 4;
        CK(cuMemcpy3DBatchAsync(1, &op, 0, s3));
        CUDA_MEMCPY3D_PEER pp;
        memset(&pp, 0, sizeof pp);
        pp.srcMemoryType = pp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        pp.srcDevice = tgt[0].p;
        pp.dstDevice = tgt[3].p;
        pp.srcContext = pp.dstContext = ctx;
        pp.WidthInBytes = pp.srcPitch = pp.dstPitch = TGT_SIZE / 8;
        pp.Height = 4;
        pp.Depth = 2;
        CK(cuMemcpy3DPeerAsync(&pp, s3));
        for (int i = 1; i <= 3; i++) {
            tgt[i].id = tgt[0].id;
            tgt[i].ver = tgt[0].ver;
        }
        /* Memory operations write the values the words already hold (the data stays what the
         * checks expect) and wait for them: uses all the same. */
        uint64_t w4 = eng_word(tgt[4].id, tgt[4].ver, 0), w5 = eng_word(tgt[5].id, tgt[5].ver, 1);
        CK(cuStreamWriteValue64(s3, tgt[4].p, w4, 0));
        CK(cuStreamWriteValue32(s3, tgt[4].p + 8, (uint32_t)eng_word(tgt[4].id, tgt[4].ver, 1), 0));
        CK(cuStreamWaitValue64(s3, tgt[4].p, w4, CU_STREAM_WAIT_VALUE_EQ));
        CK(cuStreamWaitValue32(s3, tgt[4].p + 8, (uint32_t)eng_word(tgt[4].id, tgt[4].ver, 1),
                               CU_STREAM_WAIT_VALUE_EQ));
        CUstreamBatchMemOpParams mo[2];
        memset(mo, 0, sizeof mo);
        mo[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
        mo[0].writeValue.address = tgt[5].p + 8;
        mo[0].writeValue.value64 = w5;
        mo[1].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_64;
        mo[1].waitValue.address = tgt[5].p + 8;
        mo[1].waitValue.value64 = w5;
        mo[1].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
        CK(cuStreamBatchMemOp(s3, 2, mo, 0));
        pressure();
        join_use();
    }
}

static void shape_peer(int rounds) {
    CUcontext c0, c1;
    CK(cuCtxGetCurrent(&c0));
    CK(cuDevicePrimaryCtxRetain(&c1, 1));
    CK(cuCtxSetCurrent(c1));
    CK(cuCtxEnablePeerAccess(c0, 0));
    CUstream d1;
    CK(cuStreamCreate(&d1, CU_STREAM_NON_BLOCKING));
    CUmodule m1;
    CK(cuModuleLoadData(&m1, "simcuda-module 1\nkernel reach_vu_long ptr u64 u64 u64\n"));
    CUfunction f1;
    CK(cuModuleGetFunction(&f1, m1, "reach_vu_long"));
    for (int r = 0; r < rounds; r++) {
        CK(cuCtxSetCurrent(c0));
        warm(0, nt);
        CUevent e;
        CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
        CK(cuEventRecord(e, s1));
        CK(cuCtxSetCurrent(c1));
        CK(cuStreamWaitEvent(d1, e, 0));
        for (int i = 0; i < nt; i++)
            launch4(f1, d1, &tgt[i]);
        CUevent e1;
        CK(cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING));
        CK(cuEventRecord(e1, d1));
        CK(cuCtxSetCurrent(c0));
        pressure();
        CK(cuStreamWaitEvent(s1, e1, 0)); /* the next warm-up follows device 1's work */
        CK(cuEventDestroy(e));
        CK(cuCtxSetCurrent(c1));
        CK(cuEventDestroy(e1));
    }
    CK(cuCtxSetCurrent(c1));
    CK(cuCtxSynchronize());
    CK(cuCtxSetCurrent(c0));
}

static void shape_tensormap(int rounds) {
    for (int r = 0; r < rounds; r++) {
        warm(0, nt);
        fork_use();
        for (int i = 0; i < nt; i++) {
            CUtensorMap map;
            cuuint64_t dim[2] = {TGT_SIZE / 1024, 256}, stride[1] = {1024};
            cuuint32_t box[2] = {64, 64}, es[2] = {1, 1};
            CK(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2,
                                      (void *)(uintptr_t)(i % 2 ? tgt[(i + 1) % nt].p : tgt[i].p),
                                      dim, stride, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                      CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
            /* Odd ones are re-pointed: the descriptor learnt at encoding changes address. */
            if (i % 2) CK(cuTensorMapReplaceAddress(&map, (void *)(uintptr_t)tgt[i].p));
            uint64_t words = tgt[i].bytes / 8;
            void *args[] = {&map, &tgt[i].id, &tgt[i].ver, &words};
            CK(cuLaunchKernel(fn("reach_tmap"), 1, 1, 1, 1, 1, 1, 0, s3, args, NULL));
            tgt[i].ver++;
        }
        pressure();
        join_use();
    }
}

static void shape_ptrarray(int rounds) {
    CUdeviceptr arr;
    CK(cuMemAlloc(&arr, 4096)); /* small: never managed itself */
    struct entry e[NT_MAX];
    for (int r = 0; r < rounds; r++) {
        warm(0, nt);
        for (int i = 0; i < nt; i++) {
            e[i] = entry_of(&tgt[i]);
            tgt[i].ver++;
        }
        fork_use();
        CK(cuMemcpyHtoDAsync(arr, e, (size_t)nt * sizeof e[0], s3));
        uint64_t n = (uint64_t)nt;
        void *args[] = {&arr, &n};
        CK(cuLaunchKernel(fn("reach_array"), 1, 1, 1, 1, 1, 1, 0, s3, args, NULL));
        pressure();
        join_use();
        CK(cuStreamSynchronize(s3)); /* e[] is reused */
    }
    CK(cuMemFree(arr));
}

static void shape_unknown(int rounds) {
    for (int r = 0; r < rounds; r++) {
        warm(0, nt);
        fork_use();
        for (int i = 0; i < nt; i++) {
            static uint64_t pad[WIDE_PAD];
            void *args[WIDE_PAD + 4];
            for (int k = 0; k < WIDE_PAD; k++)
                args[k] = &pad[k];
            uint64_t words = tgt[i].bytes / 8;
            args[WIDE_PAD] = &tgt[i].p;
            args[WIDE_PAD + 1] = &tgt[i].id;
            args[WIDE_PAD + 2] = &tgt[i].ver;
            args[WIDE_PAD + 3] = &words;
            CK(cuLaunchKernel(fn("reach_wide"), 1, 1, 1, 1, 1, 1, 0, s3, args, NULL));
            tgt[i].ver++;
        }
        pressure();
        join_use();
    }
}

int main(int argc, char **argv) {
    EXPECT(argc >= 2, "usage: eng_reach SHAPE [ROUNDS]");
    const char *shape = argv[1];
    int rounds = argc > 2 ? atoi(argv[2]) : 6;
    eng_primary(0);
    load();
    CK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&s3, CU_STREAM_NON_BLOCKING));
    uint64_t tbytes = TGT_SIZE;
    if (strcmp(shape, "many") == 0) {
        nt = NT_MAX;
        for (int i = 0; i < NSMALL; i++)
            alloc_buf(&tgt[i], 64 << 10);
    } else if (strcmp(shape, "graph") == 0 || strcmp(shape, "copies") == 0) {
        nt = 6;
    }
    for (int i = strcmp(shape, "many") == 0 ? NSMALL : 0; i < nt; i++)
        alloc_buf(&tgt[i], tbytes);
    for (int i = 0; i < NP; i++)
        alloc_buf(&prs[i], 2 * MIB);
    CK(cuCtxSynchronize());
    if (strcmp(shape, "many") == 0)
        shape_many(rounds);
    else if (strcmp(shape, "nccl") == 0)
        shape_nccl(rounds);
    else if (strcmp(shape, "capture") == 0)
        shape_capture(rounds);
    else if (strcmp(shape, "retain") == 0)
        shape_retain(rounds);
    else if (strcmp(shape, "graph") == 0)
        shape_graph(rounds);
    else if (strcmp(shape, "copies") == 0)
        shape_copies(rounds);
    else if (strcmp(shape, "peer") == 0)
        shape_peer(rounds);
    else if (strcmp(shape, "tensormap") == 0)
        shape_tensormap(rounds);
    else if (strcmp(shape, "ptrarray") == 0)
        shape_ptrarray(rounds);
    else if (strcmp(shape, "unknown") == 0)
        shape_unknown(rounds);
    else
        EXPECT(false, "unknown shape %s", shape);
    check_all();
    EXPECT(atomic_load(&eng_errors) == 0, "%llu mismatches seen by kernels",
           (unsigned long long)atomic_load(&eng_errors));
    printf("data: ok\n");
    return 0;
}
