/* ip_procaddr: reaches the driver the way libcudart.so.13 does. It is not linked to libcuda: it
 * dlopens libcuda.so.1, takes cuGetProcAddress_v2 with dlsym, makes every lookup of
 * tests/data/cudart13-proc-lookups.txt (argv[1]) in order with its version and flags, then
 * allocates, launches (kernel body below, verified) and frees with the pointers it got.
 *
 * stdout: one "lookup" line per query (result code, symbol status, whether a pointer came back:
 * identical with and without the library); "resolved" lines naming the object and symbol that
 * dladdr finds for the pointers of interest (libcuda.so.1 without the library, libhostoff.so
 * with it); "lookups N", the number of cuGetProcAddress queries made. */
#include "iptest.h"

#include <dlfcn.h>
#include <libgen.h>

typedef CUresult (*gpa_v2_fn)(const char *, void **, int, cuuint64_t,
                              CUdriverProcAddressQueryResult *);

#define MAX_LOOKUPS 1024
static struct {
    char sym[96];
    int ver;
    unsigned long long flags;
    void *fn;
} got[MAX_LOOKUPS];
static int nlookups;
static gpa_v2_fn gpa;

/* The pointer the list's lookup of (sym, ver, flags) returned. */
static void *from_list(const char *sym, int ver, unsigned long long flags) {
    for (int i = 0; i < nlookups; i++)
        if (strcmp(got[i].sym, sym) == 0 && got[i].ver == ver && got[i].flags == flags)
            return got[i].fn;
    fprintf(stderr, "ip_procaddr: %s %d %llu is not in the lookup list\n", sym, ver, flags);
    exit(1);
}

