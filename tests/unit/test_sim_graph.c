/* simcuda: stream capture (sequences, fork/join, status, the illegal-during-capture rules and
 * capture modes) and graphs (explicit construction, node queries, instantiation, launches and
 * their virtual timing, exec updates, independence of an exec from its graph). */
#include <pthread.h>
#include <stdbool.h>

#include "simtest.h"

#define N       256u
#define BYTES   (N * sizeof(uint32_t))
#define BUSY_NS 100000ull

/* ------------------------------------------------------------------ kernels */

static const char image[] = "simcuda-module 1\n"
                            "kernel simtest_g_fill ptr u32 u32\n"
                            "kernel simtest_g_add ptr u32 u32\n"
                            "kernel simtest_g_scale ptr u32 u32\n"
                            "kernel simtest_g_busy ptr u32 ns=100000\n";

static uint32_t *u32_arg(void **params, int i) {
    CUdeviceptr p;
    memcpy(&p, params[i], sizeof p);
    return (uint32_t *)(uintptr_t)p;
}

static uint32_t val_arg(void **params, int i) {
    uint32_t v;
    memcpy(&v, params[i], sizeof v);
    return v;
}

/* a[0..n) = v */
void simtest_g_fill(void **params) {
    uint32_t *a = u32_arg(params, 0), n = val_arg(params, 1), v = val_arg(params, 2);
    for (uint32_t i = 0; i < n; i++)
        a[i] = v;
}

/* a[0..n) += v */
void simtest_g_add(void **params) {
    uint32_t *a = u32_arg(params, 0), n = val_arg(params, 1), v = val_arg(params, 2);
    for (uint32_t i = 0; i < n; i++)
        a[i] += v;
}

/* a[0..n) *= v */
void simtest_g_scale(void **params) {
    uint32_t *a = u32_arg(params, 0), n = val_arg(params, 1), v = val_arg(params, 2);
    for (uint32_t i = 0; i < n; i++)
        a[i] *= v;
}

/* a[0] = v, for BUSY_NS of virtual time */
void simtest_g_busy(void **params) {
    u32_arg(params, 0)[0] = val_arg(params, 1);
}

static CUcontext ctx;
static CUfunction f_fill, f_add, f_scale, f_busy;

static int group_setup(void **state) {
    (void)state;
    ctx = simtest_ctx();
    CUmodule mod;
    CU_OK(cuModuleLoadData(&mod, image));
    CU_OK(cuModuleGetFunction(&f_fill, mod, "simtest_g_fill"));
    CU_OK(cuModuleGetFunction(&f_add, mod, "simtest_g_add"));
    CU_OK(cuModuleGetFunction(&f_scale, mod, "simtest_g_scale"));
    CU_OK(cuModuleGetFunction(&f_busy, mod, "simtest_g_busy"));
    return 0;
}

/* Launches a (ptr, u32, u32) kernel with one block. */
static CUresult launch3(CUfunction f, CUstream s, CUdeviceptr p, uint32_t n, uint32_t v) {
    void *args[] = {&p, &n, &v};
    return cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL);
}

static CUresult launch_busy(CUstream s, CUdeviceptr p, uint32_t v) {
    void *args[] = {&p, &v};
    return cuLaunchKernel(f_busy, 1, 1, 1, 1, 1, 1, 0, s, args, NULL);
}

static CUstreamCaptureStatus capture_status(CUstream s) {
    CUstreamCaptureStatus st;
    CU_OK(cuStreamIsCapturing(s, &st));
    return st;
}

static void expect_all(const uint32_t *a, uint32_t want) {
    for (uint32_t i = 0; i < N; i++)
        if (a[i] != want) fail_msg("element %u is %#x, expected %#x", i, a[i], want);
}

static void expect_device(CUdeviceptr d, uint32_t want) {
    uint32_t h[N];
    CU_OK(cuMemcpyDtoH(h, d, BYTES));
    expect_all(h, want);
}

static CUgraphNodeType node_type(CUgraphNode n) {
    CUgraphNodeType t;
    CU_OK(cuGraphNodeGetType(n, &t));
    return t;
}

/* ------------------------------------------------- a captured pipeline, replayed */

/* src -> d, d = (d + 5) * 3, d2 = 0xdeadbeef + 1, d -> out, d2 -> out2, all on one stream. */
struct pipeline {
    CUstream s;
    CUdeviceptr d, d2;
    uint32_t *src, *out, *out2; /* pinned host memory */
    CUgraph g;
};

