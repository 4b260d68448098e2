/* The simulator's ways for work to reach memory besides plain launches and copies: stream memory
 * operations, batch and 3D peer copies, child-graph and conditional nodes and their exec updates,
 * peer access between devices, tensor maps, pointers inside by-value parameters and pointer
 * arrays in device memory (hazard detection covers each), and cuGetErrorName/String. */
#include "simtest.h"

#include <stdatomic.h>

#define MiB (1ull << 20)

static const char image[] = "simcuda-module 1\n"
                            "kernel reach_add ptr u64 ns=1000\n"
                            "kernel reach_struct b4096 ns=50000000\n"
                            "kernel reach_tmap b128 u64 ns=1000\n"
                            "kernel reach_array ptr u64 ns=50000000\n"
                            "kernel reach_count ptr u64 ns=1000\n";

/* reach_add(p, v): *p += v (a u64). */
void reach_add(void **params) {
    uint64_t *p = *(uint64_t **)params[0];
    *p += *(uint64_t *)params[1];
}

/* reach_struct(s): s holds a pointer at offset 8; writes 7 there (NCCL's one-struct shape). */
void reach_struct(void **params) {
    uint64_t *p;
    memcpy(&p, (const char *)params[0] + 8, sizeof p);
    if (p != NULL) *p = 7;
}

/* reach_tmap(map, v): writes v at the tensor map's global address. */
void reach_tmap(void **params) {
    uint64_t *p = (uint64_t *)(uintptr_t)simcuda_tensor_map_address(params[0]);
    if (p != NULL) *p = *(uint64_t *)params[1];
}

/* reach_array(arr, n): arr is a device array of n pointers; writes 9 through each, declaring it. */
void reach_array(void **params) {
    uint64_t **arr = *(uint64_t ***)params[0];
    uint64_t n = *(uint64_t *)params[1];
    for (uint64_t i = 0; i < n; i++) {
        simcuda_kernel_access(arr[i], 8);
        *arr[i] = 9;
    }
}

/* reach_count(handle, unused): counts its calls; at stop_at sets the conditional to 0 (the
 * arguments are copied when the node is made: the limit lives in the program instead). */
static _Atomic int64_t count_calls, stop_at;
void reach_count(void **params) {
    uint64_t h = *(uint64_t *)params[0];
    if (atomic_fetch_add(&count_calls, 1) + 1 >= atomic_load(&stop_at))
        simcuda_graph_set_conditional(h, 0);
}

static CUfunction fn(const char *name) {
    static CUmodule mod;
    if (mod == NULL) CU_OK(cuModuleLoadData(&mod, image));
    CUfunction f;
    CU_OK(cuModuleGetFunction(&f, mod, name));
    return f;
}

static uint64_t read_u64(CUdeviceptr p) {
    uint64_t v = 0;
    CU_OK(cuMemcpyDtoH(&v, p, 8));
    return v;
}

static void test_where(void **state) {
    (void)state;
    CUdeviceptr lin;
    CU_OK(cuMemAlloc(&lin, 4096));
    assert_int_equal(simcuda_where((void *)(uintptr_t)lin), 'L');
    int local = 0;
    assert_int_equal(simcuda_where(&local), 'U');
    CU_OK(cuMemFree(lin));
}

static void test_error_names(void **state) {
    (void)state;
    const char *s = NULL;
    CU_OK(cuGetErrorName(CUDA_ERROR_ILLEGAL_ADDRESS, &s));
    assert_string_equal(s, "CUDA_ERROR_ILLEGAL_ADDRESS");
    CU_OK(cuGetErrorName(CUDA_SUCCESS, &s));
    assert_string_equal(s, "CUDA_SUCCESS");
    CU_OK(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s));
    assert_non_null(strstr(s, "memory"));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGetErrorName((CUresult)987654, &s));
    assert_null(s);
}

