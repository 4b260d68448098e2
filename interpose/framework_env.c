/* The frameworks' allocators, chosen for the library where the user has not chosen (issue 14:
 * "the default path is the good one"). HOSTOFF_FRAMEWORK_ALLOC=keep, or HOSTOFF_MODE=off, leaves
 * them alone.
 *
 * Why: PyTorch's default caching allocator asks the driver for large segments and carves tensors
 * out of them, so the library sees segments whose lifetimes are those of the cache, not of the
 * tensors; XLA's default allocator takes 75% of the device in one allocation at start-up, which
 * every kernel then touches, so nothing can move at all. Both have a documented setting that
 * allocates each buffer from the driver instead: PyTorch's cudaMallocAsync backend (one
 * cuMemAllocAsync per tensor storage, freed when the storage dies) and XLA's platform allocator
 * without preallocation. Replays of recorded PyTorch steps show what it is worth
 * (docs/policy-benchmark.md: the per-tensor and the segment view of the same steps).
 *
 * When: from the library's constructor, before main, so before either framework reads its
 * variables; and only when the library came in through LD_PRELOAD, the documented path, where the
 * process is still single-threaded: setenv is not safe while other threads may call getenv (a
 * library dlopened into a running process leaves the environment alone).
 *
 * Which: only a variable the user has not set, and a framework none of whose allocator variables
 * is set (a user who tuned PyTorch's caching allocator, or XLA's memory fraction, has chosen).
 * The variables are read directly here, not through ho_options(): this runs in every process
 * the library is preloaded into, most of which never use CUDA, and those must not print the
 * options' complaints; ho_options() gives them later, in processes that do. */
#include "framework_env.h"

#include "log.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static bool torch_set, xla_set;

static bool env_is(const char *name, const char *value) {
    const char *v = getenv(name);
    return v != NULL && strcmp(v, value) == 0;
}

static bool env_has(const char *name) {
    const char *v = getenv(name);
    return v != NULL && *v != '\0';
}

__attribute__((constructor)) static void framework_env_choose(void) {
    const char *preload = getenv("LD_PRELOAD");
    if (preload == NULL || strstr(preload, "libhostoff") == NULL) return;
    if (env_is("HOSTOFF_MODE", "off") || env_is("HOSTOFF_FRAMEWORK_ALLOC", "keep")) return;
    /* PYTORCH_ALLOC_CONF is the newer name PyTorch reads first; either set means chosen. */
    if (!env_has("PYTORCH_CUDA_ALLOC_CONF") && !env_has("PYTORCH_ALLOC_CONF"))
        torch_set = setenv("PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync", 0) == 0;
    if (!env_has("XLA_PYTHON_CLIENT_ALLOCATOR") && !env_has("XLA_PYTHON_CLIENT_PREALLOCATE") &&
        !env_has("XLA_PYTHON_CLIENT_MEM_FRACTION")) {
        xla_set = setenv("XLA_PYTHON_CLIENT_ALLOCATOR", "platform", 0) == 0;
        xla_set = setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "false", 0) == 0 && xla_set;
    }
}

/* PyTorch's CUDA library is loaded by the time it first calls the driver. */
static bool torch_loaded(void) {
    void *h = dlopen("libc10_cuda.so", RTLD_NOW | RTLD_NOLOAD);
    if (h == NULL) return false;
    dlclose(h);
    return true;
}

void ho_framework_env_say(void) {
    if (torch_loaded()) {
        /* Said at the default level: it changes how PyTorch allocates, and the user must be able
         * to see that, and how to undo it, without asking for more output. */
        if (torch_set)
            ho_log(HO_LOG_WARN,
                   "PyTorch allocates each tensor from the driver "
                   "(PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync, set by hostoff so that it "
                   "sees every tensor's lifetime; HOSTOFF_FRAMEWORK_ALLOC=keep leaves PyTorch's "
                   "allocator alone)");
        else
            ho_log(HO_LOG_INFO,
                   "PyTorch's allocator is the one PYTORCH_CUDA_ALLOC_CONF chose: unless it says "
                   "backend:cudaMallocAsync, hostoff sees the caching allocator's segments, not "
                   "tensors");
    }
    if (xla_set)
        ho_log(HO_LOG_INFO,
               "set XLA_PYTHON_CLIENT_ALLOCATOR=platform and XLA_PYTHON_CLIENT_PREALLOCATE=false "
               "(each XLA buffer its own allocation; HOSTOFF_FRAMEWORK_ALLOC=keep to leave XLA "
               "alone)");
}
