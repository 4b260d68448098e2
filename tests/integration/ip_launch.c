/* ip_launch: a program linked against libcuda that allocates, copies, sets and launches, with
 * kernel pointers that are interior (base + offset), inside a by-value struct parameter, inside a
 * packed `extra` buffer, next to non-pointer 8-byte scalars, NULL, or into untracked host memory;
 * through cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel and a CUkernel used as a
 * CUfunction. It mirrors every operation on the host and checks the device bytes bit-exactly.
 *
 * stdout: "data:" lines (hashes of the final bytes), "time:" lines (virtual time) and "expect"
 * lines: the counts and per-buffer uses the library's report must show, counted here at each call
 * site (buffer ids are allocation order, as the report numbers them). */
#include "iptest.h"
#include "simcuda.h"

enum { A, B, C, D, E, H, NBUF };
static const char *const names = "ABCDEH";
static unsigned uses[NBUF];
static unsigned n_launches, n_copies, n_memsets, n_allocs, n_frees;

#define BIG_WORDS   16384u /* 64 KiB */
#define SMALL_WORDS 1024u  /* 4 KiB */
#define GOLD        2654435761u

struct s24 {
    uint64_t n;
    uint32_t *dst;
    uint64_t salt;
};

/* ---------------------------------------------------------------- kernel bodies (host code) */

/* k_fill(ptr dst, u32 n, u32 v): dst[i] = v + i * GOLD */
void k_fill(void **p) {
    uint32_t *d = *(uint32_t **)p[0];
    uint32_t n = *(uint32_t *)p[1], v = *(uint32_t *)p[2];
    for (uint32_t i = 0; i < n; i++)
        d[i] = v + i * GOLD;
}

/* k_struct(b24 {n, dst, salt}, u64 mul): dst[i] = dst[i] * mul + salt */
void k_struct(void **p) {
    struct s24 s;
    memcpy(&s, p[0], sizeof s);
    uint64_t mul = *(uint64_t *)p[1];
    for (uint64_t i = 0; i < s.n; i++)
        s.dst[i] = (uint32_t)(s.dst[i] * mul + s.salt);
}

/* k_extra(ptr src, u32 n, ptr dst): dst[i] = src[i] ^ 0xa5a5a5a5 (launched with `extra`) */
void k_extra(void **p) {
    const uint32_t *src = *(uint32_t **)p[0];
    uint32_t n = *(uint32_t *)p[1];
    uint32_t *dst = *(uint32_t **)p[2];
    for (uint32_t i = 0; i < n; i++)
        dst[i] = src[i] ^ 0xa5a5a5a5u;
}

/* k_copy(ptr dst, ptr src, u32 n): dst[i] = src[i] + 1 (both pointers into one buffer) */
void k_copy(void **p) {
    uint32_t *dst = *(uint32_t **)p[0];
    const uint32_t *src = *(uint32_t **)p[1];
    uint32_t n = *(uint32_t *)p[2];
    for (uint32_t i = 0; i < n; i++)
        dst[i] = src[i] + 1;
}

/* k_scalar(u64 count, i64 step, f64 scale, ptr out): out[i] = (count + step * i) * scale */
void k_scalar(void **p) {
    uint64_t count = *(uint64_t *)p[0];
    int64_t step = *(int64_t *)p[1];
    double scale = *(double *)p[2];
    uint32_t *out = *(uint32_t **)p[3];
    for (uint64_t i = 0; i < count; i++)
        out[i] = (uint32_t)((double)((int64_t)count + step * (int64_t)i) * scale);
}

static const char image[] = "simcuda-module 1\n"
                            "kernel k_fill ptr u32 u32 ns=2000\n"
                            "kernel k_struct b24 u64 ns=3000\n"
                            "kernel k_extra ptr u32 ptr ns=4000\n"
                            "kernel k_copy ptr ptr u32 ns=5000\n"
                            "kernel k_scalar u64 i64 f64 ptr ns=6000\n";

/* ------------------------------------------------------------------ host mirror of the same */

static void m_fill(uint32_t *d, uint32_t n, uint32_t v) {
    for (uint32_t i = 0; i < n; i++)
        d[i] = v + i * GOLD;
}

static void used(int b) {
    uses[b]++;
}