static void test_stream_memops(void **state) {
    (void)state;
    CUdeviceptr a;
    CU_OK(cuMemAlloc(&a, 64));
    CU_OK(cuMemsetD8(a, 0, 64));
    CUstream s;
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU_OK(cuStreamWriteValue32(s, a, 0x1234, 0));
    CU_OK(cuStreamWriteValue64(s, a + 8, 0x1122334455667788ull, 0));
    /* The wait holds the stream until the word is at least 5: the write before it makes it so. */
    CU_OK(cuStreamWriteValue32(s, a + 16, 5, 0));
    CU_OK(cuStreamWaitValue32(s, a + 16, 5, CU_STREAM_WAIT_VALUE_GEQ));
    CUstreamBatchMemOpParams ops[2];
    memset(ops, 0, sizeof ops);
    ops[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    ops[0].writeValue.address = a + 24;
    ops[0].writeValue.value64 = 42;
    ops[1].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_64;
    ops[1].waitValue.address = a + 24;
    ops[1].waitValue.value64 = 42;
    ops[1].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
    CU_OK(cuStreamBatchMemOp(s, 2, ops, 0));
    CU_OK(cuStreamSynchronize(s));
    assert_int_equal(read_u64(a) & 0xffffffffu, 0x1234);
    assert_int_equal(read_u64(a + 8), 0x1122334455667788ull);
    assert_int_equal(read_u64(a + 24), 42);
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuStreamWriteValue32(s, a + 2, 1, 0)); /* misaligned */
    CU_OK(cuStreamDestroy(s));
    CU_OK(cuMemFree(a));
}

static void test_batch_and_peer_copies(void **state) {
    (void)state;
    CUdeviceptr a, b;
    CU_OK(cuMemAlloc(&a, MiB));
    CU_OK(cuMemAlloc(&b, MiB));
    uint8_t *h = malloc(MiB), *back = malloc(MiB);
    for (size_t i = 0; i < MiB; i++)
        h[i] = (uint8_t)(i * 7 + 3);
    CU_OK(cuMemcpyHtoD(a, h, MiB));
    CUstream s;
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr dsts[2] = {b, b + MiB / 2}, srcs[2] = {a + MiB / 2, a};
    size_t sizes[2] = {MiB / 2, MiB / 2}, idx = 0;
    CUmemcpyAttributes attr;
    memset(&attr, 0, sizeof attr);
    attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    CU_OK(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, &attr, &idx, 1, s));
    CU_OK(cuStreamSynchronize(s));
    CU_OK(cuMemcpyDtoH(back, b, MiB));
    assert_memory_equal(back, h + MiB / 2, MiB / 2);
    assert_memory_equal(back + MiB / 2, h, MiB / 2);
    /* A 3D batch copy: 4 layers of 16 rows of 256 bytes, tightly packed, b back to a. */
    CUDA_MEMCPY3D_BATCH_OP op;
    memset(&op, 0, sizeof op);
    op.src.type = op.dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
    op.src.op.ptr.ptr = b;
    op.dst.op.ptr.ptr = a;
    op.extent.width = 256;
    op.extent.height = 16;
    op.extent.depth = 4;
    CU_OK(cuMemsetD8(a, 0, MiB));
    CU_OK(cuMemcpy3DBatchAsync(1, &op, 0, s));
    CU_OK(cuStreamSynchronize(s));
    CU_OK(cuMemcpyDtoH(back, a, 256 * 16 * 4));
    assert_memory_equal(back, h + MiB / 2, 256 * 16 * 4);
    /* A 3D peer copy within one device: 2 slices. */
    CUDA_MEMCPY3D_PEER p;
    memset(&p, 0, sizeof p);
    p.srcMemoryType = p.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    p.srcDevice = a;
    p.dstDevice = b;
    p.WidthInBytes = p.srcPitch = p.dstPitch = 512;
    p.Height = 8;
    p.Depth = 2;
    CU_OK(cuMemcpy3DPeer(&p));
    CU_OK(cuMemcpyDtoH(back, b, 512 * 8 * 2));
    assert_memory_equal(back, h + MiB / 2, 512 * 8 * 2);
    op.src.type = CU_MEMCPY_OPERAND_TYPE_ARRAY;
    CU_EXPECT(CUDA_ERROR_NOT_SUPPORTED, cuMemcpy3DBatchAsync(1, &op, 0, s));
    CU_OK(cuStreamDestroy(s));
    CU_OK(cuMemFree(a));
    CU_OK(cuMemFree(b));
    free(h);
    free(back);
}