static void pipeline_setup(struct pipeline *p) {
    CU_OK(cuStreamCreate(&p->s, CU_STREAM_NON_BLOCKING));
    CU_OK(cuMemAlloc(&p->d, BYTES));
    CU_OK(cuMemAlloc(&p->d2, BYTES));
    CU_OK(cuMemAllocHost((void **)&p->src, BYTES));
    CU_OK(cuMemAllocHost((void **)&p->out, BYTES));
    CU_OK(cuMemAllocHost((void **)&p->out2, BYTES));
    CU_OK(cuMemsetD32(p->d, 0x11111111u, N));
    CU_OK(cuMemsetD32(p->d2, 0x22222222u, N));
    CU_OK(cuCtxSynchronize());
    CU_OK(cuStreamBeginCapture(p->s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CU_OK(cuMemcpyHtoDAsync(p->d, p->src, BYTES, p->s));
    CU_OK(launch3(f_add, p->s, p->d, N, 5));
    CU_OK(launch3(f_scale, p->s, p->d, N, 3));
    CU_OK(cuMemsetD32Async(p->d2, 0xdeadbeefu, N, p->s));
    CU_OK(launch3(f_add, p->s, p->d2, N, 1));
    CU_OK(cuMemcpyDtoHAsync(p->out, p->d, BYTES, p->s));
    CU_OK(cuMemcpyDtoHAsync(p->out2, p->d2, BYTES, p->s));
    CU_OK(cuStreamEndCapture(p->s, &p->g));
    assert_non_null(p->g);
    assert_int_equal(capture_status(p->s), CU_STREAM_CAPTURE_STATUS_NONE);
}

static void pipeline_teardown(struct pipeline *p) {
    if (p->g != NULL) CU_OK(cuGraphDestroy(p->g));
    CU_OK(cuMemFreeHost(p->src));
    CU_OK(cuMemFreeHost(p->out));
    CU_OK(cuMemFreeHost(p->out2));
    CU_OK(cuMemFree(p->d));
    CU_OK(cuMemFree(p->d2));
    CU_OK(cuStreamDestroy(p->s));
}

/* One launch of the pipeline's exec with a fresh source, checked bit for bit. */
static void pipeline_run(struct pipeline *p, CUgraphExec x, uint32_t seed) {
    for (uint32_t i = 0; i < N; i++) {
        p->src[i] = i * 2654435761u + seed;
        p->out[i] = p->out2[i] = 0;
    }
    CU_OK(cuGraphLaunch(x, p->s));
    CU_OK(cuStreamSynchronize(p->s));
    for (uint32_t i = 0; i < N; i++) {
        uint32_t want = (p->src[i] + 5u) * 3u;
        if (p->out[i] != want) fail_msg("out[%u] = %#x, expected %#x", i, p->out[i], want);
    }
    expect_all(p->out2, 0xdeadbef0u);
}

static void test_capture_replays_bit_exact(void **state) {
    (void)state;
    struct pipeline p;
    pipeline_setup(&p);
    /* Capturing ran nothing: the device still holds what it held before. */
    expect_device(p.d, 0x11111111u);
    expect_device(p.d2, 0x22222222u);
    CUgraphExec x;
    CU_OK(cuGraphInstantiate(&x, p.g, 0));
    for (uint32_t iter = 0; iter < 4; iter++)
        pipeline_run(&p, x, iter * 1000003u);
    CU_OK(cuGraphExecDestroy(x));
    pipeline_teardown(&p);
}

static void test_captured_nodes_and_params(void **state) {
    (void)state;
    struct pipeline p;
    pipeline_setup(&p);
    size_t n = 0;
    CU_OK(cuGraphGetNodes(p.g, NULL, &n));
    assert_int_equal(n, 7);
    CUgraphNode nodes[9];
    n = 9;
    CU_OK(cuGraphGetNodes(p.g, nodes, &n));
    assert_int_equal(n, 7);
    assert_null(nodes[7]); /* the rest of the caller's array is cleared */
    const CUgraphNodeType want[7] = {CU_GRAPH_NODE_TYPE_MEMCPY, CU_GRAPH_NODE_TYPE_KERNEL,
                                     CU_GRAPH_NODE_TYPE_KERNEL, CU_GRAPH_NODE_TYPE_MEMSET,
                                     CU_GRAPH_NODE_TYPE_KERNEL, CU_GRAPH_NODE_TYPE_MEMCPY,
                                     CU_GRAPH_NODE_TYPE_MEMCPY};
    for (int i = 0; i < 7; i++)
        assert_int_equal(node_type(nodes[i]), want[i]);

    /* One stream: a chain. */
    CUgraphNode roots[2];
    n = 2;
    CU_OK(cuGraphGetRootNodes(p.g, roots, &n));
    assert_int_equal(n, 1);
    assert_ptr_equal(roots[0], nodes[0]);
    CUgraphNode from[8], to[8];
    CUgraphEdgeData edata[8];
    size_t ne = 8;
    CU_OK(cuGraphGetEdges(p.g, from, to, edata, &ne));
    assert_int_equal(ne, 6);
    for (int i = 0; i < 6; i++) {
        assert_ptr_equal(from[i], nodes[i]);
        assert_ptr_equal(to[i], nodes[i + 1]);
        assert_int_equal(edata[i].type, CU_GRAPH_DEPENDENCY_TYPE_DEFAULT);
    }
    CUgraphNode dep[2];
    n = 2;
    CU_OK(cuGraphNodeGetDependencies(nodes[3], dep, NULL, &n));
    assert_int_equal(n, 1);
    assert_ptr_equal(dep[0], nodes[2]);
    n = 2;
    CU_OK(cuGraphNodeGetDependentNodes(nodes[3], dep, NULL, &n));
    assert_int_equal(n, 1);
    assert_ptr_equal(dep[0], nodes[4]);

    CUDA_MEMCPY3D cp;
    CU_OK(cuGraphMemcpyNodeGetParams(nodes[0], &cp));
    assert_int_equal(cp.srcMemoryType, CU_MEMORYTYPE_HOST);
    assert_ptr_equal(cp.srcHost, p.src);
    assert_int_equal(cp.dstMemoryType, CU_MEMORYTYPE_DEVICE);
    assert_int_equal(cp.dstDevice, p.d);
    assert_int_equal(cp.WidthInBytes, BYTES);
    assert_int_equal(cp.Height, 1);
    assert_int_equal(cp.Depth, 1);
    CU_OK(cuGraphMemcpyNodeGetParams(nodes[6], &cp));
    assert_int_equal(cp.srcMemoryType, CU_MEMORYTYPE_DEVICE);
    assert_int_equal(cp.srcDevice, p.d2);
    assert_int_equal(cp.dstMemoryType, CU_MEMORYTYPE_HOST);
    assert_ptr_equal(cp.dstHost, p.out2);

    CUDA_KERNEL_NODE_PARAMS kp;
    CU_OK(cuGraphKernelNodeGetParams(nodes[2], &kp));
    assert_ptr_equal(kp.func, f_scale);
    assert_int_equal(kp.gridDimX * kp.gridDimY * kp.gridDimZ, 1);
    assert_int_equal(kp.blockDimX * kp.blockDimY * kp.blockDimZ, 1);
    assert_null(kp.extra);
    CUdeviceptr kd;
    memcpy(&kd, kp.kernelParams[0], sizeof kd);
    assert_int_equal(kd, p.d);
    assert_int_equal(val_arg(kp.kernelParams, 1), N);
    assert_int_equal(val_arg(kp.kernelParams, 2), 3);
    CU_OK(cuGraphKernelNodeGetParams(nodes[4], &kp));
    assert_ptr_equal(kp.func, f_add);
    memcpy(&kd, kp.kernelParams[0], sizeof kd);
    assert_int_equal(kd, p.d2);
    assert_int_equal(val_arg(kp.kernelParams, 2), 1);

    CUDA_MEMSET_NODE_PARAMS ms;
    CU_OK(cuGraphMemsetNodeGetParams(nodes[3], &ms));
    assert_int_equal(ms.dst, p.d2);
    assert_int_equal(ms.value, 0xdeadbeefu);
    assert_int_equal(ms.elementSize, 4);
    assert_int_equal(ms.width, N);
    assert_int_equal(ms.height, 1);

    /* A query of the wrong kind of node. */
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphKernelNodeGetParams(nodes[0], &kp));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphMemsetNodeGetParams(nodes[1], &ms));
    pipeline_teardown(&p);
}

