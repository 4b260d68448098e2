/* The GPU kit's host helpers shared by integrity.c and vmmfacts.c (see kit.h). */
#include "kit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *kit_rc_name(CUresult rc) {
    const char *name = NULL;
    if (cuGetErrorName(rc, &name) == CUDA_SUCCESS && name != NULL) return name;
    switch (rc) { /* the simulator does not name errors */
    case CUDA_SUCCESS:
        return "CUDA_SUCCESS";
    case CUDA_ERROR_INVALID_VALUE:
        return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_OUT_OF_MEMORY:
        return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_NOT_INITIALIZED:
        return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_INVALID_IMAGE:
        return "CUDA_ERROR_INVALID_IMAGE";
    case CUDA_ERROR_INVALID_CONTEXT:
        return "CUDA_ERROR_INVALID_CONTEXT";
    case CUDA_ERROR_NOT_FOUND:
        return "CUDA_ERROR_NOT_FOUND";
    case CUDA_ERROR_ILLEGAL_ADDRESS:
        return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case CUDA_ERROR_NOT_SUPPORTED:
        return "CUDA_ERROR_NOT_SUPPORTED";
    default:
        return "CUDA error";
    }
}

void (*kit_on_failure)(CUresult rc, const char *what);

void kit_die_rc(CUresult rc, const char *what, const char *file, int line) {
    fprintf(stderr, "%s:%d: %s failed: %s (%d)\n", file, line, what, kit_rc_name(rc), (int)rc);
    fflush(stderr);
    if (kit_on_failure != NULL) kit_on_failure(rc, what);
    exit(1);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double kit_median(double *v, int n) {
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double kit_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

CUcontext kit_primary(CUdevice *dev) {
    CUcontext ctx;
    KIT_CK(cuInit(0));
    KIT_CK(cuDeviceGet(dev, 0));
    KIT_CK(cuDevicePrimaryCtxRetain(&ctx, *dev));
    KIT_CK(cuCtxSetCurrent(ctx));
    return ctx;
}

/* The whole file, NUL-terminated; exits 1 when it cannot be read. */
static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        exit(1);
    }
    size_t cap = 1 << 16, len = 0;
    char *data = malloc(cap + 1);
    size_t n;
    while (data != NULL && (n = fread(data + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            cap *= 2;
            data = realloc(data, cap + 1);
        }
    }
    fclose(f);
    if (data == NULL) {
        fprintf(stderr, "%s: out of memory\n", path);
        exit(1);
    }
    data[len] = '\0';
    return data;
}

/* Every parameter of f is 8 bytes at 8 * i, and there are exactly n (kit.h). */
static void check_layout(CUfunction f, const char *name, size_t n) {
    for (size_t i = 0; i <= n; i++) {
        size_t offset = 0, size = 0;
        CUresult rc = cuFuncGetParamInfo(f, i, &offset, &size);
        if (rc == CUDA_ERROR_NOT_SUPPORTED) return; /* an older driver: nothing to compare */
        if (i == n && rc == CUDA_ERROR_INVALID_VALUE) return;
        if (i == n || rc != CUDA_SUCCESS || offset != 8 * i || size != 8) {
            fprintf(stderr,
                    "kernel %s: parameter %zu is %s (offset %zu, size %zu); kit.h expects %zu "
                    "8-byte parameters\n",
                    name, i, kit_rc_name(rc), offset, size, n);
            exit(1);
        }
    }
}

/* kit_wide: the struct at 0, the errors pointer right after it, nothing else. */
static void check_wide_layout(CUfunction f) {
    static const size_t want[2][2] = {{0, KIT_WIDE_BYTES}, {KIT_WIDE_BYTES, 8}};
    for (size_t i = 0; i <= 2; i++) {
        size_t offset = 0, size = 0;
        CUresult rc = cuFuncGetParamInfo(f, i, &offset, &size);
        if (rc == CUDA_ERROR_NOT_SUPPORTED) return;
        if (i == 2 && rc == CUDA_ERROR_INVALID_VALUE) return;
        if (i == 2 || rc != CUDA_SUCCESS || offset != want[i][0] || size != want[i][1]) {
            fprintf(stderr,
                    "kernel kit_wide: parameter %zu is %s (offset %zu, size %zu); kit.h expects "
                    "a %d-byte struct and a pointer\n",
                    i, kit_rc_name(rc), offset, size, KIT_WIDE_BYTES);
            exit(1);
        }
    }
}

void kit_load(struct kit_module *m, const char *cubin) {
    memset(m, 0, sizeof *m);
    if (cubin == NULL) {
        m->image = "simulator text image";
        KIT_CK(cuModuleLoadData(&m->mod, KIT_SIM_IMAGE));
    } else {
        char *data = read_file(cubin);
        m->image = cubin;
        KIT_CK(cuModuleLoadData(&m->mod, data));
        free(data);
    }
#define KIT_GET(name, nparams)                                                                     \
    do {                                                                                           \
        CUfunction f_;                                                                             \
        KIT_CK(cuModuleGetFunction(&f_, m->mod, #name));                                           \
        check_layout(f_, #name, nparams);                                                          \
        if (strcmp(#name, "kit_fill") == 0) m->fill = f_;                                          \
        if (strcmp(#name, "kit_check") == 0) m->check = f_;                                        \
        if (strcmp(#name, "kit_vu3") == 0) m->vu3 = f_;                                            \
        if (strcmp(#name, "kit_read") == 0) m->read = f_;                                          \
        if (strcmp(#name, "kit_spin") == 0) m->spin = f_;                                          \
    } while (0);
    KIT_KERNELS(KIT_GET)
#undef KIT_GET
    KIT_CK(cuModuleGetFunction(&m->wide, m->mod, "kit_wide"));
    check_wide_layout(m->wide);
    CUdevice dev;
    int sms = 0;
    KIT_CK(cuCtxGetDevice(&dev));
    if (cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) != CUDA_SUCCESS ||
        sms < 1)
        sms = 1;
    m->sms = sms;
}

unsigned kit_blocks(const struct kit_module *m, uint64_t words) {
    uint64_t want = (words + 255) / 256, most = (uint64_t)m->sms * 8;
    if (want > most) want = most;
    return want == 0 ? 1 : (unsigned)want;
}

static CUresult launch(const struct kit_module *m, CUfunction f, CUstream s, uint64_t words,
                       void **args) {
    return cuLaunchKernel(f, kit_blocks(m, words), 1, 1, 256, 1, 1, 0, s, args, NULL);
}

CUresult kit_fill_launch(const struct kit_module *m, CUstream s, CUdeviceptr buf, uint64_t id,
                         uint64_t version, uint64_t bytes) {
    uint64_t words = bytes / 8;
    void *args[] = {&buf, &id, &version, &words};
    return launch(m, m->fill, s, words, args);
}

CUresult kit_check_launch(const struct kit_module *m, CUstream s, CUdeviceptr buf, uint64_t id,
                          uint64_t version, uint64_t bytes, CUdeviceptr errors) {
    uint64_t words = bytes / 8;
    void *args[] = {&buf, &id, &version, &words, &errors};
    return launch(m, m->check, s, words, args);
}

CUresult kit_read_launch(const struct kit_module *m, CUstream s, CUdeviceptr buf, uint64_t bytes,
                         CUdeviceptr sink) {
    uint64_t words = bytes / 8;
    void *args[] = {&buf, &words, &sink};
    return launch(m, m->read, s, words / 2, args);
}

/* One block of one warp: the kernel waits, it does no work worth more threads. */
CUresult kit_spin_launch(const struct kit_module *m, CUstream s, uint64_t ns) {
    void *args[] = {&ns};
    return cuLaunchKernel(m->spin, 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
}

CUresult kit_wide_launch(const struct kit_module *m, CUstream s, const struct kit_wide_args *a,
                         CUdeviceptr errors) {
    /* One block row per buffer (up to count), a few blocks across each. */
    unsigned x = kit_blocks(m, a->words), y = a->count == 0 ? 1 : (unsigned)a->count;
    if (x > 4) x = 4;
    void *args[] = {(void *)a, &errors};
    return cuLaunchKernel(m->wide, x, y, 1, 256, 1, 1, 0, s, args, NULL);
}