int main(void) {
    ip_primary(0);
    CUmodule mod;
    CUfunction f_fill, f_struct, f_extra, f_scalar;
    CK(cuModuleLoadData(&mod, image));
    CK(cuModuleGetFunction(&f_fill, mod, "k_fill"));
    CK(cuModuleGetFunction(&f_struct, mod, "k_struct"));
    CK(cuModuleGetFunction(&f_extra, mod, "k_extra"));
    CK(cuModuleGetFunction(&f_scalar, mod, "k_scalar"));
    /* k_copy through the library API: a CUkernel launched as a CUfunction. */
    CUlibrary lib;
    CUkernel kern_copy;
    CK(cuLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0));
    CK(cuLibraryGetKernel(&kern_copy, lib, "k_copy"));

    const size_t words[NBUF] = {BIG_WORDS,   BIG_WORDS,   SMALL_WORDS,
                                SMALL_WORDS, SMALL_WORDS, SMALL_WORDS};
    CUdeviceptr d[NBUF];
    uint32_t *m[NBUF], *back = malloc(BIG_WORDS * 4);
    EXPECT(back != NULL, "out of memory");
    for (int b = 0; b < NBUF; b++) {
        m[b] = calloc(words[b], 4);
        EXPECT(m[b] != NULL, "out of memory");
    }
    for (int b = A; b <= E; b++)
        CK(cuMemAlloc(&d[b], words[b] * 4));
    void *hp = NULL;
    CK(cuMemAllocHost(&hp, words[H] * 4));
    d[H] = (CUdeviceptr)(uintptr_t)hp;
    n_allocs = NBUF;
    for (uint32_t i = 0; i < SMALL_WORDS; i++)
        ((uint32_t *)hp)[i] = m[H][i] = i * 3u;

    CUevent t0, t1;
    CK(cuEventCreate(&t0, 0));
    CK(cuEventCreate(&t1, 0));
    CK(cuEventRecord(t0, NULL));

    /* 1-4: sets and uploads. */
    CK(cuMemsetD32(d[A], 0x01010101u, BIG_WORDS));
    for (uint32_t i = 0; i < BIG_WORDS; i++)
        m[A][i] = 0x01010101u;
    used(A), n_memsets++;
    for (uint32_t i = 0; i < BIG_WORDS; i++)
        m[B][i] = i * 7u;
    CK(cuMemcpyHtoD(d[B], m[B], BIG_WORDS * 4));
    used(B), n_copies++;
    for (uint32_t i = 0; i < SMALL_WORDS; i++)
        m[D][i] = i ^ 0x1234u;
    CK(cuMemcpyHtoD(d[D], m[D], SMALL_WORDS * 4));
    used(D), n_copies++;
    CK(cuMemsetD8(d[C], 0, SMALL_WORDS * 4));
    used(C), n_memsets++;
    CK(cuMemsetD8(d[E], 0xff, SMALL_WORDS * 4));
    memset(m[E], 0xff, SMALL_WORDS * 4);
    used(E), n_memsets++;

    /* 5: an interior pointer (A + 4 KiB). */
    {
        CUdeviceptr p = d[A] + 4096;
        uint32_t n = 1024, v = 7;
        void *args[] = {&p, &n, &v};
        CK(cuLaunchKernel(f_fill, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL));
        m_fill(m[A] + 1024, n, v);
        used(A), n_launches++;
    }
    /* 6: a pointer (interior, B + 256) inside a by-value struct, next to a small u64 scalar. */
    {
        struct s24 s = {1024, (uint32_t *)(uintptr_t)(d[B] + 256), 5};
        uint64_t mul = 3;
        void *args[] = {&s, &mul};
        CK(cuLaunchKernel(f_struct, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL));
        for (uint32_t i = 0; i < 1024; i++)
            m[B][64 + i] = m[B][64 + i] * 3u + 5u;
        used(B), n_launches++;
    }
    /* 7: pointers inside a packed `extra` buffer. */
    {
        struct {
            uint64_t src;
            uint32_t n, pad;
            uint64_t dst;
        } packed = {d[D], SMALL_WORDS, 0, d[C]};
        size_t size = sizeof packed;
        void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE,
                         &size, CU_LAUNCH_PARAM_END};
        CK(cuLaunchKernel(f_extra, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, extra));
        for (uint32_t i = 0; i < SMALL_WORDS; i++)
            m[C][i] = m[D][i] ^ 0xa5a5a5a5u;
        used(C), used(D), n_launches++;
    }
    /* 8: two pointers into one buffer count one use; a CUkernel launched as a CUfunction. */
    {
        CUdeviceptr dst = d[A] + 8192, src = d[A];
        uint32_t n = 1024;
        void *args[] = {&dst, &src, &n};
        CK(cuLaunchKernel((CUfunction)kern_copy, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL));
        for (uint32_t i = 0; i < n; i++)
            m[A][2048 + i] = m[A][i] + 1;
        used(A), n_launches++;
    }
    /* 9: 8-byte scalars that are not pointers (16, -1, 1.0) next to a pointer. */
    {
        uint64_t count = 16;
        int64_t step = -1;
        double scale = 1.0;
        void *args[] = {&count, &step, &scale, &d[E]};
        CK(cuLaunchKernel(f_scalar, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL));
        for (uint32_t i = 0; i < 16; i++)
            m[E][i] = 16 - i;
        used(E), n_launches++;
    }
    /* 10: cuLaunchKernelEx with an interior pointer (B + 32 KiB). */
    {
        CUdeviceptr p = d[B] + 32768;
        uint32_t n = 256, v = 11;
        void *args[] = {&p, &n, &v};
        CUlaunchConfig cfg = {.gridDimX = 1,
                              .gridDimY = 1,
                              .gridDimZ = 1,
                              .blockDimX = 32,
                              .blockDimY = 1,
                              .blockDimZ = 1,
                              .hStream = NULL};
        CK(cuLaunchKernelEx(&cfg, f_fill, args, NULL));
        m_fill(m[B] + 8192, n, v);
        used(B), n_launches++;
    }
    /* 11: cuLaunchCooperativeKernel into pinned host memory (tracked, kind host). */
    {
        uint32_t n = 16, v = 9;
        void *args[] = {&hp, &n, &v};
        CK(cuLaunchCooperativeKernel(f_fill, 1, 1, 1, 32, 1, 1, 0, NULL, args));
        m_fill(m[H], n, v);
        used(H), n_launches++;
    }
    /* 12: a NULL pointer; 13: a pointer into untracked host memory, inside a struct. */
    {
        CUdeviceptr p = 0;
        uint32_t n = 0, v = 0;
        void *args[] = {&p, &n, &v};
        CK(cuLaunchKernel(f_fill, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL));
        n_launches++;
        uint32_t *plain = malloc(64);
        EXPECT(plain != NULL, "out of memory");
        struct s24 s = {0, plain, 0};
        uint64_t mul = 1;
        void *args2[] = {&s, &mul};
        CK(cuLaunchKernel(f_struct, 1, 1, 1, 32, 1, 1, 0, NULL, args2, NULL));
        n_launches++;
        CK(cuCtxSynchronize());
        free(plain);
    }
    CK(cuEventRecord(t1, NULL));
    /* 14: device to device, interior on both sides. */
    CK(cuMemcpyDtoD(d[B] + 4096, d[A] + 4096, 4096));
    memcpy(m[B] + 1024, m[A] + 1024, 4096);
    used(A), used(B), n_copies++;
    /* 15: E back, then freed. */
    CK(cuMemcpyDtoH(back, d[E], SMALL_WORDS * 4));
    used(E), n_copies++;
    ip_same("E", back, m[E], SMALL_WORDS * 4);
    printf("data: E %016llx\n", (unsigned long long)ip_hash(back, SMALL_WORDS * 4));
    CK(cuMemFree(d[E]));
    n_frees++;
    /* 16: the pinned host buffer after the kernel, then overwritten from C. */
    CK(cuCtxSynchronize());
    ip_same("H", hp, m[H], SMALL_WORDS * 4);
    printf("data: H %016llx\n", (unsigned long long)ip_hash(hp, SMALL_WORDS * 4));
    CK(cuMemcpyDtoH(hp, d[C], SMALL_WORDS * 4));
    used(H), used(C), n_copies++;
    ip_same("H<-C", hp, m[C], SMALL_WORDS * 4);
    /* 17: everything else back. */
    for (int b = A; b <= D; b++) {
        CK(cuMemcpyDtoH(back, d[b], words[b] * 4));
        used(b), n_copies++;
        char what[2] = {names[b], 0};
        ip_same(what, back, m[b], words[b] * 4);
        printf("data: %c %016llx\n", names[b], (unsigned long long)ip_hash(back, words[b] * 4));
    }
    CK(cuMemFreeHost(hp));
    n_frees++;

    float ms = 0;
    CK(cuEventElapsedTime(&ms, t0, t1));
    CK(cuEventDestroy(t0));
    CK(cuEventDestroy(t1));
    printf("time: kernels %.6f ms\n", (double)ms);
    printf("time: host clock %llu ns\n", (unsigned long long)simcuda_now_ns());
    printf("expect counts allocs %u frees %u launches %u copies %u memsets %u\n", n_allocs, n_frees,
           n_launches, n_copies, n_memsets);
    for (int b = 0; b < NBUF; b++)
        printf("expect uses %d %u\n", b + 1, uses[b]);
    printf("expect live 1 2 3 4\n");
    for (int b = 0; b < NBUF; b++)
        free(m[b]);
    free(back);
    return 0;
}