/* ------------------------------------------------------------ explicit construction */

static _Atomic int host_calls;
static uint32_t host_seen[2];
static const uint32_t *host_watch[2];

static void host_node_fn(void *user) {
    (void)user;
    host_seen[0] = host_watch[0][0];
    host_seen[1] = host_watch[1][N - 1];
    host_calls++;
}

static CUDA_MEMCPY3D d2h(uint32_t *dst, CUdeviceptr src) {
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = src;
    c.dstMemoryType = CU_MEMORYTYPE_HOST;
    c.dstHost = dst;
    c.WidthInBytes = BYTES;
    c.Height = 1;
    c.Depth = 1;
    return c;
}

static void test_explicit_graph(void **state) {
    (void)state;
    CUstream s;
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr d, d2;
    CU_OK(cuMemAlloc(&d, BYTES));
    CU_OK(cuMemAlloc(&d2, BYTES));
    uint32_t *out, *out2;
    CU_OK(cuMemAllocHost((void **)&out, BYTES));
    CU_OK(cuMemAllocHost((void **)&out2, BYTES));
    host_watch[0] = out;
    host_watch[1] = out2;
    host_calls = 0;

    CUgraph g;
    CU_OK(cuGraphCreate(&g, 0));
    CUdeviceptr dp = d;
    uint32_t n = N, v = 9;
    void *args[] = {&dp, &n, &v};
    CUDA_KERNEL_NODE_PARAMS kp = {.func = f_fill,
                                  .gridDimX = 2,
                                  .gridDimY = 1,
                                  .gridDimZ = 1,
                                  .blockDimX = 32,
                                  .blockDimY = 1,
                                  .blockDimZ = 1,
                                  .kernelParams = args};
    CUgraphNode k, ms, m1, m2, h;
    CU_OK(cuGraphAddKernelNode(&k, g, NULL, 0, &kp));
    v = 1000; /* argument values were copied when the node was made */
    CUDA_MEMSET_NODE_PARAMS mp = {
        .dst = d2, .value = 0x01020304u, .elementSize = 4, .width = N, .height = 1};
    CU_OK(cuGraphAddMemsetNode(&ms, g, NULL, 0, &mp, ctx));
    CUDA_MEMCPY3D c1 = d2h(out, d), c2 = d2h(out2, d2);
    CU_OK(cuGraphAddMemcpyNode(&m1, g, &k, 1, &c1, ctx));
    CU_OK(cuGraphAddMemcpyNode(&m2, g, &ms, 1, &c2, ctx));
    CUDA_HOST_NODE_PARAMS hp = {.fn = host_node_fn, .userData = NULL};
    CU_OK(cuGraphAddHostNode(&h, g, NULL, 0, &hp));
    const CUgraphNode from[2] = {m1, m2}, to[2] = {h, h};
    CU_OK(cuGraphAddDependencies(g, from, to, NULL, 2));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphAddDependencies(g, from, to, NULL, 1));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphAddKernelNode(&k, g, from, 2, NULL));

    size_t count = 0;
    CU_OK(cuGraphGetEdges(g, NULL, NULL, NULL, &count));
    assert_int_equal(count, 4);
    CUgraphNode roots[4];
    count = 4;
    CU_OK(cuGraphGetRootNodes(g, roots, &count));
    assert_int_equal(count, 2);
    assert_ptr_equal(roots[0], k);
    assert_ptr_equal(roots[1], ms);
    CUDA_KERNEL_NODE_PARAMS got;
    CU_OK(cuGraphKernelNodeGetParams(k, &got));
    assert_int_equal(got.gridDimX, 2);
    assert_int_equal(got.blockDimX, 32);
    assert_int_equal(val_arg(got.kernelParams, 2), 9);
    CUDA_HOST_NODE_PARAMS hgot;
    CU_OK(cuGraphHostNodeGetParams(h, &hgot));
    assert_ptr_equal(hgot.fn, host_node_fn);

    /* Arrays are not simulated; a 3D copy with unevenly pitched slices is not modelled. */
    CUDA_MEMCPY3D bad = c1;
    bad.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    CU_EXPECT(CUDA_ERROR_NOT_SUPPORTED, cuGraphAddMemcpyNode(&m1, g, NULL, 0, &bad, ctx));

    CUgraphExec x;
    CU_OK(cuGraphInstantiate(&x, g, 0));
    for (int iter = 1; iter <= 2; iter++) {
        memset(out, 0, BYTES);
        memset(out2, 0, BYTES);
        CU_OK(cuGraphLaunch(x, s));
        CU_OK(cuStreamSynchronize(s));
        expect_all(out, 9);
        expect_all(out2, 0x01020304u);
        /* The host node ran after both copies it depends on. */
        assert_int_equal(host_calls, iter);
        assert_int_equal(host_seen[0], 9);
        assert_int_equal(host_seen[1], 0x01020304u);
    }
    /* Editing the graph changes neither the exec nor its next launch. */
    CU_OK(cuGraphRemoveDependencies(g, from, to, NULL, 1));
    CU_OK(cuGraphGetEdges(g, NULL, NULL, NULL, &count));
    assert_int_equal(count, 3);
    CU_OK(cuGraphExecDestroy(x));
    CU_OK(cuGraphDestroy(g));
    CU_OK(cuMemFreeHost(out));
    CU_OK(cuMemFreeHost(out2));
    CU_OK(cuMemFree(d));
    CU_OK(cuMemFree(d2));
    CU_OK(cuStreamDestroy(s));
}