static void resolved(const char *label, const void *fn) {
    Dl_info info;
    if (fn == NULL || dladdr(fn, &info) == 0 || info.dli_fname == NULL) {
        printf("resolved %s -> ? ?\n", label);
        return;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s", info.dli_fname);
    printf("resolved %s -> %s %s\n", label, basename(path),
           info.dli_sname != NULL ? info.dli_sname : "?");
}

/* Kernel body: k_inc(ptr p, u32 n): p[i] += i + 1. */
void k_inc(void **p) {
    uint32_t *d = *(uint32_t **)p[0];
    uint32_t n = *(uint32_t *)p[1];
    for (uint32_t i = 0; i < n; i++)
        d[i] += i + 1;
}

static const char image[] = "simcuda-module 1\nkernel k_inc ptr u32 ns=1000\n";

#define FN(type, sym, ver, flags) ((type)(uintptr_t)from_list(sym, ver, flags))

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: ip_procaddr cudart13-proc-lookups.txt\n");
        return 2;
    }
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    EXPECT(h != NULL, "dlopen libcuda.so.1: %s", dlerror());
    gpa = (gpa_v2_fn)(uintptr_t)dlsym(h, "cuGetProcAddress_v2");
    EXPECT(gpa != NULL, "dlsym cuGetProcAddress_v2: %s", dlerror());

    FILE *f = fopen(argv[1], "r");
    EXPECT(f != NULL, "cannot open %s", argv[1]);
    char line[256];
    while (fgets(line, sizeof line, f) != NULL) {
        if (line[0] == '#' || line[0] == '\n') continue;
        char sym[96];
        int ver;
        unsigned long long flags;
        EXPECT(sscanf(line, "%95s ver=%d flags=%llu", sym, &ver, &flags) == 3, "bad line %s", line);
        EXPECT(nlookups < MAX_LOOKUPS, "too many lookups");
        if (strcmp(sym, "(empty)") == 0) sym[0] = '\0';
        void *fn = (void *)1; /* the resolver must overwrite it */
        CUdriverProcAddressQueryResult status = (CUdriverProcAddressQueryResult)-1;
        CUresult rc = gpa(sym, &fn, ver, flags, &status);
        printf("lookup %s %d %llu rc=%d status=%d %s\n", sym[0] ? sym : "(empty)", ver, flags,
               (int)rc, (int)status, fn == NULL ? "null" : "ptr");
        snprintf(got[nlookups].sym, sizeof got[nlookups].sym, "%s", sym);
        got[nlookups].ver = ver;
        got[nlookups].flags = flags;
        got[nlookups].fn = rc == CUDA_SUCCESS ? fn : NULL;
        nlookups++;
    }
    fclose(f);
    int list_lookups = nlookups;

    /* One more, with a NULL symbolStatus, which the driver allows. */
    void *alloc_again = NULL;
    CK(gpa("cuMemAlloc", &alloc_again, 3020, CU_GET_PROC_ADDRESS_DEFAULT, NULL));
    nlookups++;
    EXPECT(alloc_again == from_list("cuMemAlloc", 3020, 0), "NULL symbolStatus changed the answer");

    /* Asked for itself, the resolver returns itself (the same entry point dlsym gave). */
    EXPECT(from_list("cuGetProcAddress", 12000, 0) == (void *)(uintptr_t)gpa,
           "cuGetProcAddress at 12000 is not the pointer dlsym returned");
    resolved("dlsym:cuGetProcAddress_v2", (void *)(uintptr_t)gpa);
    static const struct {
        const char *sym;
        int ver, flags;
    } show[] = {
        {"cuGetProcAddress", 11030, 0}, {"cuGetProcAddress", 12000, 0},
        {"cuMemAlloc", 3020, 0},        {"cuMemFree", 3020, 0},
        {"cuLaunchKernel", 4000, 0},    {"cuLaunchKernel", 7000, 2},
        {"cuLaunchKernelEx", 11060, 0}, {"cuLaunchKernelEx", 11060, 2},
        {"cuMemAllocAsync", 11020, 0},  {"cuMemAllocAsync", 11020, 2},
        {"cuGraphLaunch", 10000, 0},    {"cuGraphLaunch", 10000, 2},
        {"cuMemcpyHtoD", 7000, 2},      {"cuGetExportTable", 3000, 0},
        {"cuDeviceGet", 2000, 0},
    };
    for (size_t i = 0; i < sizeof show / sizeof show[0]; i++) {
        char label[128];
        snprintf(label, sizeof label, "%s:%d:%d", show[i].sym, show[i].ver, show[i].flags);
        resolved(label, from_list(show[i].sym, show[i].ver, (unsigned long long)show[i].flags));
    }
    /* The resolver that the resolver returned resolves too. */
    gpa_v2_fn gpa2 = FN(gpa_v2_fn, "cuGetProcAddress", 12000, 0);
    void *launch2 = NULL;
    CK(gpa2("cuLaunchKernel", &launch2, 4000, 0, NULL));
    nlookups++;
    EXPECT(launch2 == from_list("cuLaunchKernel", 4000, 0), "second-hand resolver differs");

    /* Use what was resolved: allocate, upload, launch, download, verify, free. */
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn;
    CUdeviceptr buf;
    CK(FN(PFN_cuInit_v2000, "cuInit", 2000, 0)(0));
    CK(FN(PFN_cuDeviceGet_v2000, "cuDeviceGet", 2000, 0)(&dev, 0));
    CK(FN(PFN_cuDevicePrimaryCtxRetain_v7000, "cuDevicePrimaryCtxRetain", 7000, 0)(&ctx, dev));
    CK(FN(PFN_cuCtxSetCurrent_v4000, "cuCtxSetCurrent", 4000, 0)(ctx));
    CK(FN(PFN_cuModuleLoadData_v2000, "cuModuleLoadData", 2000, 0)(&mod, image));
    CK(FN(PFN_cuModuleGetFunction_v2000, "cuModuleGetFunction", 2000, 0)(&fn, mod, "k_inc"));
    enum { N = 4096 };
    CK(FN(PFN_cuMemAlloc_v3020, "cuMemAlloc", 3020, 0)(&buf, N * 4));
    uint32_t *host = malloc(N * 4), *want = malloc(N * 4);
    EXPECT(host != NULL && want != NULL, "out of memory");
    for (uint32_t i = 0; i < N; i++)
        host[i] = want[i] = i * 2654435761u;
    CK(FN(PFN_cuMemcpyHtoD_v3020, "cuMemcpyHtoD", 3020, 0)(buf, host, N * 4));
    uint32_t n = N;
    void *args[] = {&buf, &n};
    CK(FN(PFN_cuLaunchKernel_v4000, "cuLaunchKernel", 4000, 0)(fn, 1, 1, 1, 32, 1, 1, 0, NULL, args,
                                                               NULL));
    /* The per-thread variant, on the per-thread default stream. */
    CK(FN(PFN_cuLaunchKernel_v7000_ptsz, "cuLaunchKernel", 7000, 2)(fn, 1, 1, 1, 32, 1, 1, 0, NULL,
                                                                    args, NULL));
    CK(FN(PFN_cuCtxSynchronize_v2000, "cuCtxSynchronize", 2000, 0)());
    for (uint32_t i = 0; i < N; i++)
        want[i] += 2 * (i + 1);
    CK(FN(PFN_cuMemcpyDtoH_v3020, "cuMemcpyDtoH", 3020, 0)(host, buf, N * 4));
    ip_same("buffer", host, want, N * 4);
    CK(FN(PFN_cuMemFree_v3020, "cuMemFree", 3020, 0)(buf));
    printf("data: %016llx\n", (unsigned long long)ip_hash(host, N * 4));
    printf("list %d\n", list_lookups);
    printf("lookups %d\n", nlookups);
    free(host);
    free(want);
    return 0;
}
