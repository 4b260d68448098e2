/* ip_framework: what a framework's process sees of the environment under the library
 * (interpose/framework_env.c). With an argument, loads that library first, as PyTorch loads its
 * CUDA library before it first calls the driver (the test passes a stand-in named
 * libc10_cuda.so); then initialises the driver, so the library initialises and says what it
 * chose, and prints the allocator variables as the framework would read them. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static void show(const char *name) {
    const char *v = getenv(name);
    printf("env %s %s\n", name, v != NULL ? v : "(unset)");
}

int main(int argc, char **argv) {
    if (argc > 1 && dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL) == NULL) {
        fprintf(stderr, "ip_framework: cannot load %s: %s\n", argv[1], dlerror());
        return 1;
    }
    if (cuInit(0) != CUDA_SUCCESS) {
        fprintf(stderr, "ip_framework: cuInit failed\n");
        return 1;
    }
    show("PYTORCH_CUDA_ALLOC_CONF");
    show("PYTORCH_ALLOC_CONF");
    show("XLA_PYTHON_CLIENT_ALLOCATOR");
    show("XLA_PYTHON_CLIENT_PREALLOCATE");
    return 0;
}
