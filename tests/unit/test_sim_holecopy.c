/* Copies that keep holes (tests/simcuda/holecopy.c): a copy between VMM mappings moves only the
 * source's pages that hold data and punches the destination where the source has none. The bytes
 * must be exactly those of a byte-for-byte copy whatever the destination held before, at any
 * alignment, between device- and host-located handles, and the virtual time must not change
 * (the link is charged for every byte, as the real copy engine would be).
 *
 * Children as in test_sim_vmm.c (simchild.h): each runs in a fresh process with its own report. */
#include <stdbool.h>

#include "simtest.h"

#include "simchild.h"

#define N (8 * MiB)

static CUmemGenericAllocationHandle create(CUmemLocationType where, size_t bytes) {
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = where;
    p.location.id = 0;
    CUmemGenericAllocationHandle h = 0;
    CHK_OK(cuMemCreate(&h, bytes, &p, 0));
    return h;
}

/* A fresh handle of `where`, mapped read-write at a new reservation. */
static CUdeviceptr mapped(CUmemLocationType where) {
    CUdeviceptr va = 0;
    CHK_OK(cuMemAddressReserve(&va, N, 0, 0, 0));
    CUmemGenericAllocationHandle h = create(where, N);
    CHK_OK(cuMemMap(va, N, 0, h, 0));
    CHK_OK(cuMemRelease(h));
    CUmemAccessDesc d = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CHK_OK(cuMemSetAccess(va, N, &d, 1));
    return va;
}

/* Writes `len` bytes of a seeded pattern at va + off (through a host buffer and a copy, as a
 * program would); the rest of the handle is never written: holes. */
static void write_at(CUdeviceptr va, size_t off, size_t len, uint32_t seed) {
    unsigned char *h = malloc(len);
    CHK(h != NULL);
    pattern(h, len, seed);
    CHK_OK(cuMemcpyHtoD(va + off, h, len));
    free(h);
}

/* What dst must hold after copying src: built in host memory from the same writes. */
static int c_holes(void) {
    ctx_up();
    CUdeviceptr src = mapped(CU_MEM_LOCATION_TYPE_DEVICE);
    CUdeviceptr dst = mapped(CU_MEM_LOCATION_TYPE_HOST);
    unsigned char *want = calloc(1, N), *got = malloc(N), *fill = malloc(N);
    CHK(want != NULL && got != NULL && fill != NULL);
    /* Source: data in two stretches, one of them unaligned and across a page boundary; the rest
     * holes. */
    static const struct {
        size_t off, len;
        uint32_t seed;
    } w[] = {{0, MiB, 3}, {5 * MiB + 4093, 9000, 4}};
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
        write_at(src, w[i].off, w[i].len, w[i].seed);
        pattern(want + w[i].off, w[i].len, w[i].seed);
    }
    /* Destination: full of other bytes, which the copy must replace with zeros in the holes. */
    memset(fill, 0xab, N);
    CHK_OK(cuMemcpyHtoD(dst, fill, N));
    uint64_t t0 = simcuda_now_ns();
    CHK_OK(cuMemcpyDtoD(dst, src, N));
    uint64_t took = simcuda_now_ns() - t0;
    CHK_OK(cuMemcpyDtoH(got, dst, N));
    CHK(memcmp(got, want, N) == 0);

    /* Unaligned both sides, into a device handle that held other bytes: a copy of 3 MiB + 5 from
     * src + 4093 to dev + 7. */
    CUdeviceptr dev = mapped(CU_MEM_LOCATION_TYPE_DEVICE);
    CHK_OK(cuMemcpyHtoD(dev, fill, N));
    const size_t off_s = 4093, off_d = 7, len = 3 * MiB + 5;
    CHK_OK(cuMemcpyDtoD(dev + off_d, src + off_s, len));
    CHK_OK(cuMemcpyDtoH(got, dev, N));
    CHK(memcmp(got, fill, off_d) == 0);
    CHK(memcmp(got + off_d, want + off_s, len) == 0);
    CHK(memcmp(got + off_d + len, fill, N - off_d - len) == 0);

    /* The same copy within one handle, overlapping: byte for byte (memmove semantics). */
    memcpy(fill, want, N);
    memmove(fill + MiB, fill, 4 * MiB);
    CHK_OK(cuMemcpyDtoD(src + MiB, src, 4 * MiB));
    CHK_OK(cuMemcpyDtoH(got, src, N));
    CHK(memcmp(got, fill, N) == 0);

    /* Virtual time as for any copy of N bytes: the model charges bytes, not pages. */
    g_shared[0] = took;
    free(want);
    free(got);
    free(fill);
    return 0;
}

/* The same first copy with the source written everywhere: its virtual time must be the same. */
static int c_dense(void) {
    ctx_up();
    CUdeviceptr src = mapped(CU_MEM_LOCATION_TYPE_DEVICE);
    CUdeviceptr dst = mapped(CU_MEM_LOCATION_TYPE_HOST);
    write_at(src, 0, N, 9);
    uint64_t t0 = simcuda_now_ns();
    CHK_OK(cuMemcpyDtoD(dst, src, N));
    g_shared[1] = simcuda_now_ns() - t0;
    unsigned char *want = malloc(N), *got = malloc(N);
    CHK(want != NULL && got != NULL);
    pattern(want, N, 9);
    CHK_OK(cuMemcpyDtoH(got, dst, N));
    CHK(memcmp(got, want, N) == 0);
    free(want);
    free(got);
    return 0;
}

static void test_holes_kept_bytes_exact(void **state) {
    (void)state;
    run_child("holes", c_holes, NULL);
    assert_int_equal(report("holes", "illegal_accesses"), 0);
    run_child("dense", c_dense, NULL);
    assert_true(g_shared[0] > 0);
    assert_int_equal(g_shared[0], g_shared[1]);
}

int main(void) {
    if (!suite_init("holecopy")) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_holes_kept_bytes_exact),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    remove_reports();
    return rc;
}