static void test_tensor_maps(void **state) {
    (void)state;
    CUdeviceptr a, b;
    CU_OK(cuMemAlloc(&a, MiB));
    CU_OK(cuMemAlloc(&b, MiB));
    CUtensorMap map;
    cuuint64_t dim[2] = {256, 256}, stride[1] = {1024};
    cuuint32_t box[2] = {64, 64}, es[2] = {1, 1};
    CU_OK(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, (void *)(uintptr_t)a,
                                 dim, stride, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                 CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                 CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    assert_int_equal(simcuda_tensor_map_address(&map), a);
    /* The address is not a plain word of the descriptor. */
    for (int i = 0; i < 16; i++)
        assert_true(map.opaque[i] != a);
    uint64_t v = 77;
    void *args[] = {&map, &v};
    CU_OK(cuLaunchKernel(fn("reach_tmap"), 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    CU_OK(cuCtxSynchronize());
    assert_int_equal(read_u64(a), 77);
    CU_OK(cuTensorMapReplaceAddress(&map, (void *)(uintptr_t)b));
    assert_int_equal(simcuda_tensor_map_address(&map), b);
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE,
              cuTensorMapReplaceAddress(&map, (void *)(uintptr_t)(b + 4)));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE,
              cuTensorMapEncodeTiled(
                  &map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, (void *)(uintptr_t)(a + 8), dim, stride,
                  box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                  CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    CU_OK(cuMemFree(a));
    CU_OK(cuMemFree(b));
}

/* A graph: child node adding 1, a WHILE conditional whose body counts to 3, and exec updates. */
static void test_child_and_conditional_graphs(void **state) {
    (void)state;
    CUdeviceptr a, b;
    CU_OK(cuMemAlloc(&a, 64));
    CU_OK(cuMemAlloc(&b, 64));
    CU_OK(cuMemsetD8(a, 0, 64));
    CU_OK(cuMemsetD8(b, 0, 64));
    CUgraph child, g;
    CU_OK(cuGraphCreate(&child, 0));
    CU_OK(cuGraphCreate(&g, 0));
    uint64_t one = 1;
    void *args[] = {&a, &one};
    CUDA_KERNEL_NODE_PARAMS kp;
    memset(&kp, 0, sizeof kp);
    kp.func = fn("reach_add");
    kp.gridDimX = kp.gridDimY = kp.gridDimZ = kp.blockDimX = kp.blockDimY = kp.blockDimZ = 1;
    kp.kernelParams = args;
    CUgraphNode kn, cn, wn;
    CU_OK(cuGraphAddKernelNode(&kn, child, NULL, 0, &kp));
    CU_OK(cuGraphAddChildGraphNode(&cn, g, NULL, 0, child));
    CUgraphNodeType type;
    CU_OK(cuGraphNodeGetType(cn, &type));
    assert_int_equal(type, CU_GRAPH_NODE_TYPE_GRAPH);
    CUgraph owned;
    CU_OK(cuGraphChildGraphNodeGetGraph(cn, &owned));
    assert_true(owned != child); /* the node holds a clone */

    CUgraphConditionalHandle h;
    CUcontext ctx;
    CU_OK(cuCtxGetCurrent(&ctx));
    CU_OK(cuGraphConditionalHandleCreate(&h, g, ctx, 1, CU_GRAPH_COND_ASSIGN_DEFAULT));
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    np.conditional.handle = h;
    np.conditional.type = CU_GRAPH_COND_TYPE_WHILE;
    np.conditional.size = 1;
    np.conditional.ctx = ctx;
    CU_OK(cuGraphAddNode(&wn, g, &cn, NULL, 1, &np));
    assert_non_null(np.conditional.phGraph_out);
    CUgraph body = np.conditional.phGraph_out[0];
    uint64_t unused = 0;
    void *cargs[] = {&h, &unused};
    atomic_store(&stop_at, 3);
    kp.func = fn("reach_count");
    kp.kernelParams = cargs;
    CUgraphNode bn;
    CU_OK(cuGraphAddKernelNode(&bn, body, NULL, 0, &kp));

    CUgraphExec x;
    CU_OK(cuGraphInstantiateWithFlags(&x, g, 0));
    atomic_store(&count_calls, 0);
    CU_OK(cuGraphLaunch(x, NULL));
    CU_OK(cuCtxSynchronize());
    assert_int_equal(read_u64(a), 1);
    assert_int_equal(atomic_load(&count_calls), 3);
    /* The default is assigned again: the next launch loops again (3 more calls, stop at 6). */
    atomic_store(&stop_at, 6);
    CU_OK(cuGraphExecDestroy(x));
    CU_OK(cuGraphInstantiateWithFlags(&x, g, 0));
    CU_OK(cuGraphLaunch(x, NULL));
    CU_OK(cuCtxSynchronize());
    assert_int_equal(atomic_load(&count_calls), 6);

    /* Exec updates: the child graph now adds to b; the exec launches the new one. */
    CUgraph child2;
    CU_OK(cuGraphCreate(&child2, 0));
    void *args2[] = {&b, &one};
    kp.func = fn("reach_add");
    kp.kernelParams = args2;
    CU_OK(cuGraphAddKernelNode(&kn, child2, NULL, 0, &kp));
    CU_OK(cuGraphExecChildGraphNodeSetParams(x, cn, child2));
    atomic_store(&stop_at, 7);
    CU_OK(cuGraphLaunch(x, NULL));
    CU_OK(cuCtxSynchronize());
    assert_int_equal(read_u64(a), 2); /* the first exec's launch, before the update */
    assert_int_equal(read_u64(b), 1);
    /* cuGraphExecNodeSetParams with a child graph does the same. */
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_GRAPH;
    np.graph.graph = child;
    CU_OK(cuGraphExecNodeSetParams(x, cn, &np));
    atomic_store(&stop_at, 8);
    CU_OK(cuGraphLaunch(x, NULL));
    CU_OK(cuCtxSynchronize());
    assert_int_equal(read_u64(a), 3);
    CU_OK(cuGraphExecDestroy(x));
    CU_OK(cuGraphDestroy(g));
    CU_OK(cuGraphDestroy(child));
    CU_OK(cuGraphDestroy(child2));
    CU_OK(cuMemFree(a));
    CU_OK(cuMemFree(b));
}

/* ---------------------------------------------------------------- in children (reports) */

struct child_case {
    const char *name;
    int (*fn)(void);
};

static char report_path[256];

static int run_case(void *arg) {
    struct child_case *c = arg;
    CUdevice dev;
    CUcontext ctx;
    C_OK(cuInit(0));
    C_OK(cuDeviceGet(&dev, 0));
    C_OK(cuDevicePrimaryCtxRetain(&ctx, dev));
    C_OK(cuCtxSetCurrent(ctx));
    return c->fn();
}

static long long case_report(const char *name, int (*fn)(void), const char *key,
                             const char *devices) {
    snprintf(report_path, sizeof report_path, "/tmp/sim-reach-%d-%s.json", (int)getpid(), name);
    char env_report[300], env_dev[64];
    snprintf(env_report, sizeof env_report, "SIMCUDA_REPORT=%s", report_path);
    snprintf(env_dev, sizeof env_dev, "SIMCUDA_DEVICES=%s", devices);
    const char *env[] = {env_report, env_dev, NULL};
    struct child_case c = {name, fn};
    int rc = simtest_run_child(run_case, &c, env);
    if (rc != 0) fail_msg("%s: child exited %d", name, rc);
    long long v = simtest_json_int(report_path, key);
    unlink(report_path);
    return v;
}

/* A pool allocation freed under a running kernel that reaches it only through a by-value
 * struct: a hazard. */
static int c_struct_hazard(void) {
    CUstream s1, s2;
    C_OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    C_OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CUdeviceptr a;
    C_OK(cuMemAllocAsync(&a, MiB, s1));
    C_OK(cuStreamSynchronize(s1));
    unsigned char arg[4096];
    memset(arg, 0, sizeof arg);
    memcpy(arg + 8, &a, sizeof a);
    size_t used = 16; /* NCCL's shape: the buffer is as long as the bytes used */
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, arg, CU_LAUNCH_PARAM_BUFFER_SIZE, &used,
                     CU_LAUNCH_PARAM_END};
    C_OK(cuLaunchKernel(fn("reach_struct"), 1, 1, 1, 1, 1, 1, 0, s1, NULL, extra));
    C_OK(cuMemFreeAsync(a, s2)); /* not ordered after the kernel */
    C_OK(cuCtxSynchronize());
    return 0;
}

/* The same through a pointer array in device memory (the body declares what it touches). */
static int c_array_hazard(void) {
    CUstream s1, s2;
    C_OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    C_OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CUdeviceptr a, arr;
    C_OK(cuMemAllocAsync(&a, MiB, s1));
    C_OK(cuMemAlloc(&arr, 64));
    C_OK(cuMemcpyHtoD(arr, &a, sizeof a));
    C_OK(cuStreamSynchronize(s1));
    uint64_t n = 1;
    void *args[] = {&arr, &n};
    C_OK(cuLaunchKernel(fn("reach_array"), 1, 1, 1, 1, 1, 1, 0, s1, args, NULL));
    C_OK(cuMemFreeAsync(a, s2));
    C_OK(cuCtxSynchronize());
    return 0;
}

/* A kernel on device 1 touching device 0's memory: an illegal access without peer access. */
static int c_peer(int enable) {
    CUcontext c0, c1;
    C_OK(cuDevicePrimaryCtxRetain(&c0, 0));
    C_OK(cuDevicePrimaryCtxRetain(&c1, 1));
    C_OK(cuCtxSetCurrent(c0));
    CUdeviceptr a;
    C_OK(cuMemAlloc(&a, MiB));
    C_OK(cuMemsetD8(a, 0, 8));
    C_OK(cuCtxSynchronize()); /* the memset runs on device 0's queue: done before device 1 */
    C_OK(cuCtxSetCurrent(c1));
    int can = 0;
    C_OK(cuDeviceCanAccessPeer(&can, 1, 0));
    C_CHECK(can == 1);
    if (enable) C_OK(cuCtxEnablePeerAccess(c0, 0));
    if (enable) C_EXPECT(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, cuCtxEnablePeerAccess(c0, 0));
    CUmodule mod;
    CUfunction f;
    C_OK(cuModuleLoadData(&mod, image));
    C_OK(cuModuleGetFunction(&f, mod, "reach_add"));
    uint64_t one = 1;
    void *args[] = {&a, &one};
    C_OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    CUresult rc = cuCtxSynchronize();
    if (!enable) return rc == CUDA_ERROR_ILLEGAL_ADDRESS ? 0 : 102;
    C_OK(rc);
    uint64_t v = 0;
    C_OK(cuMemcpyDtoH(&v, a, 8));
    C_CHECK(v == 1);
    /* An event of device 0 cannot be recorded on a device-1 stream. */
    C_OK(cuCtxSetCurrent(c0));
    CUevent e;
    C_OK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    C_OK(cuCtxSetCurrent(c1));
    CUstream s;
    C_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    C_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuEventRecord(e, s));
    return 0;
}
static int c_peer_off(void) {
    return c_peer(0);
}
static int c_peer_on(void) {
    return c_peer(1);
}

static void test_hazards_through_unseen_pointers(void **state) {
    (void)state;
    assert_true(case_report("struct", c_struct_hazard, "hazards", "1") >= 1);
    assert_true(case_report("array", c_array_hazard, "hazards", "1") >= 1);
}

static void test_peer_access(void **state) {
    (void)state;
    assert_int_equal(case_report("peer_off", c_peer_off, "illegal_accesses", "2"), 1);
    assert_int_equal(case_report("peer_on", c_peer_on, "illegal_accesses", "2"), 0);
}

int main(void) {
    /* The cases that run in children first: a child of a process that initialised the driver
     * cannot use it. */
    const struct CMUnitTest in_children[] = {
        cmocka_unit_test(test_hazards_through_unseen_pointers),
        cmocka_unit_test(test_peer_access),
    };
    int failed = cmocka_run_group_tests(in_children, NULL, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_where),         cmocka_unit_test(test_error_names),
        cmocka_unit_test(test_stream_memops), cmocka_unit_test(test_batch_and_peer_copies),
        cmocka_unit_test(test_tensor_maps),   cmocka_unit_test(test_child_and_conditional_graphs),
    };
    return failed + cmocka_run_group_tests(tests, simtest_group_setup, NULL);
}