/* ----------------------------------------------------------------- fork and join */

/* Two busy kernels, captured on s1 and, through a fork, on s2 (or both on s1 when serial). */
static CUgraph capture_two_busy(CUstream s1, CUstream s2, CUdeviceptr d, bool parallel) {
    CUevent fork, join;
    CU_OK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
    CU_OK(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
    CU_OK(cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUstream other = s1;
    if (parallel) {
        CU_OK(cuEventRecord(fork, s1));
        assert_int_equal(capture_status(s2), CU_STREAM_CAPTURE_STATUS_NONE);
        CU_OK(cuStreamWaitEvent(s2, fork, 0));
        assert_int_equal(capture_status(s2), CU_STREAM_CAPTURE_STATUS_ACTIVE);
        other = s2;
    }
    CU_OK(launch_busy(s1, d, 1));
    CU_OK(launch_busy(other, d + 4, 2));
    if (parallel) {
        /* Both streams belong to one capture sequence. */
        cuuint64_t id1, id2;
        CUstreamCaptureStatus st;
        const CUgraphNode *deps;
        size_t ndeps;
        CU_OK(cuStreamGetCaptureInfo(s1, &st, &id1, NULL, NULL, NULL, NULL));
        CU_OK(cuStreamGetCaptureInfo(s2, &st, &id2, NULL, &deps, NULL, &ndeps));
        assert_int_equal(id1, id2);
        assert_int_equal(ndeps, 1);
        assert_int_equal(node_type(deps[0]), CU_GRAPH_NODE_TYPE_KERNEL);
        CU_OK(cuEventRecord(join, s2));
        CU_OK(cuStreamWaitEvent(s1, join, 0));
    }
    CUgraph g;
    CU_OK(cuStreamEndCapture(s1, &g));
    assert_int_equal(capture_status(s2), CU_STREAM_CAPTURE_STATUS_NONE);
    CU_OK(cuEventDestroy(fork));
    CU_OK(cuEventDestroy(join));
    return g;
}

/* Virtual ns one launch of g takes on s, from a timing event before it to one after it. */
static uint64_t graph_span_ns(CUgraph g, CUstream s) {
    CUgraphExec x;
    CUevent a, b;
    CU_OK(cuGraphInstantiate(&x, g, 0));
    CU_OK(cuEventCreate(&a, 0));
    CU_OK(cuEventCreate(&b, 0));
    CU_OK(cuEventRecord(a, s));
    CU_OK(cuGraphLaunch(x, s));
    CU_OK(cuEventRecord(b, s));
    CU_OK(cuEventSynchronize(b));
    float ms = 0;
    CU_OK(cuEventElapsedTime(&ms, a, b));
    CU_OK(cuEventDestroy(a));
    CU_OK(cuEventDestroy(b));
    CU_OK(cuGraphExecDestroy(x));
    return (uint64_t)((double)ms * 1e6 + 0.5);
}

static void test_fork_join_overlaps(void **state) {
    (void)state;
    CUstream s1, s2;
    CU_OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CU_OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CUdeviceptr d;
    CU_OK(cuMemAlloc(&d, 8));
    CU_OK(cuMemsetD32(d, 0, 2));

    CUgraph par = capture_two_busy(s1, s2, d, true);
    CUgraphNode nodes[2], roots[2];
    size_t n = 2, nr = 2, ne = 0;
    CU_OK(cuGraphGetNodes(par, nodes, &n));
    CU_OK(cuGraphGetRootNodes(par, roots, &nr));
    CU_OK(cuGraphGetEdges(par, NULL, NULL, NULL, &ne));
    assert_int_equal(n, 2);
    assert_int_equal(nr, 2); /* two independent branches */
    assert_int_equal(ne, 0);

    CUgraph ser = capture_two_busy(s1, s2, d, false);
    CU_OK(cuGraphGetEdges(ser, NULL, NULL, NULL, &ne));
    assert_int_equal(ne, 1);

    /* Parallel branches overlap in virtual time: the launch ends well before the sum of its
     * nodes' durations; the chain takes at least the sum. */
    uint64_t t0 = simcuda_now_ns();
    uint64_t par_ns = graph_span_ns(par, s1);
    uint64_t host_ns = simcuda_now_ns() - t0;
    assert_true(par_ns >= BUSY_NS);
    assert_true(par_ns < 2 * BUSY_NS);
    assert_true(host_ns < 2 * BUSY_NS);
    uint64_t ser_ns = graph_span_ns(ser, s1);
    assert_true(ser_ns >= 2 * BUSY_NS);
    uint32_t h[2];
    CU_OK(cuMemcpyDtoH(h, d, sizeof h));
    assert_int_equal(h[0], 1);
    assert_int_equal(h[1], 2);

    /* The stream's next work starts after every node: an event right after a launch of the
     * parallel graph completes no earlier than both branches. */
    CU_OK(cuGraphDestroy(par));
    CU_OK(cuGraphDestroy(ser));
    CU_OK(cuMemFree(d));
    CU_OK(cuStreamDestroy(s1));
    CU_OK(cuStreamDestroy(s2));
}

static void test_unjoined_fork_fails(void **state) {
    (void)state;
    CUstream s1, s2;
    CU_OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CU_OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CUdeviceptr d;
    CU_OK(cuMemAlloc(&d, BYTES));
    CU_OK(cuMemsetD32(d, 0, N));
    CUevent fork;
    CU_OK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
    CU_OK(cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CU_OK(launch3(f_fill, s1, d, N, 1));
    CU_OK(cuEventRecord(fork, s1));
    CU_OK(cuStreamWaitEvent(s2, fork, 0));
    CU_OK(launch3(f_add, s2, d, N, 1)); /* never joined back into s1 */
    /* Only the origin stream may end the capture. */
    CUgraph g = (CUgraph)(uintptr_t)1;
    CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, cuStreamEndCapture(s2, &g));
    CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(s1, &g));
    assert_null(g);

    /* Again, ending on the origin stream without the join. */
    CU_OK(cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CU_OK(cuEventRecord(fork, s1));
    CU_OK(cuStreamWaitEvent(s2, fork, 0));
    CU_OK(launch3(f_add, s2, d, N, 1));
    g = (CUgraph)(uintptr_t)1;
    CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, cuStreamEndCapture(s1, &g));
    assert_null(g);
    /* Both streams left capture mode and work normally; nothing captured ever ran. */
    assert_int_equal(capture_status(s1), CU_STREAM_CAPTURE_STATUS_NONE);
    assert_int_equal(capture_status(s2), CU_STREAM_CAPTURE_STATUS_NONE);
    expect_device(d, 0);
    CU_OK(launch3(f_add, s2, d, N, 4));
    CU_OK(cuStreamSynchronize(s2));
    expect_device(d, 4);

    /* A forked stream that captured nothing after the fork needs no join. */
    CU_OK(cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CU_OK(launch3(f_add, s1, d, N, 1));
    CU_OK(cuEventRecord(fork, s1));
    CU_OK(cuStreamWaitEvent(s2, fork, 0));
    CU_OK(cuStreamEndCapture(s1, &g));
    assert_non_null(g);
    CU_OK(cuGraphDestroy(g));
    CU_OK(cuEventDestroy(fork));
    CU_OK(cuMemFree(d));
    CU_OK(cuStreamDestroy(s1));
    CU_OK(cuStreamDestroy(s2));
}

/* ------------------------------------------------------------ status and rules */

typedef CUresult (*capture_info_v2_fn)(CUstream, CUstreamCaptureStatus *, cuuint64_t *, CUgraph *,
                                       const CUgraphNode **, size_t *);

static void test_capture_status_and_info(void **state) {
    (void)state;
    CUstream s;
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr d;
    CU_OK(cuMemAlloc(&d, BYTES));
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    CU_OK(cuStreamGetCaptureInfo(s, &st, NULL, NULL, NULL, NULL, NULL));
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_NONE);
    CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
              cuStreamBeginCapture(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuStreamBeginCapture(s, (CUstreamCaptureMode)7));
    CUgraph g;
    CU_EXPECT(CUDA_ERROR_ILLEGAL_STATE, cuStreamEndCapture(s, &g));

    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CU_EXPECT(CUDA_ERROR_ILLEGAL_STATE, cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    assert_int_equal(capture_status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    cuuint64_t id1 = 0;
    CUgraph cg = NULL;
    const CUgraphNode *deps = NULL;
    const CUgraphEdgeData *edges = NULL;
    size_t ndeps = 99;
    CU_OK(cuStreamGetCaptureInfo(s, &st, &id1, &cg, &deps, &edges, &ndeps));
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    assert_true(id1 != 0);
    assert_non_null(cg);
    assert_int_equal(ndeps, 0);
    CU_OK(launch3(f_fill, s, d, N, 1));
    CU_OK(cuStreamGetCaptureInfo(s, &st, NULL, NULL, &deps, &edges, &ndeps));
    assert_int_equal(ndeps, 1);
    assert_int_equal(edges[0].type, CU_GRAPH_DEPENDENCY_TYPE_DEFAULT);
    CUgraphNode only;
    size_t n = 1;
    CU_OK(cuGraphGetNodes(cg, &only, &n));
    assert_ptr_equal(deps[0], only);
    /* The graph belongs to the capture until it ends. */
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphDestroy(cg));
    /* The CUDA 11.3 ABI (no edge data), as cudart resolves it. */
    void *fn = NULL;
    CU_OK(
        cuGetProcAddress("cuStreamGetCaptureInfo", &fn, 11030, CU_GET_PROC_ADDRESS_DEFAULT, NULL));
    cuuint64_t id_v2 = 0;
    ndeps = 0;
    capture_info_v2_fn info_v2;
    memcpy(&info_v2, &fn, sizeof info_v2); /* object to function pointer, as with dlsym */
    CU_OK(info_v2(s, &st, &id_v2, NULL, &deps, &ndeps));
    assert_int_equal(id_v2, id1);
    assert_int_equal(ndeps, 1);
    /* Setting the dependency set: the next node is a root. */
    CU_OK(cuStreamUpdateCaptureDependencies(s, NULL, NULL, 0, CU_STREAM_SET_CAPTURE_DEPENDENCIES));
    CU_OK(launch3(f_add, s, d, N, 1));
    CU_OK(cuStreamEndCapture(s, &g));
    assert_ptr_equal(g, cg);
    size_t nroots = 0;
    CU_OK(cuGraphGetRootNodes(g, NULL, &nroots));
    assert_int_equal(nroots, 2);
    CU_OK(cuGraphDestroy(g));

    /* Every capture sequence has its own id. */
    cuuint64_t id2 = 0;
    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CU_OK(cuStreamGetCaptureInfo(s, &st, &id2, NULL, NULL, NULL, NULL));
    assert_true(id2 != id1);
    CU_OK(cuStreamEndCapture(s, &g));
    CU_OK(cuGraphGetNodes(g, NULL, &n));
    assert_int_equal(n, 0);
    CU_OK(cuGraphDestroy(g));

    /* Capturing into an existing graph, after one of its nodes. */
    CUgraph mine;
    CUgraphNode root;
    CU_OK(cuGraphCreate(&mine, 0));
    CU_OK(cuGraphAddEmptyNode(&root, mine, NULL, 0));
    CU_OK(cuStreamBeginCaptureToGraph(s, mine, &root, NULL, 1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CU_OK(launch3(f_fill, s, d, N, 6));
    CU_OK(cuStreamEndCapture(s, &g));
    assert_ptr_equal(g, mine);
    CU_OK(cuGraphGetEdges(g, NULL, NULL, NULL, &n));
    assert_int_equal(n, 1);
    CUgraphExec x;
    CU_OK(cuGraphInstantiate(&x, g, 0));
    CU_OK(cuGraphLaunch(x, s));
    CU_OK(cuStreamSynchronize(s));
    expect_device(d, 6);
    CU_OK(cuGraphExecDestroy(x));
    CU_OK(cuGraphDestroy(g));
    CU_OK(cuMemFree(d));
    CU_OK(cuStreamDestroy(s));
}

/* Begins a capture on s, captures a fill of d with 77, and returns nothing: the caller breaks a
 * rule, and the capture must then end invalidated with a NULL graph, having run nothing. */
static void begin_fill(CUstream s, CUdeviceptr d, CUstreamCaptureMode mode) {
    CU_OK(cuStreamBeginCapture(s, mode));
    CU_OK(launch3(f_fill, s, d, N, 77));
}

static void expect_invalidated_end(CUstream s, CUdeviceptr d, uint32_t untouched) {
    assert_int_equal(capture_status(s), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    /* Further work on an invalidated capture is refused, not run. */
    CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, launch3(f_fill, s, d, N, 78));
    CUgraph g = (CUgraph)(uintptr_t)1;
    CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(s, &g));
    assert_null(g);
    assert_int_equal(capture_status(s), CU_STREAM_CAPTURE_STATUS_NONE);
    expect_device(d, untouched);
}

static void test_sync_during_capture_invalidates(void **state) {
    (void)state;
    CUstream s, blocking;
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU_OK(cuStreamCreate(&blocking, 0));
    CUdeviceptr d;
    CU_OK(cuMemAlloc(&d, BYTES));
    CU_OK(cuMemsetD32(d, 5, N));
    CU_OK(cuCtxSynchronize());

    begin_fill(s, d, CU_STREAM_CAPTURE_MODE_GLOBAL);
    CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuStreamSynchronize(s));
    expect_invalidated_end(s, d, 5);

    /* Querying the capturing stream, even in relaxed mode: it necessarily conflicts. */
    begin_fill(s, d, CU_STREAM_CAPTURE_MODE_RELAXED);
    CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuStreamQuery(s));
    expect_invalidated_end(s, d, 5);

    begin_fill(s, d, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuCtxSynchronize());
    expect_invalidated_end(s, d, 5);

    /* An event recorded inside a capture cannot be queried. */
    CUevent e;
    CU_OK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    begin_fill(s, d, CU_STREAM_CAPTURE_MODE_RELAXED);
    CU_OK(cuEventRecord(e, s));
    CU_EXPECT(CUDA_ERROR_CAPTURED_EVENT, cuEventQuery(e));
    expect_invalidated_end(s, d, 5);
    CU_OK(cuEventQuery(e)); /* the capture is over: never recorded outside it */

    /* Work recorded outside the capture cannot become a dependency inside it. */
    CU_OK(cuEventRecord(e, blocking));
    begin_fill(s, d, CU_STREAM_CAPTURE_MODE_GLOBAL);
    CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_ISOLATION, cuStreamWaitEvent(s, e, 0));
    expect_invalidated_end(s, d, 5);

    /* The legacy stream synchronises implicitly with blocking streams: asking about it only
     * reports the conflict, using it invalidates the capture. A non-blocking capture does not
     * concern it. */
    begin_fill(blocking, d, CU_STREAM_CAPTURE_MODE_RELAXED);
    CUstreamCaptureStatus st;
    CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, cuStreamIsCapturing(CU_STREAM_LEGACY, &st));
    assert_int_equal(capture_status(blocking), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, launch3(f_fill, CU_STREAM_LEGACY, d, N, 9));
    expect_invalidated_end(blocking, d, 5);
    begin_fill(blocking, d, CU_STREAM_CAPTURE_MODE_RELAXED);
    CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, cuStreamSynchronize(CU_STREAM_LEGACY));
    expect_invalidated_end(blocking, d, 5);
    begin_fill(s, d, CU_STREAM_CAPTURE_MODE_RELAXED);
    CU_OK(cuStreamIsCapturing(CU_STREAM_LEGACY, &st));
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_NONE);
    CU_OK(cuStreamSynchronize(CU_STREAM_LEGACY));
    CUgraph g;
    CU_OK(cuStreamEndCapture(s, &g));
    CU_OK(cuGraphDestroy(g));

    CU_OK(cuEventDestroy(e));
    CU_OK(cuMemFree(d));
    CU_OK(cuStreamDestroy(s));
    CU_OK(cuStreamDestroy(blocking));
}

