/* ip_cudart: NVIDIA's libcudart.so.13 initialising against the simulated driver. Its first call
 * makes cudart dlopen libcuda.so.1, take cuGetProcAddress_v2 with dlsym and resolve its ~440 entry
 * points; it then asks for the driver's private export tables, which the simulator refuses, so
 * cudaMalloc fails with cudaErrorNotSupported (801): expected, and what stdout shows. */
#include <cuda_runtime_api.h>
#include <stdio.h>

int main(void) {
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, 1 << 20);
    printf("cudaMalloc %d\n", (int)e);
    return 0;
}
