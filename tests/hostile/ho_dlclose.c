/* ho_dlclose LIBHOSTOFF: the library dlopen'ed (not preloaded), used from a thread so that its
 * thread-specific keys (with destructors) exist for that thread, dlclose'd, and then the thread
 * exits. Without -z nodelete the destructors would run in unmapped code (SIGSEGV). Exits 0 when
 * the thread ended cleanly and the library is still loaded after dlclose. */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(call)                                                                                   \
    do {                                                                                           \
        CUresult rc_ = (call);                                                                     \
        if (rc_ != CUDA_SUCCESS) {                                                                 \
            fprintf(stderr, "ho_dlclose: %s failed: %d\n", #call, (int)rc_);                       \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static const char image[] = "simcuda-module 1\nkernel k_use ptr ns=1000\n";

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);
typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void **, void **);

static alloc_fn hooked_alloc;
static free_fn hooked_free;
static launch_fn hooked_launch;
static CUresult (*set_current)(CUcontext);
static CUresult (*synchronize)(void);
static CUcontext ctx;
static CUfunction k_use;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int phase; /* 1: the thread used the library; 2: the library was dlclose'd */

static void *worker(void *arg) {
    (void)arg;
    CK(set_current(ctx));
    CUdeviceptr d;
    CK(hooked_alloc(&d, 8 << 20));
    void *params[] = {&d};
    for (int i = 0; i < 4; i++)
        CK(hooked_launch(k_use, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
    CK(synchronize());
    CK(hooked_free(d));
    pthread_mutex_lock(&lock);
    phase = 1;
    pthread_cond_broadcast(&cond);
    while (phase != 2)
        pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
    return NULL; /* the thread's keys' destructors run now, after dlclose */
}

/* The driver's own entry points the library does not hook, from libcuda.so.1 opened locally:
 * the program must not link the driver, or the library's references to its own hooks would bind
 * to the driver's global symbols (the library is dlopen'ed, not preloaded). */
static void *sym(void *h, const char *name) {
    void *p = dlsym(h, name);
    if (p == NULL) {
        fprintf(stderr, "ho_dlclose: %s not found\n", name);
        exit(1);
    }
    return p;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: ho_dlclose LIBHOSTOFF\n");
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        fprintf(stderr, "ho_dlclose: dlopen: %s\n", dlerror());
        return 1;
    }
    void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (drv == NULL) {
        fprintf(stderr, "ho_dlclose: dlopen libcuda.so.1: %s\n", dlerror());
        return 1;
    }
    /* The library starts at cuInit, as when preloaded. */
    CUresult (*init)(unsigned) = (CUresult(*)(unsigned))(uintptr_t)sym(h, "cuInit");
    CUresult (*device_get)(CUdevice *, int) =
        (CUresult(*)(CUdevice *, int))(uintptr_t)sym(drv, "cuDeviceGet");
    CUresult (*retain)(CUcontext *, CUdevice) =
        (CUresult(*)(CUcontext *, CUdevice))(uintptr_t)sym(drv, "cuDevicePrimaryCtxRetain");
    CUresult (*load)(CUmodule *, const void *) =
        (CUresult(*)(CUmodule *, const void *))(uintptr_t)sym(drv, "cuModuleLoadData");
    CUresult (*get_function)(CUfunction *, CUmodule, const char *) =
        (CUresult(*)(CUfunction *, CUmodule, const char *))(uintptr_t)sym(drv,
                                                                          "cuModuleGetFunction");
    set_current = (CUresult(*)(CUcontext))(uintptr_t)sym(drv, "cuCtxSetCurrent");
    synchronize = (CUresult(*)(void))(uintptr_t)sym(h, "cuCtxSynchronize");
    hooked_alloc = (alloc_fn)(uintptr_t)sym(h, "cuMemAlloc_v2");
    hooked_free = (free_fn)(uintptr_t)sym(h, "cuMemFree_v2");
    hooked_launch = (launch_fn)(uintptr_t)sym(h, "cuLaunchKernel");
    CUdevice dev;
    CK(init(0));
    CK(device_get(&dev, 0));
    CK(retain(&ctx, dev));
    CK(set_current(ctx));
    CUmodule mod;
    CK(load(&mod, image));
    CK(get_function(&k_use, mod, "k_use"));

    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0) return 1;
    pthread_mutex_lock(&lock);
    while (phase != 1)
        pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);

    if (dlclose(h) != 0) {
        fprintf(stderr, "ho_dlclose: dlclose: %s\n", dlerror());
        return 1;
    }
    pthread_mutex_lock(&lock);
    phase = 2;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
    pthread_join(t, NULL);

    /* Still loaded (nodelete): dlopen without loading finds it. */
    void *again = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD);
    if (again == NULL) {
        fprintf(stderr, "ho_dlclose: the library was unloaded by dlclose\n");
        return 1;
    }
    dlclose(again);
    puts("ho_dlclose: the thread exited cleanly after dlclose; the library stays loaded");
    return 0;
}