struct alloc_try {
    CUstreamCaptureMode mode;
    CUstreamCaptureMode previous;
    CUresult rc;
};

/* On a thread of its own, in the given capture interaction mode: allocate (and free) memory. */
static void *alloc_thread(void *arg) {
    struct alloc_try *t = arg;
    t->rc = cuCtxSetCurrent(ctx);
    CUstreamCaptureMode m = t->mode;
    if (t->rc == CUDA_SUCCESS) t->rc = cuThreadExchangeStreamCaptureMode(&m);
    t->previous = m;
    CUdeviceptr p = 0;
    if (t->rc == CUDA_SUCCESS) t->rc = cuMemAlloc(&p, 4096);
    if (t->rc == CUDA_SUCCESS) t->rc = cuMemFree(p);
    return NULL;
}

static CUresult alloc_on_thread(CUstreamCaptureMode mode) {
    struct alloc_try t = {.mode = mode, .previous = CU_STREAM_CAPTURE_MODE_RELAXED};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, alloc_thread, &t), 0);
    pthread_join(th, NULL);
    assert_int_equal(t.previous, CU_STREAM_CAPTURE_MODE_GLOBAL); /* every thread starts GLOBAL */
    return t.rc;
}

static void test_capture_modes(void **state) {
    (void)state;
    CUstream s;
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr d, p;
    CU_OK(cuMemAlloc(&d, BYTES));
    CU_OK(cuMemsetD32(d, 3, N));
    CU_OK(cuCtxSynchronize());

    /* A GLOBAL capture: relaxed and thread-local threads may allocate, a GLOBAL one may not, and
     * trying invalidates the capture. */
    begin_fill(s, d, CU_STREAM_CAPTURE_MODE_GLOBAL);
    CU_OK(alloc_on_thread(CU_STREAM_CAPTURE_MODE_RELAXED));
    CU_OK(alloc_on_thread(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    assert_int_equal(capture_status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
              alloc_on_thread(CU_STREAM_CAPTURE_MODE_GLOBAL));
    expect_invalidated_end(s, d, 3);

    /* The capturing thread itself. */
    begin_fill(s, d, CU_STREAM_CAPTURE_MODE_GLOBAL);
    CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuMemAlloc(&p, 4096));
    expect_invalidated_end(s, d, 3);

    /* A THREAD_LOCAL capture concerns only its own thread, unless that thread is relaxed. */
    begin_fill(s, d, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    CU_OK(alloc_on_thread(CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    CU_OK(cuThreadExchangeStreamCaptureMode(&mode));
    assert_int_equal(mode, CU_STREAM_CAPTURE_MODE_GLOBAL);
    CU_OK(cuMemAlloc(&p, 4096));
    CU_OK(cuMemFree(p));
    CU_OK(cuThreadExchangeStreamCaptureMode(&mode)); /* back to GLOBAL */
    assert_int_equal(capture_status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    uint32_t word;
    CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuMemcpyDtoH(&word, d, sizeof word));
    expect_invalidated_end(s, d, 3);

    /* A RELAXED capture forbids nothing that does not touch it. */
    begin_fill(s, d, CU_STREAM_CAPTURE_MODE_RELAXED);
    CU_OK(cuMemAlloc(&p, 4096));
    CU_OK(cuMemFree(p));
    CU_OK(alloc_on_thread(CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUgraph g;
    CU_OK(cuStreamEndCapture(s, &g));
    assert_non_null(g);
    CU_OK(cuGraphDestroy(g));
    CU_OK(cuMemFree(d));
    CU_OK(cuStreamDestroy(s));
}

/* ------------------------------------------------------------------ exec life */

static void test_exec_kernel_param_update(void **state) {
    (void)state;
    CUstream s;
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr d;
    CU_OK(cuMemAlloc(&d, BYTES));
    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CU_OK(launch3(f_fill, s, d, N, 1));
    CUgraph g;
    CU_OK(cuStreamEndCapture(s, &g));
    CUgraphNode k;
    size_t n = 1;
    CU_OK(cuGraphGetNodes(g, &k, &n));
    CUgraphExec x;
    CU_OK(cuGraphInstantiate(&x, g, 0));

    /* A launch already enqueued keeps the parameters it was launched with. */
    CU_OK(cuGraphLaunch(x, s));
    CUDA_KERNEL_NODE_PARAMS kp;
    CU_OK(cuGraphKernelNodeGetParams(k, &kp));
    CUdeviceptr dp = d;
    uint32_t cnt = N, v = 42;
    void *args[] = {&dp, &cnt, &v};
    kp.kernelParams = args;
    CU_OK(cuGraphExecKernelNodeSetParams(x, k, &kp));
    v = 43; /* copied at the call */
    CU_OK(cuStreamSynchronize(s));
    expect_device(d, 1);
    CU_OK(cuGraphLaunch(x, s));
    CU_OK(cuStreamSynchronize(s));
    expect_device(d, 42);
    /* The graph's own node is unchanged. */
    CU_OK(cuGraphKernelNodeGetParams(k, &kp));
    assert_int_equal(val_arg(kp.kernelParams, 2), 1);

    /* Whole-graph update from a topologically identical capture. */
    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CU_OK(launch3(f_fill, s, d, N, 7));
    CUgraph g2;
    CU_OK(cuStreamEndCapture(s, &g2));
    CUgraphExecUpdateResultInfo info;
    CU_OK(cuGraphExecUpdate(x, g2, &info));
    assert_int_equal(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
    CU_OK(cuGraphLaunch(x, s));
    CU_OK(cuStreamSynchronize(s));
    expect_device(d, 7);
    /* A different topology is refused, and the exec keeps working as it was. */
    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CU_OK(launch3(f_fill, s, d, N, 8));
    CU_OK(launch3(f_add, s, d, N, 1));
    CUgraph g3;
    CU_OK(cuStreamEndCapture(s, &g3));
    CU_EXPECT(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, cuGraphExecUpdate(x, g3, &info));
    assert_int_equal(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
    CU_OK(cuMemsetD32Async(d, 0, N, s));
    CU_OK(cuGraphLaunch(x, s));
    CU_OK(cuStreamSynchronize(s));
    expect_device(d, 7);
    CU_OK(cuGraphDestroy(g));
    CU_OK(cuGraphDestroy(g2));
    CU_OK(cuGraphDestroy(g3));
    CU_OK(cuGraphExecDestroy(x));
    CU_OK(cuMemFree(d));
    CU_OK(cuStreamDestroy(s));
}

static void test_launch_after_graph_destroyed(void **state) {
    (void)state;
    struct pipeline p;
    pipeline_setup(&p);
    CUgraph clone;
    CU_OK(cuGraphClone(&clone, p.g));
    CUgraphNode orig[7], in_clone;
    size_t n = 7;
    CU_OK(cuGraphGetNodes(p.g, orig, &n));
    CU_OK(cuGraphNodeFindInClone(&in_clone, orig[2], clone));
    assert_int_equal(node_type(in_clone), CU_GRAPH_NODE_TYPE_KERNEL);
    CUgraphExec x, xc;
    CU_OK(cuGraphInstantiate(&x, p.g, 0));
    CU_OK(cuGraphDestroy(p.g));
    p.g = NULL;
    CU_OK(cuGraphInstantiate(&xc, clone, 0));
    CU_OK(cuGraphDestroy(clone));
    pipeline_run(&p, x, 17);
    pipeline_run(&p, xc, 23);
    pipeline_run(&p, x, 29);
    CU_OK(cuGraphExecDestroy(x));
    CU_OK(cuGraphExecDestroy(xc));
    pipeline_teardown(&p);
}

/* A graph launched into a capturing stream becomes part of the captured work. */
static void test_graph_launch_captured(void **state) {
    (void)state;
    struct pipeline p;
    pipeline_setup(&p);
    CUgraphExec inner;
    CU_OK(cuGraphInstantiate(&inner, p.g, 0));
    CU_OK(cuStreamBeginCapture(p.s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CU_OK(cuGraphLaunch(inner, p.s));
    CU_OK(launch3(f_add, p.s, p.d, N, 1000)); /* after the inner graph's last node */
    CUgraph outer;
    CU_OK(cuStreamEndCapture(p.s, &outer));
    CUgraphExec x;
    CU_OK(cuGraphInstantiate(&x, outer, 0));
    pipeline_run(&p, x, 5);
    for (uint32_t i = 0; i < N; i++)
        p.out[i] = 0;
    CU_OK(cuMemcpyDtoH(p.out, p.d, BYTES));
    for (uint32_t i = 0; i < N; i++)
        assert_int_equal(p.out[i], (p.src[i] + 5u) * 3u + 1000u);
    CU_OK(cuGraphExecDestroy(x));
    CU_OK(cuGraphExecDestroy(inner));
    CU_OK(cuGraphDestroy(outer));
    pipeline_teardown(&p);
}

/* Launches of one exec are serialised, and the stream's next work waits for the whole graph. */
static void test_launch_ordering(void **state) {
    (void)state;
    CUstream s1, s2;
    CU_OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CU_OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CUdeviceptr d;
    CU_OK(cuMemAlloc(&d, 8));
    CUgraph g = capture_two_busy(s1, s2, d, true);
    CUgraphExec x;
    CU_OK(cuGraphInstantiate(&x, g, 0));
    CUevent a, b;
    CU_OK(cuEventCreate(&a, 0));
    CU_OK(cuEventCreate(&b, 0));
    CU_OK(cuEventRecord(a, s1));
    CU_OK(cuGraphLaunch(x, s1));
    CU_OK(cuGraphLaunch(x, s2)); /* another stream, yet after the first launch */
    CU_OK(cuEventRecord(b, s2));
    CU_OK(cuEventSynchronize(b));
    float ms;
    CU_OK(cuEventElapsedTime(&ms, a, b));
    assert_true((double)ms * 1e6 >= 2.0 * BUSY_NS);
    CU_OK(cuEventDestroy(a));
    CU_OK(cuEventDestroy(b));
    CU_OK(cuGraphExecDestroy(x));
    CU_OK(cuGraphDestroy(g));
    CU_OK(cuMemFree(d));
    CU_OK(cuStreamDestroy(s1));
    CU_OK(cuStreamDestroy(s2));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capture_replays_bit_exact),
        cmocka_unit_test(test_captured_nodes_and_params),
        cmocka_unit_test(test_explicit_graph),
        cmocka_unit_test(test_fork_join_overlaps),
        cmocka_unit_test(test_unjoined_fork_fails),
        cmocka_unit_test(test_capture_status_and_info),
        cmocka_unit_test(test_sync_during_capture_invalidates),
        cmocka_unit_test(test_capture_modes),
        cmocka_unit_test(test_exec_kernel_param_update),
        cmocka_unit_test(test_launch_after_graph_destroyed),
        cmocka_unit_test(test_graph_launch_captured),
        cmocka_unit_test(test_launch_ordering),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
