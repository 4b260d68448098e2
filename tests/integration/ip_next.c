/* ip_next: the dlsym pass-through keeps dlsym's meaning. libnexttest.so (a dependency) defines
 * time() and returns dlsym(RTLD_NEXT, "time"): that must be libc's time, not the test library's
 * own, even with libhostoff.so's dlsym in between. Names that are not driver entry points, and
 * cuGetExportTable, resolve as they do without the library.
 *
 * stdout: one line per lookup, as object+offset (stable across runs, unlike addresses), compared
 * with a run without the library; lines starting with "hooked" differ by design. */
#include "iptest.h"

#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <time.h>

void *next_time(void);
void *own_time(void);

typedef void *(*dlsym_fn)(void *, const char *);

/* Prints "what name -> object+offset". */
static void show(const char *what, const char *name, void *p) {
    Dl_info info;
    printf("%s %s -> ", what, name);
    if (p == NULL) {
        printf("NULL\n");
        return;
    }
    if (dladdr(p, &info) == 0 || info.dli_fname == NULL) {
        printf("(no object)\n");
        return;
    }
    /* The file's own name: a preloaded path may be a link (libasan.so -> libasan.so.8). */
    char path[PATH_MAX];
    if (realpath(info.dli_fname, path) == NULL) snprintf(path, sizeof path, "%s", info.dli_fname);
    printf("%s+0x%llx\n", basename(path),
           (unsigned long long)((uintptr_t)p - (uintptr_t)info.dli_fbase));
}

int main(void) {
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    EXPECT(libc != NULL, "libc.so.6 not loaded");
    void *libc_time = dlsym(libc, "time");
    void *nt = next_time();
    EXPECT(nt == libc_time, "dlsym(RTLD_NEXT, \"time\") from libnexttest is %p, libc's is %p", nt,
           libc_time);
    EXPECT(nt != own_time(), "dlsym(RTLD_NEXT) from libnexttest found libnexttest's own time");
    EXPECT(time(NULL) == 42, "the program's time() is not libnexttest's");
    show("RTLD_NEXT time from", "libnexttest", nt);

    /* glibc's own dlsym, to compare answers in this process. */
    dlsym_fn real = (dlsym_fn)(uintptr_t)dlvsym(libc, "dlsym", "GLIBC_2.34");
    if (real == NULL) real = (dlsym_fn)(uintptr_t)dlvsym(libc, "dlsym", "GLIBC_2.2.5");
    EXPECT(real != NULL, "no dlsym in libc");

    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    EXPECT(cuda != NULL, "dlopen libcuda.so.1: %s", dlerror());
    static const char *const cuda_names[] = {
        "cuGetExportTable", "simcuda_now_ns", "cuNotAnEntryPoint", "cu", "cuda",
        "cumemAlloc",       "cuda_x",         "cudaMalloc",        ""};
    for (size_t i = 0; i < sizeof cuda_names / sizeof cuda_names[0]; i++) {
        dlerror();
        void *p = dlsym(cuda, cuda_names[i]);
        int err = dlerror() != NULL;
        EXPECT(p == real(cuda, cuda_names[i]), "dlsym(libcuda, \"%s\") differs from glibc's",
               cuda_names[i]);
        EXPECT((p == NULL) == err, "dlsym(libcuda, \"%s\"): %p but dlerror %s", cuda_names[i], p,
               err ? "set" : "clear");
        show("libcuda", cuda_names[i], p);
    }
    static const char *const default_names[] = {"printf", "time", "cuGetExportTable", "malloc",
                                                "no_such_symbol"};
    for (size_t i = 0; i < sizeof default_names / sizeof default_names[0]; i++) {
        show("default", default_names[i], dlsym(RTLD_DEFAULT, default_names[i]));
        show("next", default_names[i], dlsym(RTLD_NEXT, default_names[i]));
    }
    /* A driver entry point is the one name that changes: the hook with the library. */
    show("hooked libcuda", "cuMemAlloc_v2", dlsym(cuda, "cuMemAlloc_v2"));
    show("hooked libcuda", "cuGetProcAddress_v2", dlsym(cuda, "cuGetProcAddress_v2"));
    return 0;
}
